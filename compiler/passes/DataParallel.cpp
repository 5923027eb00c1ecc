//===- DataParallel.cpp - replicas that average their gradients -----------===//
//
// Data-parallel ranks hold the same model and see different samples. Their
// gradients are summed before the optimizer (the loss seed already divides
// by microbatches · dp, and · cp, whose ranks see other tokens of the same
// samples and are summed with them, so the sum is the mean over the global
// batch): a
// dist.reduce_gradients at the start of @optimizer, all-reducing buckets of
// the accumulators, or, with the distributed optimizer, reduce-scattering
// them so that each rank updates its 1/dp and the parameters are
// all-gathered after (the lowering lays both out). The gradient norm then
// sums over the dp axis too.
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_DATAPARALLEL
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;

namespace {

struct DataParallelPass : strata::impl::DataParallelBase<DataParallelPass> {
  using DataParallelBase::DataParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (size < 1 || bucketElements < 1) {
      module.emitError() << "data-parallel size and bucket size must be "
                            "at least 1";
      return signalPassFailure();
    }
    auto optimizer =
        module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer);
    if (!optimizer) {
      module.emitError() << "data parallelism needs @optimizer: run "
                            "--strata-optimizer first";
      return signalPassFailure();
    }
    strata::ensureMesh(module);
    strata::setMeshAxis(module, strata::kDataAxis, size);
    // Context-parallel ranks (set before) hold the other tokens of the same
    // samples: their gradients are summed with the replicas'.
    bool context = strata::meshAxis(module, strata::kContextAxis) > 1;
    if (size == 1 && !context)
      return;

    OpBuilder b(optimizer.getBody());
    b.setInsertionPointToStart(&optimizer.getBody().front());
    auto grid = FlatSymbolRefAttr::get(b.getContext(), strata::kMeshName);
    SmallVector<int16_t, 2> axes = {strata::kDataAxis};
    if (context)
      axes.push_back(strata::kContextAxis);
    strata::dist::ReduceGradientsOp::create(
        b, optimizer.getLoc(), grid, b.getDenseI16ArrayAttr(axes),
        distributedOptimizer ? b.getUnitAttr() : UnitAttr(),
        b.getI64IntegerAttr(bucketElements));
    if (!distributedOptimizer)
      return; // every rank holds whole, equal gradients

    // Each rank's sums of squares cover its own part: sum over dp (and cp)
    // as well.
    for (int16_t axis : axes)
      strata::sumGradientNormOver(optimizer, axis);
  }
};

} // namespace
