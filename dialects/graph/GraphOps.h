//===- GraphOps.h - ops of the graph dialect --------------------*- C++ -*-===//
#ifndef STRATA_DIALECTS_GRAPH_GRAPHOPS_H
#define STRATA_DIALECTS_GRAPH_GRAPHOPS_H

#include "dialects/graph/GraphDialect.h"
#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/graph/GraphEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/graph/GraphOps.h.inc"

#endif
