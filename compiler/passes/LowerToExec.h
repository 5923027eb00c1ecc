//===- LowerToExec.h - the exec lowering's per-stage state ------*- C++ -*-===//
//
// Shared by the files of --strata-lower-to-exec: LowerToExec.cpp (the pass:
// templates, functions, transfers, the schedule), LowerToExecOps.cpp (each op's
// instructions), LowerOptimizer.cpp (the flat regions, their buckets, the
// gradient reductions and the one-launch optimizer), and each graph op's
// lowering rule (graph::ExecLowerable, in its family's file under
// compiler/rules/), which builds its instructions through it.
//
// Kernels are launched through builders generated from the kernel catalog
// (runtime/plan/Kernels.def): one struct per kernel with its operands and
// arguments as named fields in the catalog's order, so that a launch reads
//   launch(loc, kernel::LayerNormFwd{.x = x, .weight = w, .bias = b,
//                                    .y = y, .epsilon = eps});
// and the names and order come from the one definition.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_PASSES_LOWERTOEXEC_H
#define STRATA_COMPILER_PASSES_LOWERTOEXEC_H

#include "compiler/Mesh.h"
#include "compiler/StashSlots.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphOps.h"
#include "runtime/plan/Hyper.h"
#include "runtime/plan/KernelCatalog.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/StringMap.h"

#include <map>
#include <optional>
#include <string>

