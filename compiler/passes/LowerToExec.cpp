//===- LowerToExec.cpp - the scheduled step as buffers and kernels --------===//
//
// Builds one exec.rank per rank of @mesh from the step's functions
// (@microbatch, or a pipeline stage's @forward_c and @backward_c),
// @optimizer and the stage's dist.schedule: a buffer per tensor, a kernel
// per op, a program per function. The functions are SPMD; what differs by
// rank is filled in here from the rank's coordinates (tp fastest, then dp,
// then pp): a shard's offset into its global tensor, a vocabulary range,
// the first query head, who keeps a replicated value in a partial sum,
// which part of the gradients a distributed optimizer owns, which chunks
// and parameters a pipeline stage holds and the peers it sends to. The
// kernel names and their argument conventions are the runtime's
// (runtime/exec/KernelTable.cpp checks them when a plan loads).
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/LowerToExec.h"
#include "compiler/Passes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

#include <map>

namespace strata {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
using namespace strata::lower_to_exec;

namespace strata::lower_to_exec {

void Lowering::layoutParameters(ArrayRef<func::FuncOp> functions) {
  SmallVector<graph::ParamOp> ops;
  for (func::FuncOp function : functions)
    function.walk([&](graph::ParamOp param) {
      if (params.count(param.getName()))
        return;
      params[param.getName()].flatOffset = flatElements;
      flatElements += param.getType().getNumElements();
      paramOrder.push_back(param.getName().str());
      ops.push_back(param);
    });
  // The regions split evenly across data-parallel ranks.
  flatElements = (flatElements + coords.dpSize - 1) / coords.dpSize *
                 coords.dpSize;
  shardElements = flatElements / coords.dpSize;
  int64_t shardBegin = coords.dp * shardElements;
  Type valueType = bf16 ? Type(BFloat16Type::get(ctx())) : b.getF32Type();
  paramRegion = persistent(
      "params", RankedTensorType::get({flatElements}, valueType), false);
  gradRegion = persistent(
      "grads", RankedTensorType::get({flatElements}, b.getF32Type()), true);
  exec::BufferOp expAvgRegion, expAvgSqRegion, masterRegion;
  if (distributedOptimizer) {
    auto shardType = RankedTensorType::get({shardElements}, b.getF32Type());
    expAvgRegion = persistent("exp_avg", shardType, true);
    expAvgSqRegion = persistent("exp_avg_sq", shardType, true);
    if (bf16)
      masterRegion = persistent("master", shardType, false);
  }

  for (graph::ParamOp param : ops) {
    ParamBuffers &p = params[param.getName()];
    std::string name = param.getName().str();
    RankedTensorType local = param.getType();
    RankedTensorType stored = storageType(local);
    int64_t count = local.getNumElements();
    p.value = makeBuffer("param:" + name, stored, exec::Arena::Persistent,
                         paramRegion, p.flatOffset * elementBytes(stored));
    p.grad = makeBuffer("grad:" + name, asF32(local), exec::Arena::Persistent,
                        gradRegion, p.flatOffset * 4);
    SmallVector<Attribute> masters;
    SmallVector<int64_t> masterOffsets;
    if (!distributedOptimizer) {
      p.expAvg = persistent("exp_avg:" + name, asF32(local), true);
      p.expAvgSq = persistent("exp_avg_sq:" + name, asF32(local), true);
      if (stored != asF32(local)) {
        p.master = persistent("master:" + name, asF32(local), false);
        masters.push_back(FlatSymbolRefAttr::get(p.master.getSymNameAttr()));
        masterOffsets.push_back(0);
      }
    } else {
      // This rank owns flat elements [shardBegin, shardBegin + shard).
      int64_t begin = std::max(p.flatOffset, shardBegin);
      int64_t end = std::min(p.flatOffset + count, shardBegin + shardElements);
      if (begin < end) {
        Segment seg;
        seg.begin = begin - p.flatOffset;
        seg.length = end - begin;
        std::string suffix = name + "@" + std::to_string(seg.begin);
        seg.grad = regionView("grad:" + suffix, gradRegion, begin, seg.length);
        seg.value =
            regionView("param:" + suffix, paramRegion, begin, seg.length);
        seg.expAvg = regionView("exp_avg:" + suffix, expAvgRegion,
                                begin - shardBegin, seg.length);
        seg.expAvgSq = regionView("exp_avg_sq:" + suffix, expAvgSqRegion,
                                  begin - shardBegin, seg.length);
        if (masterRegion) {
          seg.master = regionView("master:" + suffix, masterRegion,
                                  begin - shardBegin, seg.length);
          masters.push_back(
              FlatSymbolRefAttr::get(seg.master.getSymNameAttr()));
          masterOffsets.push_back(seg.begin);
        }
        p.owned = seg;
      }
    }

    // Where this rank's part sits in the global tensor.
    SmallVector<int64_t> global(local.getShape());
    SmallVector<int64_t> offset(local.getRank(), 0);
    if (auto dim = param->getAttrOfType<IntegerAttr>("dist.split_dim"))
      offset[dim.getInt()] = tpOffset(local.getDimSize(dim.getInt()));
    if (auto shape = param->getAttrOfType<DenseI64ArrayAttr>("dist.global_shape"))
      global.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
    SmallVector<int64_t> padded = global;
    if (auto real = param->getAttrOfType<DenseI64ArrayAttr>("dist.real_shape"))
      global.assign(real.asArrayRef().begin(), real.asArrayRef().end());
    double std = param.getStd() ? param.getStd()->convertToDouble() : 0.0;
    exec::ParamOp::create(
        bufferBuilder, param.getLoc(), param.getNameAttr(),
        FlatSymbolRefAttr::get(p.value.getSymNameAttr()),
        FlatSymbolRefAttr::get(p.grad.getSymNameAttr()),
        b.getArrayAttr(masters), b.getDenseI64ArrayAttr(masterOffsets),
        b.getDenseI64ArrayAttr(global), b.getDenseI64ArrayAttr(padded),
        b.getDenseI64ArrayAttr(offset),
        b.getStringAttr(graph::stringifyInitKind(param.getInit())),
        b.getF64FloatAttr(std));
  }
}

exec::BufferOp Lowering::input(graph::InputOp op) {
  auto [it, inserted] = inputs.try_emplace(op.getName());
  if (inserted) {
    it->second = makeBuffer("input:" + op.getName().str(), op.getType(),
                            exec::Arena::Persistent);
    exec::IoOp::create(bufferBuilder, op.getLoc(), op.getNameAttr(),
                       FlatSymbolRefAttr::get(it->second.getSymNameAttr()));
  }
  return it->second;
}

void Lowering::kernel(Location loc, StringRef name,
                      ArrayRef<exec::BufferOp> ins,
                      ArrayRef<exec::BufferOp> outs,
                      ArrayRef<NamedAttribute> attrs) {
  auto refs = [&](ArrayRef<exec::BufferOp> list) {
    SmallVector<Attribute> out;
    for (exec::BufferOp buffer : list)
      out.push_back(FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
    return b.getArrayAttr(out);
  };
  auto op = exec::KernelOp::create(body, loc, b.getStringAttr(name), refs(ins),
                                   refs(outs));
  for (NamedAttribute attr : attrs)
    op->setAttr(attr.getName(), attr.getValue());
}

void Lowering::gemm(Location loc, exec::BufferOp a, exec::BufferOp bMatrix,
                    exec::BufferOp c, int64_t m, int64_t n, int64_t k,
                    bool transposeA, bool transposeB, bool accumulate) {
  kernel(loc, "gemm", {a, bMatrix}, {c},
         {b.getNamedAttr("m", b.getI64IntegerAttr(m)),
          b.getNamedAttr("n", b.getI64IntegerAttr(n)),
          b.getNamedAttr("k", b.getI64IntegerAttr(k)),
          b.getNamedAttr("transpose_a", b.getBoolAttr(transposeA)),
          b.getNamedAttr("transpose_b", b.getBoolAttr(transposeB)),
          b.getNamedAttr("accumulate", b.getBoolAttr(accumulate))});
}

Lowering::GradientTarget Lowering::gradientTarget(Value grad) {
  auto sink = grad.hasOneUse() ? dyn_cast<graph::AccumulateGradOp>(
                                     *grad.getUsers().begin())
                               : graph::AccumulateGradOp();
  auto it = sink ? params.find(sink.getName()) : params.end();
  if (it == params.end())
    return {temporary(grad, exec::Arena::Workspace), false};
  fused.insert(sink);
  buffers[grad] = it->second.grad;
  return {it->second.grad, true};
}

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  auto chunkAttr = func->getAttrOfType<IntegerAttr>("dist.chunk");
  bool forward = chunkAttr && func.getSymName().starts_with("forward_");
  StringRef phase = !chunkAttr ? func.getSymName()
                    : forward  ? StringRef("forward")
                               : StringRef("backward");
  auto program = exec::ProgramOp::create(
      programBuilder, func.getLoc(), func.getSymNameAttr(),
      b.getStringAttr(phase), chunkAttr);
  body.setInsertionPointToEnd(&program.getBody().emplaceBlock());
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (chunkAttr) {
    // A chunk's forward leaves its results in the stash for the backward
    // of the same microbatch, which takes them as arguments.
    int64_t chunk = chunkAttr.getInt();
    stashGroup = chunk / coords.ppSize;
    stashValues.clear();
    if (forward)
      stashValues.insert(ret.getOperands().begin(), ret.getOperands().end());
    else
      for (auto [argument, buffer] :
           llvm::zip_equal(func.getArguments(), chunkStash[chunk]))
        buffers[argument] = buffer;
    for (Operation &op : func.getBody().front().without_terminator())
      if (failed(lowerOp(&op)))
        return failure();
    if (forward)
      for (Value value : ret.getOperands()) {
        exec::BufferOp buffer = bufferOf(value);
        if (!buffer || buffer.getArena() != exec::Arena::Stash)
          return ret.emitOpError()
                 << "returns a value that cannot be stashed (a view, a "
                    "parameter or an input): only computed activations are";
        chunkStash[chunk].push_back(buffer);
      }
    stashValues.clear();
    return success();
  }
  for (Operation &op : func.getBody().front().without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
  if (func.getSymName() == "optimizer") {
    // The accumulators start the next iteration at zero; a distributed
    // optimizer's ranks share their updated parts.
    kernel(func.getLoc(), "fill", {}, {gradRegion},
           {b.getNamedAttr("value", b.getF64FloatAttr(0))});
    if (distributedOptimizer) {
      exec::BufferOp mine = regionView("params@" + std::to_string(coords.dp),
                                       paramRegion, coords.dp * shardElements,
                                       shardElements);
      kernel(func.getLoc(), "all_gather", {mine}, {paramRegion},
             {b.getNamedAttr("axes", b.getDenseI64ArrayAttr({kDataAxis})),
              rankAttr("dim", 0)});
    }
  }
  // The returned scalar (the loss, the gradient norm) is copied to a
  // persistent buffer the runtime reads after the program.
  StringRef output = func.getSymName() == "microbatch" ? "loss" : "grad_norm";
  Value result = ret.getOperand(0);
  exec::BufferOp buffer = makeBuffer(("output:" + output).str(),
                                     storageType(result.getType()),
                                     exec::Arena::Persistent);
  kernel(ret.getLoc(), "copy", {bufferOf(result)}, {buffer});
  exec::IoOp::create(bufferBuilder, ret.getLoc(), b.getStringAttr(output),
                     FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
  return success();
}

LogicalResult Lowering::lowerSchedule(dist::ScheduleOp schedule) {
  auto op = exec::ScheduleOp::create(programBuilder, schedule.getLoc());
  if (auto kind = schedule->getAttrOfType<StringAttr>("kind"))
    op->setAttr("kind", kind);
  OpBuilder steps(ctx());
  steps.setInsertionPointToEnd(&op.getBody().emplaceBlock());
  // Stash slots: a chunk's forward takes the lowest free slot of its
  // chunk, and its backward for the same microbatch frees it.
  std::map<int64_t, std::vector<bool>> busy;            // by chunk
  std::map<std::pair<int64_t, int64_t>, int64_t> slotOf; // (chunk, mb)
  SmallVector<int64_t> slots; // per chunk of the stage: the most in use
  for (auto step : schedule.getBody().front().getOps<dist::StepOp>()) {
    auto function = module.lookupSymbol<func::FuncOp>(step.getFunction());
    auto chunkAttr = function->getAttrOfType<IntegerAttr>("dist.chunk");
    IntegerAttr slotAttr;
    if (chunkAttr) {
      if (!step.getMicrobatch())
        return step.emitOpError() << "runs a chunk without a microbatch";
      int64_t chunk = chunkAttr.getInt(), mb = int64_t(*step.getMicrobatch());
      int64_t slot;
      if (step.getFunction().starts_with("forward_")) {
        std::vector<bool> &used = busy[chunk];
        slot = std::find(used.begin(), used.end(), false) - used.begin();
        if (slot == int64_t(used.size()))
          used.push_back(false);
        used[slot] = true;
        slotOf[{chunk, mb}] = slot;
        int64_t group = chunk / coords.ppSize;
        if (int64_t(slots.size()) <= group)
          slots.resize(group + 1, 0);
        slots[group] = std::max(slots[group], slot + 1);
      } else {
        auto it = slotOf.find({chunk, mb});
        if (it == slotOf.end())
          return step.emitOpError() << "runs the backward of chunk " << chunk
                                    << " for microbatch " << mb
                                    << " before its forward";
        slot = it->second;
        busy[chunk][slot] = false;
        slotOf.erase(it);
      }
      slotAttr = b.getI64IntegerAttr(slot);
    }
    exec::RunOp::create(steps, step.getLoc(), step.getFunctionAttr(),
                        step.getMicrobatchAttr(), slotAttr);
  }
  if (!slots.empty())
    op->getParentOfType<exec::RankOp>().setStashSlotsAttr(
        b.getDenseI64ArrayAttr(slots));
  return success();
}

} // namespace strata::lower_to_exec

namespace {

struct LowerToExecPass : strata::impl::LowerToExecBase<LowerToExecPass> {
  using LowerToExecBase::LowerToExecBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto microbatch = module.lookupSymbol<func::FuncOp>("microbatch");
    auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer");
    SmallVector<func::FuncOp> chunks; // @forward_c, @backward_c by chunk
    for (int64_t c = 0;; ++c) {
      auto forward =
          module.lookupSymbol<func::FuncOp>("forward_" + std::to_string(c));
      auto backward =
          module.lookupSymbol<func::FuncOp>("backward_" + std::to_string(c));
      if (!forward || !backward)
        break;
      chunks.append({forward, backward});
    }
    RankCoords coords;
    coords.tpSize = meshAxis(module, kTensorAxis);
    coords.dpSize = meshAxis(module, kDataAxis);
    coords.ppSize = meshAxis(module, kPipelineAxis);
    std::map<int64_t, dist::ScheduleOp> schedules;
    for (auto schedule : module.getOps<dist::ScheduleOp>())
      schedules[int64_t(schedule.getStage())] = schedule;
    if ((!microbatch && chunks.empty()) || !optimizer ||
        int64_t(schedules.size()) != coords.ppSize) {
      module.emitError() << "lowering needs @microbatch (or pipeline "
                            "chunks), @optimizer and a dist.schedule per "
                            "pipeline stage: run --strata-autodiff, "
                            "--strata-optimizer and --strata-schedule first";
      return signalPassFailure();
    }
    dist::ReduceGradientsOp reduce;
    optimizer.walk([&](dist::ReduceGradientsOp op) { reduce = op; });
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    int64_t world = coords.tpSize * coords.dpSize * coords.ppSize;
    for (int64_t rank = 0; rank < world; ++rank) {
      coords.rank = rank;
      coords.tp = rank % coords.tpSize;
      coords.dp = rank / coords.tpSize % coords.dpSize;
      coords.pp = rank / (coords.tpSize * coords.dpSize);
      auto op = exec::RankOp::create(b, module.getLoc(),
                                     b.getI64IntegerAttr(rank), IntegerAttr(),
                                     IntegerAttr(), IntegerAttr(),
                                     DenseI64ArrayAttr());
      op.getBody().emplaceBlock();
      // This stage's functions: its chunks, forward then backward each.
      SmallVector<func::FuncOp> functions;
      if (microbatch)
        functions.push_back(microbatch);
      for (size_t i = 0; i < chunks.size(); ++i)
        if (int64_t(i / 2) % coords.ppSize == coords.pp)
          functions.push_back(chunks[i]);
      Lowering lowering(module, op, bf16, coords, reduce);
      lowering.layoutParameters(functions);
      lowering.noteTiedParameters(optimizer);
      for (func::FuncOp function : functions)
        if (failed(lowering.lowerFunction(function)))
          return signalPassFailure();
      if (failed(lowering.lowerFunction(optimizer)) ||
          failed(lowering.lowerSchedule(schedules[coords.pp])))
        return signalPassFailure();
      // Declarations (buffers, params, io) read first, then the programs.
      Block &block = op.getBody().front();
      Operation *firstProgram = *block.getOps<exec::ProgramOp>().begin();
      for (Operation &child : llvm::make_early_inc_range(llvm::make_range(
               firstProgram->getIterator(), block.end())))
        if (!isa<exec::ProgramOp, exec::ScheduleOp>(child))
          child.moveBefore(firstProgram);
    }
    if (microbatch)
      microbatch.erase();
    for (func::FuncOp function : chunks)
      function.erase();
    optimizer.erase();
    for (auto &entry : schedules)
      entry.second.erase();
    if (auto grid = module.lookupSymbol<shard::GridOp>(kMeshName))
      grid.erase();
  }
};

} // namespace
