//===- ZeroBubbleAuto.cpp - a zero-bubble order from the costs ------------===//
#include "compiler/ZeroBubbleAuto.h"
#include "compiler/ListSchedule.h"
#include "compiler/PipelineSchedules.h"
#include "runtime/schedule/TransferGroups.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <set>

namespace strata::pipeline {

using sim::Phase;
using sim::Work;

std::string stashBytesByChunk(const std::vector<int64_t> &flat,
                              std::vector<std::array<int64_t, 3>> &out) {
  out.clear();
  if (flat.size() % 3 != 0)
    return "stash-bytes takes three numbers a chunk (kept until B, held "
           "until W, passed from B to W), got " +
           std::to_string(flat.size());
  for (size_t i = 0; i + 2 < flat.size(); i += 3)
    out.push_back({flat[i], flat[i + 1], flat[i + 2]});
  return "";
}

std::string zeroBubbleInput(int stages, int microbatches,
                            std::vector<double> forward,
                            std::vector<double> backward,
                            std::vector<double> weight, double transfer,
                            const std::vector<int64_t> &stashBytes,
                            int64_t memoryLimit, ZeroBubbleAutoInput &out) {
  out = ZeroBubbleAutoInput{stages, microbatches};
  if (std::string error = stashBytesByChunk(stashBytes, out.slotBytes);
      !error.empty())
    return error;
  out.forward = std::move(forward);
  out.backward = std::move(backward);
  out.weight = std::move(weight);
  out.transfer = transfer;
  out.memoryLimit = memoryLimit;
  return "";
}

namespace {

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// "" or what is wrong with `input`.
std::string checkInput(const ZeroBubbleAutoInput &input) {
  int p = input.stages, m = input.microbatches;
  if (p < 1 || m < 1)
    return "zb-auto needs at least one stage and one microbatch";
  if (int64_t(p) * m > kZeroBubbleAutoMostWork)
    return "zb-auto searches at most " +
           std::to_string(kZeroBubbleAutoMostWork) +
           " stage-microbatches (p x m), and this layout has " +
           std::to_string(int64_t(p) * m) + ": name zb-h1 or 1f1b";
  auto each = [&](const auto &list) {
    return list.empty() || int(list.size()) == p;
  };
  if (!each(input.forward) || !each(input.backward) || !each(input.weight) ||
      !each(input.slotBytes))
    return "zb-auto needs a forward, B and W cost and the stash's bytes for "
           "each of the " +
           std::to_string(p) + " chunks";
  for (const std::vector<double> *costs :
       {&input.forward, &input.backward, &input.weight})
    for (double cost : *costs)
      if (!(cost > 0) || !std::isfinite(cost))
        return "zb-auto's costs must be positive and finite, got " +
               number(cost);
  if (!(input.transfer >= 0) || !std::isfinite(input.transfer))
    return "zb-auto's transfer cost must be at least 0, got " +
           number(input.transfer);
  for (const std::array<int64_t, 3> &pools : input.slotBytes)
    for (int64_t bytes : pools)
      if (bytes < 0)
        return "zb-auto's stash bytes must be at least 0, got " +
               std::to_string(bytes);
  if (input.memoryLimit < 0)
    return "zb-auto's stash limit must be at least 0 (0: 1F1B's), got " +
           std::to_string(input.memoryLimit);
  return "";
}

} // namespace

ZeroBubbleAutoResult zeroBubbleAuto(const ZeroBubbleAutoInput &input,
                                    std::string &error) {
  ZeroBubbleAutoResult best;
  error = checkInput(input);
  if (!error.empty())
    return best;
  int p = input.stages, m = input.microbatches;
  ListScheduleProblem problem;
  problem.stages = p;
  problem.microbatches = m;
  for (int c = 0; c < p; ++c)
    problem.stageOfChunk.push_back(c);
  problem.forward = input.forward.empty() ? std::vector<double>(p, 1.0)
                                          : input.forward;
  problem.backward = input.backward.empty() ? std::vector<double>(p, 1.0)
                                            : input.backward;
  problem.weight =
      input.weight.empty() ? std::vector<double>(p, 1.0) : input.weight;
  problem.transfer = input.transfer;
  problem.slotBytes = input.slotBytes.empty()
                          ? std::vector<std::array<int64_t, 3>>(p, {0, 1, 0})
                          : input.slotBytes;
  sim::Costs costs;
  costs.chunkForward = problem.forward;
  costs.chunkBackward = problem.backward;
  costs.chunkWeight = problem.weight;
  costs.transfer = input.transfer;
  auto mostStash = [&](const std::vector<std::vector<Work>> &orders) {
    int64_t most = 0;
    for (const std::vector<Work> &order : orders)
      most = std::max(most, stashBytes(order, problem.slotBytes));
    return most;
  };
  // 1F1B with each W right after its B: what the default limit allows.
  std::vector<std::vector<Work>> baseline = zeroBubbleH1Holding(p, m, 0);
  int64_t limit = input.memoryLimit > 0 ? input.memoryLimit : mostStash(baseline);
  best.memoryLimit = limit;
  problem.memoryLimit.assign(p, limit);

  bool found = false;
  auto consider = [&](std::vector<std::vector<Work>> orders,
                      const std::string &name) {
    int64_t stash = mostStash(orders);
    if (stash > limit)
      return;
    sim::SimResult run = sim::simulateTransfers(
        orders, sim::exchangeBeforeEachWork(orders), p, m, costs);
    if (!run.deadlock.empty())
      return;
    ++best.candidates;
    if (name == "1F1B")
      best.oneFOneB = run.makespan;
    if (!found || run.makespan < best.makespan ||
        (run.makespan == best.makespan && stash < best.stashBytes)) {
      found = true;
      best.orders = std::move(orders);
      best.chosen = name;
      best.makespan = run.makespan;
      best.stashBytes = stash;
    }
  };
  // Every k for small p, a ladder of them for large.
  std::set<int> steps;
  for (int k = 0; k < 2 * p; k = k < 8 ? k + 1 : k * 2)
    steps.insert(k);
  steps.insert(p - 1);
  steps.insert(2 * p - 2);
  consider(baseline, "1F1B");
  // ZB-H1 and the orders between it and 1F1B: stage r holds min(r, k) W's
  // back, where the stash allows them.
  for (int k : steps)
    if (k > 0 && k < p - 1)
      consider(zeroBubbleH1Holding(p, m, k),
               "ZB-H1 holding at most " + std::to_string(k) + " W's back");
  if (p > 1)
    consider(zeroBubbleH1Holding(p, m, p - 1), "ZB-H1");
  // Each stage holding back as many as its own stash allows (zb-h1's).
  std::vector<std::vector<Work>> within;
  std::vector<int> held;
  if (p > 1 && zeroBubbleH1Within(p, m, problem.slotBytes, limit, within,
                                  held)
                   .empty()) {
    consider(std::move(within),
             "ZB-H1 holding back " + describeHeld(held) + " W's a stage");
  }
  // The list schedule under in-flight limits: the same on every stage
  // (1 .. 2p−1), and 1F1B's p−s plus k more on stage s.
  for (int k : steps) {
    std::string why;
    problem.inFlightLimit.assign(p, std::min(m, k + 1));
    if (k + 1 <= 2 * p - 1) {
      auto orders = listSchedule(problem, why);
      if (why.empty())
        consider(std::move(orders),
                 "list schedule, at most " + std::to_string(k + 1) +
                     " in flight a stage");
    }
    if (k < p) {
      for (int s = 0; s < p; ++s)
        problem.inFlightLimit[s] = std::min(m, p - s + k);
      auto orders = listSchedule(problem, why);
      if (why.empty())
        consider(std::move(orders), "list schedule, at most p-s+" +
                                        std::to_string(k) +
                                        " in flight on stage s");
    }
  }
  if (!found)
    error = "no zero-bubble order keeps the stash within " +
            std::to_string(limit) + " bytes a stage";
  return best;
}

std::vector<int64_t> flattenOrders(
    const std::vector<std::vector<Work>> &orders) {
  std::vector<int64_t> flat;
  for (const std::vector<Work> &order : orders) {
    flat.push_back(int64_t(order.size()));
    for (const Work &w : order)
      flat.insert(flat.end(),
                  {int64_t(w.phase), int64_t(w.chunk), int64_t(w.microbatch)});
  }
  return flat;
}

std::string unflattenOrders(const std::vector<int64_t> &flat, int stages,
                            std::vector<std::vector<Work>> &orders) {
  orders.assign(size_t(std::max(stages, 0)), {});
  size_t at = 0;
  for (int s = 0; s < stages; ++s) {
    if (at >= flat.size())
      return "the order given ends before stage " + std::to_string(s);
    int64_t count = flat[at++];
    if (count < 0 || uint64_t(count) > (flat.size() - at) / 3)
      return "the order given says stage " + std::to_string(s) + " runs " +
             std::to_string(count) + " works, but " +
             std::to_string((flat.size() - at) / 3) + " follow";
    for (int64_t i = 0; i < count; ++i, at += 3) {
      int64_t phase = flat[at], chunk = flat[at + 1], mb = flat[at + 2];
      if (phase < 0 || phase > 2 || chunk < 0 || chunk > INT32_MAX || mb < 0 ||
          mb > INT32_MAX)
        return "the order given has a work (" + std::to_string(phase) + ", " +
               std::to_string(chunk) + ", " + std::to_string(mb) +
               ") on stage " + std::to_string(s) +
               " that is not a phase 0-2, a chunk and a microbatch";
      orders[size_t(s)].push_back({Phase(phase), int(chunk), int(mb)});
    }
  }
  if (at != flat.size())
    return "the order given has " + std::to_string(flat.size() - at) +
           " numbers after its " + std::to_string(stages) + " stages";
  return "";
}

} // namespace strata::pipeline
