//===- GraphDialect.h - the graph dialect -----------------------*- C++ -*-===//
#ifndef STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H
#define STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "dialects/graph/GraphDialect.h.inc"

#endif
