//===- TrainingLoop.h - the training loop -----------------------*- C++ -*-===//
//
// One rank's iterations over its Executor: the learning-rate schedule, the
// batches, the loss averaged over data-parallel replicas and the log line
// in Megatron's shape, and the reports. Launching ranks (threads or
// processes) is StartRanks.h's.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_TRAIN_TRAININGLOOP_H
#define STRATA_RUNTIME_TRAIN_TRAININGLOOP_H

#include "runtime/data/Dataset.h"
#include "runtime/exec/Executor.h"
#include "runtime/plan/Hyper.h"

#include <cstdint>
#include <map>
#include <ostream>
#include <string>

namespace strata::runtime {

struct TrainOptions {
  int64_t trainIters = 0;
  uint64_t seed = 1234;
  double lr = 1.0e-4, minLr = 0.0;
  int64_t lrWarmupIters = 0;
  int64_t lrDecayIters = 0;              // 0: train-iters
  std::string lrDecayStyle = "constant"; // constant, linear, cosine
  Hyper hyper;
  int64_t logInterval = 1;
  // --data-path: a text file (its bytes are the tokens), or Megatron's
  // indexed data, a prefix or weight and prefix pairs; empty: synthetic.
  std::vector<std::string> dataPath;
  std::string split = "969,30,1"; // train, valid, test: Megatron's default
  // Validation every evalInterval iterations over evalIters batches, and
  // after training on the valid and test splits (indexed data only).
  int64_t evalInterval = 1000, evalIters = 100;
  std::string saveParams;
  // Checkpoints (CheckpointStore.h): saved under `save` every
  // `saveInterval` iterations and at the end; loaded from `load`.
  std::string save, load;
  int64_t saveInterval = 0;
  // Megatron's --exit-interval: stop (saving first) after an iteration
  // this divides, the schedule still that of --train-iters.
  int64_t exitInterval = 0;
  // Stop with an error after this many skipped iterations in a row (a
  // gradient norm that is not finite); 0: never. Megatron's
  // --check-for-nan-in-loss-and-grad is 1.
  int64_t exitOnNan = 0;
  // Starting weights from a safetensors file (HuggingFace.h's names).
  std::string loadSafetensors;
  std::string names = "strata";
  int threads = 0;
  bool reportMemory = false;
  bool reportComm = false; // bytes sent and time exposed per iteration
  bool profile = false;    // time per kernel, printed at the end
  std::string profileJson; // the last iteration's gemms and kernels by shape
  bool profiling() const { return profile || !profileJson.empty(); }
  std::string tracePath; // a Chrome trace of every step and instruction
  int ranks = 0;         // local ranks as threads: 0 means the plan's
  // The CPU backend's compute stream on a thread of its own, so that a
  // wait the communication stream needs and a plan lacks is a data race
  // (for ThreadSanitizer runs; traces then time issue, not execution).
  bool asyncCompute = false;
  // The CPU backend's collectives staged through host copies, as the cuda
  // backend's are (runtime/comm/StagedCollectives.h), to test the staging
  // where no GPU is.
  bool stagedCollectives = false;
  // Collectives of ranks as threads computed where they meet, in the
  // ring's order (runtime/comm/LocalCollectives.h), on the CPU backend.
  bool localCollectives = false;
  // Each step's body recorded once as a graph and replayed
  // (Executor::enableGraphs): 1 on, 0 off, -1 the backend's default (on
  // for a GPU, off on the CPU, where --graphs tests it).
  int graphs = -1;
  bool reportGraphs = false;   // graphs recorded and replays, at the end
  std::string backend = "cpu"; // cpu, cuda (runtime/cuda/) or simt
  // What runs the cuda backend's attention launches: strata's kernels,
  // cuDNN's fused attention (cudnn), or cuDNN where it takes the launch
  // (auto) (runtime/cuda/AttentionRunner.h).
  std::string attentionBackend = "strata";
  double commTimeoutSeconds = 300;
  // Fault injection for tests: this rank stops (a thread) or is killed
  // (a process) at the start of this iteration.
  int failRank = -1;
  int64_t failAtIteration = -1;
  // Fault injection: every gradient of this iteration non-finite (-1: no).
  int64_t failGradAtIteration = -1;
};

/// Megatron's learning-rate schedule, by iteration: warm up linearly from 0
/// over `lrWarmupIters`, then hold, or decay (linear or cosine) to `minLr`
/// at `lrDecayIters`. Iteration i (1-based) uses the value at step i − 1,
/// as Megatron's scheduler, which steps after each update, does.
double learningRate(const TrainOptions &options, int64_t iteration);

/// Checks the options that need no plan; "" when they are fine.
std::string checkTrainOptions(const TrainOptions &options);

/// One rank's training loop.
class TrainingLoop {
public:
  TrainingLoop(Executor &executor, const TrainOptions &options,
               const Dataset &data);

