//===- StartRanks.h - a plan's ranks, as threads or processes ---*- C++ -*-===//
//
// Starts the ranks a plan needs: as threads of this process (each with its
// own CPU backend and communication thread, over a local transport), or,
// under an MPI launcher, as this process's one rank. Checks that the
// ranks' memory fits before anything is allocated, trains, then gathers
// the traces and the parameters to the first rank.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_TRAIN_STARTRANKS_H
#define STRATA_RUNTIME_TRAIN_STARTRANKS_H

#include "runtime/train/TrainingLoop.h"

#include <ostream>

namespace strata::runtime {

/// Trains the plan's model and writes a log line per interval to `log`.
/// Returns the process exit status; errors go to `errors`.
int train(const Plan &plan, const TrainOptions &options, std::ostream &log,
          std::ostream &errors);

} // namespace strata::runtime

#endif
