//===- StartRanks.cpp - a plan's ranks, as threads or processes -----------===//
//
// A collective that waits past --comm-timeout ends the run with a message
// naming the rank, the instruction and the peer it waited for.
//
//===----------------------------------------------------------------------===//
#include "runtime/train/StartRanks.h"
#include "runtime/base/WholeFile.h"
#include "runtime/comm/LocalCollectives.h"
#include "runtime/comm/RingCollectives.h"
#include "runtime/comm/StagedCollectives.h"
#include "runtime/comm/Transport.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/DeviceCollectives.h"
#include "runtime/cuda/NcclCollectives.h"
#include "runtime/data/GptDataset.h"
#include "runtime/device/Trace.h"
#include "runtime/exec/Parameters.h"
#include "runtime/io/HuggingFace.h"
#include "runtime/io/Safetensors.h"
#include "runtime/simt/SimtBackend.h"
#include "runtime/train/CheckpointStore.h"
#include "runtime/train/ParameterGather.h"

#include <array>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

#include <sys/stat.h>

namespace strata::runtime {
namespace {

/// The most ranks one process runs as threads (trainAsThreads).
constexpr int kMaxLocalRanks = 512;

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

/// Reports an error that ends the run before any rank has started.
int refuse(std::ostream &errors, const std::string &message) {
  errors << "strata-run: error: " << message << "\n";
  return 1;
}

std::chrono::milliseconds commTimeout(const TrainOptions &options) {
  return std::chrono::milliseconds(int64_t(options.commTimeoutSeconds * 1000));
}

/// One rank and what it runs on: its backend (a CPU's arenas and streams,
/// or a GPU's), its collectives over its transport, the executor and the
/// training loop. The backend goes first: its threads stop before the
/// collectives its queued work refers to go.
struct LocalRank {
  LocalRank(std::unique_ptr<Backend> device,
            std::unique_ptr<Collectives> communication, const Plan &plan,
            uint32_t rank, const TrainOptions &options, const Dataset &data)
      : backend(std::move(device)), collectives(std::move(communication)),
        executor(plan, rank, *backend, *collectives),
        loop(executor, options, data) {}
  ~LocalRank() { backend.reset(); }

