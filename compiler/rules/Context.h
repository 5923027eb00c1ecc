//===- Context.h - the sequence split, for the rules --------*- C++ -*-===//
//
// What an op's context-parallel rule (graph::ContextSplittable,
// compiler/rules/) works with. The sequence of every sample is cut into
// 2c chunks and context-parallel rank i holds chunks i and 2c - 1 - i, one
// after the other: a value that runs along the sequence (the tokens, every
// activation and its gradient) holds that rank's 2/(2c) of it along one
// dimension, its sequence dimension; anything else (parameters, sums over
// tokens such as weight gradients, which are then partial over the cp
// ranks and reduced with the data-parallel ones) has none. A rule reads
// its operands' sequence dimensions and sets its results'; an op that must
// know where its tokens sit in the whole sequence is marked
// (dist.context_positions) for its lowering, or replaced by one that knows
// (a position table's add and its gradient: Positions.cpp). The pass
// (compiler/passes/ContextParallel.cpp) walks the ops in order and divides
// each sequence dimension by c.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_CONTEXT_H
#define STRATA_COMPILER_RULES_CONTEXT_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/DenseMap.h"

namespace strata {

class ContextState {
public:
  ContextState(mlir::MLIRContext *context, int64_t cp, bool ring)
      : cp(cp), ring(ring), b(context) {}

  mlir::OpBuilder &builder() { return b; }

  int64_t size() const { return cp; }
  /// Whether attention's keys and values travel the ring (p2p) rather than
  /// being gathered.
  bool usesRing() const { return ring; }

  /// Which dimension of `v` is the sequence, or -1.
  int64_t dim(mlir::Value v) const { return dims.lookup(v) - 1; }
  void set(mlir::Value v, int64_t d) { dims[v] = d + 1; }

  /// The results of `op` that are shaped like its operand `from` carry its
  /// sequence dimension; the others (sums over tokens) none. For ops that
  /// work token by token (pointwise ops, norms and their gradients).
  mlir::LogicalResult likeOperand(mlir::Operation *op, unsigned from);

  /// Marks `op` as needing its tokens' places in the whole sequence.
  void markPositions(mlir::Operation *op);

  /// Replaces `op`, which the walk is visiting, by `by` (made before it):
  /// its uses, its attributes (the layer it belongs to), and the sequence
  /// dimension `dim` of `by`'s result.
  void replace(mlir::Operation *op, mlir::Operation *by, int64_t dim);

  /// An error at `op`, prefixed with the context-parallel size.
  mlir::InFlightDiagnostic error(mlir::Operation *op);

private:
  int64_t cp;
  bool ring;
  mlir::OpBuilder b;
  llvm::DenseMap<mlir::Value, int64_t> dims; // dimension + 1; 0: none
};

} // namespace strata

#endif
