//===- Trainer.cpp - the training loop ------------------------------------===//
//
// Each rank runs the plan's schedule for its coordinates; ranks are threads
// of this process (local) or processes under an MPI launcher. The first
// rank of the last pipeline stage, which computes the loss, logs.
// A collective that waits past --comm-timeout ends the run with a message
// naming the rank, the instruction and the peer it waited for.
//
//===----------------------------------------------------------------------===//
#include "runtime/exec/Trainer.h"
#include "runtime/comm/Communicator.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/data/Dataset.h"
#include "runtime/exec/Checkpoint.h"
#include "runtime/exec/RankMemory.h"
#include "runtime/io/Safetensors.h"
#include "runtime/io/Trace.h"
#include "runtime/sim/PipelineSim.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <mutex>
#include <thread>

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
  if (o.ranks < 0)
    return "--ranks must be >= 1";
  if (!(o.commTimeoutSeconds > 0))
    return "--comm-timeout must be positive";
  return "";
}

namespace {

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

/// The rank that logs: the first of the last pipeline stage, where the
/// loss is.
uint32_t loggingRank(const Plan &plan) {
  return (plan.pipelineParallel - 1) * plan.tensorParallel * plan.dataParallel;
}

std::string checkIo(const Plan &plan, const RankPlan &rank) {
  // Pipeline stages read the inputs their chunks use; a whole-step plan
  // reads both.
  bool lastStage = plan.stageOf(rank.rank) + 1 == plan.pipelineParallel;
  for (const char *name : {"tokens", "labels"}) {
    int index = rank.ioBuffer(name);
    if (index < 0 && plan.pipelineSchedule.empty())
      return std::string("the plan has no '") + name + "' input";
    if (index < 0)
      continue;
    const Buffer &b = rank.buffers[index];
    if (b.dtype != DType::I32 ||
        b.elements != int64_t(plan.microBatchSize) * plan.seqLength)
      return std::string("the '") + name + "' input is not " +
             std::to_string(plan.microBatchSize) + " x " +
             std::to_string(plan.seqLength) + " ids";
  }
  for (const char *name : {"loss", "grad_norm"}) {
    int index = rank.ioBuffer(name);
    if (index < 0 && std::string(name) == "loss" && !lastStage)
      continue; // only the last stage computes the loss
    if (index < 0 || rank.buffers[index].dtype != DType::F32 ||
        rank.buffers[index].elements != 1)
      return std::string("the plan has no f32 '") + name + "' output" +
             (std::string(name) == "loss" ? " on the last pipeline stage"
                                          : "");
  }
  return "";
}

MeshShape meshOf(const Plan &plan) {
  MeshShape mesh;
  mesh.sizes[0] = plan.tensorParallel;
  mesh.sizes[1] = plan.dataParallel;
  mesh.sizes[2] = plan.pipelineParallel;
  return mesh;
}

/// One rank: its memory, backend and communicator, and its loop.
class RankRunner {
public:
  RankRunner(const Plan &plan, int rank, Transport &transport,
             const TrainOptions &options)
      : plan(plan), rank(plan.ranks[rank]), memory(this->rank),
        comm(transport, meshOf(plan),
             std::chrono::milliseconds(
                 int64_t(options.commTimeoutSeconds * 1000))),
        options(options) {
    dpRank = (rank / plan.tensorParallel) % plan.dataParallel;
    stage = plan.stageOf(rank);
    tokens = this->rank.ioBuffer("tokens");
    labels = this->rank.ioBuffer("labels");
    int loss = this->rank.ioBuffer("loss");
    // Per program: whether it reads the batch or writes the loss, and
    // where each communication instruction is, for timeout messages.
    for (const Program &program : this->rank.programs) {
      bool reads = false, writes = false;
      std::vector<std::string> &where = locations.emplace_back();
      for (size_t i = 0; i < program.instructions.size(); ++i) {
        const Instruction &instruction = program.instructions[i];
        for (uint32_t in : instruction.inputs)
          reads |= int(in) == tokens || int(in) == labels;
        for (uint32_t out : instruction.outputs)
          writes |= loss >= 0 && out == uint32_t(loss);
        where.push_back(
            isCommunication(KernelId(instruction.kernelId))
                ? "program " + program.name + ", instruction " +
                      std::to_string(i) +
                      (instruction.location.empty()
                           ? ""
                           : ", " + instruction.location)
                : "");
      }
      readsBatch.push_back(reads);
      writesLoss.push_back(writes);
    }
    sampleTokens.resize(plan.seqLength);
    sampleLabels.resize(plan.seqLength);
  }

