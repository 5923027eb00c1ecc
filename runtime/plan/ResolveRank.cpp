//===- ResolveRank.cpp - a template made one rank's -----------------------===//
//
// A template holds what its ranks share; a rank's copy has its PerRank
// values (buffer offsets, launch arguments) evaluated at its coordinates,
// its parameters' shards placed, and its optimizer state placed
// (OptimizerState.cpp). Everything resolved is checked again, since a
// crafted plan's per-rank values are as untrusted as the rest.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/OptimizerState.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanCheck.h"

#include <array>
#include <set>
#include <string>

namespace strata::runtime {

namespace {

/// What of a template depends on its ranks' coordinates: buffers with a
/// per-rank offset, the instructions with a per-rank argument (an
/// instruction's checks read its buffers' shapes and dtypes, never their
/// offsets, whose bounds resolveBuffer checks), and parameters split over
/// tp. The rest resolves the same for
/// every rank (stash buffers never move, and the stash's slots are checked
/// per template).
struct Dependence {
  std::vector<uint32_t> buffers, params;
  std::vector<std::pair<uint32_t, uint32_t>> instructions; // program, index
  unsigned axes = 0; // the mesh axes read (bit a for axis a)
  // A parameter's buffers or the optimizer's regions move with the rank:
  // its optimizer state (moments, masters) is placed and checked again.
  bool optimizerState = false;
};

/// The mesh axes a per-rank value reads, as Dependence::axes' bits.
unsigned axesOf(const PerRank &value) {
  unsigned axes = 0;
  for (const PerRank::Term &term : value.terms)
    if (term.stride != 0)
      axes |= 1u << term.axis;
  return axes;
}

Dependence dependenceOf(const RankPlan &stage) {
  Dependence d;
  std::vector<bool> moves(stage.buffers.size(), false);
  for (uint32_t b = 0; b < stage.buffers.size(); ++b)
    if (stage.buffers[b].perRank.varies()) {
      moves[b] = true;
      d.buffers.push_back(b);
      d.axes |= axesOf(stage.buffers[b].perRank);
    }
  for (uint32_t p = 0; p < stage.programs.size(); ++p) {
    const std::vector<Instruction> &code = stage.programs[p].instructions;
    for (uint32_t n = 0; n < code.size(); ++n) {
      bool movingOperand = false, perRankArgument = false;
      for (uint32_t b : code[n].buffers()) // out of range: refused later
        movingOperand |= b < moves.size() && moves[b];
      if (const LaunchOp *launch = code[n].launch()) {
        for (const AttrValue &attr : launch->attrs)
          if (attr.perRank.varies()) {
            perRankArgument = true;
            d.axes |= axesOf(attr.perRank);
          }
        d.optimizerState |= launch->kernel == KernelId::AdamW && movingOperand;
      }
      if (perRankArgument)
        d.instructions.push_back({p, n});
    }
  }
  for (uint32_t p = 0; p < stage.params.size(); ++p) {
    const Param &param = stage.params[p];
    if (param.splitDim >= 0) {
      d.params.push_back(p);
      d.axes |= 1u << 0;
    }
    d.optimizerState |= moves[param.value] || moves[param.grad];
  }
  return d;
}

/// Resolves `rank`, a copy of template `stage`, for rank `rankIndex` and
/// checks what it resolved: all of it, or with `only` just what depends
/// on the coordinates (reset from the template first, so that one copy
/// serves a template's ranks in turn). Masters are placed by the caller.
std::string resolveParts(const Plan &plan, uint32_t rankIndex,
                         const RankPlan &stage, RankPlan &rank,
                         const Dependence *only) {
  mesh::Coordinates coords = plan.coordinates(rankIndex);
  auto resolveBuffer = [&](uint32_t index) -> std::string {
    Buffer &b = rank.buffers[index];
    b.offset = stage.buffers[index].offset;
    // Offsets and strides are bounded (2^64, 2^60): no wrap in 128 bits.
    unsigned __int128 at =
        (unsigned __int128)b.offset + uint64_t(b.perRank.at(coords));
    uint64_t arena = rank.arenaBytes(b.arena);
    if (at > arena || b.bytes > arena - uint64_t(at))
      return "buffer '" + b.name + "' at offset " +
             (at >> 64 ? std::to_string(b.offset) + " + its per-rank part"
                       : std::to_string(uint64_t(at))) +
             " (" + std::to_string(b.bytes) + " bytes) lies outside its " +
             arenaName(b.arena) + " arena of " + std::to_string(arena) +
             " bytes";
    b.offset = uint64_t(at);
    if (b.offset % dtypeBytes(b.dtype) != 0)
      return "buffer '" + b.name + "' is misaligned";
    return "";
  };
  CheckContext context;
  context.plan = &plan;
  context.rank = rankIndex;
  context.events = rank.events;
  context.vocabSize = plan.vocabSize;
  auto resolveInstruction = [&](uint32_t p, uint32_t n) -> std::string {
    Instruction &i = rank.programs[p].instructions[n];
    if (LaunchOp *launch = std::get_if<LaunchOp>(&i.op)) {
      const LaunchOp &written = *stage.programs[p].instructions[n].launch();
      for (size_t a = 0; a < launch->attrs.size(); ++a) {
        AttrValue &attr = launch->attrs[a];
        attr.i = written.attrs[a].i + attr.perRank.at(coords);
      }
    }
    if (std::string error = checkInstruction(i, rank.buffers, context);
        !error.empty())
      return instructionWhere(plan, rank.programs[p], n, i.location) + error;
    return "";
  };
  auto resolveShard = [&](uint32_t index) -> std::string {
    Param &p = rank.params[index];
    const Buffer &value = rank.buffers[p.value];
    p.shardOffset.assign(value.shape.size(), 0);
    if (p.splitDim >= 0)
      p.shardOffset[p.splitDim] =
          int64_t(coords[mesh::kTensor]) * value.shape[p.splitDim];
    for (size_t d = 0; d < value.shape.size(); ++d)
      if (p.shardOffset[d] > p.paddedShape[d] - value.shape[d])
        return "parameter '" + p.name + "' has a shard outside its tensor";
    return "";
  };
  // Everything, or what depends on the coordinates.
  std::vector<uint32_t> buffers, params;
  std::vector<std::pair<uint32_t, uint32_t>> instructions;
  if (!only) {
    for (uint32_t b = 0; b < rank.buffers.size(); ++b)
      buffers.push_back(b);
    for (uint32_t p = 0; p < rank.programs.size(); ++p)
      for (uint32_t n = 0; n < rank.programs[p].instructions.size(); ++n)
        instructions.push_back({p, n});
    for (uint32_t p = 0; p < rank.params.size(); ++p)
      params.push_back(p);
  }
  for (uint32_t b : only ? only->buffers : buffers)
    if (std::string error = resolveBuffer(b); !error.empty())
      return error;
  for (auto [p, n] : only ? only->instructions : instructions)
    if (std::string error = resolveInstruction(p, n); !error.empty())
      return error;
  for (uint32_t p : only ? only->params : params)
    if (std::string error = resolveShard(p); !error.empty())
      return error;
  return "";
}
} // namespace

std::string resolveRank(const Plan &plan, uint32_t rank, RankPlan &out) {
  if (rank >= plan.world() || !plan.templates[plan.rankTemplates[rank]])
    return "rank " + std::to_string(rank) + ": its template is not loaded";
  const RankPlan &stage = *plan.templates[plan.rankTemplates[rank]];
  out = stage;
  out.rank = rank;
  std::string error = resolveParts(plan, rank, stage, out, nullptr);
  if (error.empty())
    error = placeOptimizerState(out);
  return error.empty() ? "" : "rank " + std::to_string(rank) + ": " + error;
}

std::string checkEveryRank(const Plan &plan) {
  for (size_t t = 0; t < plan.templates.size(); ++t) {
    if (!plan.templates[t])
      continue;
    const RankPlan &stage = *plan.templates[t];
    Dependence d = dependenceOf(stage);
    // Ranks at the same coordinates along the axes the template reads
    // resolve alike: each such class is checked once, the first in full
    // (into `rank`, then reused for the others' dependent parts).
    std::set<mesh::Coordinates> seen;
    RankPlan rank;
    bool first = true;
    for (uint32_t r = 0; r < plan.world(); ++r) {
      if (plan.rankTemplates[r] != t)
        continue;
      mesh::Coordinates coords = plan.coordinates(r), key{};
      for (int a = 0; a < mesh::kAxisCount; ++a)
        if (d.axes & (1u << a))
          key[a] = coords[a];
      if (!seen.insert(key).second)
        continue;
      std::string error;
      if (first) {
        error = resolveRank(plan, r, rank);
        first = false;
      } else {
        error = resolveParts(plan, r, stage, rank, &d);
        // Masters and moments follow the moved buffers and the adamw
        // launch's part, both resolved again above.
        if (error.empty() && d.optimizerState)
          error = placeOptimizerState(rank);
        if (!error.empty())
          error = "rank " + std::to_string(r) + ": " + error;
      }
      if (!error.empty())
        return error;
    }
  }
  return "";
}
} // namespace strata::runtime
