//===- Norms.cpp - LayerNorm and RMSNorm ----------------------------------===//
//
// Gradient: one backward op per norm gives the input's, the weight's and
// (LayerNorm) the bias's gradients at once.
//
// Sharding: a norm normalizes the last dimension, which must be whole; its
// weights are replicated. Under sequence parallelism it runs on each
// rank's part of the sequence, and its weight gradients, summed over those
// rows, are partial.
//
// Lowering: a launch each, the backward giving all its gradients at once.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult layerNormGradient(LayerNormOp norm, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  Location loc = norm.getLoc();
  auto grad = LayerNormGradOp::create(
      g.builder(), loc, norm.getInput().getType(), norm.getWeight().getType(),
      norm.getBias().getType(), norm.getInput(), norm.getWeight(), dys.front(),
      norm.getEpsilonAttr());
  g.contribute(norm.getInput(), grad.getInputGrad(), loc);
  g.contribute(norm.getWeight(), grad.getWeightGrad(), loc);
  g.contribute(norm.getBias(), grad.getBiasGrad(), loc);
  return success();
}

LogicalResult rmsNormGradient(RmsNormOp norm, GradientBuilder &g,
                              ArrayRef<Value> dys) {
  Location loc = norm.getLoc();
  auto grad = RmsNormGradOp::create(
      g.builder(), loc, norm.getInput().getType(), norm.getWeight().getType(),
      norm.getInput(), norm.getWeight(), dys.front(), norm.getEpsilonAttr());
  g.contribute(norm.getInput(), grad.getInputGrad(), loc);
  g.contribute(norm.getWeight(), grad.getWeightGrad(), loc);
  return success();
}

/// Forward: (x, weight[, bias]); backward: (x, weight, grad).
LogicalResult normSharding(Operation *op, bool backward, ShardingState &st) {
  Value x = op->getOperand(0);
  int64_t last = cast<RankedTensorType>(x.getType()).getRank() - 1;
  Sharding s = st.get(x);
  if (s.isPartial() || s.isSplit(last)) {
    if (failed(st.convertOperand(op, 0,
                                 s.isPartial() ? st.streamSharding(x)
                                               : Sharding::replicated())))
      return failure();
    s = st.get(op->getOperand(0));
  }
  unsigned params = backward ? 2 : op->getNumOperands();
  for (unsigned i = 1; i < params; ++i) {
    if (st.isUndecidedParam(op->getOperand(i)))
      st.decide(op->getOperand(i), Sharding::replicated());
    else if (!st.get(op->getOperand(i)).isReplicated() &&
             failed(st.convertOperand(op, i, Sharding::replicated())))
      return failure();
  }
  if (backward && st.get(op->getOperand(2)) != s &&
      failed(st.convertOperand(op, 2, s)))
    return failure();
  st.set(op->getResult(0), s);
  if (backward) {
    // Weight gradients sum over rows: partial when the rows are split.
    Sharding weights =
        s.isSplit() ? Sharding::partial() : Sharding::replicated();
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      st.set(op->getResult(i), weights);
  }
  return success();
}

template <typename Op>
LogicalResult forwardNormSharding(Op op, ShardingState &st) {
  return normSharding(op, /*backward=*/false, st);
}
template <typename Op>
LogicalResult backwardNormSharding(Op op, ShardingState &st) {
  return normSharding(op, /*backward=*/true, st);
}

LogicalResult layerNormLowering(LayerNormOp norm, Lowering &l) {
  l.launch(norm.getLoc(), kernel::LayerNormFwd{
                              .x = l.operand(norm.getInput()),
                              .weight = l.operand(norm.getWeight()),
                              .bias = l.operand(norm.getBias()),
                              .y = l.result(norm),
                              .epsilon = norm.getEpsilon().convertToDouble()});
  return success();
}

LogicalResult layerNormGradLowering(LayerNormGradOp norm, Lowering &l) {
  l.launch(norm.getLoc(), kernel::LayerNormBwd{
                              .x = l.operand(norm.getInput()),
                              .weight = l.operand(norm.getWeight()),
                              .dy = l.operand(norm.getGrad()),
                              .dx = l.result(norm.getInputGrad()),
                              .dweight = l.result(norm.getWeightGrad()),
                              .dbias = l.result(norm.getBiasGrad()),
                              .epsilon = norm.getEpsilon().convertToDouble()});
  return success();
}

LogicalResult rmsNormLowering(RmsNormOp norm, Lowering &l) {
  l.launch(norm.getLoc(),
           kernel::RmsNormFwd{.x = l.operand(norm.getInput()),
                              .weight = l.operand(norm.getWeight()),
                              .y = l.result(norm),
                              .epsilon = norm.getEpsilon().convertToDouble()});
  return success();
}

LogicalResult rmsNormGradLowering(RmsNormGradOp norm, Lowering &l) {
  l.launch(norm.getLoc(),
           kernel::RmsNormBwd{.x = l.operand(norm.getInput()),
                              .weight = l.operand(norm.getWeight()),
                              .dy = l.operand(norm.getGrad()),
                              .dx = l.result(norm.getInputGrad()),
                              .dweight = l.result(norm.getWeightGrad()),
                              .epsilon = norm.getEpsilon().convertToDouble()});
  return success();
}

} // namespace

void OpRules<LayerNormOp>::attach(MLIRContext &context) {
  attachContext<LayerNormOp, contextLikeInput<LayerNormOp>>(context);
  attachGradient<LayerNormOp, layerNormGradient>(context);
  attachSharding<LayerNormOp, forwardNormSharding<LayerNormOp>>(context);
  attachLowering<LayerNormOp, layerNormLowering>(context);
}
void OpRules<RmsNormOp>::attach(MLIRContext &context) {
  attachContext<RmsNormOp, contextLikeInput<RmsNormOp>>(context);
  attachGradient<RmsNormOp, rmsNormGradient>(context);
  attachSharding<RmsNormOp, forwardNormSharding<RmsNormOp>>(context);
  attachLowering<RmsNormOp, rmsNormLowering>(context);
}
// Backward only: no gradients of their own.
void OpRules<LayerNormGradOp>::attach(MLIRContext &context) {
  attachContext<LayerNormGradOp, contextLikeInput<LayerNormGradOp>>(context);
  attachSharding<LayerNormGradOp, backwardNormSharding<LayerNormGradOp>>(
      context);
  attachLowering<LayerNormGradOp, layerNormGradLowering>(context);
}
void OpRules<RmsNormGradOp>::attach(MLIRContext &context) {
  attachContext<RmsNormGradOp, contextLikeInput<RmsNormGradOp>>(context);
  attachSharding<RmsNormGradOp, backwardNormSharding<RmsNormGradOp>>(context);
  attachLowering<RmsNormGradOp, rmsNormGradLowering>(context);
}

} // namespace strata
