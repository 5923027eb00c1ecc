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

namespace strata::dist {

// The attributes the parallel passes hand each other (DistOps.td's
// discardable attributes), by their generated helpers:
//   dist::vocabParallel(ctx).isAttrPresent(op)
inline DistDialect::VocabParallelAttrHelper
vocabParallel(mlir::MLIRContext *c) {
  return DistDialect::VocabParallelAttrHelper(c);
}
inline DistDialect::QueryHeadsSplitAttrHelper
queryHeadsSplit(mlir::MLIRContext *c) {
  return DistDialect::QueryHeadsSplitAttrHelper(c);
}
inline DistDialect::ContextPositionsAttrHelper
contextPositions(mlir::MLIRContext *c) {
  return DistDialect::ContextPositionsAttrHelper(c);
}
inline DistDialect::ContextRingAttrHelper contextRing(mlir::MLIRContext *c) {
  return DistDialect::ContextRingAttrHelper(c);
}
inline DistDialect::SplitDimAttrHelper splitDim(mlir::MLIRContext *c) {
  return DistDialect::SplitDimAttrHelper(c);
}
inline DistDialect::GlobalShapeAttrHelper globalShape(mlir::MLIRContext *c) {
  return DistDialect::GlobalShapeAttrHelper(c);
}
inline DistDialect::RealShapeAttrHelper realShape(mlir::MLIRContext *c) {
  return DistDialect::RealShapeAttrHelper(c);
}
inline DistDialect::ChunkAttrHelper chunk(mlir::MLIRContext *c) {
  return DistDialect::ChunkAttrHelper(c);
}
inline DistDialect::BucketsAttrHelper buckets(mlir::MLIRContext *c) {
  return DistDialect::BucketsAttrHelper(c);
}

} // namespace strata::dist

#endif
