//===- Trainer.cpp - the training loop ------------------------------------===//
#include "runtime/exec/Trainer.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/data/Dataset.h"
#include "runtime/exec/RankMemory.h"
#include "runtime/io/Safetensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>

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
  if (o.logInterval < 1)
    return "--log-interval must be >= 1";
  return "";
}

namespace {

/// One rank's state and the means to run its programs.
class RankRunner {
public:
  RankRunner(const Plan &plan, const RankPlan &rank)
      : plan(plan), rank(rank), memory(rank) {}

  void runProgram(uint32_t index, const Hyper &hyper) {
    for (const Instruction &instruction : rank.programs[index].instructions) {
      if (!profile) {
        backend.run(instruction, memory, hyper);
        continue;
      }
      auto start = std::chrono::steady_clock::now();
      backend.run(instruction, memory, hyper);
      kernelSeconds[instruction.kernelId] +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                        start)
              .count();
      ++kernelCalls[instruction.kernelId];
    }
  }

  void printProfile(std::ostream &log) const {
    double total = 0;
    for (double seconds : kernelSeconds)
      total += seconds;
    std::vector<int> order;
    for (int id = 0; id < int(KernelId::Count); ++id)
      if (kernelCalls[id])
        order.push_back(id);
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return kernelSeconds[a] > kernelSeconds[b];
    });
    log << "kernel time (all iterations):\n";
    for (int id : order) {
      char line[160];
      std::snprintf(line, sizeof line, "  %-18s %9.1f ms %5.1f%% %8lld calls\n",
                    kernelName(KernelId(id)), kernelSeconds[id] * 1e3,
                    100.0 * kernelSeconds[id] / total,
                    (long long)kernelCalls[id]);
      log << line;
    }
  }

  bool profile = false;
  std::vector<double> kernelSeconds = std::vector<double>(int(KernelId::Count));
  std::vector<int64_t> kernelCalls = std::vector<int64_t>(int(KernelId::Count));

  /// Writes microbatch `mb` of iteration `iteration` (0-based) into the
  /// token and label buffers: sample index as Megatron's sampler orders it.
  void loadBatch(const Dataset &data, int64_t iteration, int64_t mb,
                 int64_t dpRank) {
    int tokens = rank.ioBuffer("tokens"), labels = rank.ioBuffer("labels");
    int64_t b = plan.microBatchSize, s = plan.seqLength;
    auto *t = static_cast<int32_t *>(memory.data(tokens));
    auto *l = static_cast<int32_t *>(memory.data(labels));
    for (int64_t i = 0; i < b; ++i) {
      int64_t index = iteration * plan.globalBatchSize +
                      mb * b * plan.dataParallel + dpRank * b + i;
      data.sample(index, t + i * s, l + i * s);
    }
  }

  float readScalar(const char *name) {
    return *memory.f32(static_cast<uint32_t>(rank.ioBuffer(name)));
  }

  const Plan &plan;
  const RankPlan &rank;
  RankMemory memory;
  cpu::CpuBackend backend;
};

std::string checkIo(const Plan &plan, const RankPlan &rank) {
  for (const char *name : {"tokens", "labels"}) {
    int index = rank.ioBuffer(name);
    if (index < 0)
      return std::string("the plan has no '") + name + "' input";
    const Buffer &b = rank.buffers[index];
    if (b.dtype != DType::I32 ||
        b.elements != int64_t(plan.microBatchSize) * plan.seqLength)
      return std::string("the '") + name + "' input is not " +
             std::to_string(plan.microBatchSize) + " x " +
             std::to_string(plan.seqLength) + " ids";
  }
  for (const char *name : {"loss", "grad_norm"}) {
    int index = rank.ioBuffer(name);
    if (index < 0 || rank.buffers[index].dtype != DType::F32 ||
        rank.buffers[index].elements != 1)
      return std::string("the plan has no f32 '") + name + "' output";
  }
  return "";
}

std::string thousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

void logLine(std::ostream &log, int64_t iteration, int64_t iters,
             int64_t samples, double ms, double tflops, double lr,
             int64_t batch, double loss, double norm, int64_t nans) {
  char line[512];
  std::snprintf(line, sizeof line,
                " iteration %8lld/%8lld | consumed samples: %12lld | elapsed "
                "time per iteration (ms): %.1f | throughput per GPU "
                "(TFLOP/s/GPU): %.1f | learning rate: %.6E | global batch "
                "size: %5lld | lm loss: %.6E | loss scale: 1.0 | grad norm: "
                "%.3f | number of skipped iterations:   0 | number of nan "
                "iterations: %3lld |",
                (long long)iteration, (long long)iters, (long long)samples, ms,
                tflops, lr, (long long)batch, loss, norm, (long long)nans);
  log << line << "\n";
}

} // namespace

