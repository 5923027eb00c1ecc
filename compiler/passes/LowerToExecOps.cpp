//===- LowerToExecOps.cpp - each op of the step as instructions -----------===//
//
// The op-by-op half of --strata-lower-to-exec: each op of a stage's function
// becomes gemms, launches of the kernel catalog and collectives over
// buffers, the arguments that differ between the stage's ranks (vocabulary
// and head offsets, who keeps a replicated term) written per rank, as a
// stride per coordinate. A graph op's rule is its graph::ExecLowerable, in
// its family's file under compiler/rules/; the dist and shard ops'
// (collectives, slices, the loss output) are here. The optimizer's ops are
// lowered as a whole instead (LowerOptimizer.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/LowerToExec.h"
#include "dialects/graph/GraphInterfaces.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "runtime/plan/IoNames.h"

namespace strata::lower_to_exec {

LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  // Done by the instruction of an op before it: an accumulation into a
  // gradient's target, or what a gemm's epilogue absorbed.
  if (fused.contains(op))
    return success();
  // Marked absorbed but not taken yet: a bias gradient (and its
  // accumulation) waits for the weight gradient after it, which only ops
  // absorbed alike may read meanwhile; lowerFunction checks that a gemm
  // took it in the end. Anything else would leave its readers no buffer.
  if (exec::absorbed(ctx()).isAttrPresent(op)) {
    for (Operation *user : op->getUsers())
      if (!exec::absorbed(ctx()).isAttrPresent(user))
        return op->emitOpError()
               << "is marked absorbed, but no gemm's epilogue does it";
    return success();
  }
  // A graph op: its rule, in its family's file under compiler/rules/.
  if (auto rule = dyn_cast<graph::ExecLowerable>(op))
    return rule.lowerToExec(*this);

  if (auto loss = dyn_cast<dist::LossOp>(op)) {
    output(loc, runtime::io_names::kLoss, operand(loss.getValue()));
    return success();
  }
  if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp>(op)) {
    SmallVector<int64_t> axes =
        meshAxes(op->getAttrOfType<DenseI16ArrayAttr>("grid_axes"));
    exec::BufferOp input = operand(op->getOperand(0));
    // A collective keeps its operand's dtype (f32 statistics stay f32).
    bool f32 = input.getTensorType().getElementType().isF32();
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      collective(loc,
                 reduce.getReduction() == shard::ReductionKind::Max
                     ? exec::CollectiveKind::AllReduceMax
                     : exec::CollectiveKind::AllReduceSum,
                 input,
                 temporary(reduce.getResult(), exec::Arena::Workspace, f32),
                 axes);
    } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
      collective(loc, exec::CollectiveKind::AllGather, input,
                 temporary(gather.getResult(), exec::Arena::Workspace, f32),
                 axes, gather.getGatherAxis().getSExtValue());
    } else {
      auto scatter = cast<shard::ReduceScatterOp>(op);
      collective(loc, exec::CollectiveKind::ReduceScatter, input,
                 temporary(scatter.getResult(), exec::Arena::Workspace, f32),
                 axes, scatter.getScatterAxis().getSExtValue());
    }
    return success();
  }
  if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
    exec::LaunchOp launched =
        launch(loc, kernel::Slice{.x = operand(slice.getInput()),
                                  .y = result(slice),
                                  .dim = slice.getSliceAxis().getSExtValue(),
                                  .part = 0,
                                  .parts = coords.tpSize});
    perRank(launched, "part", kTensorAxis, 1);
    return success();
  }
  if (auto keep = dyn_cast<dist::KeepOnFirstOp>(op)) {
    SmallVector<int64_t> axes = meshAxes(keep.getGridAxesAttr());
    if (axes.size() != 1)
      return keep.emitOpError()
             << "keeps a value on the first rank of " << axes.size()
             << " mesh axes: the lowering knows one";
    exec::LaunchOp launched =
        launch(loc, kernel::KeepOnFirst{.x = operand(keep.getInput()),
                                        .y = result(keep)});
    perRank(launched, "part", axes.front(), 1);
    return success();
  }
  return op->emitOpError() << "has no lowering to exec";
}

} // namespace strata::lower_to_exec
