//===- PipelineSim.cpp - a pipeline schedule run on a clock ---------------===//
#include "runtime/schedule/PipelineSim.h"

#include <algorithm>
#include <map>

namespace strata::sim {

const char *letter(Phase phase) {
  return phase == Phase::Forward    ? "F"
         : phase == Phase::Backward ? "B"
                                    : "W";
}

std::string describe(const Work &work) {
  return letter(work.phase) + std::to_string(work.microbatch) + "." +
         std::to_string(work.chunk);
}

bool holdsWeights(const std::vector<std::vector<Work>> &orders) {
  for (const std::vector<Work> &order : orders)
    for (const Work &w : order)
      if (w.phase == Phase::Weight)
        return true;
  return false;
}

Costs unitCosts(const std::vector<std::vector<Work>> &orders) {
  Costs costs;
  if (holdsWeights(orders))
    costs.backward = costs.weight = 1;
  return costs;
}

double workCost(const Costs &costs, const Work &work, int stages,
                int chunks) {
  const std::vector<double> &own = work.phase == Phase::Forward
                                       ? costs.chunkForward
                                   : work.phase == Phase::Backward
                                       ? costs.chunkBackward
                                       : costs.chunkWeight;
  if (size_t(work.chunk) < own.size())
    return own[size_t(work.chunk)];
  double stage = work.phase == Phase::Forward    ? costs.forward
                 : work.phase == Phase::Backward ? costs.backward
                                                 : costs.weight;
  return stage * double(stages) / double(chunks);
}

namespace {

using Key = std::pair<int, int>; // (chunk, microbatch)

/// Checks that the orders hold each forward and backward once, on the
/// chunk's stage. "" when they do.
std::string checkCoverage(const std::vector<std::vector<Work>> &orders,
                          int chunks, int microbatches, Placement placement) {
  int stages = int(orders.size());
  std::map<Key, int> forwards, backwards, weights;
  bool split = holdsWeights(orders);
  for (int s = 0; s < stages; ++s) {
    for (const Work &w : orders[s]) {
      if (w.chunk < 0 || w.chunk >= chunks || w.microbatch < 0 ||
          w.microbatch >= microbatches)
        return "stage " + std::to_string(s) + " runs " + describe(w) +
               ", outside " + std::to_string(chunks) + " chunks and " +
               std::to_string(microbatches) + " microbatches";
      if (int home = stageOf(placement, w.chunk, stages); home != s)
        return "stage " + std::to_string(s) + " runs " + describe(w) +
               ", but chunk " + std::to_string(w.chunk) + " lives on stage " +
               std::to_string(home);
      auto &seen = w.phase == Phase::Forward    ? forwards
                   : w.phase == Phase::Backward ? backwards
                                                : weights;
      if (++seen[{w.chunk, w.microbatch}] > 1)
        return "stage " + std::to_string(s) + " runs " + describe(w) + " twice";
      if (w.phase == Phase::Backward &&
          !forwards.count({w.chunk, w.microbatch}))
        return "stage " + std::to_string(s) + " runs " + describe(w) +
               " before its forward";
      if (w.phase == Phase::Weight && !backwards.count({w.chunk, w.microbatch}))
        return "stage " + std::to_string(s) + " runs " + describe(w) +
               " before its backward";
    }
  }
  for (int c = 0; c < chunks; ++c)
    for (int mb = 0; mb < microbatches; ++mb) {
      if (!forwards.count({c, mb}))
        return "no stage runs " + describe({Phase::Forward, c, mb});
      if (!backwards.count({c, mb}))
        return "no stage runs " + describe({Phase::Backward, c, mb});
      if (split && !weights.count({c, mb}))
        return "no stage runs " + describe({Phase::Weight, c, mb}) +
               " (the backward is cut in two: every B has its W)";
    }
  return "";
}

} // namespace

SimResult simulate(const std::vector<std::vector<Work>> &orders, int chunks,
                   int microbatches, const Costs &costs, Placement placement) {
  SimResult result;
  int stages = int(orders.size());
  result.stages.resize(stages);
  result.deadlock = checkCoverage(orders, chunks, microbatches, placement);
  if (!result.deadlock.empty())
    return result;

  std::map<std::pair<Key, Phase>, double> done; // end time, by work
  std::vector<size_t> next(stages, 0);
  std::vector<double> freeAt(stages, 0), busy(stages, 0);
  // The work a piece of work waits for on another chunk, if any.
  // (A W's backward ran before it on its own stage: coverage checked it.)
  auto dependency = [&](const Work &w) -> std::pair<bool, Work> {
    if (w.phase == Phase::Weight)
      return {false, {}};
    if (w.phase == Phase::Forward && w.chunk > 0)
      return {true, {Phase::Forward, w.chunk - 1, w.microbatch}};
    if (w.phase == Phase::Backward && w.chunk + 1 < chunks)
      return {true, {Phase::Backward, w.chunk + 1, w.microbatch}};
    if (w.phase == Phase::Backward) // the last chunk turns around
      return {true, {Phase::Forward, w.chunk, w.microbatch}};
    return {false, {}};
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      while (next[s] < orders[s].size()) {
        const Work &w = orders[s][next[s]];
        double ready = freeAt[s];
        auto [waits, on] = dependency(w);
        if (waits) {
          auto it = done.find({{on.chunk, on.microbatch}, on.phase});
          if (it == done.end())
            break;
          double transfer =
              stageOf(placement, on.chunk, stages) == s ? 0 : costs.transfer;
          ready = std::max(ready, it->second + transfer);
        }
        double cost = workCost(costs, w, stages, chunks);
        result.stages[s].push_back({w, ready, ready + cost});
        done[{{w.chunk, w.microbatch}, w.phase}] = ready + cost;
        freeAt[s] = ready + cost;
        busy[s] += cost;
        ++next[s];
        progress = true;
      }
    }
  }
  for (int s = 0; s < stages; ++s) {
    if (next[s] < orders[s].size()) {
      const Work &w = orders[s][next[s]];
      Work on = dependency(w).second;
      if (!result.deadlock.empty())
        result.deadlock += "; ";
      result.deadlock += "stage " + std::to_string(s) + " waits in " +
                         describe(w) + " for " + describe(on) +
                         ", which never runs first";
    }
    result.makespan = std::max(result.makespan, freeAt[s]);
    result.busy = std::max(result.busy, busy[s]);
    if (!result.stages[s].empty())
      result.idleWithin =
          std::max(result.idleWithin,
                   freeAt[s] - result.stages[s].front().start - busy[s]);
  }
  return result;
}

