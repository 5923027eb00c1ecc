//===- Pipeline.h - the passes strata-compile runs --------------*- C++ -*-===//
#ifndef STRATA_COMPILER_PIPELINE_H
#define STRATA_COMPILER_PIPELINE_H

#include "compiler/Layout.h"
#include "runtime/plan/Plan.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace strata {

/// What strata-compile writes a plan for: the CPU's kernels, or a GPU's
/// (CUDA C++ generated for every launch and compiled to PTX).
enum class Target { Cpu, Cuda };
/// "cpu" or "cuda" to its target; nullopt for anything else.
std::optional<Target> parseTarget(std::string_view name);

/// The layout (what the plan's header carries, Layout.h) and how to lower
/// it.
struct CompileOptions : Layout {
  int64_t vocabDivisibleBy = 128; // Megatron's --make-vocab-size-divisible-by
  bool recomputeWholeLayers = false;      // full, as Megatron's uniform runs it
  std::string attentionBackend = "fused"; // fused, or unfused: Megatron 2021's
  // How context parallelism exchanges attention's keys and values: p2p
  // (the ring, Megatron's default) or all_gather.
  std::string cpCommType = "p2p";
  int64_t bucketElements = 40000000; // Megatron's --ddp-bucket-size
  int64_t lossVocabBlock = 0; // the output layer and loss in blocks (0: whole)
  bool overlapGradReduce = true;  // reduce buckets during the backward
  bool overlapParamGather = true; // gather parameters during the forward
  Target target = Target::Cpu;
  std::string cudaArch = "sm_80"; // the cuda target's architecture
  /// zb-auto's inputs (compiler/ZeroBubbleAuto.h), for the Schedule pass:
  /// each chunk's forward, B and W cost and the transfer's (strata-compile
  /// prices them on a cluster; empty: unit costs), each chunk's stash
  /// bytes by pool (three a chunk; empty: microbatches in flight), and the
  /// most a stage's stash may take (0: 1F1B's most).
  struct ZeroBubbleCosts {
    std::vector<double> forward, backward, weight;
    double transfer = 0;
    std::vector<int64_t> stashBytes;
    int64_t maxStashBytes = 0;
    /// zb-auto's choice, flattened (pipeline::flattenOrders), once priced.
    std::vector<int64_t> order;
  } zeroBubble;

  /// Whether the step is cut into forward and backward chunk functions:
  /// with pipeline stages, virtual stages, recomputation or a schedule
  /// asked for by name.
  bool splitsPipeline() const {
    return pipelineParallel > 1 || layersPerVirtualStage > 0 ||
           recompute != Recompute::None || !pipelineSchedule.empty();
  }

  /// Microbatches per iteration on each data-parallel rank:
  /// global / (micro · dp).
  int64_t microbatches() const {
    return globalBatchSize / (microBatchSize * dataParallel);
  }
};

/// The levels, in lowering order: the model as written, the training step
/// (forward, backward, optimizer), the step with its layout and schedule,
/// the programs of each pipeline stage's template.
enum class Level { Graph, Step, Dist, Exec };

/// The level a module is at, read off the ops it holds.
Level levelOf(mlir::ModuleOp module);

/// The largest micro batch, global batch and vocabulary divisor strata
/// plans (and layout: runtime::kMaxWorldSize ranks): bounds that keep every
/// product in 64 bits and every plan field in 32.
using runtime::kMaxWorldSize;
inline constexpr int64_t kMaxMicroBatchSize = int64_t(1) << 20;
inline constexpr int64_t kMaxGlobalBatchSize = (int64_t(1) << 31) - 1;
inline constexpr int64_t kMaxVocabDivisor = int64_t(1) << 20;

/// Checks what the options must satisfy; the message says which sizes
/// disagree. "" when they fit.
std::string checkOptions(const CompileOptions &options);

/// A training step (IR at the step or dist level, which may have been
/// written by hand) accumulates a gradient for every parameter it
/// declares: one without would silently never train. Emits an error at
/// the parameter and fails otherwise.
mlir::LogicalResult verifyEveryParameterTrains(mlir::ModuleOp module);

/// Adds the passes that take a module from level `from` to level `to`:
/// autodiff and the optimizer (the training step), the schedule (dist),
/// then lowering and memory planning (exec), and for the cuda target the
/// kernels' generation (at exec, from any level).
void buildPipeline(mlir::PassManager &pm, const CompileOptions &options,
                   Level from, Level to);

/// Bytes one rank holds, by kind, read off planned exec IR.
struct MemoryReport {
  int64_t parameters = 0, gradients = 0, optimizer = 0, io = 0;
  int64_t persistent = 0, workspace = 0;
  int64_t stash = 0; // pipeline activations kept for the backward
  int64_t peak() const { return persistent + workspace + stash; }
};
MemoryReport reportMemory(mlir::Operation *rank);

/// Per chunk of planned exec IR with `stages` pipeline stages, the bytes
/// of one microbatch's stash slot in each pool: kept until B, held until
/// W, passed from B to W (zb-auto's stash bytes, flattened).
std::vector<int64_t> stashSlotBytes(mlir::ModuleOp module, int64_t stages);

} // namespace strata

#endif
