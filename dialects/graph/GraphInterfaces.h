//===- GraphInterfaces.h - per-op rules of the graph ops --------*- C++ -*-===//
#ifndef STRATA_DIALECTS_GRAPH_GRAPHINTERFACES_H
#define STRATA_DIALECTS_GRAPH_GRAPHINTERFACES_H

#include "mlir/IR/OpDefinition.h"

namespace strata {
/// Autodiff's state (compiler/rules/GradientBuilder.h): the rules only
/// reach it through a reference.
class GradientBuilder;
} // namespace strata

#include "dialects/graph/GraphInterfaces.h.inc"

#endif