int train(const Plan &plan, const TrainOptions &options, std::ostream &log,
          std::ostream &errors) {
  if (plan.ranks.size() != 1) {
    errors << "strata-run: error: this plan has " << plan.ranks.size()
           << " ranks; multi-rank runs are not supported yet\n";
    return 1;
  }
  const RankPlan &rank = plan.ranks[0];
  if (std::string error = checkIo(plan, rank); !error.empty()) {
    errors << "strata-run: error: " << error << "\n";
    return 1;
  }
  std::unique_ptr<Dataset> data;
  if (!options.dataPath.empty()) {
    if (std::string error = makeTextDataset(options.dataPath, plan.vocabSize,
                                            plan.seqLength, data);
        !error.empty()) {
      errors << "strata-run: error: " << error << "\n";
      return 1;
    }
  } else {
    data = makeSyntheticDataset(options.seed, plan.vocabSize, plan.seqLength);
  }
  cpu::setThreads(options.threads);

  RankRunner runner(plan, rank);
  runner.profile = options.profile;
  runner.memory.initializeParameters(options.seed);

  Hyper hyper = options.hyper;
  double lossSum = 0;
  int64_t lossCount = 0, nans = 0;
  double elapsedMs = 0;
  for (int64_t iteration = 1; iteration <= options.trainIters; ++iteration) {
    auto start = std::chrono::steady_clock::now();
    hyper.lr = learningRate(options, iteration);
    hyper.step = iteration;
    double iterationLoss = 0;
    for (const Step &step : rank.schedule) {
      if (step.microbatch >= 0)
        runner.loadBatch(*data, iteration - 1, step.microbatch, 0);
      runner.runProgram(step.program, hyper);
      if (step.microbatch >= 0)
        iterationLoss += runner.readScalar("loss");
    }
    iterationLoss /= double(plan.numMicrobatches);
    double norm = runner.readScalar("grad_norm");
    elapsedMs += std::chrono::duration<double, std::milli>(
                     std::chrono::steady_clock::now() - start)
                     .count();
    if (std::isnan(iterationLoss) || std::isnan(norm))
      ++nans;
    else {
      lossSum += iterationLoss;
      ++lossCount;
    }
    if (iteration % options.logInterval == 0 ||
        iteration == options.trainIters) {
      int64_t interval = iteration % options.logInterval == 0
                             ? options.logInterval
                             : iteration % options.logInterval;
      double ms = elapsedMs / double(interval);
      double tflops = plan.flopsPerIteration / (ms * 1e-3) / 1e12 /
                      double(plan.ranks.size());
      logLine(log, iteration, options.trainIters,
              iteration * int64_t(plan.globalBatchSize), ms, tflops, hyper.lr,
              plan.globalBatchSize,
              lossCount ? lossSum / double(lossCount) : NAN, norm, nans);
      lossSum = 0;
      lossCount = 0;
      elapsedMs = 0;
    }
  }

  if (options.profile)
    runner.printProfile(log);
  if (options.reportMemory) {
    uint64_t planned = rank.persistentBytes + rank.workspaceBytes;
    uint64_t persistent = runner.memory.highWater(Arena::Persistent);
    uint64_t workspace = runner.memory.highWater(Arena::Workspace);
    log << "memory: planned peak " << thousands(planned)
        << " bytes (persistent " << thousands(rank.persistentBytes)
        << " + workspace " << thousands(rank.workspaceBytes)
        << "); measured high-water " << thousands(persistent + workspace)
        << " bytes (persistent " << thousands(persistent) << " + workspace "
        << thousands(workspace) << ")\n";
  }
  if (!options.saveParams.empty()) {
    std::map<std::string, HostTensor> tensors;
    for (const Param &param : rank.params)
      tensors[param.name] = {param.globalShape,
                             runner.memory.parameterValues(param)};
    if (std::string error = writeSafetensors(options.saveParams, tensors);
        !error.empty()) {
      errors << "strata-run: error: " << error << "\n";
      return 1;
    }
  }
  return 0;
}

} // namespace strata::runtime
