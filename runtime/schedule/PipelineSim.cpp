//===- PipelineSim.cpp - a pipeline schedule run on a clock ---------------===//
#include "runtime/schedule/PipelineSim.h"

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

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

namespace {

using Key = std::pair<int, int>; // (chunk, microbatch)

/// Checks that the orders hold each forward and backward once, on the
/// chunk's stage. "" when they do.
std::string checkCoverage(const std::vector<std::vector<Work>> &orders,
                          int chunks, int microbatches) {
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
      if (w.chunk % stages != s)
        return "stage " + std::to_string(s) + " runs " + describe(w) +
               ", but chunk " + std::to_string(w.chunk) + " lives on stage " +
               std::to_string(w.chunk % stages);
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
                   int microbatches, const Costs &costs) {
  SimResult result;
  int stages = int(orders.size());
  result.stages.resize(stages);
  result.deadlock = checkCoverage(orders, chunks, microbatches);
  if (!result.deadlock.empty())
    return result;
  double perChunk = double(stages) / double(chunks);
  double forward = costs.forward * perChunk,
         backward = costs.backward * perChunk, weight = costs.weight * perChunk;

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
          double transfer = on.chunk % stages == s ? 0 : costs.transfer;
          ready = std::max(ready, it->second + transfer);
        }
        double cost = w.phase == Phase::Forward    ? forward
                      : w.phase == Phase::Backward ? backward
                                                   : weight;
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

namespace {

/// A transfer between stages: a forward's activation to the next chunk, a
/// backward's gradient to the previous one.
struct Transfer {
  bool gradient = false;
  int fromChunk = 0, microbatch = 0;
  auto key() const { return std::tie(gradient, fromChunk, microbatch); }
  bool operator<(const Transfer &o) const { return key() < o.key(); }
  bool operator==(const Transfer &o) const { return key() == o.key(); }
};

struct Group {
  std::vector<Transfer> sends, receives; // to or from other stages
  int before = 0;                        // the work index this group precedes
};

} // namespace

std::string checkTransferGroups(const std::vector<std::vector<Work>> &orders,
                                const std::vector<std::vector<bool>> &exchange,
                                int chunks) {
  int stages = int(orders.size());
  auto stageOf = [&](int chunk) { return chunk % stages; };
  // What a work sends and receives across stages (a W neither).
  auto sends = [&](const Work &w, std::vector<Transfer> &out) {
    if (w.phase == Phase::Weight)
      return;
    int to = w.phase == Phase::Forward ? w.chunk + 1 : w.chunk - 1;
    if (to >= 0 && to < chunks && stageOf(to) != stageOf(w.chunk))
      out.push_back({w.phase == Phase::Backward, w.chunk, w.microbatch});
  };
  auto receives = [&](const Work &w, std::vector<Transfer> &out) {
    if (w.phase == Phase::Weight)
      return;
    int from = w.phase == Phase::Forward ? w.chunk - 1 : w.chunk + 1;
    if (from >= 0 && from < chunks && stageOf(from) != stageOf(w.chunk))
      out.push_back({w.phase == Phase::Backward, from, w.microbatch});
  };
  std::vector<std::vector<Group>> groups(stages);
  for (int s = 0; s < stages; ++s) {
    const std::vector<Work> &order = orders[s];
    std::vector<Transfer> pending;
    for (size_t i = 0; i <= order.size(); ++i) {
      bool point = i == order.size() || i == 0 ||
                   (i < exchange[s].size() && exchange[s][i]);
      if (!point) {
        sends(order[i], pending);
        continue;
      }
      Group group;
      group.before = int(i);
      group.sends = std::move(pending);
      pending.clear();
      for (size_t j = i; j < order.size(); ++j) {
        if (j > i && j < exchange[s].size() && exchange[s][j])
          break;
        receives(order[j], group.receives);
      }
      groups[s].push_back(std::move(group));
      if (i < order.size())
        sends(order[i], pending);
    }
  }
  // Matched transfers, per stage's current group.
  std::vector<size_t> at(stages, 0);
  std::vector<std::set<std::pair<bool, Transfer>>> done(stages);
  auto current = [&](int s) -> const Group * {
    return at[s] < groups[s].size() ? &groups[s][at[s]] : nullptr;
  };
  auto has = [](const std::vector<Transfer> &list, const Transfer &t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      const Group *group = current(s);
      if (!group)
        continue;
      for (const Transfer &t : group->sends) {
        if (done[s].count({true, t}))
          continue;
        int to = stageOf(t.gradient ? t.fromChunk - 1 : t.fromChunk + 1);
        const Group *other = current(to);
        if (other && has(other->receives, t)) {
          done[s].insert({true, t});
          done[to].insert({false, t});
          progress = true;
        }
      }
      if (done[s].size() == group->sends.size() + group->receives.size()) {
        ++at[s];
        done[s].clear();
        progress = true;
      }
    }
  }
  std::string stuck;
  for (int s = 0; s < stages; ++s) {
    const Group *group = current(s);
    if (!group)
      continue;
    std::string what;
    for (const Transfer &t : group->sends)
      if (!done[s].count({true, t}))
        what = "sending " +
               describe({t.gradient ? Phase::Backward : Phase::Forward,
                         t.fromChunk, t.microbatch}) +
               "'s output";
    for (const Transfer &t : group->receives)
      if (what.empty() && !done[s].count({false, t}))
        what = "receiving " +
               describe({t.gradient ? Phase::Backward : Phase::Forward,
                         t.fromChunk, t.microbatch}) +
               "'s output";
    size_t before = size_t(group->before);
    stuck +=
        (stuck.empty() ? "" : "; ") + std::string("stage ") +
        std::to_string(s) + " waits " + what +
        (before < orders[s].size() ? " before " + describe(orders[s][before])
                                   : " after its last work");
  }
  return stuck;
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
