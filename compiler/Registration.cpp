//===- Registration.cpp - every strata dialect and pass -------------------===//
#include "compiler/Registration.h"
#include "compiler/Passes.h"
#include "dialects/graph/GraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

void strata::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::func::FuncDialect, graph::GraphDialect>();
}

void strata::registerPasses() { registerStrataPasses(); }
