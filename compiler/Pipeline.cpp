//===- Pipeline.cpp - the passes strata-compile runs, in one place --------===//
#include "compiler/Pipeline.h"
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "compiler/codegen/Nvrtc.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphOps.h"
#include "runtime/schedule/ScheduleNames.h"
#include "llvm/ADT/StringSet.h"

#include <array>
#include <map>
#include <tuple>

using namespace mlir;

namespace strata {

std::optional<Target> parseTarget(std::string_view name) {
  if (name == "cpu")
    return Target::Cpu;
  if (name == "cuda")
    return Target::Cuda;
  return std::nullopt;
}

std::string checkOptions(const CompileOptions &options) {
  // Every size is bounded before anything multiplies or divides by it: the
  // plan holds them in 32 bits, and their products must not overflow.
  auto inRange = [](const char *flag, int64_t value, int64_t most) {
    if (value >= 1 && value <= most)
      return std::string();
    return std::string(flag) + " must be " +
           (value < 1 ? "at least 1" : "at most " + std::to_string(most)) +
           ", got " + std::to_string(value);
  };
  for (auto [flag, value, most] :
       {std::tuple{"--micro-batch-size", options.microBatchSize,
                   kMaxMicroBatchSize},
        std::tuple{"--tensor-model-parallel-size", options.tensorParallel,
                   kMaxWorldSize},
        std::tuple{"--pipeline-model-parallel-size", options.pipelineParallel,
                   kMaxWorldSize},
        std::tuple{"--data-parallel-size", options.dataParallel, kMaxWorldSize},
        std::tuple{"--context-parallel-size", options.contextParallel,
                   kMaxWorldSize},
        std::tuple{"--make-vocab-size-divisible-by", options.vocabDivisibleBy,
                   kMaxVocabDivisor},
        std::tuple{"--global-batch-size", options.globalBatchSize,
                   kMaxGlobalBatchSize}})
    if (std::string error = inRange(flag, value, most); !error.empty())
      return error;
  // Each factor is at most 2^17: the product cannot overflow.
  int64_t world = options.ranksPerStage() * options.pipelineParallel;
  if (world > kMaxWorldSize)
    return "the layout has " + std::to_string(world) + " ranks (tensor " +
           std::to_string(options.tensorParallel) + " x pipeline " +
           std::to_string(options.pipelineParallel) + " x data " +
           std::to_string(options.dataParallel) +
           (options.contextParallel > 1
                ? " x context " + std::to_string(options.contextParallel)
                : std::string()) +
           "); strata plans at most " + std::to_string(kMaxWorldSize);
  if ((options.firstStageLayers >= 0 || options.lastStageLayers >= 0) &&
      options.pipelineParallel < 2)
    return "--decoder-first-pipeline-num-layers and "
           "--decoder-last-pipeline-num-layers need "
           "--pipeline-model-parallel-size of at least 2";
  if (options.firstStageLayers < -1 || options.lastStageLayers < -1)
    return "--decoder-first-pipeline-num-layers and "
           "--decoder-last-pipeline-num-layers must be at least 0";
  if (options.layersPerVirtualStage < 0)
    return "--num-layers-per-virtual-pipeline-stage must be at least 1";
  // Virtual stages on one stage are a schedule of their own (the tests'
  // p=1 rows), asked for by name; alone, the flag is a pipeline forgotten.
  if (options.layersPerVirtualStage > 0 && options.pipelineParallel < 2 &&
      options.pipelineSchedule.empty())
    return "--num-layers-per-virtual-pipeline-stage splits the stages of a "
           "pipeline: give --pipeline-model-parallel-size of at least 2 (or "
           "name a --pipeline-schedule to run virtual stages on one stage)";
  if (options.recomputeWholeLayers && options.recompute != Recompute::Full)
    return "recomputing whole layers (--recompute-method uniform) needs "
           "--recompute-granularity full";
  if (options.attentionBackend != "fused" &&
      options.attentionBackend != "unfused")
    return "--attention-backend must be fused or unfused, got '" +
           options.attentionBackend + "'";
  if (options.cpCommType != "p2p" && options.cpCommType != "all_gather")
    return "--cp-comm-type must be p2p or all_gather" +
           std::string(options.cpCommType.rfind("a2a", 0) == 0
                           ? " (Megatron's a2a is not built in strata)"
                           : "") +
           ", got '" + options.cpCommType + "'";
  if (!options.pipelineSchedule.empty() &&
      !sim::parseSchedule(options.pipelineSchedule))
    return "--pipeline-schedule must be " + sim::scheduleFlagList() +
           ", got '" + options.pipelineSchedule + "'";
  if (options.bucketElements < 1)
    return "--ddp-bucket-size must be at least 1";
  if (options.lossVocabBlock < 0)
    return "--loss-vocab-block must be at least 1, got " +
           std::to_string(options.lossVocabBlock);
  if (!codegen::isCudaArch(options.cudaArch))
    return "--cuda-arch must be " + std::string(codegen::kCudaArchs) +
           ", got '" + options.cudaArch + "'";
  if (options.globalBatchSize %
          (options.microBatchSize * options.dataParallel) !=
      0)
    return "--global-batch-size " + std::to_string(options.globalBatchSize) +
           " is not divisible by --micro-batch-size " +
           std::to_string(options.microBatchSize) + " x data-parallel size " +
           std::to_string(options.dataParallel) +
           ": every microbatch must be full";
  return "";
}

LogicalResult verifyEveryParameterTrains(ModuleOp module) {
  llvm::StringSet<> accumulated;
  module.walk(
      [&](graph::AccumulateGradOp op) { accumulated.insert(op.getName()); });
  // The output layer in blocks adds into its weight's gradient itself.
  module.walk([&](graph::LinearCrossEntropyWithGradOp op) {
    accumulated.insert(op.getWeightName());
  });
  WalkResult walk = module.walk([&](graph::ParamOp param) {
    if (accumulated.contains(param.getName()))
      return WalkResult::advance();
    param.emitError() << "parameter '" << param.getName()
                      << "' has no graph.accumulate_grad in the training "
                         "step: it would never train";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

Level levelOf(ModuleOp module) {
  if (!module.getOps<exec::TemplateOp>().empty())
    return Level::Exec;
  if (!module.getOps<dist::ScheduleOp>().empty())
    return Level::Dist;
  if (module.lookupSymbol(strata::step::kMicrobatch))
    return Level::Step;
  return Level::Graph;
}

void buildPipeline(PassManager &pm, const CompileOptions &options, Level from,
                   Level to) {
  auto crosses = [&](Level level) { return from < level && level <= to; };
  if (crosses(Level::Step)) {
    PadVocabOptions pad;
    pad.tensorParallel = options.tensorParallel;
    pad.divisibleBy = options.vocabDivisibleBy;
    pm.addPass(createPadVocab(pad));
    pm.addPass(createVerifyModel());
    // Attention that drops out is unfused whatever the backend.
    UnfuseAttentionOptions unfuse;
    unfuse.all = options.attentionBackend == "unfused";
    pm.addPass(createUnfuseAttention(unfuse));
    // Each rank's microbatch losses are divided so that summing gradients
    // over microbatches, data-parallel ranks and context-parallel ranks
    // (each a mean over its equal share of the tokens) gives the mean.
    AutodiffOptions autodiff;
    autodiff.lossScale =
        1.0 / double(options.microbatches() * options.dataParallel *
                     options.contextParallel);
    pm.addPass(createAutodiff(autodiff));
    pm.addPass(createOptimizer());
  }
  if (crosses(Level::Dist)) {
    ContextParallelOptions context;
    context.size = options.contextParallel;
    context.ring = options.cpCommType == "p2p";
    pm.addPass(createContextParallel(context));
    TensorParallelOptions tensor;
    tensor.size = options.tensorParallel;
    tensor.sequenceParallel = options.sequenceParallel;
    pm.addPass(createTensorParallel(tensor));
    DataParallelOptions data;
    data.size = options.dataParallel;
    data.distributedOptimizer = options.distributedOptimizer;
    data.bucketElements = options.bucketElements;
    pm.addPass(createDataParallel(data));
    pm.addPass(createFuseLoss());
    if (options.lossVocabBlock > 0) {
      FuseOutputLayerOptions output;
      output.blockColumns = options.lossVocabBlock;
      pm.addPass(createFuseOutputLayer(output));
    }
    if (options.splitsPipeline()) {
      PipelineSplitOptions split;
      split.stages = options.pipelineParallel;
      split.layersPerVirtualStage = options.layersPerVirtualStage;
      split.firstStageLayers = options.firstStageLayers;
      split.lastStageLayers = options.lastStageLayers;
      split.recompute = recomputeName(options.recompute);
      split.wholeLayers = options.recomputeWholeLayers;
      // The zero-bubble schedules run each backward cut in two.
      std::optional<sim::ScheduleKind> kind =
          sim::parseSchedule(options.pipelineSchedule);
      split.splitWeights = kind && sim::cutsBackward(*kind);
      split.placement =
          kind && sim::placementOf(*kind) == sim::Placement::V ? "v" : "looped";
      pm.addPass(createPipelineSplit(split));
    }
    ScheduleOptions schedule;
    schedule.microbatches = options.microbatches();
    schedule.pipelineSchedule = options.pipelineSchedule;
    const CompileOptions::ZeroBubbleCosts &zb = options.zeroBubble;
    schedule.forwardCosts.assign(zb.forward.begin(), zb.forward.end());
    schedule.backwardCosts.assign(zb.backward.begin(), zb.backward.end());
    schedule.weightCosts.assign(zb.weight.begin(), zb.weight.end());
    schedule.transferCost = zb.transfer;
    schedule.stashBytes.assign(zb.stashBytes.begin(), zb.stashBytes.end());
    schedule.maxStashBytes = zb.maxStashBytes;
    schedule.chosenOrder.assign(zb.order.begin(), zb.order.end());
    pm.addPass(createSchedule(schedule));
  }
  if (crosses(Level::Exec)) {
    FuseEpiloguesOptions epilogues;
    epilogues.biasOnly = options.target == Target::Cuda;
    pm.addPass(createFuseEpilogues(epilogues));
    pm.addPass(createLayoutOptimizerState());
    LowerToExecOptions lower;
    lower.bf16 = options.bf16;
    pm.addPass(createLowerToExec(lower));
    OverlapCommunicationOptions overlap;
    overlap.overlapGradReduce = options.overlapGradReduce;
    overlap.overlapParamGather = options.overlapParamGather;
    pm.addPass(createOverlapCommunication(overlap));
    pm.addPass(createPlanMemory());
  }
  if (to == Level::Exec && options.target == Target::Cuda) {
    pm.addPass(createFuseElementwise());
    CudaCodegenOptions cuda;
    cuda.arch = options.cudaArch;
    pm.addPass(createCudaCodegen(cuda));
  }
}

MemoryReport reportMemory(Operation *op) {
  auto stage = cast<exec::TemplateOp>(op);
  MemoryReport report;
  for (auto buffer : stage.getBody().front().getOps<exec::BufferOp>()) {
    if (buffer.getAlias() || buffer.getArena() != exec::Arena::Persistent)
      continue;
    StringRef kind = buffer.getSymName().split(':').first;
    int64_t bytes = buffer.getBytes();
    if (kind == "params")
      report.parameters += bytes;
    else if (kind == "grads")
      report.gradients += bytes;
    else if (kind == "exp_avg" || kind == "exp_avg_sq" || kind == "master")
      report.optimizer += bytes;
    else
      report.io += bytes;
  }
  report.persistent = stage.getPersistentBytes().value_or(0);
  report.workspace = stage.getWorkspaceBytes().value_or(0);
  report.stash = stage.getStashBytes().value_or(0);
  return report;
}

std::vector<int64_t> stashSlotBytes(mlir::ModuleOp module, int64_t stages) {
  std::map<int64_t, std::array<int64_t, 3>> byChunk;
  int64_t chunks = stages; // every stage has one, kept or not
  for (auto stage : module.getOps<exec::TemplateOp>()) {
    // A stash group is a chunk of the stage (chunk / stages): looped, the
    // group's j-th chunk is j·stages + stage; in a V the programs say.
    std::map<int64_t, int64_t> chunkOfGroup;
    for (auto program : stage.getBody().front().getOps<exec::ProgramOp>())
      if (std::optional<uint64_t> chunk = program.getChunk()) {
        chunkOfGroup[int64_t(*chunk) / stages] = int64_t(*chunk);
        chunks = std::max(chunks, int64_t(*chunk) + 1);
      }
    for (auto &[key, members] : exec::stashMembers(stage)) {
      // A slot is its pool's buffers end to end (a slot class's stride
      // may be another pool's, larger).
      auto named = chunkOfGroup.find(key.first);
      int64_t chunk = named != chunkOfGroup.end()
                          ? named->second
                          : key.first * stages + int64_t(stage.getStage());
      byChunk[chunk][size_t(key.second)] = exec::stashSlotBytes(members);
      chunks = std::max(chunks, chunk + 1);
    }
  }
  std::vector<int64_t> flat;
  for (int64_t c = 0; c < chunks; ++c)
    for (int64_t bytes : byChunk[c])
      flat.push_back(bytes);
  return flat;
}

} // namespace strata
