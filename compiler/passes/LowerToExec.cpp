//===- LowerToExec.cpp - the scheduled step as typed instructions ---------===//
//
// Builds one exec.template per pipeline stage of @mesh from the step's
// functions (@microbatch, or the stage's @forward_c and @backward_c),
// @optimizer and the stage's dist.schedule: a buffer per tensor, gemms and
// launches of the kernel catalog per op, a program per function. The
// functions are SPMD, and so is the template: the ranks of a stage differ
// only in their tensor- and data-parallel coordinates, and what depends on
// them is written as a per-rank expression the runtime resolves at load (a
// shard's offset into its global tensor, a vocabulary range, the first
// query head, who keeps a replicated value in a partial sum, which part of
// each bucket a distributed optimizer owns). Lowering, memory planning and
// the plan's size so grow with the model and the stages, never with the
// rank count. Pipeline transfers run on the communication stream, ordered
// against the compute stream by events; the data-parallel reductions and
// gathers (LowerOptimizer.cpp) are the optimizer's, on the compute stream,
// until --strata-overlap-communication moves them.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/LowerToExec.h"
#include "compiler/Passes.h"
#include "compiler/StashSlots.h"
#include "compiler/StepFunctions.h"
#include "runtime/plan/IoNames.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <set>

namespace strata {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::lower_to_exec;

namespace strata::lower_to_exec {

exec::BufferOp Lowering::input(graph::InputOp op) {
  auto [it, inserted] = inputs.try_emplace(op.getName());
  if (inserted) {
    it->second = makeBuffer("input:" + op.getName().str(), op.getType(),
                            exec::Arena::Persistent);
    exec::IoOp::create(declarations, op.getLoc(), op.getNameAttr(),
                       FlatSymbolRefAttr::get(it->second.getSymNameAttr()));
  }
  return it->second;
}

static ArrayAttr symbolRefs(Builder &b, ArrayRef<exec::BufferOp> list) {
  SmallVector<Attribute> out;
  for (exec::BufferOp buffer : list)
    out.push_back(FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
  return b.getArrayAttr(out);
}

static FlatSymbolRefAttr ref(exec::BufferOp buffer) {
  return buffer ? FlatSymbolRefAttr::get(buffer.getSymNameAttr())
                : FlatSymbolRefAttr();
}

void Lowering::perRank(exec::LaunchOp op, StringRef name, int64_t axis,
                       int64_t stride) {
  perRank(op, name, {{axis, stride}});
}

SmallVector<int64_t>
Lowering::perRankTerms(ArrayRef<std::pair<int64_t, int64_t>> terms) const {
  SmallVector<int64_t> kept;
  for (auto [axis, stride] : terms)
    if (coords.sizeOf(axis) > 1 && stride != 0)
      kept.append({axis, stride});
  return kept;
}

void Lowering::perRank(exec::LaunchOp op, StringRef name,
                       ArrayRef<std::pair<int64_t, int64_t>> terms) {
  SmallVector<int64_t> kept = perRankTerms(terms);
  if (kept.empty())
    return;
  SmallVector<NamedAttribute> entries;
  if (DictionaryAttr existing = op.getPerRankAttr())
    entries.assign(existing.begin(), existing.end());
  entries.push_back(b.getNamedAttr(name, b.getDenseI64ArrayAttr(kept)));
  op.setPerRankAttr(b.getDictionaryAttr(entries));
}

exec::LaunchOp Lowering::launchCollected(Location loc, StringRef name,
                                         const kernel::Collected &c) {
  return exec::LaunchOp::create(
      body, loc, b.getStringAttr(name), symbolRefs(b, c.inputs),
      symbolRefs(b, c.outputs), b.getDictionaryAttr(c.args), DictionaryAttr(),
      IntegerAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(), IntegerAttr(),
      StringAttr(), exec::StreamAttr(), exec::ConditionAttr());
}

exec::GemmOp Lowering::gemm(Location loc, exec::BufferOp a,
                            exec::BufferOp bMatrix, exec::BufferOp d, int64_t m,
                            int64_t n, int64_t k, bool transposeA,
                            bool transposeB, bool accumulate) {
  auto op = exec::GemmOp::create(
      body, loc, ref(a), ref(bMatrix), ref(d), FlatSymbolRefAttr(),
      FlatSymbolRefAttr(), b.getI64IntegerAttr(m), b.getI64IntegerAttr(n),
      b.getI64IntegerAttr(k), transposeA ? b.getUnitAttr() : UnitAttr(),
      transposeB ? b.getUnitAttr() : UnitAttr(),
      b.getI64IntegerAttr(transposeA ? m : k),
      b.getI64IntegerAttr(transposeB ? k : n), b.getI64IntegerAttr(n),
      IntegerAttr(), IntegerAttr(), IntegerAttr(), IntegerAttr(), FloatAttr(),
      FloatAttr(), exec::EpilogueAttr(), exec::StreamAttr(),
      exec::ConditionAttr());
  if (accumulate)
    op.setBetaAttr(b.getF32FloatAttr(1.0f));
  return op;
}

exec::GemmOp Lowering::gemm(Location loc, exec::BufferOp a,
                            exec::BufferOp bMatrix, exec::BufferOp d,
                            const StridedGemm &g) {
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  return exec::GemmOp::create(
      body, loc, ref(a), ref(bMatrix), ref(d), FlatSymbolRefAttr(),
      FlatSymbolRefAttr(), i64(g.m), i64(g.n), i64(g.k),
      g.transposeA ? b.getUnitAttr() : UnitAttr(),
      g.transposeB ? b.getUnitAttr() : UnitAttr(), i64(g.lda), i64(g.ldb),
      i64(g.ldd), i64(g.batch), i64(g.strideA), i64(g.strideB), i64(g.strideD),
      b.getF32FloatAttr(float(g.alpha)),
      g.accumulate ? b.getF32FloatAttr(1.0f) : FloatAttr(),
      exec::EpilogueAttr(), exec::StreamAttr(), exec::ConditionAttr());
}

exec::CollectiveOp Lowering::collective(Location loc, exec::CollectiveKind kind,
                                        exec::BufferOp in, exec::BufferOp out,
                                        ArrayRef<int64_t> axes, int64_t dim,
                                        ArrayRef<int64_t> stages) {
  return exec::CollectiveOp::create(
      body, loc, exec::CollectiveKindAttr::get(ctx(), kind), ref(in), ref(out),
      b.getDenseI64ArrayAttr(axes),
      stages.empty() ? DenseI64ArrayAttr() : b.getDenseI64ArrayAttr(stages),
      dim ? b.getI64IntegerAttr(dim) : IntegerAttr(), exec::StreamAttr(),
      exec::ConditionAttr());
}

void Lowering::output(Location loc, StringRef name, exec::BufferOp from) {
  exec::BufferOp buffer = makeBuffer(
      ("output:" + name).str(), from.getTensorType(), exec::Arena::Persistent);
  launch(loc, kernel::Copy{.x = from, .y = buffer});
  exec::IoOp::create(declarations, loc, b.getStringAttr(name),
                     FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
}

Lowering::GradientTarget Lowering::gradientTarget(Value grad) {
  auto sink = grad.hasOneUse()
                  ? dyn_cast<graph::AccumulateGradOp>(*grad.getUsers().begin())
                  : graph::AccumulateGradOp();
  auto it = sink ? params.find(sink.getName()) : params.end();
  if (it == params.end())
    return {temporary(grad, exec::Arena::Workspace), false};
  fused.insert(sink);
  buffers[grad] = it->second.grad;
  return {it->second.grad, true};
}

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  IntegerAttr chunkAttr = dist::chunk(func.getContext()).getAttr(func);
  StringRef name = func.getSymName();
  bool forward = chunkAttr && name.starts_with(strata::step::kForwardPrefix);
  bool weight = chunkAttr && name.starts_with(strata::step::kWeightPrefix);
  bool backward = chunkAttr && !forward && !weight;
  exec::Phase phase = !chunkAttr ? exec::Phase::Microbatch
                      : forward  ? exec::Phase::Forward
                      : weight   ? exec::Phase::Weight
                                 : exec::Phase::Backward;
  auto program = exec::ProgramOp::create(
      programs, func.getLoc(), func.getSymNameAttr(), phase, chunkAttr);
  programByName[func.getSymName()] = program;
  body.setInsertionPointToEnd(&program.getBody().emplaceBlock());
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  Block &block = func.getBody().front();

  // Pipeline transfers run on the communication stream, posted at the
  // schedule's exchange points: receives lead the program, sends trail it.
  // Events order them against the body on the compute stream, both ways:
  //   leading   wait @computed:P (comm)   the last run no longer reads them
  //             recv ...                  (a stashed input: nor the chunk's
  //             record @received:P (comm)  backward, which frees its slot)
  //   body      wait @received:P; wait @sent:P (the last run's sends have
  //             left); ...; record @computed:P
  //   trailing  wait @computed:P (comm); send ...; record @sent:P (comm)
  int64_t chunk = chunkAttr ? chunkAttr.getInt() : 0;
  // With the backward cut in two, B passes values on to W in the stash,
  // B frees the forward's slot and W the other two pools'.
  bool cut = chunkAttr && module.lookupSymbol(strata::step::weightOf(chunk));
  bool keepsForW = backward && cut;
  SmallVector<exec::StashPool, 2> freesPools;
  if (backward)
    freesPools.push_back(exec::StashPool::UntilBackward);
  if (weight)
    freesPools.append({exec::StashPool::Held, exec::StashPool::Passed});
  auto peerStage = [&](uint64_t of) {
    return b.getI64IntegerAttr(stageOfChunk(module, int64_t(of)));
  };
  SmallVector<dist::RecvOp> recvs;
  SmallVector<dist::SendOp> sends;
  for (Operation &op : block.without_terminator()) {
    if (auto recv = dyn_cast<dist::RecvOp>(op))
      recvs.push_back(recv);
    else if (auto send = dyn_cast<dist::SendOp>(op))
      sends.push_back(send);
  }
  if (chunkAttr) {
    // A chunk's forward leaves its results in the stash for the backward
    // of the same microbatch, which takes them as arguments; cut in two,
    // those W reads are held until W (B returns its arguments for them),
    // and B passes its own results for W in the stash.
    stashGroup = chunk / coords.ppSize;
    stashValues.clear();
    if (forward) {
      llvm::SmallDenseSet<unsigned> held;
      if (cut)
        if (auto backwardFunc = module.lookupSymbol<func::FuncOp>(
                strata::step::backwardOf(chunk)))
          for (Value value :
               backwardFunc.getBody().front().getTerminator()->getOperands())
            if (auto argument = dyn_cast<BlockArgument>(value))
              held.insert(argument.getArgNumber());
      for (auto [i, value] : llvm::enumerate(ret.getOperands())) {
        exec::StashPool &pool =
            stashValues.try_emplace(value, exec::StashPool::UntilBackward)
                .first->second;
        if (held.contains(unsigned(i)))
          pool = exec::StashPool::Held;
      }
    }
    if (keepsForW)
      for (Value value : ret.getOperands())
        if (!isa<BlockArgument>(value))
          stashValues.try_emplace(value, exec::StashPool::Passed);
    if (!forward) {
      SmallVector<exec::BufferOp> &from =
          weight ? weightStash[chunk] : chunkStash[chunk];
      if (from.size() != func.getNumArguments())
        return func.emitOpError()
               << "takes " << func.getNumArguments() << " arguments, but "
               << from.size() << " values are stashed for it";
      for (auto [argument, buffer] : llvm::zip(func.getArguments(), from))
        buffers[argument] = buffer;
    }
  }
  Location loc = func.getLoc();
  exec::EventOp computed, sent;
  if (!recvs.empty() || !sends.empty())
    computed = event(("computed:" + func.getSymName()).str());
  if (!recvs.empty()) {
    exec::waitEvent(body, loc, computed, exec::Stream::Comm);
    SmallVector<exec::BufferOp> targets;
    for (dist::RecvOp recv : recvs)
      targets.push_back(temporary(recv, exec::Arena::Workspace));
    // Into a slot: after the program that last freed a slot of that pool
    // is done with it (the stage's order took this slot after).
    std::set<exec::StashPool> pools;
    for (exec::BufferOp target : targets)
      if (target.getArena() == exec::Arena::Stash)
        pools.insert(target.getPool());
    for (exec::StashPool pool : pools) {
      exec::EventOp &freed = slotFreed[{chunk, pool}];
      if (!freed)
        freed = event(freedEventName(chunk, pool));
      exec::waitEvent(body, loc, freed, exec::Stream::Comm);
    }
    for (auto [recv, target] : llvm::zip(recvs, targets))
      exec::RecvOp::create(body, recv.getLoc(), ref(target),
                           peerStage(recv.getChunk()),
                           b.getI64IntegerAttr(int64_t(recv.getChannel())));
    exec::EventOp received = event(("received:" + func.getSymName()).str());
    exec::recordEvent(body, loc, received, exec::Stream::Comm);
    receivedWait[program] =
        exec::waitEvent(body, loc, received, exec::Stream::Compute);
  }
  if (!sends.empty()) {
    sent = event(("sent:" + func.getSymName()).str());
    exec::waitEvent(body, loc, sent, exec::Stream::Compute);
  }
  for (Operation &op : block.without_terminator())
    if (!isa<dist::RecvOp, dist::SendOp>(op) && failed(lowerOp(&op)))
      return failure();
  // An op marked absorbed lowers to nothing of its own: some gemm's
  // epilogue must have taken it, or it would be silently dropped.
  for (Operation &op : block.without_terminator())
    if (exec::absorbed(ctx()).isAttrPresent(&op) && !fused.contains(&op))
      return op.emitOpError() << "is marked absorbed, but no gemm's epilogue "
                                 "does it";

  if (forward || keepsForW) {
    for (Value value : ret.getOperands()) {
      exec::BufferOp buffer = bufferOf(value);
      if (!buffer || buffer.getArena() != exec::Arena::Stash)
        return ret.emitOpError()
               << "returns a value that cannot be stashed (a view, a "
                  "parameter or an input): only computed activations are";
      if (keepsForW && buffer.getPool() == exec::StashPool::UntilBackward)
        return ret.emitOpError() << "passes W a value its slot frees at B";
      (forward ? chunkStash : weightStash)[chunk].push_back(buffer);
    }
  }
  stashValues.clear();
  if (!chunkAttr) // the returned loss, which the runtime reads after it
    output(ret.getLoc(), runtime::io_names::kLoss, bufferOf(ret.getOperand(0)));

  if (computed)
    exec::recordEvent(body, loc, computed, exec::Stream::Compute);
  // Lowered after the programs that wait for it (F, then B), whose
  // receives made it.
  for (exec::StashPool pool : freesPools)
    if (exec::EventOp freed = slotFreed[{chunk, pool}])
      exec::recordEvent(body, loc, freed, exec::Stream::Compute);

  if (!sends.empty()) {
    exec::waitEvent(body, loc, computed, exec::Stream::Comm);
    for (dist::SendOp send : sends) {
      exec::BufferOp value = bufferOf(send.getValue());
      if (!value)
        return send.emitOpError() << "sends a value this stage does not hold";
      exec::SendOp::create(body, send.getLoc(), ref(value),
                           peerStage(send.getChunk()),
                           b.getI64IntegerAttr(int64_t(send.getChannel())));
    }
    exec::recordEvent(body, loc, sent, exec::Stream::Comm);
  }
  return success();
}

namespace {

/// Whether a receive into `key`'s slot lands in a buffer of its own (and
/// is copied in at its program's start) under `slots`: where the key
/// shares its class with another, or its chunk's B writes W's values in
/// place (the slot freed by W then), as the end of lowerSchedule says.
bool landsApart(const pipeline::StashSlots &slots, pipeline::StashKey key,
                const PassedInPlace &inPlace) {
  auto cls = slots.classOf.find(key);
  if (cls == slots.classOf.end())
    return false;
  if (inPlace.byGroup.count(key.first))
    return true;
  return llvm::count_if(slots.classOf, [&](auto &entry) {
           return entry.second == cls->second;
         }) > 1;
}

} // namespace

// A class placed by bytes puts its members at multiples of the granule:
// each must start where the arena's alignment allows.
static_assert(pipeline::kStashGranule % exec::kArenaAlignment == 0);

LogicalResult Lowering::lowerSchedule(dist::ScheduleOp schedule) {
  auto op = exec::ScheduleOp::create(programs, schedule.getLoc(),
                                     schedule.getKindAttr());
  OpBuilder steps(ctx());
  steps.setInsertionPointToEnd(&op.getBody().emplaceBlock());
  auto stage = op->getParentOfType<exec::TemplateOp>();
  using Pool = exec::StashPool;
  constexpr Pool kPools[] = {Pool::UntilBackward, Pool::Held, Pool::Passed};
  std::set<int64_t> cut; // chunks whose backward is cut in two
  for (auto &entry : programByName)
    if (entry.second.getPhase() == exec::Phase::Weight)
      cut.insert(int64_t(*entry.second.getChunk()));

  // What each step does to the stash (pipeline::stashMoves), by (stash
  // group, pool); a backward before its forward, a W before its B, refused.
  using Does = pipeline::StashMove::Does;
  SmallVector<dist::StepOp> stepOps;
  std::vector<std::vector<pipeline::StashMove>> moves;
  std::set<std::tuple<int64_t, int64_t, Pool>> live;
  std::map<int64_t, int64_t> chunkOfGroup;
  for (auto step : schedule.getBody().front().getOps<dist::StepOp>()) {
    // The stage's programs are lowered by now, each with its phase.
    exec::ProgramOp program = programByName.lookup(step.getFunction());
    if (!program)
      return step.emitOpError() << "runs '" << step.getFunction()
                                << "', which this stage has no program for";
    std::vector<pipeline::StashMove> &does = moves.emplace_back();
    stepOps.push_back(step);
    std::optional<uint64_t> chunkOf = program.getChunk();
    if (!chunkOf)
      continue;
    if (!step.getMicrobatch())
      return step.emitOpError() << "runs a chunk without a microbatch";
    int64_t chunk = int64_t(*chunkOf), mb = int64_t(*step.getMicrobatch());
    int64_t group = chunk / coords.ppSize;
    chunkOfGroup[group] = chunk;
    exec::Phase phase = program.getPhase();
    if (phase == exec::Phase::Backward &&
        !live.count({chunk, mb, Pool::UntilBackward}))
      return step.emitOpError()
             << "runs the backward of chunk " << chunk << " for microbatch "
             << mb << " before its forward";
    if (phase == exec::Phase::Weight && !live.count({chunk, mb, Pool::Passed}))
      return step.emitOpError()
             << "runs the weights' gradient of chunk " << chunk
             << " for microbatch " << mb << " before its backward";
    does = pipeline::stashMoves(
        phase == exec::Phase::Forward  ? sim::Phase::Forward
        : phase == exec::Phase::Weight ? sim::Phase::Weight
                                       : sim::Phase::Backward,
        group, mb, cut.count(chunk));
    for (const pipeline::StashMove &move : does)
      if (move.does == Does::Take)
        live.insert({chunk, mb, Pool(move.key.second)});
      else if (move.does == Does::Free)
        live.erase({chunk, mb, Pool(move.key.second)});
  }
  // Each pool's slot bytes, its buffers end to end, as the memory plan
  // lays them out, and what its receives would cost if it shared (see the
  // end); then the slots, pools sharing them where that is less. B's
  // values for W written over what it has read (StashInPlace.cpp) where
  // the slots then take fewer bytes.
  std::map<pipeline::StashKey, int64_t> bytes, landing;
  stashKeyBytes(stage, {}, bytes, landing);
  pipeline::StashSlots chosen = pipeline::planStashSlots(moves, bytes, landing);
  // Each subset of the chunks that can (every one where the stage has
  // many), the one whose slots take the fewest bytes: in place, a chunk
  // keeps its forward's slot until W, which costs where W's wait, and its
  // receives land in buffers of their own (see the end), counted here.
  PassedInPlace canPlace = planPassedInPlace(stage, coords.ppSize), best;
  int64_t fewest = chosen.bytes;
  std::vector<int64_t> placeable;
  for (auto &entry : canPlace.byGroup)
    placeable.push_back(entry.first);
  constexpr size_t kMostSubsetsOf = 4;
  uint64_t subsets = placeable.size() <= kMostSubsetsOf
                         ? (uint64_t(1) << placeable.size())
                         : 2;
  for (uint64_t subset = 1; subset < subsets; ++subset) {
    PassedInPlace trial;
    for (size_t i = 0; i < placeable.size(); ++i)
      if (subsets == 2 || (subset >> i & 1))
        trial.byGroup[placeable[i]] = canPlace.byGroup[placeable[i]];
    stashKeyBytes(stage, trial, bytes, landing);
    pipeline::StashSlots placed =
        pipeline::planStashSlots(moves, bytes, landing);
    // planStashSlots counted the shared keys' landing buffers.
    int64_t trialBytes = placed.bytes;
    for (auto [key, extra] : landing)
      if (landsApart(placed, key, trial) && !landsApart(placed, key, {}))
        trialBytes = pipeline::saturatingAdd(trialBytes, extra);
    if (trialBytes < fewest) {
      fewest = trialBytes;
      chosen = std::move(placed);
      best = std::move(trial);
    }
  }
  if (!best.byGroup.empty() && failed(placePassedInPlace(stage, best)))
    return failure();
  llvm::StringMap<exec::BufferOp> byName;
  for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>())
    byName[buffer.getSymName()] = buffer;

  for (auto [i, step] : llvm::enumerate(stepOps)) {
    const std::map<int, int64_t> &slot = chosen.slots[i];
    auto attr = [&](Pool pool) {
      auto it = slot.find(int(pool));
      return it == slot.end() || it->second < 0
                 ? IntegerAttr()
                 : b.getI64IntegerAttr(it->second);
    };
    exec::RunOp::create(steps, step.getLoc(), step.getFunctionAttr(),
                        step.getMicrobatchAttr(), attr(Pool::UntilBackward),
                        step.getExchangeAttr(), attr(Pool::Held),
                        attr(Pool::Passed));
  }
  // Each pool's slot count per chunk of the stage: its class's.
  std::map<Pool, SmallVector<int64_t>> slots;
  int64_t groups = 0;
  for (auto [key, cls] : chosen.classOf) {
    SmallVector<int64_t> &count = slots[Pool(key.second)];
    if (int64_t(count.size()) <= key.first)
      count.resize(size_t(key.first + 1), 0);
    count[size_t(key.first)] = chosen.slotsOfClass[cls];
    groups = std::max(groups, key.first + 1);
  }
  for (Pool pool : kPools)
    if (!slots[pool].empty())
      stage.setSlotsOf(pool, b.getDenseI64ArrayAttr(slots[pool]));
  if (!chosen.shared && best.byGroup.empty())
    return success();

  using Key = pipeline::StashKey;
  const std::map<Key, int64_t> &classOf = chosen.classOf;
  if (chosen.shared) {
    SmallVector<int64_t> table(size_t(groups * 3), -1);
    for (auto [key, cls] : classOf)
      table[size_t(key.first * 3 + key.second)] = cls;
    stage.setStashClassesAttr(b.getDenseI64ArrayAttr(table));
    SmallVector<int64_t> strides;
    for (auto [cls, stride] : chosen.bytesOfClass) {
      if (int64_t(strides.size()) <= cls)
        strides.resize(size_t(cls + 1), 0);
      strides[size_t(cls)] = stride;
    }
    stage.setStashStridesAttr(b.getDenseI64ArrayAttr(strides));
  }
  // A receive into a slot waits for the program that freed it (`slotFreed`,
  // recorded by the pool's freeing program). Sharing a class, the slot may
  // have been freed by another pool's program, often the one just before,
  // and a receive that waited for the class's last free could not overlap
  // it (ZB-V on the 1T row: 3% slower). So a receive into a shared pool
  // lands in a buffer of its own (memory for the whole iteration, as the
  // communication stream's buffers have), no longer waits, and the
  // program's first step on the compute stream, which has run the slot's
  // freeing program by then, copies it into the slot. So does a receive
  // into the pool of a chunk whose B writes W's values in place, freed by
  // W, not B (1% on three Table 1 rows' ZB-H1, waiting for W).
  for (auto program : llvm::make_early_inc_range(
           stage.getBody().front().getOps<exec::ProgramOp>())) {
    Block &block = program.getBody().front();
    SmallVector<std::pair<exec::RecvOp, exec::BufferOp>> staged;
    std::set<StringRef> unwaited; // freed events no receive waits for now
    for (auto recv : block.getOps<exec::RecvOp>()) {
      exec::BufferOp target = byName.lookup(recv.getBuffer());
      if (!target || target.getArena() != exec::Arena::Stash ||
          target.getAlias())
        continue;
      Key key{int64_t(target.getStashGroup().value_or(0)),
              int(target.getPool())};
      if (!landsApart(chosen, key, best))
        continue;
      staged.push_back({recv, target});
      auto freed = slotFreed.find({chunkOfGroup[key.first], Pool(key.second)});
      if (freed != slotFreed.end() && freed->second)
        unwaited.insert(freed->second.getSymName());
    }
    if (staged.empty())
      continue;
    // The compute stream's wait for the receives, and the waits after it
    // that lead the body: the copies follow them (the body from there on,
    // launches only, can be one graph).
    Operation *after = receivedWait.lookup(program);
    if (!after)
      return program.emitOpError()
             << "receives into the stash but never waits for its receives";
    for (Operation *next = after->getNextNode(); next;
         next = next->getNextNode()) {
      auto wait = dyn_cast<exec::WaitOp>(next);
      if (!wait || exec::instructionStream(wait) != exec::Stream::Compute)
        break;
      after = wait;
    }
    for (auto [recv, target] : staged) {
      exec::BufferOp own =
          makeBuffer(("r" + std::to_string(counter++)).c_str(),
                     target.getTensorType(), exec::Arena::Workspace);
      recv.setBufferAttr(ref(own));
      body.setInsertionPointAfter(after);
      after = launch(recv.getLoc(), kernel::Copy{.x = own, .y = target});
    }
    for (auto wait : llvm::make_early_inc_range(block.getOps<exec::WaitOp>()))
      if (exec::instructionStream(wait) == exec::Stream::Comm &&
          unwaited.count(wait.getEvent()))
        wait.erase();
  }
  return success();
}

SmallVector<func::FuncOp> stageFunctions(ModuleOp module, int64_t stage) {
  SmallVector<func::FuncOp> functions;
  if (auto microbatch =
          module.lookupSymbol<func::FuncOp>(strata::step::kMicrobatch))
    functions.push_back(microbatch);
  for (int64_t c = 0;; ++c) {
    auto forward =
        module.lookupSymbol<func::FuncOp>(strata::step::forwardOf(c));
    auto backward =
        module.lookupSymbol<func::FuncOp>(strata::step::backwardOf(c));
    if (!forward || !backward)
      break;
    if (stageOfChunk(module, c) != stage)
      continue;
    functions.append({forward, backward});
    if (auto weight =
            module.lookupSymbol<func::FuncOp>(strata::step::weightOf(c)))
      functions.push_back(weight);
  }
  return functions;
}

} // namespace strata::lower_to_exec

namespace {

struct LowerToExecPass : strata::impl::LowerToExecBase<LowerToExecPass> {
  using LowerToExecBase::LowerToExecBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto optimizer =
        module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer);
    StageCoords coords;
    coords.tpSize = meshAxis(module, kTensorAxis);
    coords.dpSize = meshAxis(module, kDataAxis);
    coords.ppSize = meshAxis(module, kPipelineAxis);
    coords.cpSize = meshAxis(module, kContextAxis);
    std::map<int64_t, dist::ScheduleOp> schedules;
    for (auto schedule : module.getOps<dist::ScheduleOp>())
      schedules[int64_t(schedule.getStage())] = schedule;
    if (stageFunctions(module, 0).empty() || !optimizer ||
        int64_t(schedules.size()) != coords.ppSize) {
      module.emitError() << "lowering needs @microbatch (or pipeline "
                            "chunks), @optimizer and a dist.schedule per "
                            "pipeline stage: run --strata-autodiff, "
                            "--strata-optimizer and --strata-schedule first";
      return signalPassFailure();
    }
    FailureOr<OptimizerFacts> facts = readOptimizerFacts(optimizer);
    if (failed(facts))
      return signalPassFailure();
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    llvm::SetVector<Operation *> lowered; // every stage's functions
    for (int64_t stage = 0; stage < coords.ppSize; ++stage) {
      coords.pp = stage;
      auto op = exec::TemplateOp::create(
          b, module.getLoc(), b.getI64IntegerAttr(stage), IntegerAttr(),
          IntegerAttr(), IntegerAttr(), DenseI64ArrayAttr(),
          DenseI64ArrayAttr(), DenseI64ArrayAttr(), DenseI64ArrayAttr(),
          DenseI64ArrayAttr());
      op.getBody().emplaceBlock();
      SmallVector<func::FuncOp> functions = stageFunctions(module, stage);
      for (func::FuncOp function : functions)
        lowered.insert(function);
      Lowering lowering(module, op, bf16, coords, *facts);
      if (failed(lowering.layoutParameters(functions, schedules[stage])))
        return signalPassFailure();
      for (func::FuncOp function : functions)
        if (failed(lowering.lowerFunction(function)))
          return signalPassFailure();
      lowering.lowerOptimizer(optimizer);
      if (failed(lowering.lowerSchedule(schedules[stage])))
        return signalPassFailure();
      // Declarations (buffers, events, params, io) read first, then the
      // programs.
      Block &block = op.getBody().front();
      Operation *firstProgram = *block.getOps<exec::ProgramOp>().begin();
      for (Operation &child : llvm::make_early_inc_range(
               llvm::make_range(firstProgram->getIterator(), block.end())))
        if (!isa<exec::ProgramOp, exec::ScheduleOp>(child))
          child.moveBefore(firstProgram);
    }
    for (Operation *function : lowered)
      function->erase();
    optimizer.erase();
    for (auto &entry : schedules)
      entry.second.erase();
    if (auto grid = module.lookupSymbol<shard::GridOp>(kMeshName))
      grid.erase();
  }
};

} // namespace
