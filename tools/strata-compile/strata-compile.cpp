//===- strata-compile.cpp - model file to training plan -------------------===//
//
//   strata-compile MODEL [--set NAME=VALUE]... [--micro-batch-size b]
//       [--global-batch-size B] [--bf16] [--emit=KIND] [-o OUT]
//
//===----------------------------------------------------------------------===//
#include "compiler/ModelStats.h"
#include "compiler/Pipeline.h"
#include "compiler/PipelineSchedules.h"
#include "compiler/Registration.h"
#include "compiler/codegen/CompileCode.h"
#include "compiler/plan/PlanWriter.h"
#include "dialects/exec/ExecDialect.h"
#include "frontend/Frontend.h"
#include "runtime/base/WholeFile.h"
#include "runtime/plan/Plan.h"
#include "tools/common/MegatronFlags.h"
#include "tools/strata-compile/AutoPlan.h"
#include "tools/strata-compile/ZeroBubblePricing.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <iostream>

using namespace llvm;
using namespace strata;

namespace {

enum class Emit { Summary, Graph, Step, Dist, Exec, Plan };

cl::OptionCategory category("strata-compile options");

// What the layout and lowering flags set, bound to them (their defaults
// are its own); main adds what the other flags imply.
CompileOptions flags;

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model file>"),
                               cl::Required, cl::cat(category));

cl::opt<std::string>
    outputFile("o", cl::desc("Output file (default: stdout; a plan needs one)"),
               cl::value_desc("file"), cl::init("-"), cl::cat(category));

cl::opt<Emit> emit(
    "emit",
    cl::desc("What to write (default: the plan with -o, else the summary)"),
    cl::values(
        clEnumValN(Emit::Summary, "summary",
                   "parameters, FLOPs and per-stage memory"),
        clEnumValN(Emit::Graph, "graph",
                   "the model's graph IR: single-device meaning, global "
                   "shapes, locations into the model file"),
        clEnumValN(Emit::Step, "step",
                   "the training step in graph IR: forward, backward "
                   "(autodiff) and the AdamW update"),
        clEnumValN(Emit::Dist, "dist",
                   "the step with its parallel layout and schedule"),
        clEnumValN(
            Emit::Exec, "exec",
            "a template per stage: buffers, kernels, programs, schedule"),
        clEnumValN(Emit::Plan, "plan", "the binary plan strata-run executes")),
    cl::cat(category));

cl::list<std::string> sets("set",
                           cl::desc("Override a constant the model declares"),
                           cl::value_desc("NAME=VALUE"), cl::cat(category));

cl::opt<int64_t, true> microBatchSize(
    "micro-batch-size",
    cl::desc("Sequences per microbatch: the model's 'batch' (default 1)"),
    cl::location(flags.microBatchSize), cl::cat(category));

cl::opt<int64_t> globalBatchSize(
    "global-batch-size",
    cl::desc("Sequences per iteration (default: micro-batch size x "
             "data-parallel size); microbatches accumulate gradients"),
    cl::init(0), cl::cat(category));

cl::opt<int64_t, true> tensorParallel(
    "tensor-model-parallel-size",
    cl::desc("Tensor-parallel ranks (Megatron's layout: column- then "
             "row-parallel linears, vocabulary-parallel loss)"),
    cl::location(flags.tensorParallel), cl::cat(category));

cl::opt<int64_t, true> dataParallel(
    "data-parallel-size",
    cl::desc("Data-parallel replicas: the global batch is split among them "
             "and gradients are summed"),
    cl::location(flags.dataParallel), cl::cat(category));

cl::opt<int64_t, true> contextParallel(
    "context-parallel-size",
    cl::desc("Context-parallel ranks: each sample's sequence in 2c chunks, "
             "rank i holding chunks i and 2c-1-i; attention meets every "
             "rank's keys and values (--cp-comm-type), gradients are summed "
             "with the data-parallel ranks'"),
    cl::location(flags.contextParallel), cl::cat(category));

cl::opt<std::string> cpCommType(
    "cp-comm-type",
    cl::desc("How context-parallel attention meets the other ranks' keys "
             "and values: p2p (the ring: passed from rank to rank, a step "
             "at a time, each step's attention merged by log-sum-exp; "
             "Megatron's default) or all_gather (Megatron's allgather: all "
             "of them gathered, then one attention)"),
    cl::init("p2p"), cl::cat(category));

