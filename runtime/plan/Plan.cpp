//===- Plan.cpp - a plan's names, text and groups -------------------------===//
//
// What every reader of a loaded plan shares: the names of its enums, an
// instruction's operands, shapes and layouts as text, and the members of a
// collective group. Decoding and checking a plan file is PlanDecode.cpp's;
// resolving a template for a rank is ResolveRank.cpp's.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"

#include <algorithm>
#include <string>

namespace strata::runtime {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  }
  return "?";
}

const char *arenaName(Arena arena) {
  switch (arena) {
  case Arena::Persistent:
    return "persistent";
  case Arena::Workspace:
    return "workspace";
  case Arena::Stash:
    return "stash";
  }
  return "?";
}

const char *phaseName(Phase phase) {
  switch (phase) {
  case Phase::Microbatch:
    return "microbatch";
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::Optimizer:
    return "optimizer";
  case Phase::Weight:
    return "weight";
  }
  return "?";
}

const char *collectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduceSum:
    return "all_reduce_sum";
  case CollectiveKind::AllReduceMax:
    return "all_reduce_max";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  case CollectiveKind::Shift:
    return "shift";
  }
  return "?";
}

std::string Instruction::name() const {
  if (gemm())
    return "gemm";
  if (const LaunchOp *l = launch())
    return kernelName(l->kernel);
  if (const CollectiveOp *c = collective())
    return collectiveName(c->kind);
  if (const TransferOp *t = transfer())
    return t->send ? "send" : "recv";
  return event()->record ? "record" : "wait";
}

std::vector<uint32_t> Instruction::buffers() const {
  std::vector<uint32_t> out;
  auto add = [&](uint32_t index) {
    if (index != kNoBuffer)
      out.push_back(index);
  };
  if (const GemmOp *g = gemm()) {
    for (uint32_t index : {g->a, g->b, g->d, g->bias, g->aux})
      add(index);
  } else if (const LaunchOp *l = launch()) {
    for (uint32_t index : l->operands)
      add(index);
  } else if (const CollectiveOp *c = collective()) {
    add(c->input);
    add(c->output);
  } else if (const TransferOp *t = transfer()) {
    add(t->buffer);
  }
  return out;
}

std::vector<uint32_t> Instruction::outputs() const {
  std::vector<uint32_t> out;
  if (const GemmOp *g = gemm()) {
    out.push_back(g->d);
    if (g->epilogue == Epilogue::BiasGrad)
      out.push_back(g->bias);
    if (g->aux != kNoBuffer)
      out.push_back(g->aux);
  } else if (const LaunchOp *l = launch()) {
    const KernelSpec &spec = kernelSpec(l->kernel);
    for (size_t o = 0; o < l->operands.size(); ++o)
      if (spec.operands[o].output && l->operands[o] != kNoBuffer)
        out.push_back(l->operands[o]);
  } else if (const CollectiveOp *c = collective()) {
    out.push_back(c->output);
  } else if (const TransferOp *t = transfer(); t && !t->send) {
    out.push_back(t->buffer);
  }
  return out;
}

std::string shapeText(const std::vector<int64_t> &shape) {
  std::string text = "[";
  for (size_t d = 0; d < shape.size(); ++d)
    text += (d ? ", " : "") + std::to_string(shape[d]);
  return text + "]";
}

std::string describeGelu(const std::string &gelu) {
  if (gelu.empty())
    return "no GELU";
  if (gelu == "exact,tanh")
    return "both GELU forms";
  return "the " + gelu + " GELU";
}

std::map<std::string, std::vector<int64_t>> Plan::paramShapes() const {
  std::map<std::string, std::vector<int64_t>> shapes;
  for (const auto &[r, rank] : ranks)
    for (const Param &param : rank.params)
      shapes[param.name] = param.globalShape;
  return shapes;
}

std::string Plan::layoutText() const {
  return "tensor " + std::to_string(tensorParallel) + " x data " +
         std::to_string(dataParallel) + " x pipeline " +
         std::to_string(pipelineParallel) +
         (contextParallel > 1 ? " x context " + std::to_string(contextParallel)
                              : std::string());
}

std::vector<int> Plan::groupMembers(uint32_t group, uint32_t rank) const {
  const Group &g = groups[group];
  const mesh::Sizes size = sizes();
  mesh::Coordinates home = coordinates(rank);
  int64_t count = 1;
  for (int axis : g.axes)
    count *= size[size_t(axis)];
  std::vector<int> members;
  for (int64_t k = 0; k < count; ++k) {
    mesh::Coordinates c = home;
    int64_t digit = k;
    for (int axis : g.axes) {
      c[size_t(axis)] = uint32_t(digit % size[size_t(axis)]);
      digit /= size[size_t(axis)];
    }
    if (!g.stages.empty() && std::find(g.stages.begin(), g.stages.end(),
                                       c[mesh::kPipeline]) == g.stages.end())
      continue;
    members.push_back(int(rankAt(c)));
  }
  return members;
}

std::string Plan::groupName(uint32_t group) const {
  const Group &g = groups[group];
  std::string name;
  for (int axis : g.axes)
    name +=
        std::string(name.empty() ? "" : "+") + mesh::kAxisNames[size_t(axis)];
  if (!g.stages.empty()) {
    name += " (stages";
    for (size_t s = 0; s < g.stages.size(); ++s)
      name += (s ? ", " : " ") + std::to_string(g.stages[s]);
    name += ")";
  }
  return name;
}

int64_t Plan::groupSize(uint32_t group) const {
  const Group &g = groups[group];
  const mesh::Sizes size = sizes();
  int64_t members = 1;
  for (int axis : g.axes)
    members *= axis == mesh::kPipeline && !g.stages.empty()
                   ? int64_t(g.stages.size())
                   : int64_t(size[size_t(axis)]);
  return members;
}

std::string rankRangeText(uint64_t first, uint64_t count) {
  return count == 1 ? "rank " + std::to_string(first)
                    : "ranks " + std::to_string(first) + "-" +
                          std::to_string(first + count - 1);
}

} // namespace strata::runtime
