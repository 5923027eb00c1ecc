//===- Pointwise.cpp - elementwise arithmetic and activations -------------===//
//
// Gradients (the right operand of add, sub and mul may broadcast over
// leading dimensions: its gradient is summed down to its shape):
//   a + b:  da = dy, db = dy            a - b:  da = dy, db = -dy
//   a * b:  da = dy * b, db = dy * a    s * a:  da = s * dy
//   gelu, silu: their own backward ops (graph.gelu_grad, silu_grad)
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult addGradient(AddOp add, GradientBuilder &g, ArrayRef<Value> dys) {
  Location loc = add.getLoc();
  g.contribute(add.getLhs(), dys.front(), loc);
  g.contribute(add.getRhs(), g.sumTo(dys.front(), add.getRhs().getType(), loc),
               loc);
  return success();
}

LogicalResult subGradient(SubOp sub, GradientBuilder &g, ArrayRef<Value> dys) {
  Location loc = sub.getLoc();
  g.contribute(sub.getLhs(), dys.front(), loc);
  Value summed = g.sumTo(dys.front(), sub.getRhs().getType(), loc);
  g.contribute(sub.getRhs(),
               ScaleOp::create(g.builder(), loc, summed,
                               g.builder().getF64FloatAttr(-1.0)),
               loc);
  return success();
}

LogicalResult mulGradient(MulOp mul, GradientBuilder &g, ArrayRef<Value> dys) {
  OpBuilder &b = g.builder();
  Location loc = mul.getLoc();
  Value lhs = mul.getLhs(), rhs = mul.getRhs(), dy = dys.front();
  g.contribute(lhs, MulOp::create(b, loc, lhs.getType(), dy, rhs), loc);
  Value full = MulOp::create(b, loc, lhs.getType(), dy, lhs);
  g.contribute(rhs, g.sumTo(full, rhs.getType(), loc), loc);
  return success();
}

LogicalResult scaleGradient(ScaleOp scale, GradientBuilder &g,
                            ArrayRef<Value> dys) {
  g.contribute(scale.getInput(),
               ScaleOp::create(g.builder(), scale.getLoc(), dys.front(),
                               scale.getFactorAttr()),
               scale.getLoc());
  return success();
}

LogicalResult geluGradient(GeluOp gelu, GradientBuilder &g,
                           ArrayRef<Value> dys) {
  g.contribute(gelu.getInput(),
               GeluGradOp::create(g.builder(), gelu.getLoc(), gelu.getInput(),
                                  dys.front(), gelu.getTanh()),
               gelu.getLoc());
  return success();
}

LogicalResult siluGradient(SiluOp silu, GradientBuilder &g,
                           ArrayRef<Value> dys) {
  g.contribute(silu.getInput(),
               SiluGradOp::create(g.builder(), silu.getLoc(), silu.getInput(),
                                  dys.front()),
               silu.getLoc());
  return success();
}

} // namespace

void OpRules<AddOp>::attach(MLIRContext &context) {
  attachGradient<AddOp, addGradient>(context);
}
void OpRules<SubOp>::attach(MLIRContext &context) {
  attachGradient<SubOp, subGradient>(context);
}
void OpRules<MulOp>::attach(MLIRContext &context) {
  attachGradient<MulOp, mulGradient>(context);
}
void OpRules<ScaleOp>::attach(MLIRContext &context) {
  attachGradient<ScaleOp, scaleGradient>(context);
}
void OpRules<GeluOp>::attach(MLIRContext &context) {
  attachGradient<GeluOp, geluGradient>(context);
}
void OpRules<SiluOp>::attach(MLIRContext &context) {
  attachGradient<SiluOp, siluGradient>(context);
}
// Backward only: no gradients of their own.
void OpRules<GeluGradOp>::attach(MLIRContext &) {}
void OpRules<SiluGradOp>::attach(MLIRContext &) {}

} // namespace strata