cl::opt<bool, true> sequenceParallel(
    "sequence-parallel",
    cl::desc("Split the residual stream along the sequence across "
             "tensor-parallel ranks (reduce-scatter and all-gather instead "
             "of all-reduce)"),
    cl::location(flags.sequenceParallel), cl::cat(category));

cl::opt<bool, true> distributedOptimizer(
    "use-distributed-optimizer",
    cl::desc("Shard optimizer state across data-parallel ranks (ZeRO-1): "
             "reduce-scatter gradients, update a part, all-gather parameters"),
    cl::location(flags.distributedOptimizer), cl::cat(category));

cl::opt<int64_t, true> vocabDivisibleBy(
    "make-vocab-size-divisible-by",
    cl::desc("Pad the vocabulary to a multiple of this times the "
             "tensor-parallel size, as Megatron does (default 128)"),
    cl::location(flags.vocabDivisibleBy), cl::cat(category));

cl::opt<int64_t, true> pipelineParallel(
    "pipeline-model-parallel-size",
    cl::desc("Pipeline stages: the layers are cut into chunks, chunk c on "
             "stage c mod p"),
    cl::location(flags.pipelineParallel), cl::cat(category));

cl::opt<int64_t, true> layersPerVirtualStage(
    "num-layers-per-virtual-pipeline-stage",
    cl::desc("Layers per chunk: several chunks per stage (virtual stages) "
             "for the interleaved schedule"),
    cl::location(flags.layersPerVirtualStage), cl::cat(category));

cl::opt<int64_t, true> firstStageLayers(
    "decoder-first-pipeline-num-layers",
    cl::desc("Layers on the first pipeline stage when they do not divide "
             "evenly (the other stages share the rest equally)"),
    cl::location(flags.firstStageLayers), cl::cat(category));

cl::opt<int64_t, true> lastStageLayers(
    "decoder-last-pipeline-num-layers",
    cl::desc("Layers on the last pipeline stage when they do not divide "
             "evenly"),
    cl::location(flags.lastStageLayers), cl::cat(category));

cl::opt<std::string, true> pipelineSchedule(
    "pipeline-schedule",
    cl::desc("gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-v (two chunks a "
             "stage in a V) or zb-auto (the fastest zero-bubble order for "
             "the work as priced on --cluster, within "
             "--max-activation-memory) (default: interleaved with virtual "
             "stages, else 1f1b)"),
    cl::location(flags.pipelineSchedule), cl::cat(category));

cl::opt<std::string> maxActivationMemory(
    "max-activation-memory",
    cl::desc("--pipeline-schedule zb-auto, zb-h1 or zb-v: the most a "
             "stage's stash may keep for the backward, as 24GiB, 512MiB or "
             "bytes (default: the most a stage keeps under 1F1B's order with "
             "each W after its B; zb-v: what each stage keeps at most up to "
             "its last forward, counted as its live slots' sum); zb-h1 holds "
             "back only the W's that fit, zb-v runs a waiting W early where "
             "one would not"),
    cl::cat(category));

cl::opt<std::string> recomputeGranularity(
    "recompute-granularity",
    cl::desc("Recompute activations in the backward instead of keeping "
             "them: full (all but each layer's input) or selective (the "
             "attention core)"),
    cl::init("none"), cl::cat(category));

cl::opt<std::string, true> attentionBackend(
    "attention-backend",
    cl::desc("fused (one kernel that keeps each row's log-sum-exp) or "
             "unfused (batched gemms and a softmax, the probabilities kept "
             "for the backward: what Megatron ran in 2021)"),
    cl::location(flags.attentionBackend), cl::cat(category));

// Megatron's spellings of recomputation: --recompute-activations is
// selective; --recompute-granularity full --recompute-method uniform
// --recompute-num-layers 1 recomputes each layer alone, as strata's full,
// but runs its whole forward again as Megatron's checkpointing does (its
// output and the output's collectives too, which strata's full leaves out:
// the next layer's stashed input holds that output).
cl::opt<bool> recomputeActivations(
    "recompute-activations",
    cl::desc("Megatron's name for --recompute-granularity selective"),
    cl::cat(category));

cl::opt<std::string> recomputeMethod(
    "recompute-method",
    cl::desc("with --recompute-granularity full: uniform, Megatron's: each "
             "layer alone (--recompute-num-layers 1), its whole forward run "
             "again as Megatron's checkpointing runs it"),
    cl::init(""), cl::cat(category));

