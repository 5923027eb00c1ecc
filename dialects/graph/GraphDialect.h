//===- GraphDialect.h - the graph dialect -----------------------*- C++ -*-===//
#ifndef STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H
#define STRATA_DIALECTS_GRAPH_GRAPHDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Dialect.h"

#include "dialects/graph/GraphDialect.h.inc"

namespace strata::graph {

// Autodiff's layer tag (GraphDialect.td's discardable attribute), by its
// generated helper: graph::backwardLayer(ctx).getAttr(op).
inline GraphDialect::BackwardLayerAttrHelper
backwardLayer(mlir::MLIRContext *c) {
  return GraphDialect::BackwardLayerAttrHelper(c);
}

} // namespace strata::graph

#endif