SimResult
fromMeasured(const std::vector<std::vector<Work>> &orders,
             const std::vector<std::vector<std::pair<double, double>>> &times) {
  SimResult result;
  result.stages.resize(orders.size());
  double first = 0, last = 0;
  bool any = false;
  for (size_t s = 0; s < orders.size(); ++s) {
    double busy = 0;
    for (size_t i = 0; i < orders[s].size() && i < times[s].size(); ++i) {
      auto [start, end] = times[s][i];
      result.stages[s].push_back({orders[s][i], start, end});
      busy += end - start;
      first = any ? std::min(first, start) : start;
      last = any ? std::max(last, end) : end;
      any = true;
    }
    result.busy = std::max(result.busy, busy);
    if (!result.stages[s].empty())
      result.idleWithin = std::max(result.idleWithin,
                                   result.stages[s].back().end -
                                       result.stages[s].front().start - busy);
  }
  // Times relative to the first start.
  for (auto &stage : result.stages)
    for (Timed &t : stage) {
      t.start -= first;
      t.end -= first;
    }
  result.makespan = last - first;
  return result;
}

int inFlight(const std::vector<Work> &order) {
  bool split = std::any_of(order.begin(), order.end(), [](const Work &w) {
    return w.phase == Phase::Weight;
  });
  // A microbatch is held from its forward to its last backward part.
  Phase last = split ? Phase::Weight : Phase::Backward;
  int now = 0, most = 0;
  for (const Work &w : order) {
    now += w.phase == Phase::Forward ? 1 : w.phase == last ? -1 : 0;
    most = std::max(most, now);
  }
  return most;
}

} // namespace strata::sim
