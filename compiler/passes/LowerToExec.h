//===- LowerToExec.h - the exec lowering's per-rank state -------*- C++ -*-===//
//
// Shared by the two files of --strata-lower-to-exec: LowerToExec.cpp (the
// pass: ranks, parameters' buffers, functions, the schedule) and
// LowerToExecOps.cpp (each op's kernels). Not an interface: only the pass
// includes it.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_PASSES_LOWERTOEXEC_H
#define STRATA_COMPILER_PASSES_LOWERTOEXEC_H

#include "compiler/Mesh.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <optional>

namespace strata::lower_to_exec {

using namespace mlir;
namespace graph = strata::graph;

/// Where this rank sits in the mesh.
struct RankCoords {
  int64_t rank = 0, tp = 0, dp = 0, pp = 0;
  int64_t tpSize = 1, dpSize = 1, ppSize = 1;
  /// The world rank at the same tp and dp on pipeline stage `stage`.
  int64_t onStage(int64_t stage) const {
    return tp + tpSize * (dp + dpSize * stage);
  }
};

/// The part of a parameter a distributed optimizer rank owns: elements
/// [begin, begin + length) of the local parameter.
struct Segment {
  int64_t begin = 0, length = 0;
  exec::BufferOp grad, value, expAvg, expAvgSq, master;
};

struct ParamBuffers {
  exec::BufferOp value, master, grad, expAvg, expAvgSq;
  int64_t flatOffset = 0; // elements into the flat regions
  std::optional<Segment> owned; // with the distributed optimizer
};

class Lowering {
public:
  Lowering(ModuleOp module, exec::RankOp rank, bool bf16, RankCoords coords,
           dist::ReduceGradientsOp reduce)
      : module(module), b(module.getContext()), bf16(bf16), coords(coords),
        distributedOptimizer(reduce && reduce.getDistributedOptimizer()),
        bucketElements(reduce ? int64_t(reduce.getBucketElements()) : 0) {
    bufferBuilder.setInsertionPointToEnd(&rank.getBody().front());
    programBuilder.setInsertionPointToEnd(&rank.getBody().front());
  }

  /// Lays out every parameter's value and gradient in two flat regions (in
  /// parameter order), so that buckets and a distributed optimizer's shares
  /// are contiguous, and declares the optimizer state.
  void layoutParameters(ArrayRef<func::FuncOp> functions);
  LogicalResult lowerFunction(func::FuncOp func);
  LogicalResult lowerSchedule(dist::ScheduleOp schedule);
  /// The stages that share each tied parameter (dist.tie_gradients).
  void noteTiedParameters(func::FuncOp optimizer) {
    optimizer.walk([&](dist::TieGradientsOp tie) {
      tiedStages[tie.getName()] =
          SmallVector<int64_t>(tie.getStages().begin(), tie.getStages().end());
    });
  }

private:
  MLIRContext *ctx() { return module.getContext(); }

  /// The type a tensor is stored in: bf16 for floats in bf16 mode, except
  /// scalars (loss, norms), which stay fp32.
  RankedTensorType storageType(Type type) {
    auto tensor = cast<RankedTensorType>(type);
    if (bf16 && tensor.getElementType().isF32() && tensor.getRank() > 0)
      return RankedTensorType::get(tensor.getShape(),
                                   BFloat16Type::get(ctx()));
    return tensor;
  }
  static RankedTensorType asF32(Type type) {
    auto tensor = cast<RankedTensorType>(type);
    return RankedTensorType::get(tensor.getShape(),
                                 Float32Type::get(tensor.getContext()));
  }