cl::opt<int64_t> recomputeNumLayers(
    "recompute-num-layers",
    cl::desc("with --recompute-method uniform: layers per recomputed group "
             "(1: each layer alone, all strata does)"),
    cl::init(1), cl::cat(category));

cl::opt<bool> overlapGradReduce(
    "overlap-grad-reduce",
    cl::desc("Megatron's flag: on by default here (--no-overlap-grad-reduce "
             "turns it off)"),
    cl::cat(category));

cl::opt<bool> overlapParamGather(
    "overlap-param-gather",
    cl::desc("Megatron's flag: on by default here (--no-overlap-param-gather "
             "turns it off)"),
    cl::cat(category));

cl::opt<int64_t, true> bucketSize(
    "ddp-bucket-size",
    cl::desc("Gradient elements per data-parallel reduction bucket (default "
             "40,000,000)"),
    cl::location(flags.bucketElements), cl::cat(category));

cl::opt<int64_t, true> lossVocabBlock(
    "loss-vocab-block",
    cl::desc("Compute the output layer, the loss and their gradients this "
             "many vocabulary entries at a time, in the forward, so that a "
             "microbatch's whole logits are never held; each block's logits "
             "are computed twice (default: all at once, the logits' gradient "
             "kept for the backward)"),
    cl::location(flags.lossVocabBlock), cl::cat(category));

cl::opt<bool> noOverlapGradReduce(
    "no-overlap-grad-reduce",
    cl::desc("Reduce gradients after the backward instead of overlapping "
             "each bucket's reduction with the rest of it (Megatron's "
             "--overlap-grad-reduce, on by default)"),
    cl::cat(category));

cl::opt<bool> noOverlapParamGather(
    "no-overlap-param-gather",
    cl::desc("Gather the distributed optimizer's parameters at the end of "
             "the optimizer instead of during the next forward (Megatron's "
             "--overlap-param-gather, on by default)"),
    cl::cat(category));

cl::opt<double> progressAfter(
    "progress-after",
    cl::desc("announce each step on stderr once the compile has taken this "
             "many seconds (default 3)"),
    cl::init(3.0), cl::cat(category));

cl::opt<std::string>
    target("target",
           cl::desc("cpu (default), or cuda: a CUDA kernel generated for "
                    "every launch and compiled to PTX with NVRTC"),
           cl::init("cpu"), cl::cat(category));

cl::opt<std::string, true>
    cudaArch("cuda-arch",
             cl::desc("The GPU architecture of --target cuda: sm_80 "
                      "(A100, and newer through the driver's JIT; the "
                      "default) or sm_90a (H100, H200)"),
             cl::location(flags.cudaArch), cl::cat(category));

cl::opt<bool, true>
    bf16("bf16",
         cl::desc("bf16 parameters and activations, fp32 master "
                  "weights, gradients and optimizer state"),
         cl::location(flags.bf16), cl::cat(category));

cl::opt<bool> autoLayout(
    "auto",
    cl::desc("Search the layouts of --gpus GPUs of --cluster for the global "
             "batch (t, p, v, d, micro-batch, recomputation, sequence "
             "parallelism, distributed optimizer), simulate the ones that fit, "
             "print the --top K and write the best plan to -o"),
    cl::cat(category));
cl::opt<int64_t> autoGpus("gpus", cl::desc("--auto: how many GPUs"),
                          cl::init(0), cl::cat(category));
cl::opt<std::string>
    autoCluster("cluster",
                cl::desc("--auto and --pipeline-schedule zb-auto: the "
                         "cluster spec (examples/clusters/)"),
                cl::cat(category));
cl::opt<int64_t> autoTop("top", cl::desc("--auto: layouts to print (5)"),
                         cl::init(5), cl::cat(category));
cl::opt<double> autoSeconds(
    "auto-seconds",
    cl::desc("--auto: stop looking after this many seconds, the most "
             "promising layouts first (0: look at every one)"),
    cl::init(0), cl::cat(category));
cl::opt<std::string> autoExplain(
    "explain",
    cl::desc("--auto: say why a layout ranks where it does or was rejected "
             "(as t8,p8,v2,mbs1,full,sp,distopt)"),
    cl::cat(category));

