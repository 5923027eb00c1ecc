//===- GraphShapes.h - shape and dtype rules of graph ops -------*- C++ -*-===//
//
// One rule per op, used by the op verifiers and by the frontend, which must
// know a result type before it builds an op and reports a mistake at the
// model file's line. Messages name shapes as the model language writes them
// (f32[2, 16, 64]) and leave the op's name to the caller.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_DIALECTS_GRAPH_GRAPHSHAPES_H
#define STRATA_DIALECTS_GRAPH_GRAPHSHAPES_H

#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include <optional>
#include <string>

namespace strata::graph {

using ErrorFn = llvm::function_ref<mlir::InFlightDiagnostic()>;

/// A type as the model language writes it: "f32[2, 16, 64]", "i32[2, 16]".
std::string describe(mlir::Type type);
/// A shape as "[2, 16, 64]".
std::string describeShape(llvm::ArrayRef<int64_t> shape);

mlir::FailureOr<mlir::RankedTensorType>
inferEmbeddingType(ErrorFn emitError, mlir::Type table, mlir::Type ids);

mlir::FailureOr<mlir::RankedTensorType> inferMatmulType(ErrorFn emitError,
                                                        mlir::Type lhs,
                                                        mlir::Type rhs,
                                                        bool transposeB);

/// add, sub, mul: rhs equals lhs or is a suffix of it; the result is lhs.
mlir::FailureOr<mlir::RankedTensorType>
inferBroadcastType(ErrorFn emitError, mlir::Type lhs, mlir::Type rhs);

mlir::FailureOr<mlir::RankedTensorType> inferUnaryType(ErrorFn emitError,
                                                       mlir::Type input);

/// layer_norm (bias given) and rms_norm (bias null).
mlir::FailureOr<mlir::RankedTensorType> inferNormType(ErrorFn emitError,
                                                      mlir::Type input,
                                                      mlir::Type weight,
                                                      mlir::Type bias);

/// `shape` may hold one -1, filled in from the element count.
mlir::FailureOr<mlir::RankedTensorType>
inferReshapeType(ErrorFn emitError, mlir::Type input,
                 llvm::ArrayRef<int64_t> shape);

mlir::FailureOr<mlir::RankedTensorType>
inferTransposeType(ErrorFn emitError, mlir::Type input,
                   llvm::ArrayRef<int64_t> permutation);

mlir::FailureOr<mlir::RankedTensorType> inferRopeType(ErrorFn emitError,
                                                      mlir::Type input);

/// `groupSize`, when given, is the query heads per kv head of the whole
/// model (the query holds some of them; see graph.attention).
mlir::FailureOr<mlir::RankedTensorType>
inferAttentionType(ErrorFn emitError, mlir::Type query, mlir::Type key,
                   mlir::Type value, bool causal,
                   std::optional<int64_t> groupSize = std::nullopt);
/// Attention's row log-sum-exp for a query of type `query` [b, s, H, d]:
/// f32 [b, H, s].
mlir::RankedTensorType attentionLseType(mlir::RankedTensorType query);
/// What attention keeps for its backward (graph.attention's `saved`): the
/// row log-sum-exp, or unfused the probabilities, f32 [b, H, s, keys].
mlir::RankedTensorType attentionSavedType(mlir::RankedTensorType query,
                                          mlir::RankedTensorType key,
                                          bool unfused);

mlir::FailureOr<mlir::RankedTensorType>
inferCrossEntropyType(ErrorFn emitError, mlir::Type logits, mlir::Type labels);

} // namespace strata::graph

#endif
