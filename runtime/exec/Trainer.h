//===- Trainer.h - the training loop ----------------------------*- C++ -*-===//
#ifndef STRATA_RUNTIME_EXEC_TRAINER_H
#define STRATA_RUNTIME_EXEC_TRAINER_H

#include "runtime/exec/Hyper.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <ostream>
#include <string>

namespace strata::runtime {

struct TrainOptions {
  int64_t trainIters = 0;
  uint64_t seed = 1234;
  double lr = 1.0e-4, minLr = 0.0;
  int64_t lrWarmupIters = 0;
  int64_t lrDecayIters = 0; // 0: train-iters
  std::string lrDecayStyle = "constant"; // constant, linear, cosine
  Hyper hyper;
  int64_t logInterval = 1;
  std::string dataPath;
  std::string saveParams;
  int threads = 0;
  bool reportMemory = false;
  bool reportComm = false; // bytes sent per collective per iteration
  bool profile = false; // time per kernel, printed at the end
  std::string tracePath; // a Chrome trace of every step and instruction
  int ranks = 0;        // local ranks as threads: 0 means the plan's
  double commTimeoutSeconds = 300;
  // Fault injection for tests: this rank stops (a thread) or is killed
  // (a process) at the start of this iteration.
  int failRank = -1;
  int64_t failAtIteration = -1;
};

/// Megatron's learning-rate schedule, by iteration: warm up linearly from 0
/// over `lrWarmupIters`, then hold, or decay (linear or cosine) to `minLr`
/// at `lrDecayIters`. Iteration i (1-based) uses the value at step i − 1,
/// as Megatron's scheduler, which steps after each update, does.
double learningRate(const TrainOptions &options, int64_t iteration);

/// Checks the options that need no plan; "" when they are fine.
std::string checkTrainOptions(const TrainOptions &options);

/// Trains the plan's model and writes a log line per interval to `log`.
/// Returns the process exit status; errors go to `errors`.
int train(const Plan &plan, const TrainOptions &options, std::ostream &log,
          std::ostream &errors);

} // namespace strata::runtime

#endif
