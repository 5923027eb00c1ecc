//===- Context.cpp - context parallelism's sequence split, for the rules --===//
#include "compiler/rules/Context.h"
#include "dialects/dist/DistDialect.h"

#include "mlir/IR/Builders.h"

using namespace mlir;

namespace strata {

LogicalResult ContextState::likeOperand(Operation *op, unsigned from) {
  Value source = op->getOperand(from);
  int64_t d = dim(source);
  for (Value result : op->getResults())
    if (d >= 0 && result.getType() == source.getType())
      set(result, d);
  return success();
}

void ContextState::markPositions(Operation *op) {
  dist::contextPositions(op->getContext())
      .setAttr(op, Builder(op->getContext()).getI64IntegerAttr(cp));
}

void ContextState::replace(Operation *op, Operation *by, int64_t dim) {
  for (NamedAttribute attr : op->getDiscardableAttrs())
    by->setAttr(attr.getName(), attr.getValue());
  op->replaceAllUsesWith(by);
  if (dim >= 0)
    set(by->getResult(0), dim);
  op->erase();
}

InFlightDiagnostic ContextState::error(Operation *op) {
  InFlightDiagnostic diag = op->emitError();
  diag << "context parallelism (size " << cp << "): ";
  return diag;
}

} // namespace strata
