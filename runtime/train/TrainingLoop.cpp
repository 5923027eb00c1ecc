//===- TrainingLoop.cpp - the training loop -------------------------------===//
#include "runtime/train/TrainingLoop.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"
#include "runtime/comm/Transport.h"
#include "runtime/data/GptDataset.h"
#include "runtime/io/HuggingFace.h"
#include "runtime/plan/ContextPositions.h"
#include "runtime/plan/Dropout.h"
#include "runtime/plan/IoNames.h"
#include "runtime/train/CheckpointStore.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <signal.h>
#include <sys/stat.h>

namespace strata::runtime {

double learningRate(const TrainOptions &o, int64_t iteration) {
  double step = double(iteration - 1);
  double warmup = double(o.lrWarmupIters);
  double decay = double(o.lrDecayIters > 0 ? o.lrDecayIters : o.trainIters);
  if (warmup > 0 && step <= warmup)
    return o.lr * step / warmup;
  if (o.lrDecayStyle == "constant")
    return o.lr;
  if (step > decay)
    return o.minLr;
  double ratio = decay > warmup ? (step - warmup) / (decay - warmup) : 1.0;
  double coefficient = o.lrDecayStyle == "linear"
                           ? 1.0 - ratio
                           : 0.5 * (std::cos(M_PI * ratio) + 1.0);
  return o.minLr + coefficient * (o.lr - o.minLr);
}

/// The longest --comm-timeout, in seconds.
constexpr double kMaxCommTimeout = 30 * 24 * 3600.0;

std::string checkTrainOptions(const TrainOptions &o) {
  if (o.trainIters < 0)
    return "--train-iters must be >= 0";
  if (o.lrDecayStyle != "constant" && o.lrDecayStyle != "linear" &&
      o.lrDecayStyle != "cosine")
    return "--lr-decay-style must be constant, linear or cosine, got '" +
           o.lrDecayStyle + "'";
  if (!(o.lr >= 0) || !(o.minLr >= 0) || o.minLr > o.lr)
    return "--lr and --min-lr must satisfy 0 <= min-lr <= lr";
  if (o.lrWarmupIters < 0 || o.lrDecayIters < 0)
    return "--lr-warmup-iters and --lr-decay-iters must be >= 0";
  const Hyper &h = o.hyper;
  if (!(h.beta1 >= 0 && h.beta1 < 1) || !(h.beta2 >= 0 && h.beta2 < 1))
    return "--adam-beta1 and --adam-beta2 must be in [0, 1)";
  if (!(h.eps > 0))
    return "--adam-eps must be positive";
  if (!(h.weightDecay >= 0))
    return "--weight-decay must be >= 0";
  if (!(h.clipGrad >= 0))
    return "--clip-grad must be >= 0 (0: no clipping)";
  if (o.exitOnNan < 0)
    return "--exit-on-nan must be >= 0 (0: never)";
  if (o.saveInterval < 0 || o.exitInterval < 0)
    return "--save-interval and --exit-interval must be >= 0";
  if (o.evalInterval < 0 || o.evalIters < 0)
    return "--eval-interval and --eval-iters must be >= 0";
  if (o.saveInterval > 0 && o.save.empty())
    return "--save-interval needs --save DIR";
  for (const std::string *dir : {&o.save, &o.load}) {
    struct stat st;
    if (!dir->empty() && ::stat(dir->c_str(), &st) == 0 && !S_ISDIR(st.st_mode))
      return "'" + *dir + "' is not a directory (--save and --load take one)";
  }
  if (!o.load.empty() && !o.loadSafetensors.empty())
    return "--load and --load-safetensors both start the run: give one";
  NameScheme scheme;
  if (std::string error = parseNameScheme(o.names, scheme); !error.empty())
    return error;
  if (o.names != "strata" && o.loadSafetensors.empty())
    return "--names says how --load-safetensors' file names the weights; "
           "give that file";
  if (o.logInterval < 1)
    return "--log-interval must be >= 1";
  if (o.ranks < 0)
    return "--ranks must be >= 1";
  // Past a month the deadline overflows the clock and a healthy run
  // timed out at once.
  if (!(o.commTimeoutSeconds > 0) || o.commTimeoutSeconds > kMaxCommTimeout)
    return "--comm-timeout must be positive and at most " +
           std::to_string(int64_t(kMaxCommTimeout)) + " seconds (30 days)";
  if (o.backend != "cpu" && o.backend != "cuda" && o.backend != "simt")
    return "--backend must be cpu, cuda, simt or sim, got '" + o.backend + "'";
  if (o.localCollectives && (o.stagedCollectives || o.backend == "cuda"))
    return "--local-collectives runs on the CPU backend (or simt), without "
           "--staged-collectives";
  std::array<double, 3> split;
  if (std::string error = parseSplit(o.split, split); !error.empty())
    return error;
  // Files the run writes at its end: refused now, not after the run.
  for (const std::string *path : {&o.saveParams, &o.tracePath})
    if (!path->empty())
      if (std::string error = checkWritable(*path); !error.empty())
        return error;
  return "";
}

namespace {

/// The signal that asked this process to stop, or 0.
std::atomic<int> stopSignal{0};

extern "C" void onStopSignal(int signal) { stopSignal.store(signal); }

} // namespace

void installStopSignals() {
  struct sigaction action = {};
  action.sa_handler = onStopSignal;
  sigemptyset(&action.sa_mask);
  // One-shot: a second Ctrl-C ends the process at once.
  action.sa_flags = SA_RESETHAND | SA_RESTART;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
}

int TrainingLoop::stopSignalEverywhere(int64_t iteration) {
  // Summed over every rank: positive when any saw a signal, and every rank
  // reads it after the same iteration, whenever each was signalled.
  float seen = stopSignal.load() ? 1.0f : 0.0f;
  executor.communication().hostAllReduce(
      everyone, &seen, 1,
      "agreeing whether to stop after iteration " + std::to_string(iteration));
  if (seen <= 0)
    return 0;
  int mine = stopSignal.load();
  return mine ? mine : -1; // -1: another rank's
}

uint32_t loggingRank(const Plan &plan) {
  return plan.firstRankOf(plan.lossStage());
}

namespace {

void logLine(std::ostream &log, int64_t iteration, int64_t iters,
             int64_t samples, double ms, double tflops, double lr,
             int64_t batch, double loss, double norm, int64_t skipped,
             int64_t nans) {
  // Megatron prints the throughput to one decimal; a CPU run's is far
  // below 0.1, so small figures keep three significant digits.
  char throughput[32];
  std::snprintf(throughput, sizeof throughput, tflops >= 1 ? "%.1f" : "%.3g",
                tflops);
  char line[512];
  std::snprintf(line, sizeof line,
                " iteration %8lld/%8lld | consumed samples: %12lld | elapsed "
                "time per iteration (ms): %.1f | throughput per GPU "
                "(TFLOP/s/GPU): %s | learning rate: %.6E | global batch "
                "size: %5lld | lm loss: %.6E | loss scale: 1.0 | grad norm: "
                "%.3f | number of skipped iterations: %3lld | number of nan "
                "iterations: %3lld |",
                (long long)iteration, (long long)iters, (long long)samples, ms,
                throughput, lr, (long long)batch, loss, norm,
                (long long)skipped, (long long)nans);
  log << line << "\n";
}

} // namespace

TrainingLoop::TrainingLoop(Executor &executor, const TrainOptions &options,
                           const Dataset &data)
    : executor(executor), options(options), data(data), plan(executor.plan()),
      rank(executor.rankPlan()) {
  coords = plan.coordinates(rank.rank);
  // The loss is each rank's mean over its tokens: the ranks that see other
  // samples (dp) or other chunks of the same ones (cp) average theirs.
  for (uint32_t d = 0; d < plan.dataParallel; ++d)
    for (uint32_t c = 0; c < plan.contextParallel; ++c) {
      mesh::Coordinates at = coords;
      at[mesh::kData] = d;
      at[mesh::kContext] = c;
      lossGroup.push_back(int(plan.rankAt(at)));
    }
  for (uint32_t r = 0; r < plan.world(); ++r)
    everyone.push_back(int(r));
  holdsLoss = coords[mesh::kPipeline] == plan.lossStage();
  tokens.resize(size_t(plan.microBatchSize) * plan.localSeqLength());
  labels.resize(tokens.size());
  if (plan.contextParallel > 1) {
    wholeTokens.resize(size_t(plan.seqLength));
    wholeLabels.resize(wholeTokens.size());
  }
  dropoutKeys.resize(size_t(plan.microBatchSize));
}

void TrainingLoop::loadBatch(const Dataset &from, int64_t first, int64_t mb,
                             bool training) {
  // Sample indices as Megatron's sampler orders them across data-parallel
  // ranks; a sample's dropout key follows from its index, so that every
  // layout drops the same elements of it (none when evaluating).
  // A pipeline stage may hold only some of the inputs: a middle stage that
  // drops out needs the keys, not the samples.
  bool readsSamples =
      executor.io(io_names::kTokens) || executor.io(io_names::kLabels);
  int64_t b = plan.microBatchSize, local = plan.localSeqLength();
  for (int64_t i = 0; i < b; ++i) {
    int64_t index =
        first + mb * b * plan.dataParallel + coords[mesh::kData] * b + i;
    if (readsSamples) {
      int32_t *tokensAt = tokens.data() + i * local;
      int32_t *labelsAt = labels.data() + i * local;
      if (plan.contextParallel == 1) {
        from.sample(index, tokensAt, labelsAt);
      } else {
        // Context parallelism: the rank's two chunks of the sample, each
        // from its first row's place.
        from.sample(index, wholeTokens.data(), wholeLabels.data());
        for (int64_t row = 0; row < local; row += local / 2) {
          int64_t place = contextPosition(row, local, plan.contextParallel,
                                          coords[mesh::kContext]);
          std::copy_n(wholeTokens.data() + place, local / 2, tokensAt + row);
          std::copy_n(wholeLabels.data() + place, local / 2, labelsAt + row);
        }
      }
    }
    dropoutKeys[size_t(i)] = training ? dropoutKey(options.seed, index) : -1;
  }
  Backend &device = executor.device();
  for (auto [name, host] : {std::pair{io_names::kTokens, &tokens},
                            std::pair{io_names::kLabels, &labels},
                            std::pair{kDropoutKeys, &dropoutKeys}})
    if (void *target = executor.io(name))
      device.copyIn(Stream::Compute, target, host->data(), host->size() * 4);
}

float TrainingLoop::averageLoss(float sum, const std::string &what) {
  // Each rank averages its microbatches; then the ranks (equal shares of
  // tokens, so the mean of means is the mean).
  float loss = sum / float(plan.numMicrobatches);
  executor.communication().hostAllReduce(
      lossGroup, &loss, 1, "averaging the loss over dp and cp, " + what);
  return loss / float(lossGroup.size());
}

bool TrainingLoop::run(std::ostream *log) {
  Hyper hyper = options.hyper;
  double lossSum = 0, elapsedMs = 0;
  executor.poisonGradientsAt(options.failGradAtIteration);
  // Counted per log interval, as Megatron's log line counts them.
  int64_t lossCount = 0, nans = 0, skipped = 0, skippedInARow = 0;
  for (int64_t iteration = firstIteration; iteration <= options.trainIters;
       ++iteration) {
    if (int(rank.rank) == options.failRank &&
        iteration == options.failAtIteration) {
      if (launcherWorldSize() > 0)
        std::raise(SIGKILL);
      return false;
    }
    auto start = std::chrono::steady_clock::now();
    // The updates applied so far: a skipped one advances neither Adam's
    // step nor the schedule (Megatron steps its scheduler only when the
    // update succeeded).
    int64_t updates = iteration - skippedIterations;
    hyper.lr = learningRate(options, updates);
    hyper.step = updates;
    float loss = executor.runIteration(iteration, hyper, [&](int64_t mb) {
      loadBatch(data, (iteration - 1) * plan.globalBatchSize, mb,
                /*training=*/true);
    });
    if (holdsLoss)
      loss = averageLoss(loss, "iteration " + std::to_string(iteration));
    float norm = executor.gradNorm();
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
    elapsedMs += seconds * 1e3;
    iterationSeconds += seconds;
    ++iterationsRun;
    // The device skipped the update when the global norm was not finite:
    // every rank reads the same norm, so every rank counts it alike.
    bool skip = !std::isfinite(norm);
    skippedIterations += skip;
    skipped += skip;
    skippedInARow = skip ? skippedInARow + 1 : 0;
    if (!std::isfinite(loss) || skip) {
      ++nans;
    } else {
      lossSum += loss;
      ++lossCount;
    }
    bool report =
        iteration % options.logInterval == 0 || iteration == options.trainIters;
    if (log && report) {
      int64_t interval = iteration % options.logInterval == 0
                             ? options.logInterval
                             : iteration % options.logInterval;
      double ms = elapsedMs / double(interval);
      double tflops =
          plan.flopsPerIteration / (ms * 1e-3) / 1e12 / double(plan.world());
      logLine(*log, iteration, options.trainIters,
              iteration * int64_t(plan.globalBatchSize), ms, tflops, hyper.lr,
              plan.globalBatchSize,
              lossCount ? lossSum / double(lossCount) : NAN, norm, skipped,
              nans);
    }
    if (report) {
      lossSum = 0;
      lossCount = 0;
      elapsedMs = 0;
      skipped = 0;
      nans = 0;
    }
    if (options.exitOnNan > 0 && skippedInARow >= options.exitOnNan)
      throw std::runtime_error(
          "iteration " + std::to_string(iteration) +
          ": the gradient norm was " + (std::isnan(norm) ? "nan" : "inf") +
          " in " + std::to_string(skippedInARow) +
          " iteration(s) in a row, their updates skipped; --exit-on-nan " +
          std::to_string(options.exitOnNan) + " stops the run here");
    // Megatron's order: evaluate, save, exit. The valid split goes on where
    // the last evaluation stopped.
    if (valid && options.evalInterval > 0 &&
        iteration % options.evalInterval == 0)
      evaluate(*valid,
               (iteration / options.evalInterval - 1) * options.evalIters *
                   plan.globalBatchSize,
               "iteration " + std::to_string(iteration), iteration, log);
    bool due =
        options.saveInterval > 0 && iteration % options.saveInterval == 0;
    bool exit =
        options.exitInterval > 0 && iteration % options.exitInterval == 0;
    // A scheduler's SIGTERM (or a SIGINT) on any rank: every rank saves
    // this iteration and stops, having agreed (Megatron's exit signal
    // handler). Only with --save: without it the signal ends the run.
    int signal = options.save.empty() ? 0 : stopSignalEverywhere(iteration);
    if (!options.save.empty() &&
        (due || exit || signal || iteration == options.trainIters)) {
      executor.device().synchronize();
      auto began = std::chrono::steady_clock::now();
      if (std::string error = saveCheckpoint(executor, options.save, iteration,
                                             options.seed, skippedIterations);
          !error.empty())
        throw std::runtime_error(error);
      if (log)
        *log << "saved checkpoint of iteration " << iteration << " to "
             << checkpointDirectory(options.save, iteration) << " in "
             << int64_t(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - began)
                            .count() *
                        1e3)
             << " ms\n";
    }
    if (signal) {
      if (log)
        *log << "exiting program at iteration " << iteration
             << (signal == SIGINT    ? " after receiving SIGINT"
                 : signal == SIGTERM ? " after receiving SIGTERM"
                                     : " after another rank received a stop "
                                       "signal")
             << ": its checkpoint is saved; resume with --load " << options.save
             << "\n";
      executor.device().synchronize();
      return true;
    }
    // Megatron exits here, before the evaluations after training, even at
    // the last iteration.
    if (exit) {
      if (log)
        *log << "exiting program at iteration " << iteration << "\n";
      executor.device().synchronize();
      return true;
    }
  }
  // After training, the valid split past the periodic evaluations', and
  // the test split from its start.
  int64_t last = options.trainIters;
  if (valid)
    evaluate(*valid,
             (options.evalInterval > 0 ? last / options.evalInterval : 0) *
                 options.evalIters * plan.globalBatchSize,
             "iteration " + std::to_string(last) + " on validation set", last,
             log);
  if (test)
    evaluate(*test, 0, "iteration " + std::to_string(last) + " on test set",
             last, log);
  executor.device().synchronize();
  return true;
}

