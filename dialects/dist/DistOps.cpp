//===- DistOps.cpp - the dist dialect -------------------------------------===//
#include "dialects/dist/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/SymbolTable.h"

using namespace mlir;
using namespace strata::dist;

#include "dialects/dist/DistDialect.cpp.inc"

void DistDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/dist/DistOps.cpp.inc"
      >();
}

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.cpp.inc"

LogicalResult StepOp::verify() {
  auto schedule = (*this)->getParentOfType<ScheduleOp>();
  if (auto mb = getMicrobatch()) {
    int64_t index = static_cast<int64_t>(*mb);
    if (index < 0 || index >= static_cast<int64_t>(schedule.getMicrobatches()))
      return emitOpError() << "microbatch " << index << " is outside 0.."
                           << schedule.getMicrobatches() - 1;
  }
  Operation *symbolTable = SymbolTable::getNearestSymbolTable(*this);
  if (symbolTable &&
      !isa_and_nonnull<func::FuncOp>(
          SymbolTable::lookupSymbolIn(symbolTable, getFunctionAttr())))
    return emitOpError() << getFunctionAttr()
                         << " is not a function of the step";
  return success();
}
