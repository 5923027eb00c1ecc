//===- CompileCode.h - the module's generated kernels to PTX ----*- C++ -*-===//
#ifndef STRATA_COMPILER_CODEGEN_COMPILECODE_H
#define STRATA_COMPILER_CODEGEN_COMPILECODE_H

#include "mlir/IR/BuiltinOps.h"

namespace strata::codegen {

/// Compiles every exec.code op's source with NVRTC for the module's
/// `strata.cuda_arch` and sets its `ptx`, the units in parallel. Errors go
/// to the module's diagnostics.
mlir::LogicalResult compileGeneratedCode(mlir::ModuleOp module);

} // namespace strata::codegen

#endif
