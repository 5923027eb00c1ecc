//===- strata-run.cpp - execute a training plan ---------------------------===//
//
//   strata-run PLAN --train-iters K [--seed S] [--lr ...]
//              [--data-path FILE | [W] PREFIX...] [--split A,B,C]
//              [--save-params OUT.safetensors] [--log-interval N] ...
//   strata-run PLAN --check
//
// Flags take Megatron-LM's names. Links the runtime only.
//
//===----------------------------------------------------------------------===//
#include "runtime/base/WholeFile.h"
#include "runtime/cluster/Calibration.h"
#include "runtime/cluster/ClusterSpec.h"
#include "runtime/comm/Transport.h"
#include "runtime/cuda/AttentionRunner.h"
#include "runtime/cuda/Environment.h"
#include "runtime/plan/Plan.h"
#include "runtime/predict/Prediction.h"
#include "runtime/train/StartRanks.h"
#include "tools/common/MegatronFlags.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <map>
#include <string>
#include <thread>

using namespace strata::runtime;

namespace {

const char *kUsage =
    "usage: strata-run PLAN [flags]\n"
    "  --train-iters K           iterations to train (default 0: initialize,\n"
    "                            save if asked, and stop)\n"
    "  --seed S                  initialization and synthetic data (1234)\n"
    "  --lr X  --min-lr X        peak and final learning rate (1e-4, 0)\n"
    "  --lr-warmup-iters N       linear warm-up from 0 (0)\n"
    "  --lr-decay-iters N        decay length (default: train-iters)\n"
    "  --lr-decay-style S        constant, linear or cosine (constant)\n"
    "  --weight-decay X          decoupled, on matrices (0.01)\n"
    "  --adam-beta1 X --adam-beta2 X --adam-eps X   (0.9, 0.999, 1e-8)\n"
    "  --clip-grad X             global gradient-norm clip, 0 = off (1.0)\n"
    "  --data-path [W] PREFIX... Megatron's indexed data (PREFIX.bin and\n"
    "                            .idx, as strata-data preprocess writes\n"
    "                            them; weight and prefix pairs blend\n"
    "                            several); the words up to the next flag\n"
    "  --data-path FILE          or a file's bytes as tokens (default:\n"
    "                            synthetic tokens from the seed)\n"
    "  --split A,B,C             train, valid, test parts of each prefix\n"
    "                            (969,30,1)\n"
    "  --eval-interval N         the validation loss every N iterations\n"
    "                            (1000), and after training on the valid\n"
    "                            and test splits (indexed data)\n"
    "  --eval-iters N            batches per evaluation (100; 0: none)\n"
    "  --save-params FILE        write the parameters (safetensors) at\n"
    "                            the end\n"
    "  --save DIR                checkpoints (parameters, Adam moments,\n"
    "                            data position) every --save-interval N\n"
    "                            iterations and at the end\n"
    "  --load DIR                go on from DIR's latest checkpoint, in\n"
    "                            any layout (none there: from the start)\n"
    "  --load-safetensors FILE   start from the weights of a safetensors\n"
    "                            file, a sharded one's index.json, or a\n"
    "                            directory of either (no optimizer state)\n"
    "  --names strata|hf-gpt2|hf-llama   how that file names them\n"
    "                            (strata: as the model does)\n"
    "  --exit-interval N         stop after an iteration N divides (saving\n"
    "                            first with --save), the learning-rate\n"
    "                            schedule still --train-iters'\n"
    "  --exit-on-nan N           stop with an error after N iterations in\n"
    "                            a row whose gradient norm was nan or inf\n"
    "                            (their updates are skipped on every rank;\n"
    "                            0: never, the default);\n"
    "                            --check-for-nan-in-loss-and-grad is 1\n"
    "  --exit-signal-handler     (Megatron's; always so with --save) on\n"
    "                            SIGTERM or SIGINT, every rank saves at the\n"
    "                            next iteration boundary and stops\n"
    "  --log-interval N          iterations per log line (1); the skipped\n"
    "                            and nan counts are the interval's\n"
    "  --backend cpu|cuda|simt|sim   where the ranks run (cpu; cuda loads\n"
    "                            the NVIDIA driver, and only then; simt, for\n"
    "                            testing, runs a cuda plan's kernels on the\n"
    "                            CPU, compiled by the host's C++ compiler,\n"
    "                            on a model of a GPU's blocks; sim predicts\n"
    "                            one iteration on the --cluster, no data)\n"
    "  --attention-backend strata|auto|cudnn   (cuda) what runs attention:\n"
    "                            the plan's own kernels (strata, the\n"
    "                            default), cuDNN's fused attention where it\n"
    "                            is found and takes the launch (auto), or\n"
    "                            cuDNN or a refusal saying why (cudnn)\n"
    "  --cluster SPEC            (sim) the modelled cluster, a JSON spec\n"
    "                            (examples/clusters/)\n"
    "  --simulate-every-rank     (sim) every rank, not one per pipeline\n"
    "                            stage standing for its tensor and data ranks\n"
    "  --free-communication      (sim) collectives and transfers cost\n"
    "                            nothing: the schedule alone\n"
    "  --calibration FILE        (sim) measured gemm and kernel times by\n"
    "                            name and shape (--profile-json's, or the\n"
    "                            GPU check's calibration.json) in place of\n"
    "                            the model's\n"
    "  --threads N               CPU threads per rank (default: the cores\n"
    "                            shared among local ranks)\n"
    "  --ranks N                 ranks as threads of this process (default:\n"
    "                            the plan's; under mpirun or srun each\n"
    "                            process is one rank)\n"
    "  --comm-timeout S          seconds a rank waits for a peer before the\n"
    "                            run ends with an error (300)\n"
    "  --report-comm             print bytes sent per collective\n"
    "  --report-memory           print planned and measured peak memory\n"
    "  --profile                 print the time spent in each kernel (on a\n"
    "                            GPU the device's, each instruction between\n"
    "                            events, the iteration run without graphs)\n"
    "  --profile-json FILE       the last iteration's gemms and kernels by\n"
    "                            shape: calls, seconds, bytes, FLOPs\n"
    "  --trace FILE              write when every step and instruction ran,\n"
    "                            per rank, as a Chrome/Perfetto trace\n"
    "  --graphs, --no-graphs     record each step's body once as a graph\n"
    "                            and replay it (a CUDA graph; on by\n"
    "                            default on a GPU; on the CPU, for testing,\n"
    "                            the recorded tasks)\n"
    "  --report-graphs           print the graphs recorded and replayed\n"
    "  --local-collectives       collectives of ranks as threads computed\n"
    "                            where the ranks meet, in the ring's order\n"
    "                            (the arithmetic of a GPU's device-side\n"
    "                            communicator), not over the ring\n"
    "  --staged-collectives      (testing) stage the CPU backend's\n"
    "                            collectives through host copies, as the\n"
    "                            cuda backend does\n"
    "  --async-compute           (testing) run each rank's compute stream\n"
    "                            on a thread of its own, as a GPU runs\n"
    "                            ahead of its host: with ThreadSanitizer, a\n"
    "                            wait a plan lacks is a reported data race\n"
    "  --fail-rank R --fail-at-iteration I\n"
    "                            (testing) rank R stops at iteration I\n"
    "  --fail-grad-at-iteration I (testing) every gradient of iteration I\n"
    "                            made inf before the update, on every rank\n"
    "  --check                   load the plan for every rank of its layout\n"
    "                            without running it: resolve and check each\n"
    "                            rank's template, print each stage's memory\n"
    "  --report-load             print which templates this process decoded\n"
    "strata-run --cuda-info      the GPU, driver, cuBLASLt, cuDNN, NCCL and\n"
    "                            NVRTC the cuda backend finds, and where\n"
    "                            (searched in STRATA_CUDA_LIBS, the library\n"
    "                            path, $CUDA_HOME/lib64, python3's nvidia\n"
    "                            wheels)\n";

int fail(const std::string &message) {
  // One write: under mpirun a line written in pieces can be cut by the
  // launcher's own output (its abort notice) between them.
  std::cerr << ("strata-run: error: " + message + "\n") << std::flush;
  return 1;
}

bool parseInt(const std::string &text, int64_t &out) {
  char *end = nullptr;
  errno = 0;
  long long value = std::strtoll(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0)
    return false;
  out = value;
  return true;
}

bool parseDouble(const std::string &text, double &out) {
  char *end = nullptr;
  errno = 0;
  double value = std::strtod(text.c_str(), &end);
  // Every real flag is a rate, a coefficient or a time: inf and nan train
  // to nothing or wait forever.
  if (text.empty() || *end != '\0' || errno != 0 || !std::isfinite(value))
    return false;
  out = value;
  return true;
}

/// strata-run --backend sim: one iteration on a modelled cluster.
int simulate(const std::string &planPath, const std::string &clusterPath,
             const std::string &calibrationPath,
             strata::runtime::predict::PredictOptions options,
             const std::string &tracePath) {
  namespace predict = strata::runtime::predict;
  if (clusterPath.empty())
    return fail("--backend sim needs --cluster SPEC (examples/clusters/)");
  ClusterSpec spec;
  if (std::string error = loadClusterSpec(clusterPath, spec); !error.empty())
    return fail(error);
  Calibration calibration;
  if (!calibrationPath.empty()) {
    if (std::string error = calibration.load(calibrationPath); !error.empty())
      return fail(error);
    options.calibration = &calibration;
  }
  // The file read once; only the simulated ranks decoded.
  std::vector<uint8_t> bytes;
  if (std::string error = readFileWhole(planPath, bytes, kPlanFile);
      !error.empty())
    return fail(error);
  // Every rank of a large layout is millions of operations per rank over
  // thousands of ranks: one per stage stands for them.
  auto everyRankFits = [&](const Plan &header) -> std::string {
    constexpr uint32_t kMostEveryRank = 512;
    if (!options.everyRank || header.world() <= kMostEveryRank)
      return "";
    return "--simulate-every-rank is for layouts of at most " +
           std::to_string(kMostEveryRank) + " ranks; this plan has " +
           std::to_string(header.world()) + " (" + header.layoutText() +
           "): without it one rank per pipeline stage stands for its stage";
  };
  Plan plan;
  if (std::string error = predict::loadForPrediction(bytes, options.everyRank,
                                                     plan, everyRankFits);
      !error.empty())
    return fail(planPath + ": " + error);
  predict::Prediction prediction;
  if (std::string error =
          predict::predictIteration(plan, spec, options, prediction);
      !error.empty())
    return fail(planPath + ": " + error);
  std::cout << predict::describePrediction(plan, spec, prediction);
  if (!tracePath.empty())
    if (std::string error =
            writeFileWhole(tracePath, predict::predictionTrace(prediction));
        !error.empty())
      return fail(error);
  return 0;
}

/// strata-run --check: every rank of the plan resolved from its template
/// and checked, one at a time (a 3072-rank plan on a laptop), then each
/// stage's memory.
int checkPlan(const std::string &path) {
  Plan plan;
  LoadOptions load;
  load.resolve = false;
  if (std::string error = loadPlan(path, plan, load); !error.empty())
    return fail(path + ": " + error);
  if (std::string error = checkEveryRank(plan); !error.empty())
    return fail(path + ": " + error);
  std::cout << path << ": " << plan.world() << " ranks (" << plan.layoutText()
            << ") from " << plan.templates.size()
            << " templates: every rank resolves and checks\n";
  // Resolving moves no arena: a stage's memory is its template's.
  uint32_t perStage = plan.ranksPerStage();
  for (uint32_t stage = 0; stage < plan.pipelineParallel; ++stage) {
    uint32_t first = plan.firstRankOf(stage), t = plan.rankTemplates[first];
    const RankPlan &ranks = *plan.templates[t];
    std::cout << "stage " << stage << " (" << rankRangeText(first, perStage)
              << ", template " << t << "): persistent "
              << humanBytes(ranks.persistentBytes) << " + workspace "
              << humanBytes(ranks.workspaceBytes) << " + stash "
              << humanBytes(ranks.stashBytes) << " = peak "
              << humanBytes(ranks.peakBytes()) << " ("
              << withThousands(ranks.peakBytes()) << " bytes) per rank\n";
  }
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  TrainOptions options;
  std::string planPath;
  bool help = false, check = false, reportLoad = false, cudaInfo = false;
  std::string clusterPath, calibrationPath;
  strata::runtime::predict::PredictOptions predictOptions;

  using Setter = std::function<bool(const std::string &)>;
  auto integer = [](int64_t &target) {
    return Setter(
        [&target](const std::string &v) { return parseInt(v, target); });
  };
  auto real = [](double &target) {
    return Setter(
        [&target](const std::string &v) { return parseDouble(v, target); });
  };
  auto text = [](std::string &target) {
    return Setter([&target](const std::string &v) {
      target = v;
      return !v.empty();
    });
  };
  int64_t seed = int64_t(options.seed), threads = 0, ranks = 0;
  int64_t failRank = -1, failAt = -1;
  std::map<std::string, Setter> valued = {
      {"--train-iters", integer(options.trainIters)},
      {"--seed", integer(seed)},
      {"--lr", real(options.lr)},
      {"--min-lr", real(options.minLr)},
      {"--lr-warmup-iters", integer(options.lrWarmupIters)},
      {"--lr-decay-iters", integer(options.lrDecayIters)},
      {"--lr-decay-style", text(options.lrDecayStyle)},
      {"--weight-decay", real(options.hyper.weightDecay)},
      {"--adam-beta1", real(options.hyper.beta1)},
      {"--adam-beta2", real(options.hyper.beta2)},
      {"--adam-eps", real(options.hyper.eps)},
      {"--clip-grad", real(options.hyper.clipGrad)},
      {"--split", text(options.split)},
      {"--eval-interval", integer(options.evalInterval)},
      {"--eval-iters", integer(options.evalIters)},
      {"--backend", text(options.backend)},
      {"--attention-backend", text(options.attentionBackend)},
      {"--cluster", text(clusterPath)},
      {"--calibration", text(calibrationPath)},
      {"--save-params", text(options.saveParams)},
      {"--save", text(options.save)},
      {"--load", text(options.load)},
      {"--save-interval", integer(options.saveInterval)},
      {"--exit-interval", integer(options.exitInterval)},
      {"--exit-on-nan", integer(options.exitOnNan)},
      {"--load-safetensors", text(options.loadSafetensors)},
      {"--names", text(options.names)},
      {"--trace", text(options.tracePath)},
      {"--profile-json", text(options.profileJson)},
      {"--log-interval", integer(options.logInterval)},
      {"--threads", integer(threads)},
      {"--ranks", integer(ranks)},
      {"--comm-timeout", real(options.commTimeoutSeconds)},
      {"--fail-rank", integer(failRank)},
      {"--fail-at-iteration", integer(failAt)},
      {"--fail-grad-at-iteration", integer(options.failGradAtIteration)},
  };

  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      help = true;
      continue;
    }
    if (arg == "--report-memory") {
      options.reportMemory = true;
      continue;
    }
    if (arg == "--profile") {
      options.profile = true;
      continue;
    }
    if (arg == "--report-comm") {
      options.reportComm = true;
      continue;
    }
    if (arg == "--exit-signal-handler") {
      continue; // Megatron's: strata-run saves on SIGTERM whenever --save
    }
    if (arg == "--check-for-nan-in-loss-and-grad") {
      options.exitOnNan = 1; // Megatron's: stop at the first
      continue;
    }
    if (arg == "--check") {
      check = true;
      continue;
    }
    if (arg == "--simulate-every-rank") {
      predictOptions.everyRank = true;
      continue;
    }
    if (arg == "--free-communication") {
      predictOptions.freeCommunication = true;
      continue;
    }
    if (arg == "--cuda-info") {
      cudaInfo = true;
      continue;
    }
    if (arg == "--report-load") {
      reportLoad = true;
      continue;
    }
    if (arg == "--async-compute") {
      options.asyncCompute = true;
      continue;
    }
    if (arg == "--staged-collectives") {
      options.stagedCollectives = true;
      continue;
    }
    if (arg == "--local-collectives") {
      options.localCollectives = true;
      continue;
    }
    if (arg == "--graphs" || arg == "--no-graphs") {
      options.graphs = arg == "--graphs";
      continue;
    }
    if (arg == "--report-graphs") {
      options.reportGraphs = true;
      continue;
    }
    if (arg == "--data-path") {
      // Megatron's: every word up to the next flag (the last flag given).
      options.dataPath.clear();
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        options.dataPath.push_back(argv[++i]);
      if (options.dataPath.empty())
        return fail("--data-path needs a file, a prefix, or weights and "
                    "prefixes");
      continue;
    }
    if (arg.rfind("--", 0) != 0) {
      if (!planPath.empty())
        return fail("one plan at a time: got '" + planPath + "' and '" + arg +
                    "'");
      planPath = arg;
      continue;
    }
    std::string name = arg, value;
    bool inlineValue = false;
    if (size_t eq = arg.find('='); eq != std::string::npos) {
      name = arg.substr(0, eq);
      value = arg.substr(eq + 1);
      inlineValue = true;
    }
    auto it = valued.find(name);
    if (it == valued.end()) {
      std::string megatron = strata::tools::explainMegatronFlag(
          name, strata::tools::StrataTool::Run);
      return fail(megatron.empty()
                      ? "unknown flag '" + name + "'; see strata-run --help"
                      : megatron);
    }
    if (!inlineValue) {
      if (i + 1 >= argc)
        return fail(name + " needs a value");
      value = argv[++i];
    }
    if (!it->second(value))
      return fail(name + ": '" + value +
                  "' is not a valid value (a finite number; integers in "
                  "64 bits)");
  }
  if (help) {
    std::cout << kUsage;
    return 0;
  }
  if (cudaInfo) {
    if (!planPath.empty())
      return fail("--cuda-info takes no plan");
    std::string report;
    std::string error = cuda::describeCudaEnvironment(report);
    std::cout << report;
    return error.empty() ? 0 : fail(error);
  }
  if (planPath.empty())
    return fail("no plan given" +
                std::string(options.dataPath.empty()
                                ? ""
                                : " (the words after --data-path are its; "
                                  "give the plan first)") +
                "\n" + kUsage);
  bool simOnly = !clusterPath.empty() || !calibrationPath.empty() ||
                 predictOptions.everyRank || predictOptions.freeCommunication;
  if (options.backend != "sim" && simOnly)
    return fail("--cluster, --calibration, --simulate-every-rank and "
                "--free-communication are --backend sim's");
  if (options.backend == "sim")
    return simulate(planPath, clusterPath, calibrationPath, predictOptions,
                    options.tracePath);
  if (cuda::AttentionBackend attention;
      !cuda::parseAttentionBackend(options.attentionBackend, attention))
    return fail("--attention-backend takes strata, auto or cudnn, not '" +
                options.attentionBackend + "'");
  if (options.attentionBackend == "cudnn" && options.backend != "cuda")
    return fail("--attention-backend cudnn is the cuda backend's (this is "
                "--backend " +
                options.backend + ")");
  if (seed < 0)
    return fail("--seed must be >= 0");
  // More compute threads than the machine runs at once only slow a rank
  // down, and thousands exhaust the process (libgomp aborted).
  int64_t cores = std::max(1u, std::thread::hardware_concurrency());
  if (threads < 0 || threads > 4 * cores)
    return fail("--threads must be between 0 (one share of the cores) and " +
                std::to_string(4 * cores) + " (4 x this machine's " +
                std::to_string(cores) + " cores), got " +
                std::to_string(threads));
  if (ranks < 0 || ranks > kMaxWorldSize)
    return fail("--ranks must be between 1 and " +
                std::to_string(kMaxWorldSize) + ", got " +
                std::to_string(ranks));
  options.seed = uint64_t(seed);
  options.threads = int(threads);
  options.ranks = int(ranks);
  if (failRank < -1 || failRank >= kMaxWorldSize)
    return fail("--fail-rank must be a rank, got " + std::to_string(failRank));
  options.failRank = int(failRank);
  options.failAtIteration = failAt;
  if (std::string error = checkTrainOptions(options); !error.empty())
    return fail(error);

  if (check)
    return checkPlan(planPath);

  // Under a launcher this process is one rank: it decodes its own
  // template only (and rank 0, which gathers the parameters to save, all).
  Plan plan;
  LoadOptions load;
  int me = launcherRank();
  // Rank 0 decodes every template to gather --save-params, and to check a
  // loaded checkpoint against the whole model.
  if (launcherWorldSize() > 0 && me >= 0 &&
      (me != 0 || (options.saveParams.empty() && options.load.empty() &&
                   options.loadSafetensors.empty())))
    load.ranks = std::vector<uint32_t>{uint32_t(me)};
  if (std::string error = loadPlan(planPath, plan, load); !error.empty())
    return fail(planPath + ": " + error);
  if (reportLoad) {
    std::string which;
    size_t decoded = 0;
    for (size_t t = 0; t < plan.templates.size(); ++t)
      if (plan.templates[t]) {
        which += (which.empty() ? "" : ", ") + std::to_string(t);
        ++decoded;
      }
    std::cout << (me >= 0 ? "rank " + std::to_string(me) : "this process")
              << " decoded " << decoded << " of " << plan.templates.size()
              << " templates (" << which << ")\n";
  }
  return train(plan, options, std::cout, std::cerr);
}
