//===- GradientBuilder.cpp - autodiff's running gradients -----------------===//
#include "compiler/rules/GradientBuilder.h"
#include "dialects/graph/GraphInterfaces.h"
#include "dialects/graph/GraphOps.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {

void GradientBuilder::contribute(Value value, Value grad, Location loc) {
  if (!grad)
    return;
  Operation *def = value.getDefiningOp();
  if (isa_and_nonnull<InputOp>(def))
    return; // token ids have no gradient
  if (auto param = dyn_cast_or_null<ParamOp>(def)) {
    AccumulateGradOp::create(b, loc, param.getNameAttr(), grad);
    return;
  }
  Value &sum = grads[value];
  sum =
      sum ? AddOp::create(b, loc, sum.getType(), sum, grad).getResult() : grad;
}

Value GradientBuilder::sumTo(Value grad, Type type, Location loc) {
  if (grad.getType() == type)
    return grad;
  return SumToOp::create(b, loc, type, grad);
}

LogicalResult GradientBuilder::differentiate(Operation *op) {
  SmallVector<Value> resultGrads;
  bool any = false;
  for (Value result : op->getResults()) {
    resultGrads.push_back(gradOf(result));
    any |= static_cast<bool>(resultGrads.back());
  }
  if (!any)
    return success(); // reaches no loss
  auto rule = dyn_cast<Differentiable>(op);
  if (!rule)
    return op->emitOpError()
           << "has no gradient: only a model's forward ops are "
              "differentiated, not the training step's own";
  return rule.buildGradient(*this, resultGrads);
}

} // namespace strata
