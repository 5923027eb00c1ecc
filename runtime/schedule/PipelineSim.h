//===- PipelineSim.h - a pipeline schedule run on a clock -------*- C++ -*-===//
//
// Runs the per-stage order of a pipeline schedule against its data
// dependencies — a chunk's forward waits for the previous chunk's forward of
// the same microbatch, its backward for the next chunk's backward — with a
// cost per forward and backward. With the backward cut in two (the
// zero-bubble schedules) a backward is B, the input's gradient, which the
// chunk before waits for, and each B has a W, the weights' gradient, later
// on the same stage, which nothing waits for. It finds when every piece of work
// starts and ends, the bubble (the time stages sit idle), and deadlocks (work
// that waits on work that never comes). The compiler checks every schedule it
// writes with it; strata-inspect draws plans and traces with it.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_SCHEDULE_PIPELINESIM_H
#define STRATA_RUNTIME_SCHEDULE_PIPELINESIM_H

#include "runtime/schedule/ScheduleNames.h"

#include <string>
#include <vector>

namespace strata::sim {

enum class Phase { Forward, Backward, Weight };

/// One forward, backward (B when the backward is cut in two) or weight
/// gradient (W) of one chunk (global index 0..chunks-1) for one
/// microbatch.
struct Work {
  Phase phase = Phase::Forward;
  int chunk = 0;
  int microbatch = 0;
  bool operator==(const Work &) const = default;
};

/// "F", "B" or "W".
const char *letter(Phase phase);

/// "F3.1": forward of microbatch 3 on chunk 1 (B for backward, W for the
/// weights' gradient).
std::string describe(const Work &work);

/// Whether any order holds a W (the backward is cut in two).
bool holdsWeights(const std::vector<std::vector<Work>> &orders);

/// Costs in any unit. A chunk's forward costs `forward / chunksPerStage`:
/// the costs are a whole stage's, so that interleaving (more, smaller
/// chunks) keeps the work per stage the same. Where the orders cut the
/// backward in two, `backward` is B's cost and `weight` W's; else
/// `backward` is the whole backward's.
struct Costs {
  double forward = 1, backward = 2;
  double transfer = 0; // between dependent work on different stages
  double weight = 0;
  /// Per chunk, where given (one entry a chunk): its own forward, B (or
  /// whole backward) and W cost, in place of the stage's share above, so
  /// that the first chunk's embedding and the last one's loss count.
  std::vector<double> chunkForward, chunkBackward, chunkWeight;
};

/// What `work` costs of `costs` with `stages` stages and `chunks` chunks.
double workCost(const Costs &costs, const Work &work, int stages, int chunks);

/// Unit costs: a stage's forward 1 and backward 2, or, where any order
/// holds a W, forward, B and W 1 each (the zero-bubble paper's).
Costs unitCosts(const std::vector<std::vector<Work>> &orders);

struct Timed {
  Work work;
  double start = 0, end = 0;
};

struct SimResult {
  std::vector<std::vector<Timed>> stages; // what ran, per stage, in order
  double makespan = 0;
  double busy = 0; // the most any stage computes
  /// The most any stage sits idle between the start of its first work and
  /// the end of its last.
  double idleWithin = 0;
  std::string deadlock; // "" unless some stage could not go on
  /// Idle time over compute time: the paper's t_pb / t_id. What an
  /// iteration costs where the optimizer step waits for every stage (the
  /// gradient norm's synchronisation, as strata's and Megatron's do).
  double bubbleFraction() const {
    return busy > 0 ? (makespan - busy) / busy : 0;
  }
  /// The idle inside each stage's own span over compute time, the most of
  /// any stage: the zero-bubble paper's measure. It leaves out the skew of
  /// the stages' starts (the last stage waits for the first forward to
  /// reach it), which only an optimizer that does not synchronise the
  /// stages (the paper's post-validation) overlaps with the next iteration.
  double bubbleWithinStagesFraction() const {
    return busy > 0 ? idleWithin / busy : 0;
  }
};

/// Runs `orders` (one list per stage; chunk c on the stage `placement`
/// puts it on) with `costs`. Checks that every (chunk, microbatch) has
/// exactly one forward and one backward, on its stage, the forward first,
/// and, where any order holds a W, exactly one W after its backward; a
/// violation is reported in `deadlock` as well.
SimResult simulate(const std::vector<std::vector<Work>> &orders, int chunks,
                   int microbatches, const Costs &costs,
                   Placement placement = Placement::Looped);

/// Runs measured start and end times instead of costs: validates the
/// order the same way and fills the result from `times` (per stage, in
/// order, {start, end}).
SimResult
fromMeasured(const std::vector<std::vector<Work>> &orders,
             const std::vector<std::vector<std::pair<double, double>>> &times);

/// The most microbatches a stage holds activations for at once: forwards
/// run whose backward has not (whose W has not, where the order holds W's:
/// W reads what the forward kept).
int inFlight(const std::vector<Work> &order);

} // namespace strata::sim

#endif
