//===- PipelineSchedules.cpp - gpipe, 1F1B and interleaved 1F1B -----------===//
#include "compiler/PipelineSchedules.h"

#include <algorithm>

namespace strata::pipeline {

using sim::Phase;
using sim::Work;

std::string checkSchedule(ScheduleKind kind, int p, int v, int m) {
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
    return std::min(p - stage - 1, m);
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

std::vector<Work> stageOrder(ScheduleKind kind, int p, int v, int m, int stage,
                             std::vector<bool> *exchange) {
  std::vector<Work> order;
  std::vector<bool> points;
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

std::vector<std::vector<Work>>
scheduleOrders(ScheduleKind kind, int p, int v, int m,
               std::vector<std::vector<bool>> *exchange) {
  std::vector<std::vector<Work>> orders;
  if (exchange)
    exchange->assign(p, {});
  for (int s = 0; s < p; ++s)
    orders.push_back(
        stageOrder(kind, p, v, m, s, exchange ? &(*exchange)[s] : nullptr));
  return orders;
}

} // namespace strata::pipeline
