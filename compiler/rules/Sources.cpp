//===- Sources.cpp - parameters, inputs, constants, layer boundaries ------===//
//
// Gradient: a source is a leaf (a parameter's gradient reaches its
// accumulator when its users contribute it, GradientBuilder::contribute);
// a layer boundary passes each result's gradient to its input.
//
// Sharding: inputs and constants are replicated and parameters are
// decided by their first user; the stream crosses a layer boundary whole
// (or sequence-split), never as partial sums.
//
// Lowering: a parameter or an input is its buffer, a layer boundary passes
// its inputs' buffers on, a constant is a fill.
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

template <typename Op> LogicalResult sourceSharding(Op, ShardingState &) {
  return success();
}

LogicalResult boundarySharding(LayerBoundaryOp boundary, ShardingState &st) {
  Operation *op = boundary;
  for (unsigned i = 0; i < op->getNumOperands(); ++i)
    if (st.get(op->getOperand(i)).isPartial() &&
        failed(st.convertOperand(op, i, st.streamSharding(op->getOperand(i)))))
      return failure();
  for (auto [input, result] :
       llvm::zip(boundary.getInputs(), boundary.getResults()))
    st.set(result, st.get(input));
  return success();
}

LogicalResult paramLowering(ParamOp param, Lowering &l) {
  l.bind(param, l.operand(param));
  return success();
}

LogicalResult inputLowering(InputOp input, Lowering &l) {
  l.bind(input, l.input(input));
  return success();
}

LogicalResult boundaryLowering(LayerBoundaryOp boundary, Lowering &l) {
  for (auto [input, result] :
       llvm::zip(boundary.getInputs(), boundary.getResults()))
    l.bind(result, l.operand(input));
  return success();
}

LogicalResult constantLowering(ConstantOp constant, Lowering &l) {
  l.launch(constant.getLoc(),
           kernel::Fill{.y = l.result(constant),
                        .value = constant.getValue().convertToDouble()});
  return success();
}

/// The tokens and labels ([batch, seq]) run along the sequence; a
/// per-sample input (dropout's keys) does not.
LogicalResult inputContext(InputOp input, ContextState &state) {
  if (input.getType().getRank() >= 2)
    state.set(input.getResult(), 1);
  return success();
}

LogicalResult boundaryContext(LayerBoundaryOp boundary, ContextState &state) {
  for (auto [in, out] : llvm::zip(boundary.getInputs(), boundary.getResults()))
    if (state.dim(in) >= 0)
      state.set(out, state.dim(in));
  return success();
}

} // namespace

void OpRules<ParamOp>::attach(MLIRContext &context) {
  attachContext<ParamOp, contextNone<ParamOp>>(context);
  attachGradient<ParamOp, leafGradient<ParamOp>>(context);
  attachSharding<ParamOp, sourceSharding<ParamOp>>(context);
  attachLowering<ParamOp, paramLowering>(context);
}
void OpRules<InputOp>::attach(MLIRContext &context) {
  attachContext<InputOp, inputContext>(context);
  attachGradient<InputOp, leafGradient<InputOp>>(context);
  attachSharding<InputOp, sourceSharding<InputOp>>(context);
  attachLowering<InputOp, inputLowering>(context);
}
void OpRules<ConstantOp>::attach(MLIRContext &context) {
  attachContext<ConstantOp, contextNone<ConstantOp>>(context);
  attachGradient<ConstantOp, leafGradient<ConstantOp>>(context);
  attachSharding<ConstantOp, sourceSharding<ConstantOp>>(context);
  attachLowering<ConstantOp, constantLowering>(context);
}
void OpRules<LayerBoundaryOp>::attach(MLIRContext &context) {
  attachContext<LayerBoundaryOp, boundaryContext>(context);
  attachGradient<LayerBoundaryOp, boundaryGradient>(context);
  attachSharding<LayerBoundaryOp, boundarySharding>(context);
  attachLowering<LayerBoundaryOp, boundaryLowering>(context);
}

} // namespace strata
