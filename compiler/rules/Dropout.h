//===- Dropout.h - what a dropout rule shares with attention's --*- C++ -*-===//
//
// Dropout of a split tensor draws each element by its index in the unsplit
// tensor, so the sharding rule records the split on the op and the lowering
// reads it back: graph.dropout's (Dropout.cpp) and an unfused attention's
// dropout of its probabilities (Attention.cpp) alike.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_DROPOUT_H
#define STRATA_COMPILER_RULES_DROPOUT_H

#include "compiler/rules/Rule.h"

namespace strata {

/// Records on `op` (while sharding) that the tensor it drops out, of global
/// type `global`, is sharded `s`: dist.split_dim and dist.global_shape when
/// it is split, nothing else.
void recordDropoutSplit(mlir::Operation *op, Sharding s,
                        mlir::RankedTensorType global, mlir::OpBuilder &b);

/// `x` dropped out into `y` for `op` at `rate` and `site`, `keys` the
/// samples' keys, `local` the dropped tensor's type on this rank: one
/// launch, the rank's share of a recorded split at its offset.
exec::LaunchOp launchDropout(lower_to_exec::Lowering &l, mlir::Operation *op,
                             mlir::RankedTensorType local, exec::BufferOp x,
                             exec::BufferOp keys, exec::BufferOp y,
                             double rate, int64_t site);

} // namespace strata

#endif
