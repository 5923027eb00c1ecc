//===- Attention.cpp - attention and rotary positions ---------------------===//
//
// Gradients: attention's backward recomputes the probabilities from the
// forward's row log-sum-exp (the flash-attention contract) and gives the
// query's, key's and value's gradients at once; a rotation's gradient is
// the rotation by the opposite angle.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult ropeGradient(RopeOp rope, GradientBuilder &g,
                           ArrayRef<Value> dys) {
  OpBuilder &b = g.builder();
  g.contribute(rope.getInput(),
               RopeOp::create(b, rope.getLoc(), rope.getType(), dys.front(),
                              rope.getBaseAttr(),
                              rope.getInverse() ? UnitAttr() : b.getUnitAttr()),
               rope.getLoc());
  return success();
}

LogicalResult attentionGradient(AttentionOp attention, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  Location loc = attention.getLoc();
  auto grad = AttentionGradOp::create(
      g.builder(), loc, attention.getQuery().getType(),
      attention.getKey().getType(), attention.getValue().getType(),
      attention.getQuery(), attention.getKey(), attention.getValue(),
      attention.getResult(), attention.getLse(), dys.front(),
      attention.getCausalAttr(), attention.getGroupSizeAttr());
  g.contribute(attention.getQuery(), grad.getQueryGrad(), loc);
  g.contribute(attention.getKey(), grad.getKeyGrad(), loc);
  g.contribute(attention.getValue(), grad.getValueGrad(), loc);
  return success();
}

} // namespace

void OpRules<RopeOp>::attach(MLIRContext &context) {
  attachGradient<RopeOp, ropeGradient>(context);
}
void OpRules<AttentionOp>::attach(MLIRContext &context) {
  attachGradient<AttentionOp, attentionGradient>(context);
}
// Backward only: no gradient of its own.
void OpRules<AttentionGradOp>::attach(MLIRContext &) {}

} // namespace strata
