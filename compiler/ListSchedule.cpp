//===- ListSchedule.cpp - a pipeline order found on a clock ---------------===//
#include "compiler/ListSchedule.h"

#include <deque>
#include <limits>

namespace strata::pipeline {

using sim::Phase;
using sim::Work;

namespace {

constexpr double kNever = std::numeric_limits<double>::infinity();

/// The state of the clock: what each chunk has run and when it ended.
struct Clock {
  const ListScheduleProblem &problem;
  int chunks = 0;
  std::vector<std::vector<double>> forwardEnd, backwardEnd; // [chunk][mb]
  std::vector<int> nextForward, nextBackward;               // per chunk
  std::vector<std::deque<Work>> weights; // per stage, in B's order
  std::vector<double> freeAt;            // per stage
  std::vector<int> held;                 // per stage: F run, W not

  explicit Clock(const ListScheduleProblem &problem)
      : problem(problem), chunks(int(problem.stageOfChunk.size())),
        forwardEnd(chunks, std::vector<double>(problem.microbatches, kNever)),
        backwardEnd(forwardEnd), nextForward(chunks, 0),
        nextBackward(chunks, 0), weights(problem.stages),
        freeAt(problem.stages, 0), held(problem.stages, 0) {}

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
    double input = c == 0 ? 0 : arrival(forwardEnd[c - 1][mb], c - 1, c);
    return std::max(freeAt[s], input);
  }
  double backwardReady(int c) const {
    int mb = nextBackward[c];
    if (mb >= nextForward[c])
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
    for (int c = chunks; c-- > 0;) {
      if (problem.stageOfChunk[c] != s)
        continue;
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

} // namespace strata::pipeline
