//===- ExecDialect.h - the exec dialect -------------------------*- C++ -*-===//
#ifndef STRATA_DIALECTS_EXEC_EXECDIALECT_H
#define STRATA_DIALECTS_EXEC_EXECDIALECT_H

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Dialect.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/RegionKindInterface.h"
#include "mlir/IR/SymbolTable.h"

#include "dialects/exec/ExecDialect.h.inc"
#include "dialects/exec/ExecEnums.h.inc"

#define GET_OP_CLASSES
#include "dialects/exec/ExecOps.h.inc"

#endif