void TrainingLoop::evaluate(const Dataset &from, int64_t first,
                            const std::string &what, int64_t iteration,
                            std::ostream *log) {
  double total = 0;
  Collectives &comm = executor.communication();
  // Training's communication (a gather after the update overlaps what
  // follows) finished first, so that what is counted next is the
  // evaluation's.
  executor.device().synchronize();
  comm.flush();
  auto bytesBefore = comm.bytesByKind();
  double commBefore = executor.device().communicationSeconds(),
         exposedBefore = executor.exposedCommunicationSeconds();
  for (int64_t k = 0; k < options.evalIters; ++k) {
    int64_t start = first + k * int64_t(plan.globalBatchSize);
    float loss = executor.evaluate(iteration, [&](int64_t mb) {
      loadBatch(from, start, mb, /*training=*/false);
    });
    if (holdsLoss)
      total += averageLoss(loss, "the " + what + " evaluation");
  }
  for (auto &[kind, bytes] : comm.bytesByKind())
    evaluationBytes[kind] += bytes - bytesBefore[kind];
  evaluationCommSeconds +=
      executor.device().communicationSeconds() - commBefore;
  evaluationExposedSeconds +=
      executor.exposedCommunicationSeconds() - exposedBefore;
  if (!log || options.evalIters < 1)
    return;
  // Every batch has as many tokens: the token-weighted mean Megatron
  // takes is the mean of the batches' means.
  double loss = total / double(options.evalIters);
  char line[256];
  // Megatron says "validation loss" of the test split too.
  std::snprintf(line, sizeof line,
                " validation loss at %s | lm loss value: %.6E | lm loss "
                "PPL: %.6E | ",
                what.c_str(), loss, std::exp(std::min(20.0, loss)));
  std::string rule(std::strlen(line) + 1, '-');
  *log << rule << "\n" << line << "\n" << rule << "\n";
}

