//===- ListSchedule.cpp - a pipeline order found on a clock ---------------===//
#include "compiler/ListSchedule.h"
#include "compiler/StashSlots.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <map>

namespace strata::pipeline {

using sim::Phase;
using sim::Work;

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

/// The stash pools a microbatch enters and leaves with each work (0: kept
/// until B, 1: held until W, 2: passed from B to W), as the memory plan
/// takes and frees their slots.
template <class Enter, class Leave>
void movePools(Phase phase, Enter &&enter, Leave &&leave) {
  switch (phase) {
  case Phase::Forward:
    enter(0);
    enter(1);
    break;
  case Phase::Backward:
    leave(0);
    enter(2);
    break;
  case Phase::Weight:
    leave(1);
    leave(2);
    break;
  }
}

/// The state of the clock: what each chunk has run and when it ended.
struct Clock {
  const ListScheduleProblem &problem;
  int chunks = 0;
  std::vector<std::vector<double>> forwardEnd, backwardEnd; // [chunk][mb]
  std::vector<int> nextForward, nextBackward;               // per chunk
  std::vector<std::deque<Work>> weights; // per stage, in B's order
  std::vector<double> freeAt;            // per stage
  std::vector<int> held;                 // per stage: F run, W not
  // Per chunk and pool: microbatches in it now, and the most ever (its
  // slots); per stage: the bytes of its slots.
  std::vector<std::array<int, 3>> inPool, slots;
  std::vector<int64_t> slotBytesOfStage;
  std::vector<std::vector<int>> chunksOf; // per stage, last chunk first

  explicit Clock(const ListScheduleProblem &problem)
      : problem(problem), chunks(int(problem.stageOfChunk.size())),
        forwardEnd(chunks, std::vector<double>(problem.microbatches, kNever)),
        backwardEnd(forwardEnd), nextForward(chunks, 0),
        nextBackward(chunks, 0), weights(problem.stages),
        freeAt(problem.stages, 0), held(problem.stages, 0),
        inPool(chunks, {0, 0, 0}), slots(chunks, {0, 0, 0}),
        slotBytesOfStage(problem.stages, 0), chunksOf(problem.stages) {
    for (int c = chunks; c-- > 0;)
      chunksOf[problem.stageOfChunk[c]].push_back(c);
  }

  bool limitsMemory() const { return !problem.slotBytes.empty(); }

  /// Whether chunk c's next F (or B) fits in its stage's memory limit:
  /// the slots it would add to the pools it enters.
  bool fits(int c, Phase phase) const {
    if (!limitsMemory())
      return true;
    int64_t more = 0;
    auto enter = [&](int pool) {
      if (inPool[c][pool] + 1 > slots[c][pool])
        more = saturatingAdd(more, problem.slotBytes[c][pool]);
    };
    // An F also leaves room for its B's passed slot: B goes first, and
    // could not run past the limit unless a W ahead of it frees one.
    enter(2);
    if (phase == Phase::Forward) {
      enter(0);
      enter(1);
    }
    int s = problem.stageOfChunk[c];
    return more == 0 ||
           saturatingAdd(slotBytesOfStage[s], more) <= problem.memoryLimit[s];
  }
  void enter(int c, int pool) {
    if (++inPool[c][pool] > slots[c][pool]) {
      ++slots[c][pool];
      if (limitsMemory())
        slotBytesOfStage[problem.stageOfChunk[c]] =
            saturatingAdd(slotBytesOfStage[problem.stageOfChunk[c]],
                 problem.slotBytes[c][pool]);
    }
  }

  /// When `end` on chunk `from` reaches chunk `to`.
  double arrival(double end, int from, int to) const {
    return problem.stageOfChunk[from] == problem.stageOfChunk[to]
               ? end
               : end + problem.transfer;
  }

  /// When chunk c's next F (or B) could start; kNever if not yet known.
  double forwardReady(int c) const {
    int mb = nextForward[c], s = problem.stageOfChunk[c];
    if (mb >= problem.microbatches || held[s] >= problem.inFlightLimit[s])
      return kNever;
    // Past the memory limit, only a stage that holds nothing goes on.
    if (held[s] > 0 && !fits(c, Phase::Forward))
      return kNever;
    double input = c == 0 ? 0 : arrival(forwardEnd[c - 1][mb], c - 1, c);
    return std::max(freeAt[s], input);
  }
  double backwardReady(int c) const {
    int mb = nextBackward[c];
    if (mb >= nextForward[c])
      return kNever;
    // A W first where it frees what this B would need past the limit.
    if (!fits(c, Phase::Backward) && !weights[problem.stageOfChunk[c]].empty())
      return kNever;
    double gradient = c + 1 == chunks
                          ? forwardEnd[c][mb]
                          : arrival(backwardEnd[c + 1][mb], c + 1, c);
    return std::max(freeAt[problem.stageOfChunk[c]], gradient);
  }

