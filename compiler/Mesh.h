//===- Mesh.h - the device mesh of a parallel layout ------------*- C++ -*-===//
//
// One upstream shard.grid, @mesh, with an axis for each kind of parallelism
// (runtime/plan/MeshAxes.h: their ids, names and Megatron's rank order,
// tensor parallel fastest, then context, data and pipeline parallel).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_MESH_H
#define STRATA_COMPILER_MESH_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "runtime/plan/MeshAxes.h"
#include "runtime/schedule/ScheduleNames.h"

namespace strata {

inline constexpr llvm::StringLiteral kMeshName = "mesh";
enum MeshAxis : int16_t {
  kTensorAxis = mesh::kTensor,
  kDataAxis = mesh::kData,
  kPipelineAxis = mesh::kPipeline,
  kContextAxis = mesh::kContext
};

/// The module's @mesh, made 1x1x1x1 if it has none (IR written before the
/// context axis has three; it is 1 there).
mlir::shard::GridOp ensureMesh(mlir::ModuleOp module);

/// Sets the size of one axis of @mesh.
void setMeshAxis(mlir::ModuleOp module, int16_t axis, int64_t size);

/// The size of one axis of @mesh (1 without a mesh).
int64_t meshAxis(mlir::ModuleOp module, int16_t axis);

/// Where the pipeline split put its chunks on the stages (a module
/// attribute PipelineSplit sets; looped, chunk c on stage c mod p, without
/// one).
sim::Placement chunkPlacement(mlir::ModuleOp module);
void setChunkPlacement(mlir::ModuleOp module, sim::Placement placement);
/// The pipeline stage chunk `chunk` lives on.
int64_t stageOfChunk(mlir::ModuleOp module, int64_t chunk);

/// Makes the gradient norm of `optimizer` sum over `axis` as well: each
/// rank along it holds the squares of a different part of the gradients
/// (data-parallel shares of the distributed optimizer, pipeline stages'
/// parameters). Extends the all-reduce feeding graph.clip_coefficient, or
/// inserts one.
void sumGradientNormOver(mlir::func::FuncOp optimizer, int16_t axis);

} // namespace strata

#endif
