//===- Sources.cpp - parameters, inputs, constants, layer boundaries ------===//
//
// Gradient: a source is a leaf (a parameter's gradient reaches its
// accumulator when its users contribute it, GradientBuilder::contribute);
// a layer boundary passes each result's gradient to its input.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

template <typename Op>
LogicalResult leafGradient(Op, GradientBuilder &, ArrayRef<Value>) {
  return success();
}

LogicalResult boundaryGradient(LayerBoundaryOp boundary, GradientBuilder &g,
                               ArrayRef<Value> dys) {
  for (auto [input, grad] : llvm::zip(boundary.getInputs(), dys))
    g.contribute(input, grad, boundary.getLoc());
  return success();
}

} // namespace

void OpRules<ParamOp>::attach(MLIRContext &context) {
  attachGradient<ParamOp, leafGradient<ParamOp>>(context);
}
void OpRules<InputOp>::attach(MLIRContext &context) {
  attachGradient<InputOp, leafGradient<InputOp>>(context);
}
void OpRules<ConstantOp>::attach(MLIRContext &context) {
  attachGradient<ConstantOp, leafGradient<ConstantOp>>(context);
}
void OpRules<LayerBoundaryOp>::attach(MLIRContext &context) {
  attachGradient<LayerBoundaryOp, boundaryGradient>(context);
}

} // namespace strata
