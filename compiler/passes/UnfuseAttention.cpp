//===- UnfuseAttention.cpp - attention computed apart ---------------------===//
//
// Each graph.attention of the forward model (with `all` false, each that
// drops out: the fused kernel draws no mask) is rebuilt with `unfused` and
// its probabilities as the value it keeps for the backward (the op's
// description says what its lowering then runs). Before autodiff nothing
// reads the log-sum-exp yet, so only the result is replaced.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"

namespace strata {
#define GEN_PASS_DEF_UNFUSEATTENTION
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

struct UnfuseAttentionPass
    : strata::impl::UnfuseAttentionBase<UnfuseAttentionPass> {
  using UnfuseAttentionBase::UnfuseAttentionBase;

  void runOnOperation() override {
    SmallVector<AttentionOp> attentions;
    getOperation().walk([&](AttentionOp op) {
      if (!op.getUnfused() && (all || op.getDropout()))
        attentions.push_back(op);
    });
    for (AttentionOp op : attentions) {
      if (!op.getSaved().use_empty()) {
        op.emitOpError() << "its log-sum-exp is read already: attention is "
                            "unfused before autodiff";
        return signalPassFailure();
      }
      OpBuilder b(op);
      auto query = cast<RankedTensorType>(op.getResult().getType());
      auto key = cast<RankedTensorType>(op.getKey().getType());
      auto unfused = AttentionOp::create(
          b, op.getLoc(), query, attentionSavedType(query, key, true),
          op.getQuery(), op.getKey(), op.getValue(), op.getKeys(),
          op.getCausalAttr(), op.getGroupSizeAttr(), b.getUnitAttr(),
          op.getDropoutAttr(), op.getDropoutSiteAttr());
      if (failed(verify(unfused))) // fewer kv heads than query heads
        return signalPassFailure();
      op.getResult().replaceAllUsesWith(unfused.getResult());
      op.erase();
    }
  }
};

} // namespace
