//===- GraphDialect.cpp - the graph dialect -------------------------------===//
#include "dialects/graph/GraphDialect.h"
#include "dialects/graph/GraphOps.h"

using namespace mlir;
using namespace strata::graph;

#include "dialects/graph/GraphDialect.cpp.inc"

void GraphDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/graph/GraphOps.cpp.inc"
      >();
}