  /// What stage s would start next, and when: a B before an F before a W
  /// among those that could start first (ties between chunks to the later
  /// chunk, nearer the loss).
  std::pair<double, Work> choose(int s) const {
    double best = kNever;
    Work work;
    int rank = 3;
    auto consider = [&](double at, Work w, int priority) {
      if (at == kNever)
        return;
      if (at < best || (at == best && priority < rank)) {
        best = at;
        work = w;
        rank = priority;
      }
    };
    for (int c : chunksOf[s]) {
      consider(backwardReady(c), {Phase::Backward, c, nextBackward[c]}, 0);
      consider(forwardReady(c), {Phase::Forward, c, nextForward[c]}, 1);
    }
    if (!weights[s].empty())
      consider(freeAt[s], weights[s].front(), 2);
    return {best, work};
  }

  void run(int s, double start, const Work &w) {
    int c = w.chunk;
    double end;
    switch (w.phase) {
    case Phase::Forward:
      end = start + problem.forward[c];
      forwardEnd[c][w.microbatch] = end;
      ++nextForward[c];
      ++held[s];
      break;
    case Phase::Backward:
      end = start + problem.backward[c];
      backwardEnd[c][w.microbatch] = end;
      ++nextBackward[c];
      weights[s].push_back({Phase::Weight, c, w.microbatch});
      break;
    case Phase::Weight:
      end = start + problem.weight[c];
      weights[s].pop_front();
      --held[s];
      break;
    }
    movePools(
        w.phase, [&](int pool) { enter(c, pool); },
        [&](int pool) { --inPool[c][pool]; });
    freeAt[s] = end;
  }
};

} // namespace

std::vector<std::vector<Work>> listSchedule(const ListScheduleProblem &problem,
                                            std::string &error) {
  error.clear();
  int chunks = int(problem.stageOfChunk.size());
  std::vector<std::vector<Work>> orders(problem.stages);
  for (int s = 0; s < problem.stages; ++s)
    if (s >= int(problem.inFlightLimit.size()) || problem.inFlightLimit[s] < 1)
      error = "stage " + std::to_string(s) +
              " may hold no microbatch: its in-flight limit must be at least 1";
  if (int(problem.forward.size()) != chunks ||
      int(problem.backward.size()) != chunks ||
      int(problem.weight.size()) != chunks)
    error = "every chunk needs a forward, B and W cost";
  for (int c = 0; error.empty() && c < chunks; ++c)
    if (problem.stageOfChunk[c] < 0 ||
        problem.stageOfChunk[c] >= problem.stages)
      error = "chunk " + std::to_string(c) + " lives on no stage";
    else if (!(problem.forward[c] > 0 && problem.backward[c] > 0 &&
               problem.weight[c] > 0))
      error = "chunk " + std::to_string(c) + "'s costs must be positive";
  if (error.empty() && !problem.slotBytes.empty() &&
      (int(problem.slotBytes.size()) != chunks ||
       int(problem.memoryLimit.size()) != problem.stages))
    error = "the stash's bytes need one entry a chunk and a limit a stage";
  for (const std::array<int64_t, 3> &pools : problem.slotBytes)
    for (int64_t bytes : pools)
      if (error.empty() && bytes < 0)
        error = "the stash's bytes must be at least 0";
  if (!error.empty())
    return orders;

  Clock clock(problem);
  size_t total = size_t(3) * chunks * problem.microbatches, placed = 0;
  while (placed < total) {
    // The stage that can start something first (ties to the first stage:
    // work starting at one time cannot change what the others see then).
    int stage = -1;
    std::pair<double, Work> next{kNever, {}};
    for (int s = 0; s < problem.stages; ++s) {
      auto candidate = clock.choose(s);
      if (candidate.first < next.first) {
        next = candidate;
        stage = s;
      }
    }
    if (stage < 0) {
      error = "the stages cannot go on after " + std::to_string(placed) +
              " of " + std::to_string(total) + " works";
      return orders;
    }
    clock.run(stage, next.first, next.second);
    orders[stage].push_back(next.second);
    ++placed;
  }
  return orders;
}

int64_t stashBytes(const std::vector<Work> &order,
                   const std::vector<std::array<int64_t, 3>> &slotBytes) {
  // As the lowering lays the stash out (compiler/StashSlots.h).
  std::vector<std::vector<StashMove>> steps;
  std::map<StashKey, int64_t> bytes;
  for (const Work &w : order) {
    steps.push_back(stashMoves(w.phase, w.chunk, w.microbatch, true));
    for (const StashMove &move : steps.back())
      bytes[move.key] = size_t(w.chunk) < slotBytes.size() && w.chunk >= 0
                            ? slotBytes[size_t(w.chunk)][size_t(move.key.second)]
                            : 0;
  }
  return planStashSlots(steps, bytes).bytes;
}

} // namespace strata::pipeline