  /// Microseconds since the run began (the trace's clock).
  double now() const {
    return std::chrono::duration<double, std::micro>(Clock::now() - epoch)
        .count();
  }

  void runProgram(uint32_t index, const Hyper &hyper, int64_t microbatch) {
    const Program &program = rank.programs[index];
    bool tracing = !options.tracePath.empty();
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const Instruction &instruction = program.instructions[i];
      auto start = std::chrono::steady_clock::now();
      double startUs = tracing ? now() : 0;
      if (isCommunication(KernelId(instruction.kernelId)))
        comm.run(instruction, memory, locations[index][i], microbatch);
      else
        backend.run(instruction, memory, hyper);
      if (options.profile) {
        kernelSeconds[instruction.kernelId] +=
            std::chrono::duration<double>(std::chrono::steady_clock::now() -
                                          start)
                .count();
        ++kernelCalls[instruction.kernelId];
      }
      if (tracing) {
        TraceEvent event;
        event.name = instruction.kernel;
        event.startUs = startUs;
        event.durationUs = now() - startUs;
        if (instruction.kernelId == int(KernelId::Recv))
          waitedUs += event.durationUs;
        trace.push_back(std::move(event));
      }
    }
  }

  /// A step's name in traces: a chunk's forward or backward as the
  /// schedule simulator writes it (F3.1: microbatch 3 on chunk 1), M3 a
  /// whole microbatch, then the optimizer.
  static std::string stepName(const Program &program, int64_t microbatch) {
    switch (program.phase) {
    case Phase::Forward:
    case Phase::Backward:
      return sim::describe({program.phase == Phase::Forward
                                ? sim::Phase::Forward
                                : sim::Phase::Backward,
                            program.chunk, int(microbatch)});
    case Phase::Microbatch:
      return "M" + std::to_string(microbatch);
    case Phase::Optimizer:
      return "optimizer";
    }
    return program.name;
  }

  /// Writes microbatch `mb` of iteration `iteration` (0-based) into the
  /// token and label buffers: sample indices as Megatron's sampler orders
  /// them across data-parallel ranks.
  void loadBatch(const Dataset &data, int64_t iteration, int64_t mb) {
    int64_t b = plan.microBatchSize, s = plan.seqLength;
    for (int64_t i = 0; i < b; ++i) {
      int64_t index = iteration * plan.globalBatchSize +
                      mb * b * plan.dataParallel + dpRank * b + i;
      // A pipeline stage may hold only one of the two inputs.
      int32_t *t = tokens >= 0 ? memory.data<int32_t>(tokens) + i * s
                               : sampleTokens.data();
      int32_t *l = labels >= 0 ? memory.data<int32_t>(labels) + i * s
                               : sampleLabels.data();
      data.sample(index, t, l);
    }
  }

  float readScalar(const char *name) {
    return *memory.f32(static_cast<uint32_t>(rank.ioBuffer(name)));
  }