  /// Trains; writes the log if `log` (the rank that logs: the first of the
  /// last pipeline stage, where the loss is). Returns false if this rank
  /// stopped early (fault injection).
  bool run(std::ostream *log);

  /// Goes on after iteration `iteration` (a loaded checkpoint's), of which
  /// `skipped` skipped their update.
  void resumeAfter(int64_t iteration, int64_t skipped) {
    firstIteration = iteration + 1;
    skippedIterations = skipped;
  }

  /// The valid and test splits to evaluate on (null: none).
  void setEvaluationData(const Dataset *validSplit, const Dataset *testSplit) {
    valid = validSplit;
    test = testSplit;
  }

  /// --profile, --report-comm and --report-memory, as asked, and the
  /// --profile-json file; "" or why that file could not be written.
  std::string printReports(std::ostream &log);
  /// The last iteration's gemms and launches by shape with their cost and
  /// time (Executor::profileDetail), as --profile-json writes them.
  std::string profileJson() const;

  /// The rank's track name in traces: its number and coordinates.
  std::string traceLabel() const;

private:
  /// Microbatch `microbatch` of the global batch starting at sample
  /// `first` of `from`, as Megatron's sampler hands it to this rank.
  void loadBatch(const Dataset &from, int64_t first, int64_t microbatch,
                 bool training);
  /// The mean loss over the global batch, from this rank's sum over its
  /// microbatches (on the last pipeline stage, where the loss is).
  float averageLoss(float sum, const std::string &what);
  /// Whether any rank was asked to stop (installStopSignals): the signal
  /// this rank saw, -1 for another rank's, 0 for none. Every rank calls it
  /// after every iteration, and all agree.
  int stopSignalEverywhere(int64_t iteration);
  /// evalIters batches of `from` from sample `first`; the loss printed,
  /// Megatron's way, on the rank that logs.
  void evaluate(const Dataset &from, int64_t first, const std::string &what,
                int64_t iteration, std::ostream *log);

  Executor &executor;
  const TrainOptions &options;
  const Dataset &data;
  const Dataset *valid = nullptr, *test = nullptr;
  const Plan &plan;
  const RankPlan &rank;
  mesh::Coordinates coords{};          // this rank's, by axis id
  std::vector<int> lossGroup;          // the ranks averaging the loss
  std::vector<int> everyone;           // every rank: agreeing to stop
  bool holdsLoss = false;              // the last chunk's: the loss is here
  std::vector<int32_t> tokens, labels; // host staging for one microbatch
  std::vector<int32_t> wholeTokens, wholeLabels; // a whole sample, with cp
  std::vector<int32_t> dropoutKeys; // and its samples' dropout keys
  int64_t iterationsRun = 0, firstIteration = 1;
  // Iterations whose gradient norm was not finite: their update was
  // skipped, and the optimizer's step and the learning rate schedule do
  // not count them (Megatron's update_successful).
  int64_t skippedIterations = 0;
  double iterationSeconds = 0;
  // What evaluations sent and waited, left out of --report-comm's
  // per-iteration figures.
  std::map<std::string, uint64_t> evaluationBytes;
  double evaluationCommSeconds = 0, evaluationExposedSeconds = 0;
};

/// The rank that logs: the first of the last pipeline stage.
uint32_t loggingRank(const Plan &plan);

/// SIGTERM and SIGINT (a scheduler's warning before preemption, a
/// Ctrl-C) make a run with --save save at the next iteration boundary and
/// stop cleanly; a second one ends the process at once.
void installStopSignals();

} // namespace strata::runtime

#endif
