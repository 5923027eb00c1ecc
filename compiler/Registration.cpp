//===- Registration.cpp - every strata dialect and pass -------------------===//
#include "compiler/Registration.h"
#include "compiler/Passes.h"
#include "compiler/rules/OpRules.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"

void strata::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<mlir::func::FuncDialect, graph::GraphDialect,
                  dist::DistDialect, exec::ExecDialect,
                  mlir::shard::ShardDialect>();
  registerOpRules(registry);
}

void strata::registerPasses() { registerStrataPasses(); }
