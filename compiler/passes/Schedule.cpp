//===- Schedule.cpp - the order of one training iteration -----------------===//
//
// On one stage, an iteration runs @microbatch once per microbatch (each adds
// its gradients into the accumulators) and then @optimizer once. Pipeline
// schedules (gpipe, 1f1b, interleaved) will interleave per-chunk forward and
// backward functions here instead.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_SCHEDULE
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;

namespace {

struct SchedulePass : strata::impl::ScheduleBase<SchedulePass> {
  using ScheduleBase::ScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    for (StringRef name : {"microbatch", "optimizer"}) {
      if (!module.lookupSymbol<func::FuncOp>(name)) {
        module.emitError() << "no @" << name
                           << " function to schedule: run --strata-autodiff "
                              "and --strata-optimizer first";
        return signalPassFailure();
      }
    }
    if (microbatches < 1) {
      module.emitError() << "microbatches must be at least 1, got "
                         << static_cast<int64_t>(microbatches);
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto schedule = strata::dist::ScheduleOp::create(
        b, loc, b.getI64IntegerAttr(0), b.getI64IntegerAttr(microbatches));
    b.setInsertionPointToEnd(&schedule.getBody().emplaceBlock());
    for (int64_t mb = 0; mb < microbatches; ++mb)
      strata::dist::StepOp::create(b, loc,
                                   FlatSymbolRefAttr::get(b.getContext(),
                                                          "microbatch"),
                                   b.getI64IntegerAttr(mb));
    strata::dist::StepOp::create(
        b, loc, FlatSymbolRefAttr::get(b.getContext(), "optimizer"),
        IntegerAttr());
  }
};

} // namespace
