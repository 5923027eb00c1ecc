//===- FuseLoss.cpp - the loss's gradient computed with the loss ----------===//
//
// Autodiff seeds the backward with the loss's own gradient, a constant
// (1 / microbatches / data-parallel ranks), so the logits' gradient can be
// computed where the loss is: one op instead of two, the row statistics
// (max and sum of exponentials) computed once instead of twice, and what
// the forward leaves for the backward is the logits' gradient instead of
// the logits (the same bytes; Megatron's fused cross-entropy keeps its
// softmax for the backward the same way). Runs on @microbatch after tensor
// parallelism, whose vocabulary-parallel loss it fuses too, and before the
// pipeline split, which then finds the fused op among the forward ops.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_FUSELOSS
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
namespace graph = strata::graph;

namespace {

/// The constant seed `grad` is, cloned before `at` as a forward value (no
/// strata.layer: the pipeline split reads that tag as "backward"); null if
/// `grad` is not a constant.
Value seedBefore(OpBuilder &b, Operation *at, Value grad) {
  auto constant = grad.getDefiningOp<graph::ConstantOp>();
  if (!constant)
    return nullptr;
  b.setInsertionPoint(at);
  Operation *clone = b.clone(*constant);
  clone->removeAttr("strata.layer");
  return clone->getResult(0);
}

/// The loss and its gradient replaced by the fused op's results; the
/// backward's `seed` erased once nothing else uses it.
void replaceBoth(Operation *loss, Operation *grad, Value seed, Value fusedLoss,
                 Value fusedGrad) {
  loss->replaceAllUsesWith(ValueRange{fusedLoss});
  grad->replaceAllUsesWith(ValueRange{fusedGrad});
  loss->erase();
  grad->erase();
  if (Operation *def = seed.getDefiningOp(); def && def->use_empty())
    def->erase();
}

/// cross_entropy + cross_entropy_grad of the same logits and labels.
void fuseWhole(OpBuilder &b, graph::CrossEntropyGradOp grad) {
  graph::CrossEntropyOp loss;
  for (Operation *user : grad.getLogits().getUsers())
    if (auto candidate = dyn_cast<graph::CrossEntropyOp>(user))
      if (candidate.getLabels() == grad.getLabels() &&
          candidate.getVocabSizeAttr() == grad.getVocabSizeAttr())
        loss = candidate;
  if (!loss)
    return;
  Value seed = seedBefore(b, loss, grad.getGrad());
  if (!seed)
    return;
  auto fused = graph::CrossEntropyWithGradOp::create(
      b, loss.getLoc(), loss.getType(), grad.getType(), loss.getLogits(),
      loss.getLabels(), seed, loss.getVocabSizeAttr());
  replaceBoth(loss, grad, grad.getGrad(), fused.getLoss(),
              fused.getLogitsGrad());
}

/// cross_entropy_from_stats + cross_entropy_grad_from_stats of the same
/// statistics.
void fuseFromStats(OpBuilder &b, graph::CrossEntropyGradFromStatsOp grad) {
  graph::CrossEntropyFromStatsOp loss;
  for (Operation *user : grad.getMax().getUsers())
    if (auto candidate = dyn_cast<graph::CrossEntropyFromStatsOp>(user))
      if (candidate.getSumExp() == grad.getSumExp())
        loss = candidate;
  if (!loss)
    return;
  Value seed = seedBefore(b, loss, grad.getGrad());
  if (!seed)
    return;
  auto fused = graph::CrossEntropyWithGradFromStatsOp::create(
      b, loss.getLoc(), loss.getType(), grad.getType(), grad.getLogits(),
      grad.getLabels(), loss.getMax(), loss.getSumExp(), loss.getTarget(), seed,
      grad.getVocabSizeAttr());
  // The lowering gives a vocabulary-parallel launch its rank's columns.
  if (Attribute parallel = grad->getAttr("dist.vocab_parallel"))
    fused->setAttr("dist.vocab_parallel", parallel);
  replaceBoth(loss, grad, grad.getGrad(), fused.getLoss(),
              fused.getLogitsGrad());
}

struct FuseLossPass : strata::impl::FuseLossBase<FuseLossPass> {
  void runOnOperation() override {
    OpBuilder b(&getContext());
    // Collected first: fusing erases ops a walk would visit.
    SmallVector<Operation *> grads;
    getOperation().walk([&](Operation *op) {
      if (isa<graph::CrossEntropyGradOp, graph::CrossEntropyGradFromStatsOp>(
              op))
        grads.push_back(op);
    });
    for (Operation *grad : grads) {
      if (auto whole = dyn_cast<graph::CrossEntropyGradOp>(grad))
        fuseWhole(b, whole);
      else
        fuseFromStats(b, cast<graph::CrossEntropyGradFromStatsOp>(grad));
    }
  }
};

} // namespace
