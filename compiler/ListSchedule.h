//===- ListSchedule.h - a pipeline order found on a clock -------*- C++ -*-===//
//
// Builds each stage's order of forwards (F), input gradients (B) and weight
// gradients (W) by running the stages on a clock and letting each, whenever
// it is free, start what is ready: a B first (the stage before waits for
// it), else an F while the stage holds fewer microbatches than its limit,
// else the oldest W (nothing waits for it, so it fills the holes). This is
// the zero-bubble paper's heuristic (Qi et al. 2024, §3) without its search
// over the warm-up's length. With unit costs and 2p−1 microbatches a stage
// it gives ZB-H2's parallelogram; with the plan's own costs, zb-auto.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_LISTSCHEDULE_H
#define STRATA_COMPILER_LISTSCHEDULE_H

#include "runtime/schedule/PipelineSim.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::pipeline {

struct ListScheduleProblem {
  int stages = 1;
  int microbatches = 1;
  /// Per chunk (0..chunks-1, in the model's order): its stage and the
  /// cost of its forward, B and W for one microbatch. Costs must be
  /// positive.
  std::vector<int> stageOfChunk;
  std::vector<double> forward, backward, weight;
  double transfer = 0; // between dependent work on different stages
  /// Per stage: the most chunk-microbatches it holds at once (from a
  /// forward to its W).
  std::vector<int> inFlightLimit;
  /// Where given (one entry a chunk): the bytes of one microbatch's stash
  /// slot in each pool (kept until B, held until W, passed from B to W),
  /// and per stage the most bytes its slots may take. A pool has as many
  /// slots as it ever holds at once (the memory plan's count), so a stage
  /// does not start an F that would need a slot past its limit (counting
  /// a passed slot for its B) unless it holds nothing (else it could never
  /// go on), and runs a pending W (which frees slots) before a B that
  /// would.
  std::vector<std::array<int64_t, 3>> slotBytes;
  std::vector<int64_t> memoryLimit;
};

/// The bytes the stash slots of a stage's `order` take, as the lowering
/// lays them out (compiler/StashSlots.h: per chunk and pool the most
/// microbatches it holds at once times the slot's bytes, or less where
/// pools share their slots).
int64_t stashBytes(const std::vector<sim::Work> &order,
                   const std::vector<std::array<int64_t, 3>> &slotBytes);

/// Every stage's order; "" in `error`, else why the stages cannot finish
/// (a limit below one, a chunk on no stage, costs missing or not
/// positive).
std::vector<std::vector<sim::Work>>
listSchedule(const ListScheduleProblem &problem, std::string &error);

} // namespace strata::pipeline

#endif
