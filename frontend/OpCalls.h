//===- OpCalls.h - the model language's ops ---------------------*- C++ -*-===//
#ifndef STRATA_FRONTEND_OPCALLS_H
#define STRATA_FRONTEND_OPCALLS_H

#include "frontend/Values.h"

#include "mlir/IR/Builders.h"

#include <functional>

namespace strata::frontend {

struct PositionalArg {
  Val value;
  mlir::Location loc;
};

struct KeywordValue {
  std::string name;
  Val value;
  mlir::Location loc;
};

/// An op call with its arguments evaluated.
struct CallArgs {
  CallArgs(std::string callee, mlir::Location location)
      : callee(std::move(callee)), location(location) {}
  std::string callee;
  mlir::Location location;
  std::vector<PositionalArg> positional;
  std::vector<KeywordValue> keywords;
  // What a dropout needs from the model being built: the samples' keys
  // (the runtime's "dropout_keys" input, declared on first use) and the
  // next site, counted over the model's dropouts in order.
  std::function<mlir::FailureOr<mlir::Value>()> dropoutKeys;
  int64_t *nextDropoutSite = nullptr;
};

bool isOpName(llvm::StringRef name);

/// How the op is called: "matmul(a, b, transpose_b=false)".
std::string opSignature(llvm::StringRef name);

/// "; did you mean 'gelu'?" when a known op is close, else the list of ops.
std::string suggestOp(llvm::StringRef name);

/// Checks the arguments against the op's signature and shape rule, and
/// builds the graph op at the builder's insertion point.
mlir::FailureOr<mlir::Value> buildOpCall(mlir::OpBuilder &builder,
                                         const CallArgs &args);

/// `a + b`, `a - b`, `a * b` on tensors: graph.add, graph.sub, graph.mul.
mlir::FailureOr<mlir::Value> buildBinaryOp(mlir::OpBuilder &builder,
                                           mlir::Location loc,
                                           llvm::StringRef name,
                                           mlir::Value lhs, mlir::Value rhs);

} // namespace strata::frontend

#endif
