//===- Plan.h - a loaded, checked plan --------------------------*- C++ -*-===//
//
// The runtime's view of a plan file: plain structs, decoded once and filled
// only after the frame's checksum, the FlatBuffers verifier and the
// semantic checks (Plan.cpp: arena bounds, indices, names; PlanCheck.cpp:
// every instruction against its kind and, for launches, the kernel
// catalog) have passed.
// Nothing after loading needs to distrust the plan, and nothing looks up
// an attribute by name while it runs.
//
// A plan holds a template per pipeline stage. A rank's RankPlan is its
// template resolved for its coordinates (every PerRank value added in, its
// parameters' shards and masters placed), then checked: what a rank runs
// is always concrete. A process decodes only the templates of the ranks
// it loads.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_PLAN_H
#define STRATA_RUNTIME_PLAN_PLAN_H

#include "runtime/base/Text.h"
#include "runtime/plan/KernelCatalog.h"
#include "runtime/plan/MeshAxes.h"
#include "runtime/schedule/ScheduleNames.h"

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace strata::runtime {

enum class DType : uint8_t { F32, BF16, I32 };

/// The most elements a dimension, a buffer or a parameter may have, and the
/// largest integer a kernel argument may be: past it a plan is corrupt.
inline constexpr int64_t kMaxDim = int64_t(1) << 40;

/// Pipeline channels a plan may use: their transfers' tags must stay
/// within what every MPI guarantees (comm/Collectives.h transferTag).
inline constexpr uint32_t kMaxChannels = 500;
/// The most ranks a layout has (tensor x pipeline x data): strata-compile
/// plans no more, and the loader, checkpoints and strata-run take no more
/// (the paper's largest run has 3,072).
inline constexpr int64_t kMaxWorldSize = int64_t(1) << 17;
inline size_t dtypeBytes(DType dtype) { return dtype == DType::BF16 ? 2 : 4; }
const char *dtypeName(DType dtype);

/// "rank 4" or "ranks 4-7": `count` ranks from `first`.
std::string rankRangeText(uint64_t first, uint64_t count);

/// A value that grows by `stride` per coordinate of the rank along mesh
/// `axis` (ids as runtime/plan/MeshAxes.h), and by a second term's along
/// another (a rank's place in a group over two axes: the distributed
/// optimizer's parts over data and context ranks); resolved into the value
/// when a rank loads.
struct PerRank {
  struct Term {
    uint8_t axis = 0;
    int64_t stride = 0;
  };
  std::array<Term, 2> terms{};
  /// What it adds at coordinates `c` (each term within 2^40 · 2^20).
  int64_t at(const mesh::Coordinates &c) const {
    return terms[0].stride * int64_t(c[terms[0].axis]) +
           terms[1].stride * int64_t(c[terms[1].axis]);
  }
  bool varies() const { return terms[0].stride != 0 || terms[1].stride != 0; }
};

enum class Arena : uint8_t { Persistent, Workspace, Stash };
inline constexpr int kArenas = 3;
const char *arenaName(Arena arena);

/// An absent optional operand.
inline constexpr uint32_t kNoBuffer = 0xFFFFFFFF;

/// A stash buffer's pool (plan.fbs): held from the forward to the
/// backward (B), from the forward to W, or from B to W.
enum class StashPool : uint8_t { UntilBackward, Held, Passed };
inline constexpr int kStashPools = 3;
/// A step's slot in each pool (-1: none).
using StashSlots = std::array<int32_t, kStashPools>;
inline constexpr StashSlots kNoSlots = {-1, -1, -1};

struct Buffer {
  std::string name;
  Arena arena = Arena::Workspace;
  uint64_t offset = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t elements = 0;
  uint64_t bytes = 0;
  bool zeroInit = false;
  uint64_t slotStride = 0; // stash: slot k lies k * slotStride further
  StashPool stashPool = StashPool::UntilBackward; // stash: whose slot
  PerRank perRank; // bytes added to the template's offset
  bool isFloat() const { return dtype != DType::I32; }
};

enum class Epilogue : uint8_t { None, Bias, GeluBias, BiasGrad };

/// D = alpha · op(A) · op(B) + beta · D, then the epilogue (plan.fbs).
struct GemmOp {
  uint32_t a = 0, b = 0, d = 0, bias = kNoBuffer, aux = kNoBuffer;
  int64_t m = 0, n = 0, k = 0;
  bool transposeA = false, transposeB = false;
  int64_t lda = 0, ldb = 0, ldd = 0;
  int64_t batch = 1, strideA = 0, strideB = 0, strideD = 0;
  float alpha = 1, beta = 0;
  Epilogue epilogue = Epilogue::None;
};

struct AttrValue {
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> list;
  PerRank perRank; // added to i
};

/// A kernel of the catalog; operands and attributes in its order.
struct LaunchOp {
  KernelId kernel = KernelId::Fill;
  std::vector<uint32_t> operands;
  std::vector<AttrValue> attrs;
  std::vector<uint32_t> grid, block;
  uint32_t sharedBytes = 0;
  int32_t code = -1;
  // N > 1 in a CUDA plan: `code` computes this launch and the N - 1 after
  // it (its members, which have none); the CPU runs each as written.
  uint32_t fuse = 0;
};

enum class CollectiveKind : uint8_t {
  AllReduceSum,
  AllReduceMax,
  AllGather,
  ReduceScatter,
  Shift // input to the group's next rank, the previous one's into output
};
inline constexpr int kCollectiveKinds = 5;
const char *collectiveName(CollectiveKind kind);

struct CollectiveOp {
  CollectiveKind kind = CollectiveKind::AllReduceSum;
  uint32_t group = 0;
  uint32_t input = 0, output = 0;
  int32_t dim = 0;
  DType dtype = DType::F32;
};

/// A pipeline send or receive with the same tp and dp coordinates on
/// another stage.
struct TransferOp {
  bool send = false;
  uint32_t buffer = 0;
  uint32_t peerStage = 0;
  uint32_t channel = 0;
};

struct EventOp {
  bool record = false; // else wait
  uint32_t event = 0;
};

/// A rank's streams. Plans name compute, communication and context (the
/// ring of context parallelism's shifts, which so never queue behind the
/// gradients' reductions); the executor runs pipeline transfers on the
/// other four, so that they never queue behind the
/// data-parallel reductions of the communication stream (Megatron's sends
/// have a communicator of their own): a stream, each with its own
/// communicator, for each kind (a forward's activations, a backward's
/// gradients) and direction (toward higher stages, toward lower), so that
/// a receive waiting for a peer never holds back a send of another kind or
/// the other way. With one chunk a stage, or two in a V, each stream
/// between two stages then carries one chunk boundary's transfers, in
/// microbatch order at both ends (ZB-V sends its first chunk's forwards
/// and its second's gradients the same way).
enum class Stream : uint8_t {
  Compute,
  Comm,
  ActivationsUp,
  ActivationsDown,
  GradientsUp,
  GradientsDown,
  Context,
};
inline constexpr int kStreams = 7;
inline constexpr Stream kTransferStreams[] = {
    Stream::ActivationsUp, Stream::ActivationsDown, Stream::GradientsUp,
    Stream::GradientsDown};
inline constexpr int kTransferStreamCount = sim::kTransferLanes;
/// "compute", "communication", "activations up", ...: traces' and the
/// simulator's names for the streams.
inline const char *streamName(Stream stream) {
  constexpr const char *kNames[kStreams] = {
      "compute",      "communication",  "activations up", "activations down",
      "gradients up", "gradients down", "context"};
  return kNames[int(stream)];
}

/// The transfer stream of a transfer between `stage` and `peerStage`
/// (`send`: from this stage) of a forward's activations or a backward's
/// `gradient`: by the direction it travels. A transfer to the stage itself
/// (virtual stages of one stage) goes up, at both ends.
inline Stream transferStream(bool send, uint32_t stage, uint32_t peerStage,
                             bool gradient) {
  uint32_t from = send ? stage : peerStage, to = send ? peerStage : stage;
  return kTransferStreams[sim::transferLane(int(from), int(to), gradient)];
}
/// Its place among kTransferStreams.
inline int transferStreamIndex(Stream stream) {
  return int(stream) - int(Stream::ActivationsUp);
}

enum class Condition : uint8_t { Always, LastMicrobatch };

struct Instruction {
  std::variant<GemmOp, LaunchOp, CollectiveOp, TransferOp, EventOp> op;
  Stream stream = Stream::Compute;
  Condition when = Condition::Always;
  uint32_t location = 0; // into Plan::locations

  const GemmOp *gemm() const { return std::get_if<GemmOp>(&op); }
  const LaunchOp *launch() const { return std::get_if<LaunchOp>(&op); }
  const CollectiveOp *collective() const {
    return std::get_if<CollectiveOp>(&op);
  }
  const TransferOp *transfer() const { return std::get_if<TransferOp>(&op); }
  const EventOp *event() const { return std::get_if<EventOp>(&op); }
  /// "gemm", a kernel's name, "all_reduce_sum", "send", "record", ...
  std::string name() const;
  /// The buffers it reads and writes (absent operands left out).
  std::vector<uint32_t> buffers() const;
  /// The buffers it writes.
  std::vector<uint32_t> outputs() const;
};

/// With the backward cut in two, Backward is B (the input's gradient) and
/// Weight W (the weights').
enum class Phase : uint8_t { Microbatch, Forward, Backward, Optimizer, Weight };

const char *phaseName(Phase phase); // "forward", ...
/// Whether a program of this phase is one pipeline chunk's (and its steps
/// run in a stash slot).
inline bool chunked(Phase phase) {
  return phase == Phase::Forward || phase == Phase::Backward ||
         phase == Phase::Weight;
}

struct Program {
  std::string name;
  std::vector<Instruction> instructions;
  Phase phase = Phase::Microbatch;
  int32_t chunk = -1; // forward, backward, weight: the pipeline chunk
  // Where the leading receives end and the trailing sends begin (the
  // instructions an exchange point posts): [0, bodyBegin) and
  // [bodyEnd, size).
  size_t bodyBegin = 0, bodyEnd = 0;
};

/// Optimizer state a rank keeps for a parameter: its local elements
/// [begin, begin + length) have their Adam moments (and master) at
/// `state` onwards in the adamw launch's exp_avg and exp_avg_sq (and
/// master) buffers.
struct StateSegment {
  int64_t state = 0, begin = 0, length = 0;
};

struct Param {
  std::string name;
  uint32_t value = 0, grad = 0;
  // The global tensor's shape, and with its vocabulary padding (elements
  // past globalShape are padding; whole shards may be).
  std::vector<int64_t> globalShape, paddedShape;
  int splitDim = -1; // split over the tensor-parallel ranks along it
  std::string init;
  double std = 0;
  // Resolved for the rank: where its shard starts in the global tensor,
  // and the elements whose optimizer state (and masters) it keeps.
  std::vector<int64_t> shardOffset;
  std::vector<StateSegment> state; // empty on a rank without an optimizer
};

/// Calls fn(e, global, padding) for each element e (row-major) of a rank's
/// shard of `param`, whose local shape is `local`: the element's index in
/// the global tensor, and whether it is vocabulary padding (past the
/// global shape, so `global` means nothing). Elements [begin, end) only,
/// when given (end -1: to the last), so that threads can share a shard.
template <typename Fn>
void forEachShardElement(const Param &param, const std::vector<int64_t> &local,
                         Fn fn, int64_t begin = 0, int64_t end = -1) {
  size_t dims = local.size();
  std::vector<int64_t> index(dims, 0), stride(dims, 1);
  for (size_t d = dims; d-- > 1;)
    stride[d - 1] = stride[d] * param.globalShape[d];
  int64_t count = 1;
  for (int64_t extent : local)
    count *= extent;
  if (end < 0 || end > count)
    end = count;
  for (int64_t rest = begin, d = int64_t(dims); d-- > 0;) {
    index[size_t(d)] = local[size_t(d)] ? rest % local[size_t(d)] : 0;
    rest = local[size_t(d)] ? rest / local[size_t(d)] : 0;
  }
  for (int64_t e = begin; e < end; ++e) {
    int64_t global = 0;
    bool padding = false;
    for (size_t d = 0; d < dims; ++d) {
      int64_t at = index[d] + param.shardOffset[d];
      padding |= at >= param.globalShape[d];
      global += at * stride[d];
    }
    fn(e, global, padding);
    for (size_t d = dims; d-- > 0;) {
      if (++index[d] < local[d])
        break;
      index[d] = 0;
    }
  }
}

struct Io {
  std::string name;
  uint32_t buffer = 0;
};

struct Step {
  uint32_t program = 0;
  int32_t microbatch = -1;
  StashSlots slots = kNoSlots; // a pipeline chunk's stash slot per pool
  bool exchange = false;       // an exchange point before this step
};

/// A communication group: the ranks differing from a rank only along
/// `axes` (ids: 0 tp, 1 dp, 2 pp, 3 cp), on `stages` of the pipeline when
/// given.
struct Group {
  std::vector<int> axes;
  std::vector<uint32_t> stages;
  /// The streams its collectives run on in any template, a bit per Stream:
  /// read from every template at load (decoded or not), so that each
  /// member, loading its own rank only, knows the others' (NCCL needs a
  /// communicator per stream, joined by every member).
  uint8_t streams = 0;
};

/// A template as written, or a rank's resolved copy of one.
struct RankPlan {
  uint32_t rank = 0; // resolved: the rank
  uint64_t persistentBytes = 0, workspaceBytes = 0, stashBytes = 0;
  uint32_t events = 0;
  std::vector<Buffer> buffers;
  std::vector<Program> programs;
  std::vector<Param> params;
  std::vector<Io> io;
  std::vector<Step> schedule;
  // Resolved: the adamw launch's moment and fp32 master buffers (indexed by
  // StateSegment::state) and the gradient region it reads, whose
  // accumulators the optimizer zeroes (kNoBuffer without one; no master
  // when the parameters are themselves fp32).
  uint32_t expAvg = kNoBuffer, expAvgSq = kNoBuffer, master = kNoBuffer,
           gradRegion = kNoBuffer;

  /// The buffer index of an io entry, or -1.
  int ioBuffer(const std::string &name) const {
    for (const Io &entry : io)
      if (entry.name == name)
        return static_cast<int>(entry.buffer);
    return -1;
  }
  uint64_t arenaBytes(Arena arena) const {
    return arena == Arena::Persistent  ? persistentBytes
           : arena == Arena::Workspace ? workspaceBytes
                                       : stashBytes;
  }
  uint64_t peakBytes() const {
    return persistentBytes + workspaceBytes + stashBytes;
  }
};

/// A generated kernel of a CUDA plan (plan.fbs Code).
struct CodeObject {
  std::string name, kernel, source, ptx;
};

/// A shape for messages: "[64, 256]".
std::string shapeText(const std::vector<int64_t> &shape);

/// Plan::gelu in words: "the exact GELU", "the tanh GELU", "both GELU
/// forms", "no GELU".
std::string describeGelu(const std::string &gelu);

struct Plan {
  std::string model;
  uint32_t microBatchSize = 0, globalBatchSize = 0, numMicrobatches = 0;
  uint32_t seqLength = 0, vocabSize = 0;
  double flopsPerIteration = 0;
  double paperFlopsPerIteration = 0; // the layers' forward counted again
  std::string gelu; // the model's: "exact", "tanh", "exact,tanh" or ""
  uint32_t tensorParallel = 1, dataParallel = 1, pipelineParallel = 1,
           contextParallel = 1;
  std::string pipelineSchedule; // "" without pipeline chunks
  /// Where the chunks lie on the stages: looped, or (ZB-V) in a V.
  sim::Placement placement() const {
    std::optional<sim::ScheduleKind> kind =
        sim::parseSchedule(pipelineSchedule);
    return kind ? sim::placementOf(*kind) : sim::Placement::Looped;
  }
  /// The stage of the last chunk, which scores the labels and holds the
  /// loss: the last stage, or in a V the first.
  uint32_t lossStage() const {
    return placement() == sim::Placement::V ? 0 : pipelineParallel - 1;
  }
  std::vector<Group> groups;
  std::vector<std::string> locations; // [0] is ""
  std::vector<CodeObject> code;
  std::string cudaArch;                // "" for a CPU plan
  std::vector<uint32_t> rankTemplates; // each rank's template
  // The templates as written, those of the loaded ranks decoded.
  std::vector<std::optional<RankPlan>> templates;
  std::map<uint32_t, RankPlan> ranks; // the loaded ranks, resolved

  /// The tokens of a sample a rank holds: the sequence, or with context
  /// parallelism its share, two chunks of the 2c.
  uint32_t localSeqLength() const { return seqLength / contextParallel; }
  /// Each mesh axis's size, by id (runtime/plan/MeshAxes.h).
  mesh::Sizes sizes() const {
    return {tensorParallel, dataParallel, pipelineParallel, contextParallel};
  }
  uint32_t world() const { return ranksPerStage() * pipelineParallel; }
  /// The ranks of a pipeline stage: tp · cp · dp, consecutive.
  uint32_t ranksPerStage() const {
    return tensorParallel * contextParallel * dataParallel;
  }
  /// "tensor 2 x data 1 x pipeline 4" (and "x context 2" where c > 1), for
  /// messages.
  std::string layoutText() const;
  /// The global shape of each parameter the loaded ranks hold, by name.
  std::map<std::string, std::vector<int64_t>> paramShapes() const;
  /// A rank's coordinates along each axis, by id (tp fastest, then cp, dp
  /// and pp).
  mesh::Coordinates coordinates(uint32_t rank) const {
    return mesh::coordinatesOf(rank, sizes());
  }
  /// The rank at coordinates `c`.
  uint32_t rankAt(const mesh::Coordinates &c) const {
    return mesh::rankAt(c, sizes());
  }
  /// The pipeline stage of a rank (pp is the slowest coordinate).
  uint32_t stageOf(uint32_t rank) const {
    return coordinates(rank)[mesh::kPipeline];
  }
  /// The first rank of `stage`; its ranks are the next tp · cp · dp.
  uint32_t firstRankOf(uint32_t stage) const {
    mesh::Coordinates c{};
    c[mesh::kPipeline] = stage;
    return rankAt(c);
  }
  /// The rank at the same tp, cp and dp coordinates as `rank` on `stage`.
  uint32_t onStage(uint32_t rank, uint32_t stage) const {
    mesh::Coordinates c = coordinates(rank);
    c[mesh::kPipeline] = stage;
    return rankAt(c);
  }
  /// The world ranks of `rank`'s instance of group `group`, in mesh order.
  std::vector<int> groupMembers(uint32_t group, uint32_t rank) const;
  /// How many ranks each instance of group `group` holds.
  int64_t groupSize(uint32_t group) const;
  /// A group's name in reports: "tp", "dp+pp", "pp (stages 0, 3)".
  std::string groupName(uint32_t group) const;
};

/// Which ranks a load resolves: all of them, or those listed (a process
/// under MPI: its own). Only their templates are decoded. With `resolve`
/// false the templates are decoded and checked but no rank is resolved
/// (strata-run --check resolves each in turn with resolveRank).
struct LoadOptions {
  std::optional<std::vector<uint32_t>> ranks;
  bool resolve = true;
};

/// Reads and checks the plan at `path`. Returns "" or what is wrong.
std::string loadPlan(const std::string &path, Plan &plan,
                     const LoadOptions &options = {});

/// The same, from the file's bytes.
std::string loadPlanFromBytes(const std::vector<uint8_t> &bytes, Plan &plan,
                              const LoadOptions &options = {});

/// Resolves rank `rank`'s decoded template for its coordinates into `out`
/// and checks it. Returns "" or what is wrong (naming the rank).
std::string resolveRank(const Plan &plan, uint32_t rank, RankPlan &out);

/// Checks every rank of a plan loaded with all its templates, none kept:
/// per template, one rank resolved and checked in full, and for each other
/// distinct rank (its coordinates along the axes the template's per-rank
/// values read) what depends on them, so that a 3072-rank plan checks in
/// the time and memory of a few. Returns "" or the first error.
std::string checkEveryRank(const Plan &plan);

} // namespace strata::runtime

#endif
