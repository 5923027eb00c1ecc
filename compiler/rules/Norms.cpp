//===- Norms.cpp - LayerNorm and RMSNorm ----------------------------------===//
//
// Gradient: one backward op per norm gives the input's, the weight's and
// (LayerNorm) the bias's gradients at once.
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

} // namespace

void OpRules<LayerNormOp>::attach(MLIRContext &context) {
  attachGradient<LayerNormOp, layerNormGradient>(context);
}
void OpRules<RmsNormOp>::attach(MLIRContext &context) {
  attachGradient<RmsNormOp, rmsNormGradient>(context);
}
// Backward only: no gradients of their own.
void OpRules<LayerNormGradOp>::attach(MLIRContext &) {}
void OpRules<RmsNormGradOp>::attach(MLIRContext &) {}

} // namespace strata