std::string TrainingLoop::traceLabel() const {
  uint32_t r = rank.rank;
  return "rank " + std::to_string(r) + " (tp " +
         std::to_string(coords[mesh::kTensor]) +
         (plan.contextParallel > 1
              ? ", cp " + std::to_string(coords[mesh::kContext])
              : std::string()) +
         ", dp " + std::to_string(coords[mesh::kData]) + ", pp " +
         std::to_string(coords[mesh::kPipeline]) + ")";
}

std::string TrainingLoop::profileJson() const {
  std::vector<const Executor::ProfileEntry *> order;
  std::map<std::string, Executor::ProfileEntry> detail =
      executor.profileDetail();
  for (const auto &[key, entry] : detail)
    order.push_back(&entry);
  std::sort(order.begin(), order.end(), [](const auto *a, const auto *b) {
    return a->seconds > b->seconds;
  });
  std::string text = "{\n  \"clock\": ";
  text += executor.profilesDevice() ? "\"device\"" : "\"host\"";
  text += ",\n  \"backend\": " + jsonString(options.backend) +
          ",\n  \"rank\": " + std::to_string(rank.rank) +
          ",\n  \"iteration\": " +
          std::to_string(firstIteration + iterationsRun - 1) +
          ",\n  \"entries\": [";
  for (size_t i = 0; i < order.size(); ++i) {
    const auto &e = *order[i];
    char numbers[192];
    std::snprintf(numbers, sizeof numbers,
                  "\"calls\": %lld, \"seconds\": %.9g, \"bytes\": %.17g, "
                  "\"flops\": %.17g",
                  (long long)e.calls, e.seconds, e.cost.bytes, e.cost.flops);
    text +=
        std::string(i ? "," : "") +
        "\n    {\"name\": " + jsonString(e.cost.name) +
        ", \"shape\": " + jsonString(e.cost.shape) +
        (e.library.empty() ? "" : ", \"library\": " + jsonString(e.library)) +
        ", " + numbers + "}";
  }
  return text + "\n  ]\n}\n";
}

