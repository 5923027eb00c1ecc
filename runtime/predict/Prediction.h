//===- Prediction.h - a plan's iteration on a modelled cluster --*- C++ -*-===//
//
// strata-run --backend sim: the plan's ranks run through the real
// executor on ModelledDevice and ModelledNetwork, one iteration each,
// issued one rank after another (nothing blocks: the Timeline matches
// collectives and transfers afterwards), then solved. Ranks whose
// programs and links are alike are simulated once: by default one rank
// per pipeline stage (tensor and data coordinates 0), standing for the
// tp x dp ranks of its stage, whose programs are the same template and
// whose groups span the same levels.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PREDICT_PREDICTION_H
#define STRATA_RUNTIME_PREDICT_PREDICTION_H

#include "runtime/cluster/Calibration.h"
#include "runtime/cluster/ClusterSpec.h"
#include "runtime/plan/Plan.h"
#include "runtime/predict/Timeline.h"
#include "runtime/schedule/PipelineSim.h"

#include <array>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime::predict {

struct PredictOptions {
  bool everyRank = false; // simulate every rank, not one per stage
  /// Communication costs nothing (to see the schedule alone).
  bool freeCommunication = false;
  /// Measured gemm and kernel times, or null.
  const Calibration *calibration = nullptr;
};

struct RankPrediction {
  uint32_t rank = 0, stage = 0;
  uint32_t computeLane = 0; // its compute stream's lane in the timeline
  /// The iteration's seconds on the compute stream, by what it did or
  /// waited for (Timeline::attribute); they add up to the iteration.
  std::array<double, kUses> uses{};
  /// Of uses[Compute], the optimizer step's (the rest is the pipeline's),
  /// and the gemms'.
  double optimizerSeconds = 0, gemmSeconds = 0;
  /// When its last forward or backward step ends (before the optimizer).
  double pipelineEndSeconds = 0;
  uint64_t arenaBytes[kArenas] = {};
  uint64_t peakBytes() const {
    return arenaBytes[0] + arenaBytes[1] + arenaBytes[2];
  }
};

struct Prediction {
  double iterationSeconds = 0;
  std::vector<RankPrediction> ranks; // the simulated ones, by rank
  size_t operations = 0;
  bool bf16 = false; // its gemms multiply bf16 (else fp32): the peak
  /// With a calibration: the gemms and launches issued that it had a
  /// measurement for, and those it had not.
  size_t measured = 0, modelled = 0;
  std::unique_ptr<Timeline> timeline; // for a trace
};

/// The ranks simulated: one per pipeline stage, or every one.
std::vector<uint32_t> simulatedRanks(const Plan &plan, bool everyRank);

/// The plan in `bytes` with only its simulated ranks decoded (a 3072-rank
/// plan decodes its stages' templates); "" or why not. `check`, when
/// given, sees the header first and may refuse the layout.
std::string loadForPrediction(
    const std::vector<uint8_t> &bytes, bool everyRank, Plan &plan,
    const std::function<std::string(const Plan &)> &check = {});

/// Predicts one iteration of `plan` (its simulated ranks loaded) on
/// `spec`; "" or why it cannot (a deadlock, an unmatched transfer, a rank
/// that does not load).
std::string predictIteration(const Plan &plan, const ClusterSpec &spec,
                             const PredictOptions &options, Prediction &out);

/// The pipeline's work as the schedule simulator prices it
/// (sim::Costs's per-chunk costs, in seconds): for each of `chunks`
/// chunks, the mean over its steps of the seconds its forward, backward
/// (B where cut) and W spend in their own operations on the compute
/// stream — kernels, copies, tensor-parallel collectives, not waits for
/// other ranks — and the pipeline transfers' mean. Chunks no simulated
/// rank ran are 0.
sim::Costs pipelineWorkCosts(const Prediction &prediction, int chunks);

/// The report strata-run prints: Megatron's iteration line with the
/// predicted time, then the breakdown and each stage's memory.
std::string describePrediction(const Plan &plan, const ClusterSpec &spec,
                               const Prediction &prediction);

/// The simulated timeline as a Chrome/Perfetto trace (JSON).
std::string predictionTrace(const Prediction &prediction);

} // namespace strata::runtime::predict

#endif