int fail(const Twine &message) {
  WithColor::error(errs(), "strata-compile") << message << "\n";
  return 1;
}

std::string describeStats(const ModelStats &stats, const CompileOptions &opts,
                          const char *prefix) {
  int64_t m = opts.microbatches();
  return formatv("{0}model {1}: {2} layers, {3} parameters\n"
                 "{0}{4} FLOPs per microbatch ({5:e2}; {6} tokens; matmul "
                 "and attention, forward and backward); {15} with the "
                 "layers' forward recomputed (the paper's count)\n"
                 "{0}batch: {7} microbatches of {8} sequences per iteration "
                 "on each of {11} data-parallel ranks (global batch {9}), "
                 "{10}; tensor-parallel {12}{13}{14}{16}\n",
                 prefix, stats.name, stats.layers,
                 runtime::withThousands(stats.parameters),
                 runtime::withThousands(stats.stepFlops()),
                 double(stats.stepFlops()),
                 runtime::withThousands(stats.tokens), m, opts.microBatchSize,
                 opts.globalBatchSize, opts.bf16 ? "bf16" : "fp32",
                 opts.dataParallel, opts.tensorParallel,
                 opts.sequenceParallel ? ", sequence-parallel" : "",
                 opts.distributedOptimizer ? ", distributed optimizer" : "",
                 runtime::withThousands(stats.paperStepFlops()),
                 opts.contextParallel > 1
                     ? formatv("; context-parallel {0} (each sequence in {1} "
                               "chunks, two a rank: {2} tokens)",
                               opts.contextParallel, 2 * opts.contextParallel,
                               stats.seqLength / opts.contextParallel)
                           .str()
                     : std::string())
      .str();
}

/// A long compile says what it is doing: past a few seconds, each pass
/// and step is announced on stderr as it starts.
class Progress : public mlir::PassInstrumentation {
public:
  explicit Progress(double quietSeconds) : quiet(quietSeconds) {}
  void runBeforePass(mlir::Pass *pass, mlir::Operation *) override {
    say(pass->getArgument().empty() ? pass->getName() : pass->getArgument());
  }
  void say(StringRef what) {
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    if (seconds >= quiet)
      errs() << formatv("strata-compile: {0} ({1:f1} s so far)\n", what,
                        seconds);
  }

private:
  std::chrono::steady_clock::time_point start =
      std::chrono::steady_clock::now();
  double quiet;
};

/// One line per template: a pipeline stage's ranks share their memory.
std::string describeMemory(mlir::ModuleOp module,
                           const CompileOptions &options) {
  std::string text;
  int64_t perStage = options.ranksPerStage();
  for (auto stage : module.getOps<exec::TemplateOp>()) {
    MemoryReport m = reportMemory(stage);
    // Activations: the workspace, plus what a pipeline stage keeps for
    // the backward of the microbatches in flight.
    std::string kept = m.stash ? formatv(" (kept for backward {0})",
                                         runtime::humanBytes(m.stash))
                                     .str()
                               : "";
    std::string ranks =
        runtime::rankRangeText(stage.getStage() * perStage, perStage);
    text += formatv("stage {0} ({8}) memory: parameters {1}, gradients {2}, "
                    "optimizer state {3}, activations {4}{5}; peak {6} "
                    "({7} bytes)\n",
                    stage.getStage(), runtime::humanBytes(m.parameters),
                    runtime::humanBytes(m.gradients),
                    runtime::humanBytes(m.optimizer),
                    runtime::humanBytes(m.workspace + m.stash), kept,
                    runtime::humanBytes(m.peak()),
                    runtime::withThousands(m.peak()), ranks)
                .str();
  }
  return text;
}

