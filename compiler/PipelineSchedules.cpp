//===- PipelineSchedules.cpp - the pipeline schedules' orders -------------===//
#include "compiler/PipelineSchedules.h"
#include "compiler/ListSchedule.h"
#include "compiler/StashSlots.h"
#include "compiler/ZeroBubbleAuto.h"
#include "runtime/schedule/TransferGroups.h"

#include <algorithm>
#include <set>

namespace strata::pipeline {

using sim::Phase;
using sim::Work;

std::string checkSchedule(ScheduleKind kind, int p, int v, int m) {
  if (kind == ScheduleKind::ZeroBubbleV && v != 2)
    return "--pipeline-schedule zb-v runs two chunks a stage in a V, but "
           "there are " +
           std::to_string(v) +
           ": set --num-layers-per-virtual-pipeline-stage to half of each "
           "stage's layers";
  if (sim::cutsBackward(kind) && kind != ScheduleKind::ZeroBubbleV && v != 1)
    return std::string("--pipeline-schedule ") + scheduleName(kind) +
           " runs one chunk per stage, but there are " + std::to_string(v) +
           " (virtual stages)";
  if (kind == ScheduleKind::OneFOneB && v != 1)
    return "--pipeline-schedule 1f1b runs one chunk per stage, but there are " +
           std::to_string(v) +
           " (virtual stages): use --pipeline-schedule interleaved or gpipe";
  if (kind == ScheduleKind::Interleaved && v < 2)
    return "--pipeline-schedule interleaved needs at least 2 chunks per "
           "stage: set --num-layers-per-virtual-pipeline-stage";
  if (kind == ScheduleKind::Interleaved && m % p != 0)
    return "the interleaved schedule needs the number of microbatches (" +
           std::to_string(m) +
           ") to be a multiple of the pipeline-parallel size (" +
           std::to_string(p) + ")";
  return "";
}

int warmupCount(ScheduleKind kind, int p, int v, int m, int stage) {
  switch (kind) {
  case ScheduleKind::GPipe:
    return v * m;
  case ScheduleKind::OneFOneB:
  case ScheduleKind::ZeroBubbleH1:
    return std::min(p - stage - 1, m);
  case ScheduleKind::ZeroBubbleH2:
    return std::min(2 * (p - stage) - 1, m);
  case ScheduleKind::ZeroBubbleAuto:
  case ScheduleKind::ZeroBubbleV: {
    std::vector<Work> order = scheduleOrders(kind, p, v, m)[stage];
    return int(std::find_if(order.begin(), order.end(),
                            [](const Work &w) {
                              return w.phase != Phase::Forward;
                            }) -
               order.begin());
  }
  case ScheduleKind::Interleaved: {
    // Megatron: with as many microbatches as stages, all forwards first;
    // otherwise (v−1)·p forwards on every stage plus two per stage after
    // this one, so that later stages can start 1F1B at once.
    int total = v * m;
    if (m == p)
      return total;
    return std::min(2 * (p - stage - 1) + (v - 1) * p, total);
  }
  }
  return 0;
}

namespace {

/// ZB-H1 (Qi et al. 2024, §2.1): 1F1B's warm-up, then each B followed by a
/// W, except that stage r holds its first r W's back (to the cool-down,
/// where they fill the holes left while the last B's come back) — or
/// `held` of them. Every stage then holds p microbatches at most, as
/// 1F1B's first does, and the bubble is a third of 1F1B's when F, B and W
/// cost the same.
std::vector<Work> zeroBubbleH1(int p, int m, int stage, int held) {
  std::vector<Work> order;
  int warmup = warmupCount(ScheduleKind::ZeroBubbleH1, p, 1, m, stage);
  int weights = 0;
  auto weight = [&] { order.push_back({Phase::Weight, stage, weights++}); };
  for (int mb = 0; mb < warmup; ++mb)
    order.push_back({Phase::Forward, stage, mb});
  for (int k = 0; k < m - warmup; ++k) {
    order.push_back({Phase::Forward, stage, warmup + k});
    order.push_back({Phase::Backward, stage, k});
    if (k >= held)
      weight();
  }
  for (int k = m - warmup; k < m; ++k) {
    order.push_back({Phase::Backward, stage, k});
    weight();
  }
  while (weights < m)
    weight();
  return order;
}

/// ZB-H2 (§2.2): the list schedule with unit costs where every stage may
/// hold 2p−1 microbatches: 2(p−r)−1 forwards on stage r before its first
/// B, then B's as they come with F's and W's between, so that every stage
/// runs without a hole from its first work to its last (the paper's
/// parallelogram).
std::vector<std::vector<Work>> zeroBubbleH2(int p, int m) {
  ListScheduleProblem problem;
  problem.stages = p;
  problem.microbatches = m;
  for (int c = 0; c < p; ++c)
    problem.stageOfChunk.push_back(c);
  problem.forward.assign(p, 1);
  problem.backward.assign(p, 1);
  problem.weight.assign(p, 1);
  problem.inFlightLimit.assign(p, 2 * p - 1);
  std::string error; // none: the limits and costs are positive
  return listSchedule(problem, error);
}

/// ZB-V (Qi et al. 2024, appendix; PyTorch's ScheduleZBVZeroBubble): two
/// chunks a stage in a V, a = r and b = 2p−1−r on stage r, so that the
/// first stage runs the first forward and the last backward and the turn
/// from chunk p−1 to p stays on the last stage. Stage r runs
///   2(p−r)−1 forwards of a; r of (F b, F a); p−r of (F b, B b, W b);
///   then (F a, B a, W a, F b, B b, W b) until every forward has run
///   (stage 0: (B a, W a, F a, F b, B b, W b));
///   then r of (B a, B b); p−r of (B a, W a); the W's left, b's first.
/// It needs 2p−1 microbatches to fill; with fewer, it is made for 2p−1
/// and the works of the microbatches past m are left out (a microbatch's
/// works depend on its own only, so what is left cannot wait on them).
std::vector<Work> zeroBubbleV(int p, int m, int r) {
  int n = std::max(m, 2 * p - 1);
  int a = r, b = 2 * p - 1 - r;
  int fa = 0, fb = 0, ba = 0, bb = 0, wa = 0, wb = 0;
  std::vector<Work> order;
  auto add = [&](Phase phase, int chunk, int &count) {
    if (count < m)
      order.push_back({phase, chunk, count});
    ++count;
  };
  for (int k = 0; k < 2 * (p - r) - 1; ++k)
    add(Phase::Forward, a, fa);
  for (int k = 0; k < r; ++k) {
    add(Phase::Forward, b, fb);
    add(Phase::Forward, a, fa);
  }
  for (int k = 0; k < p - r; ++k) {
    add(Phase::Forward, b, fb);
    add(Phase::Backward, b, bb);
    add(Phase::Weight, b, wb);
  }
  while (fb < n) {
    // The first stage's first chunk sends no gradient (its B is empty, W
    // is its whole backward): it runs the oldest microbatch's W before
    // the next forward, so that it never holds that forward beside 2p − 1
    // others and the last chunk's (a slot that cannot move needs room
    // for both), at no cost in time (its forward has slack there).
    if (r == 0) {
      add(Phase::Backward, a, ba);
      add(Phase::Weight, a, wa);
    }
    if (fa < n)
      add(Phase::Forward, a, fa);
    if (r != 0) {
      add(Phase::Backward, a, ba);
      add(Phase::Weight, a, wa);
    }
    add(Phase::Forward, b, fb);
    add(Phase::Backward, b, bb);
    add(Phase::Weight, b, wb);
  }
  for (int k = 0; k < r; ++k) {
    add(Phase::Backward, a, ba);
    add(Phase::Backward, b, bb);
  }
  for (int k = 0; k < p - r; ++k) {
    add(Phase::Backward, a, ba);
    add(Phase::Weight, a, wa);
  }
  while (wb < n)
    add(Phase::Weight, b, wb);
  while (wa < n)
    add(Phase::Weight, a, wa);
  return order;
}

} // namespace

std::vector<Work> stageOrder(ScheduleKind kind, int p, int v, int m, int stage,
                             std::vector<bool> *exchange) {
  std::vector<Work> order;
  std::vector<bool> points;
  if (sim::cutsBackward(kind)) {
    order = kind == ScheduleKind::ZeroBubbleH1
                ? zeroBubbleH1(p, m, stage, stage)
            : kind == ScheduleKind::ZeroBubbleV
                ? zeroBubbleV(p, m, stage)
                : scheduleOrders(kind, p, v, m)[stage];
    // An exchange point before every work: a B's gradient goes out before
    // the W after it runs, not after.
    if (exchange)
      exchange->assign(order.size(), true);
    return order;
  }
  // Where the exchange points fall, as Megatron's schedules post: before
  // every work, except that the interleaved steady state's forward and
  // its backward share one (its batched four-way exchange).
  auto add = [&](Work work, bool point) {
    order.push_back(work);
    points.push_back(point);
  };
  if (kind == ScheduleKind::GPipe) {
    for (int j = 0; j < v; ++j)
      for (int mb = 0; mb < m; ++mb)
        add({Phase::Forward, j * p + stage, mb}, true);
    for (int j = v; j-- > 0;)
      for (int mb = 0; mb < m; ++mb)
        add({Phase::Backward, j * p + stage, mb}, true);
  } else {
    // The k-th forward (or backward) of the stage: microbatches go in
    // groups of p through each chunk in turn, forward through chunks
    // 0..v−1 and backward through v−1..0.
    auto nth = [&](int k, Phase phase) {
      int group = k / (p * v), inGroup = k % (p * v);
      int j = inGroup / p;
      if (phase == Phase::Backward)
        j = v - 1 - j;
      return Work{phase, j * p + stage, group * p + inGroup % p};
    };
    int total = v * m;
    int warmup = warmupCount(kind, p, v, m, stage);
    bool pairs = kind == ScheduleKind::Interleaved;
    for (int k = 0; k < warmup; ++k)
      add(nth(k, Phase::Forward), true);
    for (int k = 0; k < total - warmup; ++k) {
      add(nth(warmup + k, Phase::Forward), true);
      add(nth(k, Phase::Backward), !pairs);
    }
    for (int k = total - warmup; k < total; ++k)
      add(nth(k, Phase::Backward), true);
  }
  if (exchange)
    *exchange = std::move(points);
  return order;
}

std::vector<std::vector<Work>> zeroBubbleH1Holding(int p, int m, int most) {
  std::vector<std::vector<Work>> orders;
  for (int s = 0; s < p; ++s)
    orders.push_back(zeroBubbleH1(p, m, s, std::min(s, std::max(most, 0))));
  return orders;
}

namespace {

/// "" or what is wrong with a stash-limited order's input: a slot's bytes
/// in each pool for each of `count` `what` (stages, chunks), none below
/// 0, and a limit of at least 0 (0 is `zeroIs`).
std::string checkStashLimited(const std::string &schedule,
                              const std::vector<std::array<int64_t, 3>> &slotBytes,
                              int count, const std::string &what, int64_t limit,
                              const std::string &zeroIs) {
  if (int64_t(slotBytes.size()) != int64_t(count))
    return schedule + " within a stash limit needs the stash's bytes for "
                      "each of the " +
           std::to_string(count) + " " + what + ", got " +
           std::to_string(slotBytes.size());
  for (const std::array<int64_t, 3> &pools : slotBytes)
    for (int64_t bytes : pools)
      if (bytes < 0)
        return schedule + "'s stash bytes must be at least 0, got " +
               std::to_string(bytes);
  if (limit < 0)
    return schedule + "'s stash limit must be at least 0 (0: " + zeroIs +
           "), got " + std::to_string(limit);
  return "";
}

} // namespace

std::string zeroBubbleH1Within(
    int p, int m, const std::vector<std::array<int64_t, 3>> &slotBytes,
    int64_t limit, std::vector<std::vector<Work>> &orders,
    std::vector<int> &held) {
  orders.clear();
  held.clear();
  if (std::string error = checkStashLimited("ZB-H1", slotBytes, p, "stages",
                                             limit, "1F1B's");
      !error.empty())
    return error;
  auto bytesOf = [&](int stage, int holding) {
    return stashBytes(zeroBubbleH1(p, m, stage, holding), slotBytes);
  };
  if (limit == 0)
    for (int s = 0; s < p; ++s)
      limit = std::max(limit, bytesOf(s, 0));
  // A stage's stash grows with each W it holds (each is held longer):
  // the most that fit, by bisection.
  for (int s = 0; s < p; ++s) {
    if (int64_t least = bytesOf(s, 0); least > limit)
      return "ZB-H1 keeps at least " + std::to_string(least) +
             " bytes of stash on stage " + std::to_string(s) +
             " (1F1B's order with each W after its B), over the limit of " +
             std::to_string(limit);
    int fits = 0, over = s + 1; // bytesOf(fits) <= limit < bytesOf(over)
    while (over - fits > 1) {
      int k = fits + (over - fits) / 2;
      (bytesOf(s, k) <= limit ? fits : over) = k;
    }
    orders.push_back(zeroBubbleH1(p, m, s, fits));
    held.push_back(fits);
  }
  return "";
}

namespace {

/// Runs `w` on a stage whose stash holds `live` bytes (updated): the most
/// it holds while `w` runs, its slots taken before its own are freed.
int64_t runStash(const Work &w,
                 const std::vector<std::array<int64_t, 3>> &slotBytes,
                 int64_t &live) {
  int64_t most = live;
  for (const StashMove &move :
       stashMoves(w.phase, w.chunk, w.microbatch, /*cut=*/true)) {
    int64_t bytes = slotBytes[size_t(w.chunk)][size_t(move.key.second)];
    if (move.does == StashMove::Does::Take)
      most = std::max(most, live = saturatingAdd(live, bytes));
    else if (move.does == StashMove::Does::Free)
      live -= bytes;
  }
  return most;
}

} // namespace

std::string zeroBubbleVWithin(
    int p, int m, const std::vector<std::array<int64_t, 3>> &slotBytes,
    int64_t limit, std::vector<std::vector<Work>> &orders,
    std::vector<int> &early) {
  orders.clear();
  early.clear();
  if (p < 1 || m < 1)
    return "ZB-V needs at least one stage and one microbatch";
  if (std::string error = checkStashLimited("ZB-V", slotBytes, 2 * p,
                                             "chunks", limit,
                                             "its own up to the cool-down");
      !error.empty())
    return error;
  std::vector<std::vector<Work>> plain, eachWAfterItsB =
                                          zeroBubbleVEachWAfterItsB(p, m);
  for (int r = 0; r < p; ++r)
    plain.push_back(zeroBubbleV(p, m, r));
  // The most a stage keeps running `order` up to `end`.
  auto mostKept = [&](const std::vector<Work> &order,
                      std::vector<Work>::const_iterator end) {
    int64_t live = 0, most = 0;
    for (auto it = order.begin(); it != end; ++it)
      most = std::max(most, runStash(*it, slotBytes, live));
    return most;
  };
  for (int r = 0; r < p; ++r) {
    const std::vector<Work> &order = plain[size_t(r)];
    // The least any order of these works keeps: each W right after its B
    // (a W only frees). Running waiting W's first wherever a forward or a
    // B would pass the limit keeps any limit at least that.
    const std::vector<Work> &least = eachWAfterItsB[size_t(r)];
    if (int64_t floor = mostKept(least, least.end()); limit > 0 && floor > limit)
      return "ZB-V keeps at least " + std::to_string(floor) +
             " bytes of stash on stage " + std::to_string(r) +
             " (its order with each W right after its B), over the limit "
             "of " +
             std::to_string(limit);
    auto lastForward =
        std::find_if(order.rbegin(), order.rend(), [](const Work &w) {
          return w.phase == Phase::Forward;
        }).base();
    int64_t stageLimit = limit > 0 ? limit : mostKept(order, lastForward);
    std::vector<Work> &out = orders.emplace_back();
    int &moved = early.emplace_back(0);
    std::vector<Work> waiting; // W's whose B has run, oldest first
    std::set<std::pair<int, int>> ran; // W's run early: (chunk, microbatch)
    int64_t live = 0;
    for (const Work &w : order) {
      if (w.phase == Phase::Weight) {
        if (ran.count({w.chunk, w.microbatch}))
          continue;
        auto mine = std::find_if(waiting.begin(), waiting.end(),
                                 [&](const Work &b) {
                                   return b.chunk == w.chunk &&
                                          b.microbatch == w.microbatch;
                                 });
        if (mine != waiting.end())
          waiting.erase(mine);
      } else {
        for (;;) {
          int64_t trial = live;
          if (waiting.empty() || runStash(w, slotBytes, trial) <= stageLimit)
            break;
          Work oldest = waiting.front();
          waiting.erase(waiting.begin());
          runStash(oldest, slotBytes, live);
          out.push_back(oldest);
          ran.insert({oldest.chunk, oldest.microbatch});
          ++moved;
        }
      }
      runStash(w, slotBytes, live);
      out.push_back(w);
      if (w.phase == Phase::Backward)
        waiting.push_back({Phase::Weight, w.chunk, w.microbatch});
    }
  }
  return "";
}

std::vector<std::vector<Work>> zeroBubbleVEachWAfterItsB(int p, int m) {
  std::vector<std::vector<Work>> orders;
  for (int r = 0; r < p; ++r) {
    std::vector<Work> &out = orders.emplace_back();
    for (const Work &w : zeroBubbleV(p, m, r)) {
      if (w.phase == Phase::Weight)
        continue;
      out.push_back(w);
      if (w.phase == Phase::Backward)
        out.push_back({Phase::Weight, w.chunk, w.microbatch});
    }
  }
  return orders;
}

std::string describeHeld(const std::vector<int> &held) {
  if (held.empty())
    return "";
  if (held.size() > 8)
    return std::to_string(*std::min_element(held.begin(), held.end())) +
           " to " + std::to_string(*std::max_element(held.begin(), held.end()));
  std::string text;
  for (int h : held)
    text += (text.empty() ? "" : ",") + std::to_string(h);
  return text;
}

std::vector<std::vector<Work>>
scheduleOrders(ScheduleKind kind, int p, int v, int m,
               std::vector<std::vector<bool>> *exchange) {
  std::vector<std::vector<Work>> orders;
  if (exchange)
    exchange->assign(p, {});
  if (kind == ScheduleKind::ZeroBubbleH2 ||
      kind == ScheduleKind::ZeroBubbleAuto) {
    // One list schedule makes every stage's order; zb-auto's here is from
    // unit costs and memory in microbatches (the Schedule pass gives it
    // the plan's own).
    std::string error; // only where checkSchedule would refuse p and m
    orders = kind == ScheduleKind::ZeroBubbleH2
                 ? zeroBubbleH2(p, m)
                 : zeroBubbleAuto(ZeroBubbleAutoInput{p, m}, error).orders;
    orders.resize(size_t(std::max(p, 0)));
    if (exchange)
      *exchange = sim::exchangeBeforeEachWork(orders);
    return orders;
  }
  for (int s = 0; s < p; ++s)
    orders.push_back(
        stageOrder(kind, p, v, m, s, exchange ? &(*exchange)[s] : nullptr));
  return orders;
}

} // namespace strata::pipeline
