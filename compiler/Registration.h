//===- Registration.h - every strata dialect and pass -----------*- C++ -*-===//
#ifndef STRATA_COMPILER_REGISTRATION_H
#define STRATA_COMPILER_REGISTRATION_H

#include "mlir/IR/DialectRegistry.h"

namespace strata {

/// The dialects strata's IR uses: its own and the upstream ones it builds on,
/// with the graph ops' rules (compiler/rules/) attached.
void registerDialects(mlir::DialectRegistry &registry);

/// Every pass declared in compiler/Passes.td, for strata-opt.
void registerPasses();

} // namespace strata

#endif
