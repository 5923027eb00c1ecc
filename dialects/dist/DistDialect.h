//===- DistDialect.h - the dist dialect -------------------------*- C++ -*-===//
#ifndef STRATA_DIALECTS_DIST_DISTDIALECT_H
#define STRATA_DIALECTS_DIST_DISTDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#include "dialects/dist/DistDialect.h.inc"

#define GET_OP_CLASSES
#include "dialects/dist/DistOps.h.inc"

#endif