/// Reads the input: a model file through the frontend, or IR (.mlir) at any
/// level as strata-compile itself prints it.
mlir::OwningOpRef<mlir::ModuleOp> load(mlir::MLIRContext &context,
                                       SourceMgr &sourceMgr,
                                       const CompileOptions &options,
                                       ModelStats &stats) {
  if (StringRef(inputFile).ends_with(".mlir")) {
    auto module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr, &context);
    if (module)
      stats = computeModelStats(*module);
    return module;
  }
  std::vector<frontend::ConstOverride> overrides;
  overrides.push_back({"batch", std::to_string(options.microBatchSize)});
  for (const std::string &text : sets) {
    frontend::ConstOverride override;
    if (!frontend::parseOverride(text, override)) {
      fail("--set " + text + ": expected NAME=VALUE, as in --set hidden=64");
      return nullptr;
    }
    overrides.push_back(override);
  }
  auto module =
      frontend::buildModel(context, sourceMgr, overrides,
                           [](const Twine &message) { fail(message); });
  if (!module)
    return nullptr;
  stats = computeModelStats(*module);
  PlanHeader header;
  static_cast<Layout &>(header) = options;
  header.model = stats.name;
  header.numMicrobatches = options.microbatches();
  header.seqLength = stats.seqLength;
  header.vocabSize = stats.vocabSize;
  header.gelu = stats.gelu;
  // The whole model's work per iteration: every microbatch of every replica.
  header.flopsPerIteration = double(stats.stepFlops()) *
                             double(options.globalBatchSize) /
                             double(options.microBatchSize);
  header.paperFlopsPerIteration = double(stats.paperStepFlops()) *
                                  double(options.globalBatchSize) /
                                  double(options.microBatchSize);
  setPlanHeader(*module, header);
  return module;
}

/// One candidate of --auto compiled in a context of its own, to plan
/// bytes; "" or the compiler's first diagnostic.
std::string compileCandidate(const std::string &source, CompileOptions options,
                             bool verify, const runtime::ClusterSpec &spec,
                             std::vector<uint8_t> &bytes) {
  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false);
  std::string said;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    if (said.empty())
      said = d.str();
    return mlir::success();
  });
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      MemoryBuffer::getMemBufferCopy(source, inputFile), SMLoc());
  ModelStats stats;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      load(context, sourceMgr, options, stats);
  auto why = [&](const char *otherwise) {
    return said.empty() ? std::string(otherwise) : said;
  };
  if (!module)
    return why("the model does not build");
  // zb-auto's order needs its work priced on the cluster, zb-v's its
  // stash measured (its waiting W's run early where they would grow
  // it), as a compile of the layout alone would.
  std::string chose; // what the summary would say, which --auto does not
  if (options.pipelineSchedule == "zb-auto") {
    if (std::string error = priceZeroBubble(*module, Level::Graph, spec,
                                            options, chose, verify);
        !error.empty())
      return error;
  } else if (options.pipelineSchedule == "zb-v") {
    if (std::string error = measureZeroBubbleStash(*module, Level::Graph,
                                                   options, chose, verify);
        !error.empty())
      return error;
  }
  mlir::PassManager pm(&context);
  buildPipeline(pm, options, Level::Graph, Level::Exec);
  // The verifier after every pass is half of a large model's compile.
  pm.enableVerifier(verify);
  if (failed(pm.run(*module)))
    return why("the compiler refused it");
  if (options.target == Target::Cuda &&
      failed(codegen::compileGeneratedCode(*module)))
    return why("NVRTC refused its kernels");
  if (failed(writePlan(*module, bytes)))
    return why("the plan could not be written");
  return "";
}

} // namespace