namespace strata::lower_to_exec {

using namespace mlir;
namespace graph = strata::graph;

/// One struct per kernel of the catalog: its operands (exec.buffer ops,
/// null for an absent optional output) and arguments, in order.
namespace kernel {
#define KERNEL(Name, text)                                                     \
  struct Name {                                                                \
    static constexpr runtime::KernelId id = runtime::KernelId::Name;
#define IN(operand, dtypes) exec::BufferOp operand;
#define OUT(operand, dtypes) exec::BufferOp operand;
#define INT(a) int64_t a = 0;
#define FLOAT(a) double a = 0;
#define BOOL(a) bool a = false;
#define INTS(a) llvm::SmallVector<int64_t> a;
#define END_KERNEL()                                                           \
  }                                                                            \
  ;
#include "runtime/plan/Kernels.def"

/// What a launch's fields turn into: its inputs, outputs and arguments.
struct Collected {
  llvm::SmallVector<exec::BufferOp> inputs, outputs;
  llvm::SmallVector<NamedAttribute> args;
};

/// collect(k, c, b) visits a kernel struct's fields in the catalog's order.
#define KERNEL(Name, text)                                                     \
  inline void collect(const Name &k, Collected &c, Builder &b) {               \
    (void)k;                                                                   \
    (void)b;
#define IN(operand, dtypes) c.inputs.push_back(k.operand);
#define OUT(operand, dtypes) c.outputs.push_back(k.operand);
#define OPT_OUT(operand, dtypes)                                               \
  if (k.operand)                                                               \
    c.outputs.push_back(k.operand);
#define INT(a) c.args.push_back(b.getNamedAttr(#a, b.getI64IntegerAttr(k.a)));
#define FLOAT(a) c.args.push_back(b.getNamedAttr(#a, b.getF64FloatAttr(k.a)));
#define BOOL(a) c.args.push_back(b.getNamedAttr(#a, b.getBoolAttr(k.a)));
#define INTS(a)                                                                \
  c.args.push_back(b.getNamedAttr(#a, b.getDenseI64ArrayAttr(k.a)));
#define END_KERNEL() }
#include "runtime/plan/Kernels.def"
} // namespace kernel

/// A shard op's grid axes as the exec dialect's collectives name them.
inline SmallVector<int64_t> meshAxes(DenseI16ArrayAttr axes) {
  return SmallVector<int64_t>(axes.asArrayRef().begin(),
                              axes.asArrayRef().end());
}

/// The stage a template is lowered for, and the mesh's sizes. A rank's
/// tensor- and data-parallel coordinates are not known here: what depends
/// on them is written as a per-rank expression (`per_rank`) that the
/// runtime resolves at load.
struct StageCoords {
  int64_t pp = 0;
  int64_t tpSize = 1, dpSize = 1, ppSize = 1, cpSize = 1;
  /// The size of mesh axis `axis` (Mesh.h).
  int64_t sizeOf(int64_t axis) const {
    return axis == kTensorAxis    ? tpSize
           : axis == kDataAxis    ? dpSize
           : axis == kContextAxis ? cpSize
                                  : ppSize;
  }
};

/// What the optimizer function says of a parameter (LowerOptimizer.cpp).
struct ParamFacts {
  bool decay = false;          // AdamW decays it (a matrix)
  bool partialOverTp = false;  // its accumulator holds partial sums over tp
  bool countOnFirstTp = false; // replicated over tp: the norm counts it once
  SmallVector<int64_t> tiedStages; // the stages sharing it, if tied
};

struct ParamBuffers {
  exec::BufferOp value, grad;
  int64_t flatOffset = 0; // elements into the flat regions
  int64_t elements = 0;
  int64_t chunk = 0; // the stage's chunk that uses it first
  int64_t bucket = -1;
};

/// A contiguous range of the flat regions whose gradients are reduced over
/// the data-parallel ranks together: Megatron's buckets, as
/// --strata-layout-optimizer-state chose them. With the distributed
/// optimizer each rank owns 1/dp of every bucket.
struct Bucket {
  int64_t begin = 0, size = 0; // elements, padded to a multiple of dp
  int64_t chunk = -1;          // -1: the gradients another collective
                               // finishes first (tied, partial over tp)
  int64_t part = 0;            // elements each rank owns (size / dp with
                               // the distributed optimizer, else size)
  int64_t stateBegin = 0;      // where its owned part lies in the state
                               // regions
  exec::BufferOp grads, params, ownGrads, ownParams; // views
};

/// What @optimizer (as autodiff and the parallel passes wrote it) says of
/// the step, read once for every stage (LowerOptimizer.cpp).
struct OptimizerFacts {
  llvm::StringMap<ParamFacts> params; // read with lookup: none is no facts
  bool distributedOptimizer = false;
  // The mesh axes dist.reduce_gradients sums over (none without it): dp,
  // and cp, whose ranks hold other tokens of the same samples.
  llvm::SmallVector<int64_t, 2> reductionAxes;
  // Gradient elements per bucket: dist.reduce_gradients' (Megatron's
  // default, as --strata-data-parallel's, without it).
  int64_t bucketElements = 40000000;
  SmallVector<int64_t> normAxes; // the gradient norm's all-reduce
};

/// Reads `optimizer`; an op the flat optimizer does not know is an error.
FailureOr<OptimizerFacts> readOptimizerFacts(func::FuncOp optimizer);

/// The event the program that frees `chunk`'s slot of `pool` records, for
/// a receive into that pool to wait for: "freed:chunk3", "freed:chunk3:held".
std::string freedEventName(int64_t chunk, exec::StashPool pool);

/// Which of B's values for W can be written over forward values B has read
/// for the last time (StashInPlace.cpp): per stash group of a cut chunk,
/// each such passed buffer, the kept buffer it lies in and where.
struct PassedInPlace {
  struct Placement {
    exec::BufferOp passed, host;
    int64_t offset = 0;
  };
  struct Chunk {
    int64_t chunk = 0;
    SmallVector<Placement> placed;
  };
  std::map<int64_t, Chunk> byGroup;
};
/// The placements for `stage`'s lowered programs (`stages`: the pipeline's
/// size, a chunk's stash group being chunk / stages); nothing is changed.
PassedInPlace planPassedInPlace(exec::TemplateOp stage, int64_t stages);
/// One slot's bytes per (stash group, pool), and what each pool's receives
/// would cost if it shared its slots, as `stage` lays them out with `plan`
/// placed (an empty plan: as it stands).
void stashKeyBytes(exec::TemplateOp stage, const PassedInPlace &plan,
                   std::map<pipeline::StashKey, int64_t> &bytes,
                   std::map<pipeline::StashKey, int64_t> &landing);

class Lowering {
public:
  Lowering(ModuleOp module, exec::TemplateOp stage, bool bf16,
           StageCoords coords, const OptimizerFacts &opt)
      : module(module), b(module.getContext()), bf16(bf16), coords(coords),
        opt(opt) {
    declarations.setInsertionPointToEnd(&stage.getBody().front());
    programs.setInsertionPointToEnd(&stage.getBody().front());
  }

  /// Lays every parameter's value and gradient out in flat regions, in the
  /// buckets `schedule`'s dist.buckets names, and declares the optimizer
  /// state (LowerOptimizer.cpp).
  LogicalResult layoutParameters(ArrayRef<func::FuncOp> functions,
                                 dist::ScheduleOp schedule);
  LogicalResult lowerFunction(func::FuncOp func);
  /// The flat optimizer program (LowerOptimizer.cpp).
  void lowerOptimizer(func::FuncOp optimizer);
  /// The mesh axes that sum the gradients (dist.reduce_gradients': dp, and
  /// cp with context parallelism), those of more than one rank, and their
  /// ranks.
  SmallVector<int64_t> reducingAxes() const;
  int64_t reducingRanks() const;
  /// A rank's place among those ranks times `stride`, as per-rank terms:
  /// the distributed optimizer's part.
  SmallVector<std::pair<int64_t, int64_t>, 2> ownPart(int64_t stride) const;
  LogicalResult lowerSchedule(dist::ScheduleOp schedule);
  /// Makes `plan` so (StashInPlace.cpp): each placed passed buffer (and its
  /// views) a view of its kept buffer, the chunk's kept pool held until W,
  /// and B's free of it, which nothing waits for now (lowerSchedule stages
  /// the chunk's receives), gone.
  LogicalResult placePassedInPlace(exec::TemplateOp stage,
                                   const PassedInPlace &plan);

  // What the per-op lowering rules (compiler/rules/) build with.

  /// The buffer an operand reads: a parameter's value even before its
  /// param op is reached (an epilogue's bias), else the value's buffer.
  exec::BufferOp operand(Value value) {
    if (auto param = value.getDefiningOp<graph::ParamOp>())
      return params[param.getName()].value;
    return bufferOf(value);
  }
  /// A fresh workspace buffer for a result; `keepF32` keeps a float tensor
  /// in f32 in bf16 mode (the loss's row statistics, attention's
  /// log-sum-exp).
  exec::BufferOp result(Value value, bool keepF32 = false) {
    return temporary(value, exec::Arena::Workspace, keepF32);
  }
  /// A parameter's buffers, or null if `name` is none.
  ParamBuffers *paramBuffers(StringRef name) {
    auto it = params.find(name);
    return it == params.end() ? nullptr : &it->second;
  }
  /// The buffer of `value` is `buffer` (a parameter's, an input's, a view).
  void bind(Value value, exec::BufferOp buffer) { buffers[value] = buffer; }

  /// Marks integer argument `name` of `op` as `stride` times the rank's
  /// coordinate along mesh `axis` more than written (a shard's offset, a
  /// part's index); nothing on an axis of size 1.
  void perRank(exec::LaunchOp op, StringRef name, int64_t axis, int64_t stride);
  /// The same with a term per axis (a rank's place in a group over two
  /// axes); axes of size 1 left out.
  void perRank(exec::LaunchOp op, StringRef name,
               ArrayRef<std::pair<int64_t, int64_t>> terms);
  /// A per-rank value's terms as `per_rank` holds them, those on axes of
  /// size 1 left out (empty: none).
  SmallVector<int64_t>
  perRankTerms(ArrayRef<std::pair<int64_t, int64_t>> terms) const;
  /// `in` all-reduced over the tensor-parallel ranks into `out`: summed,
  /// or its largest with `max` (a rule's own reduction between its
  /// launches, as the blocked vocabulary-parallel loss's).
  void tensorAllReduce(Location loc, exec::BufferOp in, exec::BufferOp out,
                       bool max) {
    collective(loc,
               max ? exec::CollectiveKind::AllReduceMax
                   : exec::CollectiveKind::AllReduceSum,
               in, out, {kTensorAxis});
  }
  /// `in` gathered (or reduce-scattered) over the context-parallel ranks
  /// along dimension `dim` into `out`, in rank order (attention's keys and
  /// values, and their gradients).
  void contextCollective(Location loc, exec::CollectiveKind kind,
                         exec::BufferOp in, exec::BufferOp out, int64_t dim) {
    collective(loc, kind, in, out, {kContextAxis}, dim);
  }
  /// `in` shifted to the next context-parallel rank, the previous one's
  /// received into `out`, on the context stream (the ring's, beside the
  /// compute stream's attention; ordered by the caller's events).
  void contextShiftBeside(Location loc, exec::BufferOp in, exec::BufferOp out) {
    collective(loc, exec::CollectiveKind::Shift, in, out, {kContextAxis})
        .setStreamAttr(exec::StreamAttr::get(ctx(), exec::Stream::Context));
  }
  /// A new event of the stage, named `what` and a number of its own.
  exec::EventOp freshEvent(StringRef what) {
    return event((what + ":" + Twine(counter++)).str());
  }
  /// Records `event` on `stream` here, or holds `stream` until its latest
  /// record has passed.
  void record(Location loc, exec::EventOp event, exec::Stream stream) {
    exec::recordEvent(body, loc, event, stream);
  }
  void wait(Location loc, exec::EventOp event, exec::Stream stream) {
    exec::waitEvent(body, loc, event, stream);
  }
  /// The tensor-parallel ranks a stage's values are split over.
  int64_t tensorParallelSize() const { return coords.tpSize; }
  /// `value`'s buffer as a view of `of` (a reshape, a layer boundary).
  exec::BufferOp view(Value value, exec::BufferOp of) {
    exec::BufferOp buffer =
        makeBuffer("t" + std::to_string(counter++),
                   storageType(value.getType()), of.getArena(), of);
    buffers[value] = buffer;
    return buffer;
  }

  /// An input's persistent buffer, declared on its first use.
  exec::BufferOp input(graph::InputOp op);
  /// A launch of a catalog kernel.
  template <typename K> exec::LaunchOp launch(Location loc, const K &k) {
    kernel::Collected c;
    kernel::collect(k, c, b);
    return launchCollected(loc, runtime::kernelName(K::id), c);
  }
  /// D = op(A)·op(B) (+ D when accumulating), row-major and contiguous:
  /// A [m, k] (or [k, m] transposed), B [k, n] (or [n, k]).
  exec::GemmOp gemm(Location loc, exec::BufferOp a, exec::BufferOp bMatrix,
                    exec::BufferOp d, int64_t m, int64_t n, int64_t k,
                    bool transposeA, bool transposeB, bool accumulate);
  /// A batched gemm over strided matrices, as exec.gemm describes it
  /// (what unfused attention runs per sample over its heads).
  struct StridedGemm {
    int64_t m = 0, n = 0, k = 0;
    bool transposeA = false, transposeB = false;
    int64_t lda = 0, ldb = 0, ldd = 0;
    int64_t batch = 1, strideA = 0, strideB = 0, strideD = 0;
    double alpha = 1;
    bool accumulate = false; // D += (beta 1)
  };
  exec::GemmOp gemm(Location loc, exec::BufferOp a, exec::BufferOp bMatrix,
                    exec::BufferOp d, const StridedGemm &g);
  /// `elements` elements of `of` from element `first`: a 1-D view.
  exec::BufferOp slice(exec::BufferOp of, int64_t first, int64_t elements) {
    Type element = of.getTensorType().getElementType();
    return makeBuffer("t" + std::to_string(counter++),
                      RankedTensorType::get({elements}, element), of.getArena(),
                      of, first * exec::elementBytes(element));
  }
  /// Rows [first, first + count) of `of`, viewed as [count, its last
  /// dimension].
  exec::BufferOp rows(exec::BufferOp of, int64_t first, int64_t count) {
    RankedTensorType type = of.getTensorType();
    int64_t columns = type.getShape().empty() ? 1 : type.getShape().back();
    return makeBuffer(
        "t" + std::to_string(counter++),
        RankedTensorType::get({count, columns}, type.getElementType()),
        of.getArena(), of,
        first * columns * exec::elementBytes(type.getElementType()));
  }
  /// `of`'s first elements viewed as `shape`.
  exec::BufferOp shaped(exec::BufferOp of, ArrayRef<int64_t> shape) {
    return makeBuffer(
        "t" + std::to_string(counter++),
        RankedTensorType::get(shape, of.getTensorType().getElementType()),
        of.getArena(), of);
  }
  /// A workspace buffer that no value names, of `type`'s shape in f32.
  exec::BufferOp scratchF32(Type type) {
    return makeBuffer("t" + std::to_string(counter++), asF32(type),
                      exec::Arena::Workspace);
  }
  /// A workspace buffer that no value names, of `type`'s shape (stored as
  /// the step's tensors are).
  exec::BufferOp scratch(Type type) {
    return makeBuffer("t" + std::to_string(counter++), storageType(type),
                      exec::Arena::Workspace);
  }
  /// Where a gradient kernel writes: straight into the parameter's
  /// accumulator (adding, `accumulate` true) when its only use is
  /// graph.accumulate_grad, else a fresh workspace buffer.
  struct GradientTarget {
    exec::BufferOp buffer;
    bool accumulate = false;
  };
  GradientTarget gradientTarget(Value grad);
  /// `op`, marked exec.absorbed, is done by the epilogue of the gemm being
  /// built; an absorbed op no gemm takes is an error (lowerFunction).
  void absorb(Operation *op) { fused.insert(op); }

private:
  MLIRContext *ctx() { return module.getContext(); }

  /// The type a tensor is stored in: bf16 for floats in bf16 mode, except
  /// scalars (loss, norms), which stay fp32.
  RankedTensorType storageType(Type type) {
    auto tensor = cast<RankedTensorType>(type);
    if (bf16 && tensor.getElementType().isF32() && tensor.getRank() > 0)
      return RankedTensorType::get(tensor.getShape(), BFloat16Type::get(ctx()));
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
      viewBytes +=
          aliasOf.getViewOffset() ? int64_t(*aliasOf.getViewOffset()) : 0;
      if (auto root = aliasOf.getAliasAttr())
        alias = root;
      else
        alias = FlatSymbolRefAttr::get(aliasOf.getSymNameAttr());
      if (viewBytes)
        viewOffset = b.getI64IntegerAttr(viewBytes);
    }
    return exec::BufferOp::create(
        declarations, module.getLoc(), b.getStringAttr(name),
        TypeAttr::get(type), exec::ArenaAttr::get(ctx(), arena),
        b.getI64IntegerAttr(-1), alias, viewOffset, DenseI64ArrayAttr(),
        zeroInit ? b.getUnitAttr() : UnitAttr(), IntegerAttr(), IntegerAttr(),
        exec::StashPoolAttr());
  }
  /// A 1-D view of `elements` elements of a flat region.
  exec::BufferOp regionView(StringRef name, exec::BufferOp region,
                            int64_t begin, int64_t elements) {
    Type element = region.getTensorType().getElementType();
    return makeBuffer(name, RankedTensorType::get({elements}, element),
                      exec::Arena::Persistent, region,
                      begin * exec::elementBytes(element));
  }
  exec::BufferOp persistent(StringRef name, RankedTensorType type,
                            bool zeroInit) {
    return makeBuffer(name, type, exec::Arena::Persistent, {}, 0, zeroInit);
  }
  exec::EventOp event(StringRef name) {
    return exec::EventOp::create(declarations, module.getLoc(),
                                 b.getStringAttr(name));
  }
  /// A buffer for `value` in `arena` (the stash for a stashed value);
  /// `keepF32` as result()'s.
  exec::BufferOp temporary(Value value, exec::Arena arena,
                           bool keepF32 = false) {
    auto pool = stashValues.find(value);
    bool stashed = pool != stashValues.end();
    exec::BufferOp buffer = makeBuffer(
        (stashed ? "s" : "t") + std::to_string(counter++),
        keepF32 ? asF32(value.getType()) : storageType(value.getType()),
        stashed ? exec::Arena::Stash : arena);
    if (stashed) {
      buffer.setStashGroupAttr(b.getI64IntegerAttr(stashGroup));
      if (pool->second != exec::StashPool::UntilBackward)
        buffer.setStashPoolAttr(
            exec::StashPoolAttr::get(b.getContext(), pool->second));
    }
    buffers[value] = buffer;
    return buffer;
  }
  exec::BufferOp bufferOf(Value value) { return buffers.lookup(value); }

  exec::LaunchOp launchCollected(Location loc, StringRef name,
                                 const kernel::Collected &c);
  exec::CollectiveOp collective(Location loc, exec::CollectiveKind kind,
                                exec::BufferOp in, exec::BufferOp out,
                                ArrayRef<int64_t> axes, int64_t dim = 0,
                                ArrayRef<int64_t> stages = {});
  /// Copies `from` into a persistent buffer the runtime reads as output
  /// `name` ("loss", "grad_norm").
  void output(Location loc, StringRef name, exec::BufferOp from);

  LogicalResult lowerOp(Operation *op);
  /// The flat optimizer's ranges (Kernels.def, runtime/plan/Ownership.h):
  /// the gradient norm's segments, counted on every rank or only on the
  /// first tensor-parallel one; AdamW's; and the buckets' windows, of
  /// which each rank owns its part (LowerOptimizer.cpp).
  struct NormSegments {
    SmallVector<int64_t> always, firstOnly;
  };
  NormSegments normSegments();
  SmallVector<int64_t> adamSegments();
  SmallVector<int64_t> windows();
  /// A bucket's data-parallel reduction.
  void reduceBucket(Location loc, Bucket &bucket);

  ModuleOp module;
  OpBuilder b;
  OpBuilder declarations{module.getContext()}; // buffers, params, events
  OpBuilder programs{module.getContext()};
  OpBuilder body{module.getContext()}; // the program being lowered
  bool bf16;
  StageCoords coords;
  const OptimizerFacts &opt;
  // The flat regions.
  exec::BufferOp paramRegion, gradRegion, expAvgRegion, expAvgSqRegion,
      masterRegion, hyperBuffer;
  int64_t flatElements = 0, stateElements = 0;
  SmallVector<std::string> paramOrder; // as laid out
  llvm::StringMap<ParamBuffers> params;
  SmallVector<Bucket> buckets;

  int64_t counter = 0;
  llvm::DenseMap<Value, exec::BufferOp> buffers;
  llvm::StringMap<exec::BufferOp> inputs;
  // Accumulations an instruction before them did (it wrote straight into
  // the accumulator).
  llvm::DenseSet<Operation *> fused;
  // Pipeline chunks: the values @forward_c returns live in the stash, in
  // group `stashGroup` (the chunk's index on its stage); @backward_c's
  // arguments are the same buffers. With the backward cut in two, the
  // values @backward_c returns are @weight_c's arguments (`weightStash`):
  // the forward values among them are held in a pool of their own until
  // W, and B's own values are passed in a third; the rest of the forward's
  // is freed at B. `stashValues` maps each value to its pool.
  llvm::DenseMap<Value, exec::StashPool> stashValues;
  int64_t stashGroup = -1;
  llvm::DenseMap<int64_t, SmallVector<exec::BufferOp>> chunkStash;
  llvm::DenseMap<int64_t, SmallVector<exec::BufferOp>> weightStash;
  // A chunk that receives into a pool of the stash: the program that
  // frees that pool's slot (the backward, B, or W) records when it is done
  // with it. By (chunk, pool).
  std::map<std::pair<int64_t, exec::StashPool>, exec::EventOp> slotFreed;
  // Per program that receives: the compute stream's wait for its receives.
  llvm::DenseMap<Operation *, Operation *> receivedWait;
  llvm::DenseMap<StringRef, exec::ProgramOp> programByName;
};

/// The functions of pipeline stage `stage`, in the order it lowers them:
/// @microbatch, or the @forward_c and @backward_c (and @weight_c, the
/// backward cut in two) of the chunks the module's placement puts there.
SmallVector<func::FuncOp> stageFunctions(ModuleOp module, int64_t stage);

} // namespace strata::lower_to_exec

#endif