  exec::BufferOp makeBuffer(StringRef name, RankedTensorType type,
                            exec::Arena arena, exec::BufferOp aliasOf = {},
                            int64_t viewBytes = 0, bool zeroInit = false) {
    FlatSymbolRefAttr alias;
    IntegerAttr viewOffset;
    if (aliasOf) {
      viewBytes += aliasOf.getViewOffset() ? int64_t(*aliasOf.getViewOffset())
                                           : 0;
      if (auto root = aliasOf.getAliasAttr())
        alias = root;
      else
        alias = FlatSymbolRefAttr::get(aliasOf.getSymNameAttr());
      if (viewBytes)
        viewOffset = b.getI64IntegerAttr(viewBytes);
    }
    return exec::BufferOp::create(
        bufferBuilder, module.getLoc(), b.getStringAttr(name),
        TypeAttr::get(type), exec::ArenaAttr::get(ctx(), arena),
        b.getI64IntegerAttr(-1), alias, viewOffset,
        zeroInit ? b.getUnitAttr() : UnitAttr(), IntegerAttr(),
        IntegerAttr());
  }
  static int64_t elementBytes(RankedTensorType type) {
    return type.getElementType().isBF16() ? 2 : 4;
  }
  /// A 1-D view of `elements` elements of a flat region.
  exec::BufferOp regionView(StringRef name, exec::BufferOp region,
                            int64_t begin, int64_t elements) {
    RankedTensorType type = region.getTensorType();
    return makeBuffer(name,
                      RankedTensorType::get({elements}, type.getElementType()),
                      exec::Arena::Persistent, region,
                      begin * elementBytes(type));
  }
  exec::BufferOp persistent(StringRef name, RankedTensorType type,
                            bool zeroInit) {
    return makeBuffer(name, type, exec::Arena::Persistent, {}, 0, zeroInit);
  }
  /// A rank-dependent kernel argument.
  NamedAttribute rankAttr(StringRef name, int64_t value) {
    return b.getNamedAttr(name, b.getI64IntegerAttr(value));
  }
  /// The tp index that a tensor split along tp starts at, in elements of
  /// its dimension `size` (local).
  int64_t tpOffset(int64_t localSize) { return coords.tp * localSize; }
  /// A buffer for `value`; `keepF32` keeps a float tensor in f32 in bf16
  /// mode (the loss's row statistics, as Megatron computes them).
  exec::BufferOp temporary(Value value, exec::Arena arena,
                           bool keepF32 = false) {
    bool stashed = stashValues.contains(value);
    exec::BufferOp buffer =
        makeBuffer((stashed ? "s" : "t") + std::to_string(counter++),
                   keepF32 ? asF32(value.getType())
                           : storageType(value.getType()),
                   stashed ? exec::Arena::Stash : arena);
    if (stashed)
      buffer.setStashGroupAttr(b.getI64IntegerAttr(stashGroup));
    buffers[value] = buffer;
    return buffer;
  }
  exec::BufferOp view(Value value, exec::BufferOp of) {
    exec::BufferOp buffer = makeBuffer(
        "t" + std::to_string(counter++), storageType(value.getType()),
        of.getArena(), of);
    buffers[value] = buffer;
    return buffer;
  }

  exec::BufferOp input(graph::InputOp op);
  exec::BufferOp bufferOf(Value value) { return buffers.lookup(value); }

  void kernel(Location loc, StringRef name, ArrayRef<exec::BufferOp> inputs,
              ArrayRef<exec::BufferOp> outputs,
              ArrayRef<NamedAttribute> attrs = {});
  void gemm(Location loc, exec::BufferOp a, exec::BufferOp bMatrix,
            exec::BufferOp c, int64_t m, int64_t n, int64_t k,
            bool transposeA, bool transposeB, bool accumulate);

  /// Where a gradient kernel writes: straight into the parameter's
  /// accumulator (adding, `accumulate` true) when its only use is
  /// graph.accumulate_grad, else a fresh workspace buffer.
  struct GradientTarget {
    exec::BufferOp buffer;
    bool accumulate = false;
  };
  GradientTarget gradientTarget(Value grad);

  LogicalResult lowerOp(Operation *op);

  ModuleOp module;
  OpBuilder b;
  OpBuilder bufferBuilder{module.getContext()};
  OpBuilder programBuilder{module.getContext()};
  OpBuilder body{module.getContext()};
  bool bf16;
  RankCoords coords;
  bool distributedOptimizer;
  int64_t bucketElements;
  exec::BufferOp paramRegion, gradRegion;
  int64_t flatElements = 0, shardElements = 0;
  SmallVector<std::string> paramOrder;
  int64_t counter = 0;
  llvm::DenseMap<Value, exec::BufferOp> buffers;
  llvm::StringMap<ParamBuffers> params;
  llvm::StringMap<exec::BufferOp> inputs;
  llvm::DenseSet<Operation *> fused; // accumulate_grads done by a producer
  // Pipeline chunks: the values @forward_c returns live in the stash, in
  // group `stashGroup` (the chunk's index on its stage); @backward_c's
  // arguments are the same buffers.
  llvm::DenseSet<Value> stashValues;
  int64_t stashGroup = -1;
  llvm::DenseMap<int64_t, SmallVector<exec::BufferOp>> chunkStash;
  llvm::StringMap<SmallVector<int64_t>> tiedStages;
};

} // namespace strata::lower_to_exec

#endif
