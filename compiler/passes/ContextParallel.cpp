//===- ContextParallel.cpp - split the step along the sequence ------------===//
//
// Megatron's context parallelism (--context-parallel-size c): every
// sample's sequence is cut into 2c chunks and context-parallel rank i holds
// chunks i and 2c - 1 - i, one after the other, so that under a causal mask
// every rank's queries see as many keys. Everything that works token by
// token (embeddings, matmuls, norms, the MLP, the loss) runs unchanged on
// the rank's share; each op's rule (graph::ContextSplittable, in its
// family's file under compiler/rules/) says which dimension of its results
// runs along the sequence, starting from the tokens and labels, and marks
// the ops that must know where their tokens sit in the whole sequence
// (dist.context_positions: rotary angles, and attention, whose lowering
// brings every rank's keys and values) or replaces them by ones that do (a
// learned position table's add and its gradient: graph.add_positions and
// graph.sum_positions). This pass walks the step in order and divides each such
// dimension by c. Weight gradients, sums over the rank's tokens, are then
// partial over the cp ranks: --strata-data-parallel sums them with the
// replicas', and the loss seed divides by c as it does by dp.
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "compiler/rules/Context.h"
#include "dialects/graph/GraphInterfaces.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

namespace strata {
#define GEN_PASS_DEF_CONTEXTPARALLEL
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

LogicalResult splitFunction(func::FuncOp func, strata::ContextState &state) {
  // A rule may replace the op it visits (a position table's add).
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    if (isa<func::ReturnOp>(op)) {
      for (Value operand : op.getOperands())
        if (state.dim(operand) >= 0)
          return state.error(&op)
                 << "the step returns a value that runs along the sequence";
      continue;
    }
    auto splittable = dyn_cast<ContextSplittable>(op);
    if (!splittable)
      return state.error(&op)
             << "no context-parallel rule for " << op.getName();
    if (failed(splittable.splitContext(state)))
      return failure();
  }
  return success();
}

/// Each value's sequence dimension becomes the rank's share of it.
LogicalResult localize(func::FuncOp func, strata::ContextState &state) {
  int64_t c = state.size();
  for (Operation &op : func.getBody().front())
    for (Value result : op.getResults()) {
      int64_t d = state.dim(result);
      if (d < 0)
        continue;
      auto type = cast<RankedTensorType>(result.getType());
      SmallVector<int64_t> shape(type.getShape());
      if (shape[d] % (2 * c) != 0)
        return state.error(&op)
               << "the sequence of " << shape[d] << " tokens (dimension " << d
               << " of " << describe(type) << ") does not cut into 2 x " << c
               << " equal chunks";
      shape[d] /= c;
      result.setType(RankedTensorType::get(shape, type.getElementType()));
    }
  return success();
}

struct ContextParallelPass
    : strata::impl::ContextParallelBase<ContextParallelPass> {
  using ContextParallelBase::ContextParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (size < 1) {
      module.emitError() << "context-parallel size must be at least 1";
      return signalPassFailure();
    }
    strata::ensureMesh(module);
    strata::setMeshAxis(module, strata::kContextAxis, size);
    if (size == 1)
      return;
    auto microbatch =
        module.lookupSymbol<func::FuncOp>(strata::step::kMicrobatch);
    auto optimizer =
        module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer);
    if (!microbatch || !optimizer) {
      module.emitError() << "context parallelism splits the training step: "
                            "run --strata-autodiff and --strata-optimizer "
                            "first";
      return signalPassFailure();
    }
    strata::ContextState state(module.getContext(), size, ring);
    if (failed(splitFunction(microbatch, state)) ||
        failed(splitFunction(optimizer, state)) ||
        failed(localize(microbatch, state)))
      return signalPassFailure();
  }
};

} // namespace
