//===- OpRules.cpp - every graph op's rules, attached ---------------------===//
#include "compiler/rules/OpRules.h"

void strata::registerOpRules(mlir::DialectRegistry &registry) {
  registry.addExtension(+[](mlir::MLIRContext *context, graph::GraphDialect *) {
    attachOpRules<
#define GET_OP_LIST
#include "dialects/graph/GraphOps.cpp.inc"
        >(*context);
  });
}