std::string TrainingLoop::printReports(std::ostream &log) {
  std::string who = plan.world() > 1 ? "rank " + std::to_string(rank.rank) + " "
                                     : std::string();
  std::string error;
  if (!options.profileJson.empty() && rank.rank == loggingRank(plan))
    error = writeFileWhole(options.profileJson, profileJson());
  if (options.profile && rank.rank == loggingRank(plan)) {
    auto times = executor.profile();
    double total = 0;
    for (auto &[name, entry] : times)
      total += entry.first;
    std::vector<std::pair<std::string, std::pair<double, int64_t>>> order(
        times.begin(), times.end());
    std::sort(order.begin(), order.end(), [](const auto &a, const auto &b) {
      return a.second.first > b.second.first;
    });
    log << "kernel time (all iterations, compute stream, "
        << (executor.profilesDevice() ? "the device's clock"
                                      : "the host's clock")
        << "):\n";
    for (auto &[name, entry] : order) {
      char line[160];
      std::snprintf(line, sizeof line, "  %-30s %9.1f ms %5.1f%% %8lld calls\n",
                    name.c_str(), entry.first * 1e3,
                    100.0 * entry.first / total, (long long)entry.second);
      log << line;
    }
  }
  if (options.reportComm && iterationsRun > 0) {
    for (auto &[kind, bytes] : executor.communication().bytesByKind())
      log << "rank " << rank.rank << " sent "
          << withThousands((bytes - evaluationBytes[kind]) /
                           uint64_t(iterationsRun))
          << " bytes per iteration in " << kind << "\n";
    char line[256];
    double perIteration = 1e3 / double(iterationsRun);
    std::snprintf(
        line, sizeof line,
        "rank %u communication per iteration: %.2f ms on the communication "
        "stream, %.2f ms exposed (the compute stream in collectives or "
        "waiting for the communication or transfer stream) of %.2f ms\n",
        rank.rank,
        (executor.device().communicationSeconds() - evaluationCommSeconds) *
            perIteration,
        (executor.exposedCommunicationSeconds() - evaluationExposedSeconds) *
            perIteration,
        iterationSeconds * perIteration);
    log << line;
  }
  if (options.reportGraphs) {
    auto [recorded, replays] = executor.graphCounts();
    log << who << "graphs: " << recorded << " recorded, " << replays
        << " replays\n";
  }
  if (options.reportMemory) {
    Backend &device = executor.device();
    auto stashText = [&](uint64_t bytes) {
      return rank.stashBytes ? " + stash " + withThousands(bytes) : "";
    };
    log << who << "memory: planned peak " << withThousands(rank.peakBytes())
        << " bytes (persistent " << withThousands(rank.persistentBytes)
        << " + workspace " << withThousands(rank.workspaceBytes)
        << stashText(rank.stashBytes) << "); ";
    if (std::string beyond = device.memoryBeyondArenas(); !beyond.empty())
      log << "beyond the plan's arenas: " << beyond << "; ";
    // A GPU's arenas are not marked: there is no high-water mark to read.
    if (device.highWater(Arena::Persistent) < 0) {
      log << "measured high-water: not known on this backend\n";
    } else {
      uint64_t persistent = uint64_t(device.highWater(Arena::Persistent));
      uint64_t workspace = uint64_t(device.highWater(Arena::Workspace));
      uint64_t stash =
          rank.stashBytes ? uint64_t(device.highWater(Arena::Stash)) : 0;
      log << "measured high-water "
          << withThousands(persistent + workspace + stash)
          << " bytes (persistent " << withThousands(persistent)
          << " + workspace " << withThousands(workspace) << stashText(stash)
          << ")\n";
    }
  }
  return error.empty() ? "" : "--profile-json: " + error;
}

} // namespace strata::runtime
