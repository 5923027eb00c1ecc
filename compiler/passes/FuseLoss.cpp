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
#include "dialects/dist/DistDialect.h"
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
/// graph.backward_layer: the pipeline split reads that tag as "backward"); null
/// if `grad` is not a constant.
Value seedBefore(OpBuilder &b, Operation *at, Value grad) {
  auto constant = grad.getDefiningOp<graph::ConstantOp>();
  if (!constant)
    return nullptr;
  b.setInsertionPoint(at);
  Operation *clone = b.clone(*constant);
  graph::backwardLayer(b.getContext()).removeAttr(clone);
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

/// The first user of `v` of kind LossOp that `matches`, or null.
template <typename LossOp, typename Match>
LossOp partnerOf(Value v, Match matches) {
  for (Operation *user : v.getUsers())
    if (auto candidate = dyn_cast<LossOp>(user);
        candidate && matches(candidate))
      return candidate;
  return LossOp();
}

/// `loss` and `grad` replaced by the fused op `build(seed)` makes, when the
/// gradient's seed is a constant.
template <typename Build>
void fuse(OpBuilder &b, Operation *loss, Operation *grad, Value gradSeed,
          Build build) {
  Value seed = seedBefore(b, loss, gradSeed);
  if (!seed)
    return;
  auto fused = build(seed);
  // The lowering gives a vocabulary-parallel launch its rank's columns.
  auto vocabParallel = strata::dist::vocabParallel(grad->getContext());
  if (UnitAttr parallel = vocabParallel.getAttr(grad))
    vocabParallel.setAttr(fused, parallel);
  replaceBoth(loss, grad, gradSeed, fused.getLoss(), fused.getLogitsGrad());
}

/// cross_entropy + cross_entropy_grad of the same logits and labels.
void fuseWhole(OpBuilder &b, graph::CrossEntropyGradOp grad) {
  auto loss = partnerOf<graph::CrossEntropyOp>(
      grad.getLogits(), [&](graph::CrossEntropyOp candidate) {
        return candidate.getLabels() == grad.getLabels() &&
               candidate.getVocabSizeAttr() == grad.getVocabSizeAttr();
      });
  if (loss)
    fuse(b, loss, grad, grad.getGrad(), [&](Value seed) {
      return graph::CrossEntropyWithGradOp::create(
          b, loss.getLoc(), loss.getType(), grad.getType(), loss.getLogits(),
          loss.getLabels(), seed, loss.getVocabSizeAttr());
    });
}

/// cross_entropy_from_stats + cross_entropy_grad_from_stats of the same
/// statistics.
void fuseFromStats(OpBuilder &b, graph::CrossEntropyGradFromStatsOp grad) {
  auto loss = partnerOf<graph::CrossEntropyFromStatsOp>(
      grad.getMax(), [&](graph::CrossEntropyFromStatsOp candidate) {
        return candidate.getSumExp() == grad.getSumExp();
      });
  if (loss)
    fuse(b, loss, grad, grad.getGrad(), [&](Value seed) {
      return graph::CrossEntropyWithGradFromStatsOp::create(
          b, loss.getLoc(), loss.getType(), grad.getType(), grad.getLogits(),
          grad.getLabels(), loss.getMax(), loss.getSumExp(), loss.getTarget(),
          seed, grad.getVocabSizeAttr());
    });
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
