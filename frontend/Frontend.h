//===- Frontend.h - model file to graph IR ----------------------*- C++ -*-===//
#ifndef STRATA_FRONTEND_FRONTEND_H
#define STRATA_FRONTEND_FRONTEND_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "llvm/Support/SourceMgr.h"

#include <string>
#include <vector>

namespace strata::frontend {

/// `--set NAME=VALUE`: replaces the default of a constant the model declares.
struct ConstOverride {
  std::string name;
  std::string value;
};

/// Builds the graph IR of the model in the main buffer of `sourceMgr`.
/// An error in the model is an MLIR diagnostic at its model-file location
/// (the caller installs a handler); an override that does not fit the model
/// goes to `usageError`, since it has no place in the file. On error nothing
/// is returned.
mlir::OwningOpRef<mlir::ModuleOp>
buildModel(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
           const std::vector<ConstOverride> &overrides,
           llvm::function_ref<void(const llvm::Twine &)> usageError);

/// Parses "NAME=VALUE" as `--set` takes it; false if it has no '='.
bool parseOverride(llvm::StringRef text, ConstOverride &out);

} // namespace strata::frontend

#endif
