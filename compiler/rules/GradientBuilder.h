//===- GradientBuilder.h - autodiff's running gradients ---------*- C++ -*-===//
//
// What an op's gradient rule (graph::Differentiable, compiler/rules/)
// builds through: the builder placed after the forward, and `contribute`,
// which sums an operand's gradient contributions and sends a parameter's
// to its fp32 accumulator (graph.accumulate_grad), so that a tied
// embedding and successive microbatches add up where the gradient lives.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_GRADIENTBUILDER_H
#define STRATA_COMPILER_RULES_GRADIENTBUILDER_H

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace strata {

class GradientBuilder {
public:
  explicit GradientBuilder(mlir::OpBuilder &builder) : b(builder) {}

  mlir::OpBuilder &builder() { return b; }

  /// The gradient flowing into `value` so far, or null if none.
  mlir::Value gradOf(mlir::Value value) const { return grads.lookup(value); }

  /// Adds `grad` (null: nothing) to the gradient of `value`: into the
  /// accumulator when it is a parameter, else into the running sum; token
  /// ids have none.
  void contribute(mlir::Value value, mlir::Value grad, mlir::Location loc);

  /// The gradient of a broadcast operand: summed down to its type.
  mlir::Value sumTo(mlir::Value grad, mlir::Type type, mlir::Location loc);

  /// Applies `op`'s gradient rule to the gradients of its results; an op
  /// none of whose results has a gradient contributes nothing.
  mlir::LogicalResult differentiate(mlir::Operation *op);

private:
  mlir::OpBuilder &b;
  llvm::DenseMap<mlir::Value, mlir::Value> grads;
};

} // namespace strata

#endif
