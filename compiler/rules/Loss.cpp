//===- Loss.cpp - the cross-entropy, whole or vocabulary-parallel ---------===//
//
// Gradient: softmax minus the one-hot target, scaled by the loss's
// gradient (graph.cross_entropy_grad). The fused and vocabulary-parallel
// forms are made after autodiff (FuseLoss, TensorParallel) and have none.
//
// Sharding: logits split along the vocabulary (a column-parallel output
// layer) make the loss vocabulary-parallel: three row statistics (the max,
// the target's logit, the sum of exponentials), each all-reduced, and the
// loss from them; its gradient reads the same statistics. Other logits are
// made whole first.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult crossEntropyGradient(CrossEntropyOp loss, GradientBuilder &g,
                                   ArrayRef<Value> dys) {
  g.contribute(loss.getLogits(),
               CrossEntropyGradOp::create(g.builder(), loss.getLoc(),
                                          loss.getLogits().getType(),
                                          loss.getLogits(), loss.getLabels(),
                                          dys.front(), loss.getVocabSizeAttr()),
               loss.getLoc());
  return success();
}

LogicalResult crossEntropySharding(CrossEntropyOp op, ShardingState &st) {
  int64_t last = op.getLogits().getType().getRank() - 1;
  Sharding logits = st.get(op.getLogits());
  if (logits.isPartial() || (logits.isSplit() && logits.dim != last)) {
    if (failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    logits = Sharding::replicated();
  }
  if (!logits.isSplit()) {
    st.set(op, Sharding::replicated());
    return success();
  }
  // Vocabulary-parallel: three row statistics, each all-reduced.
  OpBuilder &b = st.builder();
  b.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto logitsType = op.getLogits().getType();
  auto rows =
      RankedTensorType::get(logitsType.getShape().drop_back(), b.getF32Type());
  int64_t vocab =
      op.getVocabSize() ? *op.getVocabSize() : logitsType.getShape().back();
  auto vocabAttr = b.getI64IntegerAttr(vocab);
  auto localMax = LogitsMaxOp::create(b, loc, rows, op.getLogits(), vocabAttr);
  Value max = st.allReduce(loc, rows, localMax, /*max=*/true);
  auto localTarget = LogitsTargetOp::create(b, loc, rows, op.getLogits(),
                                            op.getLabels(), vocabAttr);
  Value target = st.allReduce(loc, rows, localTarget, /*max=*/false);
  auto localSum =
      LogitsSumExpOp::create(b, loc, rows, op.getLogits(), max, vocabAttr);
  Value sumExp = st.allReduce(loc, rows, localSum, /*max=*/false);
  auto layerTag = op->getAttr("strata.layer");
  for (Operation *created :
       {max.getDefiningOp(), target.getDefiningOp(), sumExp.getDefiningOp()})
    if (layerTag)
      created->setAttr("strata.layer", layerTag);
  for (Operation *stat : {localMax.getOperation(), localTarget.getOperation(),
                          localSum.getOperation()}) {
    stat->setAttr("dist.vocab_parallel", b.getUnitAttr());
    st.set(stat->getResult(0), Sharding::replicated()); // rows are whole
  }
  auto loss = CrossEntropyFromStatsOp::create(b, loc, op.getType(), max, sumExp,
                                              target);
  st.set(loss, Sharding::replicated());
  st.lossStats[op.getLogits()] = {max, sumExp};
  op.replaceAllUsesWith(loss.getResult());
  op.erase();
  return success();
}

LogicalResult crossEntropyGradSharding(CrossEntropyGradOp op,
                                       ShardingState &st) {
  if (st.get(op.getGrad()).isPartial() &&
      failed(st.convertOperand(op, 2, Sharding::replicated())))
    return failure();
  auto it = st.lossStats.find(op.getLogits());
  if (it == st.lossStats.end()) {
    Sharding logits = st.get(op.getLogits());
    if (!logits.isReplicated() &&
        failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    st.set(op, Sharding::replicated());
    return success();
  }
  OpBuilder &b = st.builder();
  b.setInsertionPoint(op);
  int64_t vocab = op.getVocabSize()
                      ? *op.getVocabSize()
                      : op.getLogits().getType().getShape().back();
  auto grad = CrossEntropyGradFromStatsOp::create(
      b, op.getLoc(), op.getType(), op.getLogits(), op.getLabels(),
      it->second.max, it->second.sumExp, op.getGrad(),
      b.getI64IntegerAttr(vocab));
  grad->setAttr("dist.vocab_parallel", b.getUnitAttr());
  if (auto layer = op->getAttr("strata.layer"))
    grad->setAttr("strata.layer", layer);
  st.set(grad, st.get(op.getLogits()));
  op.replaceAllUsesWith(grad.getResult());
  op.erase();
  return success();
}

/// Planning: the loss needs its logits split along the vocabulary (it
/// becomes vocabulary-parallel).
void crossEntropySplit(CrossEntropyOp, OpOperand &use, int64_t dim,
                       SplitPlanner &planner) {
  int64_t last = cast<RankedTensorType>(use.get().getType()).getRank() - 1;
  if (use.getOperandNumber() == 0 && (dim == last || dim < 0))
    planner.want(SplitPlanner::Need::Required);
}

} // namespace

void OpRules<CrossEntropyOp>::attach(MLIRContext &context) {
  attachGradient<CrossEntropyOp, crossEntropyGradient>(context);
  attachSharding<CrossEntropyOp, crossEntropySharding, crossEntropySplit>(
      context);
}
// Backward only: no gradient of its own.
void OpRules<CrossEntropyGradOp>::attach(MLIRContext &context) {
  attachSharding<CrossEntropyGradOp, crossEntropyGradSharding>(context);
}
// Made by tensor parallelism's loss rule (the statistics, with their
// shardings) or after it (FuseLoss): neither rule.
void OpRules<CrossEntropyWithGradOp>::attach(MLIRContext &) {}
void OpRules<LogitsMaxOp>::attach(MLIRContext &) {}
void OpRules<LogitsTargetOp>::attach(MLIRContext &) {}
void OpRules<LogitsSumExpOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyFromStatsOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyGradFromStatsOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyWithGradFromStatsOp>::attach(MLIRContext &) {}

} // namespace strata