  /// Trains; rank 0 writes the log. Returns false if this rank stopped
  /// early (fault injection).
  bool train(const Dataset &data, std::ostream *log) {
    Hyper hyper = options.hyper;
    double lossSum = 0, elapsedMs = 0;
    int64_t lossCount = 0, nans = 0;
    std::vector<int> dpGroup = comm.group({1});
    bool lastStage = stage + 1 == plan.pipelineParallel;
    bool tracing = !options.tracePath.empty();
    for (int64_t iteration = 1; iteration <= options.trainIters; ++iteration) {
      if (int(rank.rank) == options.failRank &&
          iteration == options.failAtIteration) {
        if (launcherWorldSize() > 0)
          std::raise(SIGKILL);
        return false;
      }
      auto start = std::chrono::steady_clock::now();
      hyper.lr = learningRate(options, iteration);
      hyper.step = iteration;
      float loss = 0;
      for (const Step &step : rank.schedule) {
        // The batch is loaded for every step that reads it: pipeline
        // stages interleave microbatches, and loading is cheap.
        if (step.microbatch >= 0 && readsBatch[step.program])
          loadBatch(data, iteration - 1, step.microbatch);
        memory.setSlot(step.slot);
        double startUs = tracing ? now() : 0;
        size_t first = trace.size();
        waitedUs = 0;
        runProgram(step.program, hyper, step.microbatch);
        if (tracing) {
          const Program &program = rank.programs[step.program];
          TraceEvent event;
          event.step = true;
          event.name = stepName(program, step.microbatch);
          event.phase = phaseName(program.phase);
          event.chunk = program.chunk;
          event.microbatch = step.microbatch;
          event.iteration = iteration;
          event.startUs = startUs;
          event.durationUs = now() - startUs;
          event.waitUs = waitedUs;
          // Before its instructions, as trace viewers like them.
          trace.insert(trace.begin() + first, std::move(event));
        }
        if (writesLoss[step.program])
          loss += readScalar("loss");
      }
      if (lastStage) {
        // Each data-parallel rank averaged its microbatches; average ranks.
        loss /= float(plan.numMicrobatches);
        comm.allReduce(dpGroup, &loss, 1, false,
                       "averaging the loss over dp, iteration " +
                           std::to_string(iteration));
        loss /= float(dpGroup.size());
      }
      float norm = readScalar("grad_norm");
      elapsedMs += std::chrono::duration<double, std::milli>(
                       std::chrono::steady_clock::now() - start)
                       .count();
      if (std::isnan(loss) || std::isnan(norm)) {
        ++nans;
      } else {
        lossSum += loss;
        ++lossCount;
      }
      bool report = iteration % options.logInterval == 0 ||
                    iteration == options.trainIters;
      if (log && report) {
        int64_t interval = iteration % options.logInterval == 0
                               ? options.logInterval
                               : iteration % options.logInterval;
        double ms = elapsedMs / double(interval);
        double tflops = plan.flopsPerIteration / (ms * 1e-3) / 1e12 /
                        double(plan.ranks.size());
        logLine(*log, iteration, options.trainIters,
                iteration * int64_t(plan.globalBatchSize), ms, tflops,
                hyper.lr, plan.globalBatchSize,
                lossCount ? lossSum / double(lossCount) : NAN, norm, nans);
      }
      if (report) {
        lossSum = 0;
        lossCount = 0;
        elapsedMs = 0;
      }
    }
    return true;
  }

  void printReports(std::ostream &log) {
    if (options.profile && rank.rank == loggingRank(plan))
      printProfile(log);
    if (options.reportComm && options.trainIters > 0)
      for (auto &[kind, bytes] : comm.bytesByKind)
        log << "rank " << rank.rank << " sent " << withThousands(bytes /
                                                             options.trainIters)
            << " bytes per iteration in " << kind << "\n";
    if (options.reportMemory) {
      uint64_t planned =
          rank.persistentBytes + rank.workspaceBytes + rank.stashBytes;
      uint64_t persistent = memory.highWater(Arena::Persistent);
      uint64_t workspace = memory.highWater(Arena::Workspace);
      uint64_t stash = rank.stashBytes ? memory.highWater(Arena::Stash) : 0;
      auto stashText = [&](uint64_t bytes) {
        return rank.stashBytes ? " + stash " + withThousands(bytes) : "";
      };
      log << (plan.ranks.size() > 1 ? "rank " + std::to_string(rank.rank) + " "
                                    : std::string())
          << "memory: planned peak " << withThousands(planned)
          << " bytes (persistent " << withThousands(rank.persistentBytes)
          << " + workspace " << withThousands(rank.workspaceBytes)
          << stashText(rank.stashBytes) << "); measured high-water "
          << withThousands(persistent + workspace + stash) << " bytes (persistent "
          << withThousands(persistent) << " + workspace " << withThousands(workspace)
          << stashText(stash) << ")\n";
    }
  }

