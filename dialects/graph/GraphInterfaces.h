//===- GraphInterfaces.h - per-op rules of the graph ops --------*- C++ -*-===//
#ifndef STRATA_DIALECTS_GRAPH_GRAPHINTERFACES_H
#define STRATA_DIALECTS_GRAPH_GRAPHINTERFACES_H

#include "mlir/IR/OpDefinition.h"

namespace strata {
// The compiler's state the rules work through (compiler/rules/): autodiff's
// running gradients, tensor parallelism's shardings, context parallelism's
// sequence dimensions, the exec lowering's buffers. The dialect only names
// them.
class ContextState;
class GradientBuilder;
class ShardingState;
class SplitPlanner;
namespace lower_to_exec {
class Lowering;
} // namespace lower_to_exec
} // namespace strata

#include "dialects/graph/GraphInterfaces.h.inc"

#endif
