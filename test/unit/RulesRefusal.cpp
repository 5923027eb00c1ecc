//===- RulesRefusal.cpp - a graph op without rules does not build ---------===//
//
// Not part of the build: the test rules-refuse-an-op-without-rules compiles
// it and expects the compiler to refuse it, as it would refuse a graph op
// added to GraphOps.td without its rules (compiler/rules/OpRules.h): here
// the dialect's own op list, as registration attaches it, plus one op that
// no family names.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/OpRules.h"

namespace {
struct NewGraphOp {};
} // namespace

void attachEveryOpAndANewOne(mlir::MLIRContext &context) {
  strata::attachOpRules<
#define GET_OP_LIST
#include "dialects/graph/GraphOps.cpp.inc"
      , NewGraphOp>(context);
}