  /// The rank's track in a trace: its number and coordinates.
  std::string traceLabel() const {
    uint32_t r = rank.rank;
    return "rank " + std::to_string(r) + " (tp " +
           std::to_string(r % plan.tensorParallel) + ", dp " +
           std::to_string(dpRank) + ", pp " + std::to_string(stage) + ")";
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
      std::snprintf(line, sizeof line, "  %-30s %9.1f ms %5.1f%% %8lld calls\n",
                    kernelName(KernelId(id)), kernelSeconds[id] * 1e3,
                    100.0 * kernelSeconds[id] / total,
                    (long long)kernelCalls[id]);
      log << line;
    }
  }

  const Plan &plan;
  const RankPlan &rank;
  RankMemory memory;
  cpu::CpuBackend backend;
  Communicator comm;
  const TrainOptions &options;
  int64_t dpRank = 0;
  uint32_t stage = 0;
  int tokens = -1, labels = -1; // the input buffers, if this rank has them
  std::vector<int32_t> sampleTokens, sampleLabels; // for one it lacks
  // Per program: does it read the batch, write the loss; and per
  // instruction, where it is (for communication timeouts).
  std::vector<bool> readsBatch, writesLoss;
  std::vector<std::vector<std::string>> locations;
  // The trace's clock: the monotonic clock, which processes on one machine
  // share, so that MPI ranks' tracks line up too.
  Clock::time_point epoch{};
  std::vector<TraceEvent> trace;
  double waitedUs = 0; // in the current step's receives
  std::vector<double> kernelSeconds = std::vector<double>(int(KernelId::Count));
  std::vector<int64_t> kernelCalls = std::vector<int64_t>(int(KernelId::Count));
};

std::mutex failureMutex;

/// Reports an error that ends the run: every rank thread of this process,
/// or (under MPI) every process of the job, which the launcher would
/// otherwise leave waiting.
[[noreturn]] void die(std::ostream &errors, const std::string &message,
                      bool mpi = false) {
  std::lock_guard<std::mutex> lock(failureMutex);
  errors << "strata-run: error: " << message << std::endl;
  std::fflush(nullptr);
  if (mpi)
    abortMpi();
  std::_Exit(1);
}

} // namespace