/// Megatron's spellings, folded into strata's options; "" or what does
/// not fit.
std::string foldMegatronFlags() {
  if (recomputeActivations) {
    if (recomputeGranularity.getNumOccurrences() &&
        recomputeGranularity != "selective")
      return "--recompute-activations is --recompute-granularity selective; "
             "it contradicts --recompute-granularity " +
             recomputeGranularity;
    recomputeGranularity = "selective";
  }
  if (recomputeMethod.getNumOccurrences() ||
      recomputeNumLayers.getNumOccurrences()) {
    if (recomputeGranularity != "full")
      return "--recompute-method and --recompute-num-layers go with "
             "--recompute-granularity full, as in Megatron";
    if (recomputeMethod.getNumOccurrences() && recomputeMethod != "uniform")
      return "--recompute-method " + recomputeMethod +
             ": strata's full recomputation recomputes each layer alone "
             "(Megatron's --recompute-method uniform --recompute-num-layers "
             "1); other methods are not supported";
    if (recomputeNumLayers != 1)
      return "--recompute-num-layers " + std::to_string(recomputeNumLayers) +
             ": strata's full recomputation recomputes each layer alone "
             "(--recompute-num-layers 1); groups of layers are not supported";
  }
  if (overlapGradReduce && noOverlapGradReduce)
    return "--overlap-grad-reduce and --no-overlap-grad-reduce contradict";
  if (overlapParamGather && noOverlapParamGather)
    return "--overlap-param-gather and --no-overlap-param-gather contradict";
  return "";
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  // A Megatron flag strata-compile does not take says where it belongs,
  // before LLVM's parser guesses at a near name.
  {
    auto &registered = cl::getRegisteredOptions();
    for (int i = 1; i < argc; ++i) {
      StringRef arg = argv[i];
      if (!arg.starts_with("-") || arg == "-")
        continue;
      StringRef name = arg.split('=').first;
      if (registered.count(name.ltrim('-')))
        continue;
      std::string megatron =
          tools::explainMegatronFlag(name, tools::StrataTool::Compile);
      if (!megatron.empty())
        return fail(megatron);
    }
  }
  cl::ParseCommandLineOptions(argc, argv,
                              "strata-compile: a model file to a training "
                              "plan\n");
  if (std::string error = foldMegatronFlags(); !error.empty())
    return fail(error);
  if (emit.getNumOccurrences() == 0)
    emit = outputFile == "-" ? Emit::Summary : Emit::Plan;
  if (emit == Emit::Plan && outputFile == "-")
    return fail("--emit=plan writes a binary file: give it with -o FILE");
  const runtime::FileKind &inputKind = StringRef(inputFile).ends_with(".mlir")
                                           ? runtime::kIrFile
                                           : runtime::kModelFile;
  if (std::string error =
          runtime::checkNotInput(outputFile, inputFile, inputKind);
      !error.empty())
    return fail(error);
  if (outputFile != "-")
    if (std::string error = runtime::checkWritable(outputFile); !error.empty())
      return fail(error);

  CompileOptions options = flags;
  // Without a global batch: one microbatch per data-parallel rank.
  // The default, micro batch x data-parallel size, saturates rather than
  // wraps: checkOptions names the flag that is too large.
  int64_t everyReplicaOnce;
  if (__builtin_mul_overflow(options.microBatchSize, options.dataParallel,
                             &everyReplicaOnce))
    everyReplicaOnce = INT64_MAX;
  options.globalBatchSize =
      globalBatchSize.getNumOccurrences() ? globalBatchSize : everyReplicaOnce;
  std::optional<Recompute> recompute = parseRecompute(recomputeGranularity);
  if (!recompute)
    return fail("--recompute-granularity must be full or selective, got '" +
                recomputeGranularity + "'");
  options.recompute = *recompute;
  options.recomputeWholeLayers = recomputeMethod == "uniform";
  // Megatron spells the gather "allgather".
  options.cpCommType = cpCommType == "allgather" ? std::string("all_gather")
                                                 : cpCommType.getValue();
  std::optional<Target> chosenTarget = parseTarget(target);
  if (!chosenTarget)
    return fail("--target must be cpu or cuda, got '" + target + "'");
  options.target = *chosenTarget;
  options.overlapGradReduce = !noOverlapGradReduce;
  options.overlapParamGather = !noOverlapParamGather;
  if (cudaArch.getNumOccurrences() && options.target != Target::Cuda)
    return fail("--cuda-arch is for --target cuda");
  if (std::string error = checkOptions(options); !error.empty())
    return fail(error);

  std::string source;
  if (std::string error = runtime::readFileWhole(inputFile, source, inputKind);
      !error.empty())
    return fail(error);
  std::unique_ptr<MemoryBuffer> buffer = MemoryBuffer::getMemBufferCopy(
      source, inputFile == "-" ? std::string("<stdin>") : inputFile);
  source = std::string();

  mlir::DialectRegistry registry;
  registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  context.printOpOnDiagnostic(false); // the model line says it better
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(buffer), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);

  ModelStats stats;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      load(context, sourceMgr, options, stats);
  if (!module)
    return 1;
  // zb-auto's, zb-h1's and zb-v's memory limit: checked wherever it is
  // given, used where the schedule is written.
  bool zeroBubbleAuto = options.pipelineSchedule == "zb-auto";
  bool measuresStash =
      options.pipelineSchedule == "zb-h1" || options.pipelineSchedule == "zb-v";
  if (maxActivationMemory.getNumOccurrences()) {
    if (!zeroBubbleAuto && !measuresStash)
      return fail("--max-activation-memory is --pipeline-schedule zb-auto's, "
                  "zb-h1's and zb-v's");
    if (!runtime::parseBytes(maxActivationMemory,
                             options.zeroBubble.maxStashBytes) ||
        options.zeroBubble.maxStashBytes <= 0)
      return fail("--max-activation-memory must be a positive size, as "
                  "24GiB, 512MiB or a count of bytes, got '" +
                  maxActivationMemory + "'");
  }
  if (autoLayout) {
    if (StringRef(inputFile).ends_with(".mlir"))
      return fail("--auto takes a model file, not IR");
    AutoPlanRequest request;
    request.gpus = autoGpus;
    request.clusterPath = autoCluster;
    request.top = autoTop;
    request.explain = autoExplain;
    request.seconds = autoSeconds;
    if (!(autoSeconds >= 0) || autoSeconds > 1e6)
      return fail("--auto-seconds must be between 0 and 1e6");
    if (autoCluster.empty() || autoGpus.getNumOccurrences() == 0)
      return fail("--auto needs --gpus N and --cluster SPEC");
    if (globalBatchSize.getNumOccurrences() == 0)
      return fail("--auto needs --global-batch-size: the layouts divide it");
    // Context parallelism is not among the layouts it searches (a plan
    // for c times the GPUs it prices would be wrong).
    if (contextParallel.getNumOccurrences())
      return fail("--auto does not search context parallelism: give "
                  "--context-parallel-size without --auto");
    // What the search chooses is not given.
    for (const cl::Option *chosen : std::initializer_list<const cl::Option *>{
             &microBatchSize, &tensorParallel, &dataParallel, &sequenceParallel,
             &distributedOptimizer, &pipelineParallel, &layersPerVirtualStage,
             &firstStageLayers, &lastStageLayers, &pipelineSchedule,
             &recomputeGranularity})
      if (chosen->getNumOccurrences())
        return fail("--auto chooses the layout: --" + chosen->ArgStr +
                    " is not given with it");
    std::string text(sourceMgr.getMemoryBuffer(1)->getBuffer());
    return autoPlan(
        request, options, stats,
        [&](const CompileOptions &candidate, bool verify,
            const runtime::ClusterSpec &spec, std::vector<uint8_t> &bytes) {
          return compileCandidate(text, candidate, verify, spec, bytes);
        },
        outputFile, std::cout, std::cerr);
  }
  if (autoGpus.getNumOccurrences() ||
      (autoCluster.getNumOccurrences() && !zeroBubbleAuto) ||
      autoTop.getNumOccurrences() || autoExplain.getNumOccurrences() ||
      autoSeconds.getNumOccurrences())
    return fail("--gpus, --cluster, --top, --explain and --auto-seconds are "
                "--auto's (--cluster also --pipeline-schedule zb-auto's)");

  FailureOr<PlanHeader> header = getPlanHeader(*module);
  if (failed(header))
    return 1;
  // Graph IR whose header predates the GELU field says it in its ops.
  if (header->gelu.empty() && !stats.gelu.empty()) {
    header->gelu = stats.gelu;
    setPlanHeader(*module, *header);
  }
  // IR carries the batch and parallel layout it was made for.
  static_cast<Layout &>(options) = *header;
  // IR written by hand carries a layout no flag checked.
  if (std::string error = checkOptions(options); !error.empty())
    return fail(inputFile + "'s strata.plan header: " + error);

  Level from = levelOf(*module);
  Level to = emit == Emit::Graph  ? Level::Graph
             : emit == Emit::Step ? Level::Step
             : emit == Emit::Dist ? Level::Dist
                                  : Level::Exec;
  if (to < from)
    return fail("the input is already past the level --emit asks for");
  if ((from == Level::Step || from == Level::Dist) &&
      failed(verifyEveryParameterTrains(*module)))
    return 1;
  // zb-auto orders the work by its cost: priced on the cluster first,
  // wherever this compile writes the schedule.
  std::string zeroBubbleSaid;
  int64_t p = options.pipelineParallel,
          perChunk = options.layersPerVirtualStage;
  int64_t v = perChunk > 0 && stats.layers > 0 && p > 0
                  ? std::max<int64_t>(1, stats.layers / (p * perChunk))
                  : 1;
  // ZB-V's chunks in a V, said in its words before the split would.
  if (options.pipelineSchedule ==
          sim::scheduleName(sim::ScheduleKind::ZeroBubbleV) &&
      from < Level::Dist && to >= Level::Dist)
    if (std::string error =
            pipeline::checkSchedule(sim::ScheduleKind::ZeroBubbleV, int(p),
                                    int(v), int(options.microbatches()));
        !error.empty())
      return fail(error);
  if (zeroBubbleAuto && from < Level::Dist && to >= Level::Dist) {
    if (autoCluster.empty())
      return fail("--pipeline-schedule zb-auto orders the work by what it "
                  "costs: give the cluster to price it on with --cluster "
                  "SPEC (examples/clusters/)");
    // Said for zb-auto, before a probe under another schedule says it.
    if (std::string error =
            pipeline::checkSchedule(sim::ScheduleKind::ZeroBubbleAuto, int(p),
                                    int(v), int(options.microbatches()));
        !error.empty())
      return fail(error);
    runtime::ClusterSpec spec;
    if (std::string error = runtime::loadClusterSpec(autoCluster, spec);
        !error.empty())
      return fail(error);
    if (std::string error =
            priceZeroBubble(*module, from, spec, options, zeroBubbleSaid);
        !error.empty())
      return fail(error);
  }

  // zb-h1 holds back the W's its stage's stash has room for, zb-v runs
  // a waiting W early where its stash has none: the probe's memory
  // plan says how much each takes.
  if (measuresStash && from < Level::Dist && to >= Level::Dist)
    if (std::string error =
            measureZeroBubbleStash(*module, from, options, zeroBubbleSaid);
        !error.empty())
      return fail(error);

  mlir::PassManager pm(&context);
  auto progress = std::make_unique<Progress>(progressAfter);
  Progress *progressOf = progress.get();
  pm.addInstrumentation(std::move(progress));
  buildPipeline(pm, options, from, to);
  if (failed(pm.run(*module)))
    return 1;

  std::string summary =
      stats.layers || stats.parameters ? describeStats(stats, options, "") : "";
  summary += zeroBubbleSaid;
  if (emit == Emit::Summary || emit == Emit::Plan)
    summary += describeMemory(*module, options);

  if (emit == Emit::Plan && options.target == Target::Cuda) {
    progressOf->say("compiling the generated kernels with NVRTC");
    if (failed(codegen::compileGeneratedCode(*module)))
      return 1;
    auto codes = module->getOps<exec::CodeOp>();
    summary +=
        formatv("CUDA kernels for {0}: {1}, compiled to PTX by NVRTC\n",
                options.cudaArch, std::distance(codes.begin(), codes.end()))
            .str();
  }

  if (emit == Emit::Plan) {
    std::vector<uint8_t> bytes;
    progressOf->say("writing the plan");
    if (failed(writePlan(*module, bytes)))
      return 1;
    // The runtime's own checks, so that a plan strata-run would refuse is
    // an error here, never a file.
    progressOf->say("checking the plan for every rank");
    // Every rank resolved from its template and checked, one at a time.
    runtime::Plan loaded;
    runtime::LoadOptions load;
    load.resolve = false;
    std::string error = runtime::loadPlanFromBytes(bytes, loaded, load);
    if (error.empty())
      error = runtime::checkEveryRank(loaded);
    if (!error.empty())
      return fail("the plan fails the runtime's checks, so it is not "
                  "written: " +
                  error);
    if (std::string error = runtime::writeFileWhole(outputFile, bytes);
        !error.empty())
      return fail(error);
    outs() << summary << "wrote " << outputFile << " ("
           << runtime::withThousands(bytes.size()) << " bytes)\n";
    return 0;
  }

  // Printed text goes to stdout ("-"), or to a file written whole.
  std::string text;
  llvm::raw_string_ostream os(text);
  if (emit == Emit::Summary) {
    os << summary;
  } else {
    if (stats.layers || stats.parameters)
      os << describeStats(stats, options, "// ");
    // Locations inline (local scope: no #loc aliases), so the printed IR
    // reads line by line against the model file and parses back.
    module->print(os, mlir::OpPrintingFlags()
                          .enableDebugInfo(/*enable=*/true,
                                           /*prettyForm=*/false)
                          .useLocalScope());
    os << "\n";
  }
  if (outputFile == "-") {
    outs() << text;
    return 0;
  }
  if (std::string error = runtime::writeFileWhole(outputFile, text);
      !error.empty())
    return fail(error);
  return 0;
}