  std::unique_ptr<Backend> backend;
  std::unique_ptr<Collectives> collectives;
  Executor executor;
  TrainingLoop loop;
};

/// Rank `rank` on a CPU backend, or on `gpu` when there is one, made and
/// its plan loaded (arenas, events, modules, groups); "" or why not. With
/// `meetings`, ranks as threads meet for their collectives (on a GPU the
/// device-side communicator, on the CPU --local-collectives); else a GPU's
/// collectives, and the CPU's with --staged-collectives, are staged through
/// the host, and the CPU's rings run on its streams.
std::string makeRank(const Plan &plan, uint32_t rank, Transport &transport,
                     const TrainOptions &options, const Dataset &data,
                     int threads, const cuda::Gpu *gpu,
                     std::shared_ptr<CollectiveHub> meetings,
                     std::unique_ptr<LocalRank> &made) {
  std::unique_ptr<Backend> device;
  std::unique_ptr<Collectives> collectives;
  if (gpu) {
    cuda::AttentionBackend attention = cuda::AttentionBackend::Strata;
    if (!cuda::parseAttentionBackend(options.attentionBackend, attention))
      return "--attention-backend takes strata, auto or cudnn, not '" +
             options.attentionBackend + "'";
    auto gpuDevice =
        std::make_unique<cuda::CudaBackend>(gpu->context, attention);
    if (std::string error = gpuDevice->create(); !error.empty())
      return error;
    if (meetings)
      collectives = std::make_unique<cuda::DeviceCollectives>(
          std::move(meetings), transport, *gpuDevice, commTimeout(options));
    else if (!options.stagedCollectives &&
             launcherLocalSize() <= gpu->devices) // a GPU per process
      collectives = std::make_unique<cuda::NcclCollectives>(
          transport, *gpuDevice, commTimeout(options));
    device = std::move(gpuDevice);
  } else {
    // --backend simt: the CPU's, running a cuda plan's generated kernels.
    std::unique_ptr<cpu::CpuBackend> cpuDevice =
        options.backend == "simt"
            ? std::make_unique<simt::SimtBackend>(options.asyncCompute, threads)
            : std::make_unique<cpu::CpuBackend>(options.asyncCompute, threads);
    cpu::CpuBackend *streams = cpuDevice.get();
    SubmitToStream submit = [streams](Stream stream, const std::string &name,
                                      std::function<void()> work) {
      streams->submit(stream, name, std::move(work));
    };
    if (meetings)
      collectives = std::make_unique<LocalCollectives>(
          std::move(meetings), transport, submit, commTimeout(options));
    else if (!options.stagedCollectives)
      collectives = std::make_unique<RingCollectives>(transport, submit,
                                                      commTimeout(options));
    device = std::move(cpuDevice);
  }
  if (!collectives)
    collectives = std::make_unique<StagedCollectives>(transport, *device,
                                                      commTimeout(options));
  made = std::make_unique<LocalRank>(std::move(device), std::move(collectives),
                                     plan, rank, options, data);
  if (options.graphs > 0 || (options.graphs < 0 && gpu))
    made->executor.enableGraphs();
  return made->executor.load();
}

/// makeRank, with the rank named in its error, and a device call that
/// threw (a GPU's) an error too rather than an uncaught exception.
std::string loadRank(const Plan &plan, uint32_t rank, Transport &transport,
                     const TrainOptions &options, const Dataset &data,
                     int threads, const cuda::Gpu *gpu,
                     std::shared_ptr<CollectiveHub> meetings,
                     std::unique_ptr<LocalRank> &made) {
  std::string error;
  try {
    error = makeRank(plan, rank, transport, options, data, threads, gpu,
                     std::move(meetings), made);
  } catch (const std::exception &failure) {
    error = failure.what();
  }
  return error.empty() ? "" : "rank " + std::to_string(rank) + ": " + error;
}

/// The memory the ranks of this process need, against what there is (the
/// host's, or the GPU's): a plan too large for the machine is an error
/// before anything is allocated.
std::string checkMemory(const Plan &plan, uint32_t first, uint32_t count,
                        const cuda::Gpu *gpu) {
  if (gpu)
    return cuda::checkDeviceMemory(plan, first, count,
                                   cuda::CudaBackend::kExtraBytes, gpu->info);
  uint64_t needed = 0;
  for (uint32_t r = first; r < first + count; ++r)
    needed += plan.ranks.at(r).peakBytes();
  uint64_t available = cpu::availableHostBytes();
  if (available == 0 || needed <= available)
    return "";
  return std::string(count > 1 ? "the " + std::to_string(count) +
                                     " ranks of this process need "
                               : "rank " + std::to_string(first) + " needs ") +
         humanBytes(needed) + " (" + withThousands(needed) +
         " bytes: persistent, workspace and stash arenas); " +
         humanBytes(available) + " of memory are available";
}

std::string traceOf(LocalRank &rank) {
  return traceLines(int(rank.executor.rankPlan().rank), rank.loop.traceLabel(),
                    rank.executor.takeTrace(),
                    rank.backend->takeCommunicationTrace());
}

/// Under MPI: gathers every rank's trace lines (and the parameters) to
/// rank 0 over the transport.
void gatherTrace(Transport &transport, LocalRank &rank,
                 const TrainOptions &options, std::ostream &errors) {
  int me = transport.rank(), world = transport.size();
  auto deadline = Clock::now() + commTimeout(options);
  std::string mine = traceOf(rank);
  if (me != 0) {
    uint64_t size = mine.size();
    transport.send(0, &size, 8, kTagGatherTrace, deadline,
                   "gathering the trace");
    transport.send(0, mine.data(), size, kTagGatherTrace, deadline,
                   "gathering the trace");
    return;
  }
  std::vector<std::string> all = {mine};
  for (int r = 1; r < world; ++r) {
    uint64_t size = 0;
    transport.recv(r, &size, 8, kTagGatherTrace, deadline,
                   "gathering the trace");
    std::string lines(size, '\0');
    transport.recv(r, lines.data(), size, kTagGatherTrace, deadline,
                   "gathering the trace");
    all.push_back(std::move(lines));
  }
  if (std::string error = writeTrace(options.tracePath, all); !error.empty())
    die(errors, error, /*mpi=*/true);
}

void gatherParams(Transport &transport, LocalRank &rank, const Plan &plan,
                  const TrainOptions &options, std::ostream &errors) {
  int me = transport.rank(), world = transport.size();
  auto deadline = Clock::now() + commTimeout(options);
  std::vector<ParamPiece> mine = piecesOf(rank.executor);
  if (me != 0) {
    for (const ParamPiece &piece : mine) {
      uint64_t count = piece.exact.size();
      transport.send(0, piece.values.data(), piece.values.size() * 4,
                     kTagGatherParams, deadline, "gathering parameters");
      transport.send(0, &count, 8, kTagGatherParams, deadline,
                     "gathering parameters");
      transport.send(0, piece.exact.data(), count * 16, kTagGatherParams,
                     deadline, "gathering parameters");
    }
    return;
  }
  std::vector<std::vector<ParamPiece>> all(world);
  all[0] = std::move(mine);
  for (int r = 1; r < world; ++r) {
    const RankPlan &other = plan.ranks.at(r);
    for (const Param &param : other.params) {
      ParamPiece piece;
      piece.values.resize(other.buffers[param.value].elements);
      transport.recv(r, piece.values.data(), piece.values.size() * 4,
                     kTagGatherParams, deadline, "gathering parameters");
      uint64_t count = 0;
      transport.recv(r, &count, 8, kTagGatherParams, deadline,
                     "gathering parameters");
      piece.exact.resize(count);
      transport.recv(r, piece.exact.data(), count * 16, kTagGatherParams,
                     deadline, "gathering parameters");
      all[r].push_back(std::move(piece));
    }
  }
  if (std::string error =
          writeSafetensors(options.saveParams, assemble(plan, all));
      !error.empty())
    die(errors, error, /*mpi=*/true);
}

/// The valid and test splits evaluated on (null: none).
struct Evaluation {
  const Dataset *valid = nullptr, *test = nullptr;
};

/// The rank's parameters and moments from a loaded checkpoint, its loop
/// going on after the checkpoint's iteration.
void resume(LocalRank &rank, const LoadedCheckpoint *checkpoint) {
  if (!checkpoint)
    return;
  if (std::string error = restoreShards(rank.executor, checkpoint->params);
      !error.empty())
    throw std::runtime_error(
        "rank " + std::to_string(rank.executor.rankPlan().rank) +
        ": loading '" + checkpoint->directory + "': " + error);
  rank.loop.resumeAfter(checkpoint->iteration, checkpoint->skippedIterations);
}

/// One process, one rank, under an MPI launcher.
int trainAsProcess(const Plan &plan, const TrainOptions &options,
                   const Dataset &data, Evaluation evaluation,
                   const LoadedCheckpoint *checkpoint, const cuda::Gpu *gpu,
                   std::ostream &log, std::ostream &errors) {
  if (options.localCollectives)
    return refuse(errors, "--local-collectives is for ranks as threads of "
                          "one process; under a launcher each process is "
                          "one rank");
  int world = int(plan.world());
  int launched = launcherWorldSize();
  if (launched != world)
    return refuse(errors, "the plan is for " + std::to_string(world) +
                              " ranks; the launcher started " +
                              std::to_string(launched));
  std::unique_ptr<Transport> transport;
  if (std::string error = makeMpiTransport(transport); !error.empty())
    return refuse(errors, error);
  uint32_t me = uint32_t(transport->rank());
  if (!plan.ranks.count(me))
    die(errors,
        "rank " + std::to_string(me) + ": the plan was loaded without it",
        /*mpi=*/true);
  if (std::string error = checkMemory(plan, me, 1, gpu); !error.empty())
    die(errors, error, /*mpi=*/true);
  cpu::setThreads(options.threads);
  std::unique_ptr<LocalRank> made;
  if (std::string error = loadRank(plan, me, *transport, options, data,
                                   options.threads, gpu, nullptr, made);
      !error.empty())
    die(errors, error, /*mpi=*/true);
  LocalRank &rank = *made;
  if (gpu && me == loggingRank(plan))
    log << static_cast<cuda::CudaBackend &>(*rank.backend).attentionReport()
        << "\n";
  rank.loop.setEvaluationData(evaluation.valid, evaluation.test);
  auto epoch = Clock::now();
  if (!options.tracePath.empty())
    rank.executor.enableTrace(epoch);
  if (options.profiling())
    rank.executor.enableProfile();
  try {
    initializeParameters(rank.executor, options.seed);
    resume(rank, checkpoint);
    rank.loop.run(me == loggingRank(plan) ? &log : nullptr);
    rank.collectives->flush();
    if (std::string error = rank.loop.printReports(log); !error.empty())
      throw std::runtime_error(error);
    if (!options.tracePath.empty())
      gatherTrace(*transport, rank, options, errors);
    if (!options.saveParams.empty())
      gatherParams(*transport, rank, plan, options, errors);
  } catch (const std::exception &error) {
    die(errors, error.what(), /*mpi=*/true);
  }
  finishMpi();
  return 0;
}

/// Every rank a thread of this process.
int trainAsThreads(const Plan &plan, const TrainOptions &options,
                   const Dataset &data, Evaluation evaluation,
                   const LoadedCheckpoint *checkpoint, const cuda::Gpu *gpu,
                   std::ostream &log, std::ostream &errors) {
  int world = int(plan.world());
  if (options.ranks != 0 && options.ranks != world)
    return refuse(errors, "the plan is for " + std::to_string(world) +
                              " ranks, --ranks " +
                              std::to_string(options.ranks) + " asks for " +
                              std::to_string(options.ranks));
  // Each rank is a thread or two with its own plan, transport and buffers
  // (about 4 MiB beside its arenas): thousands of them in one process
  // exhaust its threads and memory long before the first step.
  if (world > kMaxLocalRanks)
    return refuse(errors,
                  "the plan has " + std::to_string(world) +
                      " ranks; one process runs at most " +
                      std::to_string(kMaxLocalRanks) +
                      " of them as threads: start a process per rank (or "
                      "per node) with mpirun or srun");
  if (std::string error = checkMemory(plan, 0, uint32_t(world), gpu);
      !error.empty())
    return refuse(errors, error);
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  int threadsPerRank =
      options.threads > 0 ? options.threads : std::max(1, cores / world);
  auto hub = makeLocalHub(world);
  // Ranks sharing a GPU meet for their collectives (the device-side
  // communicator) unless staged; on the CPU when asked.
  std::shared_ptr<CollectiveHub> meetings =
      options.localCollectives || (gpu && !options.stagedCollectives)
          ? makeCollectiveHub()
          : nullptr;
  std::vector<std::unique_ptr<Transport>> transports;
  std::vector<std::unique_ptr<LocalRank>> ranks;
  auto epoch = Clock::now();
  for (int r = 0; r < world; ++r) {
    transports.push_back(makeLocalTransport(hub, r));
    ranks.emplace_back();
    if (std::string error =
            loadRank(plan, uint32_t(r), *transports.back(), options, data,
                     threadsPerRank, gpu, meetings, ranks.back());
        !error.empty())
      return refuse(errors, error);
    ranks.back()->loop.setEvaluationData(evaluation.valid, evaluation.test);
    if (!options.tracePath.empty())
      ranks.back()->executor.enableTrace(epoch);
    if (options.profiling())
      ranks.back()->executor.enableProfile();
  }
  if (gpu && world > 0)
    log << static_cast<cuda::CudaBackend &>(*ranks[0]->backend)
               .attentionReport()
        << "\n";
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    try {
      threads.emplace_back([&, r] {
        cpu::setThreads(threadsPerRank);
        LocalRank &rank = *ranks[r];
        try {
          initializeParameters(rank.executor, options.seed);
          resume(rank, checkpoint);
          rank.loop.run(uint32_t(r) == loggingRank(plan) ? &log : nullptr);
        } catch (const std::exception &error) {
          die(errors, error.what());
        }
      });
    } catch (const std::system_error &error) {
      // The ranks started wait for this one: none can finish.
      die(errors, "cannot start rank " + std::to_string(r) +
                      "'s thread: " + error.what());
    }
  }
  for (std::thread &thread : threads)
    thread.join();
  for (auto &rank : ranks)
    if (std::string error = rank->loop.printReports(log); !error.empty())
      return refuse(errors, error);
  if (!options.tracePath.empty()) {
    std::vector<std::string> all;
    for (auto &rank : ranks)
      all.push_back(traceOf(*rank));
    if (std::string error = writeTrace(options.tracePath, all); !error.empty())
      return refuse(errors, error);
  }
  if (!options.saveParams.empty()) {
    std::vector<std::vector<ParamPiece>> all;
    for (auto &rank : ranks)
      all.push_back(piecesOf(rank->executor));
    if (std::string error =
            writeSafetensors(options.saveParams, assemble(plan, all));
        !error.empty())
      return refuse(errors, error);
  }
  return 0;
}

bool exists(const std::string &path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

/// --load-safetensors: the file's tensors by --names as the weights of the
/// parameters this process's ranks hold, with no optimizer state, the run
/// starting at iteration 1.
std::string startingWeights(const Plan &plan, const TrainOptions &options,
                            LoadedCheckpoint &out) {
  NameScheme scheme;
  if (std::string error = parseNameScheme(options.names, scheme);
      !error.empty())
    return error;
  std::map<std::string, HostTensor> file, tensors;
  std::string config;
  if (std::string error = readWeights(options.loadSafetensors, file, config);
      !error.empty())
    return error;
  // GPT-2 weights beside a config.json that names another GELU than the
  // model's would load and train, as another function: refused.
  if (scheme == NameScheme::HfGpt2 && !config.empty()) {
    std::string json;
    if (std::string error = readFileWhole(config, json, kJsonFile);
        !error.empty())
      return error;
    if (std::string error = checkHfGpt2Activation(json, plan.gelu);
        !error.empty())
      return "'" + config + "': " + error;
  }
  if (std::string error =
          importTensors(file, scheme, plan.paramShapes(),
                        plan.ranks.size() == plan.world(), tensors);
      !error.empty())
    return "'" + options.loadSafetensors + "' (" + options.names +
           " names): " + error;
  out = {};
  out.directory = options.loadSafetensors;
  for (auto &[name, tensor] : tensors) {
    GlobalParam &g = out.params[name];
    g.shape = tensor.shape;
    g.known.assign(tensor.values.size(), 2);
    g.value = std::move(tensor.values);
  }
  return "";
}

/// The training samples: --data-path's, or synthetic tokens from the seed.
/// One word naming a file is a text file's bytes; otherwise the words are
/// Megatron's indexed data (a prefix of .bin and .idx, or weights and
/// prefixes), split by --split, seeded by --seed.
std::string openData(const Plan &plan, const TrainOptions &options,
                     std::array<std::unique_ptr<Dataset>, 3> &splits,
                     std::ostream &log) {
  std::unique_ptr<Dataset> &data = splits[0];
  const std::vector<std::string> &words = options.dataPath;
  if (words.empty()) {
    data = makeSyntheticDataset(options.seed, plan.vocabSize, plan.seqLength);
    return "";
  }
  if (words.size() == 1 && !exists(words[0] + ".idx") &&
      !exists(words[0] + ".bin")) {
    if (!exists(words[0]))
      return "--data-path '" + words[0] + "': no such file, nor '" + words[0] +
             ".bin' and '.idx' (Megatron's indexed data)";
    return makeTextDataset(words[0], plan.vocabSize, plan.seqLength, data);
  }
  DataBlend blend;
  std::array<double, 3> split;
  if (std::string error = parseDataPath(words, blend); !error.empty())
    return error;
  if (std::string error = parseSplit(options.split, split); !error.empty())
    return error;
  if (options.seed > UINT32_MAX)
    return "--seed " + std::to_string(options.seed) +
           ": Megatron's data shuffle takes a seed below 2^32";
  // At least one sample, so that the data is checked even when no
  // iteration runs; the valid split for every evaluation and the one
  // after training, as Megatron counts them.
  uint64_t gbs = plan.globalBatchSize;
  uint64_t train = std::max<uint64_t>(1, uint64_t(options.trainIters) * gbs);
  uint64_t evaluations =
      (options.evalInterval > 0 ? options.trainIters / options.evalInterval
                                : 0) +
      1;
  uint64_t eval = uint64_t(options.evalIters) * gbs;
  if (std::string error = makeMegatronDatasets(
          blend, split, plan.seqLength, uint32_t(options.seed),
          {train, evaluations * eval, eval}, plan.vocabSize, splits);
      !error.empty())
    return error;
  if (!splits[0])
    return "--split " + options.split + " leaves no training data";
  if (options.evalIters > 0 && launcherRank() <= 0)
    for (int k = 1; k < 3; ++k)
      if (!splits[k])
        log << "no " << (k == 1 ? "validation" : "test") << " data: --split "
            << options.split << " leaves the " << (k == 1 ? "valid" : "test")
            << " split of a prefix no sequences; it is not evaluated\n";
  return "";
}

} // namespace

int train(const Plan &plan, const TrainOptions &options, std::ostream &log,
          std::ostream &errors) {
  std::optional<cuda::Gpu> gpu;
  if (options.backend == "cuda")
    if (std::string error = cuda::openGpu(plan, gpu.emplace()); !error.empty())
      return refuse(errors, error);
  if (options.backend == "simt")
    if (std::string error = cuda::checkCudaPlan(plan); !error.empty())
      return refuse(errors, error);
  std::array<std::unique_ptr<Dataset>, 3> splits;
  if (std::string error = openData(plan, options, splits, log); !error.empty())
    return refuse(errors, error);
  const Dataset &data = *splits[0];
  Evaluation evaluation{splits[1].get(), splits[2].get()};
  // A checkpoint is read once a process, its ranks each taking their shards.
  // What cannot be read stops every process: under MPI the others may
  // already wait for this one.
  auto cannotStart = [&](const std::string &error) {
    if (launcherWorldSize() > 0)
      die(errors, error, /*mpi=*/true);
    return refuse(errors, error);
  };
  std::optional<LoadedCheckpoint> checkpoint;
  if (!options.load.empty()) {
    bool found = false;
    if (std::string error = readCheckpoint(options.load, plan, options.seed,
                                           checkpoint.emplace(), found);
        !error.empty())
      return cannotStart(error);
    if (!found) {
      checkpoint.reset();
      if (launcherRank() <= 0)
        log << "no checkpoint in " << options.load
            << " (no latest_checkpointed_iteration.txt): training from "
               "iteration 0\n";
    } else if (launcherRank() <= 0) {
      log << "loaded checkpoint " << checkpoint->directory << ": iteration "
          << checkpoint->iteration << ", saved by " << checkpoint->savedRanks
          << (checkpoint->savedRanks == 1 ? " rank (" : " ranks (")
          << checkpoint->savedLayout << "), resharded to " << plan.world()
          << "\n";
    }
  }
  if (!options.loadSafetensors.empty()) {
    if (std::string error =
            startingWeights(plan, options, checkpoint.emplace());
        !error.empty())
      return cannotStart(error);
    if (launcherRank() <= 0)
      log << "loaded " << checkpoint->params.size() << " parameters from "
          << options.loadSafetensors << " (" << options.names << " names)\n";
  }
  const LoadedCheckpoint *loaded = checkpoint ? &*checkpoint : nullptr;
  // With somewhere to save, a stop signal saves first (docs/errors.md).
  if (!options.save.empty())
    installStopSignals();
  if (launcherWorldSize() > 0)
    return trainAsProcess(plan, options, data, evaluation, loaded,
                          gpu ? &*gpu : nullptr, log, errors);
  return trainAsThreads(plan, options, data, evaluation, loaded,
                        gpu ? &*gpu : nullptr, log, errors);
}

} // namespace strata::runtime