int train(const Plan &plan, const TrainOptions &options, std::ostream &log,
          std::ostream &errors) {
  int world = int(plan.ranks.size());
  for (const RankPlan &rank : plan.ranks)
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

  int launched = launcherWorldSize();
  if (launched > 0) {
    // One process per rank.
    if (launched != world) {
      errors << "strata-run: error: the plan is for " << world
             << " ranks; the launcher started " << launched << "\n";
      return 1;
    }
    std::unique_ptr<Transport> transport = makeMpiTransport();
    int me = transport->rank();
    cpu::setThreads(options.threads);
    RankRunner runner(plan, me, *transport, options);
    runner.memory.initializeParameters(options.seed);
    try {
      runner.train(*data, uint32_t(me) == loggingRank(plan) ? &log : nullptr);
      runner.comm.flush();
      runner.printReports(log);
      if (!options.tracePath.empty()) {
        // Rank 0 writes every rank's events, gathered.
        auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(
                                           options.commTimeoutSeconds * 1000));
        std::string mine = traceLines(me, runner.traceLabel(), runner.trace);
        if (me == 0) {
          std::vector<std::string> all = {mine};
          for (int r = 1; r < world; ++r) {
            uint64_t size = 0;
            transport->recv(r, &size, 8, 8, deadline, "gathering the trace");
            std::string lines(size, '\0');
            transport->recv(r, lines.data(), size, 8, deadline,
                            "gathering the trace");
            all.push_back(std::move(lines));
          }
          if (std::string error = writeTrace(options.tracePath, all);
              !error.empty())
            die(errors, error, /*mpi=*/true);
        } else {
          uint64_t size = mine.size();
          transport->send(0, &size, 8, 8, deadline, "gathering the trace");
          transport->send(0, mine.data(), size, 8, deadline,
                          "gathering the trace");
        }
      }
      if (!options.saveParams.empty()) {
        auto deadline = Clock::now() + std::chrono::milliseconds(int64_t(
                                           options.commTimeoutSeconds * 1000));
        std::vector<ParamPiece> mine = piecesOf(runner.memory);
        if (me == 0) {
          std::vector<std::vector<ParamPiece>> all(world);
          all[0] = std::move(mine);
          for (int r = 1; r < world; ++r) {
            for (const Param &param : plan.ranks[r].params) {
              ParamPiece piece;
              piece.values.resize(
                  plan.ranks[r].buffers[param.value].elements);
              transport->recv(r, piece.values.data(),
                              piece.values.size() * 4, 7, deadline,
                              "gathering parameters");
              uint64_t count = 0;
              transport->recv(r, &count, 8, 7, deadline,
                              "gathering parameters");
              piece.exact.resize(count);
              transport->recv(r, piece.exact.data(), count * 16, 7, deadline,
                              "gathering parameters");
              all[r].push_back(std::move(piece));
            }
          }
          if (std::string error =
                  writeSafetensors(options.saveParams, assemble(plan, all));
              !error.empty())
            die(errors, error);
        } else {
          for (const ParamPiece &piece : mine) {
            uint64_t count = piece.exact.size();
            transport->send(0, piece.values.data(), piece.values.size() * 4,
                            7, deadline, "gathering parameters");
            transport->send(0, &count, 8, 7, deadline,
                            "gathering parameters");
            transport->send(0, piece.exact.data(), count * 16, 7, deadline,
                            "gathering parameters");
          }
        }
      }
    } catch (const CommTimeout &timeout) {
      die(errors, timeout.what(), /*mpi=*/true);
    }
    finishMpi();
    return 0;
  }

  // Ranks as threads of this process.
  if (options.ranks != 0 && options.ranks != world) {
    errors << "strata-run: error: the plan is for " << world
           << " ranks, --ranks " << options.ranks << " asks for "
           << options.ranks << "\n";
    return 1;
  }
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  int threadsPerRank =
      options.threads > 0 ? options.threads : std::max(1, cores / world);
  auto hub = makeLocalHub(world);
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<RankRunner>> runners;
  for (int r = 0; r < world; ++r) {
    transports.push_back(makeLocalTransport(hub, r));
    runners.push_back(
        std::make_unique<RankRunner>(plan, r, *transports.back(), options));
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      cpu::setThreads(threadsPerRank);
      RankRunner &runner = *runners[r];
      runner.memory.initializeParameters(options.seed);
      try {
        runner.train(*data, uint32_t(r) == loggingRank(plan) ? &log : nullptr);
      } catch (const CommTimeout &timeout) {
        die(errors, timeout.what());
      }
    });
  }
  for (std::thread &thread : threads)
    thread.join();
  for (auto &runner : runners)
    runner->printReports(log);
  if (!options.tracePath.empty()) {
    std::vector<std::string> all;
    for (int r = 0; r < world; ++r)
      all.push_back(
          traceLines(r, runners[r]->traceLabel(), runners[r]->trace));
    if (std::string error = writeTrace(options.tracePath, all);
        !error.empty()) {
      errors << "strata-run: error: " << error << "\n";
      return 1;
    }
  }
  if (!options.saveParams.empty()) {
    std::vector<std::vector<ParamPiece>> all;
    for (auto &runner : runners)
      all.push_back(piecesOf(runner->memory));
    if (std::string error =
            writeSafetensors(options.saveParams, assemble(plan, all));
        !error.empty()) {
      errors << "strata-run: error: " << error << "\n";
      return 1;
    }
  }
  return 0;
}

} // namespace strata::runtime
