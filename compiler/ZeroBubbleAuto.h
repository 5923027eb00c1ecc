//===- ZeroBubbleAuto.h - a zero-bubble order from the costs ----*- C++ -*-===//
//
// zb-auto: the order that runs one iteration soonest under a memory limit,
// from the chunks' own forward, B and W costs and their stash's bytes. The
// candidates are the list schedule (compiler/ListSchedule.h) under a range
// of in-flight limits — the paper's search over the warm-up's length —
// and ZB-H1 with each stage holding up to k of its W's back (k = 0: 1F1B
// with each W right after its B; k = p − 1: ZB-H1); each is run with its
// transfers posted as the executor posts them (sim::simulateTransfers), so
// that an order whose sends would hold back its receives is priced as it
// runs, and one over the memory limit or that could hang is dropped.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_ZEROBUBBLEAUTO_H
#define STRATA_COMPILER_ZEROBUBBLEAUTO_H

#include "runtime/schedule/PipelineSim.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::pipeline {

struct ZeroBubbleAutoInput {
  int stages = 1, microbatches = 1; // one chunk a stage: chunk c on stage c
  /// Per chunk: its forward's, B's and W's cost (empty: 1 each).
  std::vector<double> forward, backward, weight;
  double transfer = 0; // between stages
  /// Per chunk: one microbatch's stash slot in each pool, in bytes: kept
  /// until B, held until W, passed from B to W (empty: a unit held until
  /// W, so that memory counts microbatches in flight).
  std::vector<std::array<int64_t, 3>> slotBytes;
  /// The most a stage's stash may take; 0: the most 1F1B's stages take
  /// (with each W right after its B).
  int64_t memoryLimit = 0;
};

struct ZeroBubbleAutoResult {
  std::vector<std::vector<sim::Work>> orders; // per stage
  std::string chosen;   // which candidate: "list, in flight ≤ 5", "ZB-H1"
  double makespan = 0;  // in the costs' unit
  double oneFOneB = 0;  // 1F1B's (W after B) in the same unit
  int64_t memoryLimit = 0, stashBytes = 0; // the limit, the most a stage takes
  int candidates = 0;                      // run and within the limit
};

/// Stash bytes given flat, three a chunk (kept until B, held until W,
/// passed from B to W), as one array a chunk; "" or what is wrong.
std::string stashBytesByChunk(const std::vector<int64_t> &flat,
                              std::vector<std::array<int64_t, 3>> &out);

/// The input from the Schedule pass's options (and strata-compile's
/// priced costs): the stash's bytes flat, three a chunk; "" or what is
/// wrong with them.
std::string zeroBubbleInput(int stages, int microbatches,
                            std::vector<double> forward,
                            std::vector<double> backward,
                            std::vector<double> weight, double transfer,
                            const std::vector<int64_t> &stashBytes,
                            int64_t memoryLimit, ZeroBubbleAutoInput &out);

/// The most stage-microbatches (p x m) zb-auto searches over: its
/// candidates are run on clocks whose work grows with them.
inline constexpr int64_t kZeroBubbleAutoMostWork = int64_t(1) << 18;

/// The order, or "" in `error` and why none can be made (what is wrong
/// with the input, or no order within the limit).
ZeroBubbleAutoResult zeroBubbleAuto(const ZeroBubbleAutoInput &input,
                                    std::string &error);

/// zb-auto's choice flattened for the Schedule pass (strata-compile's
/// pricing has searched already): per stage its count of works, then each
/// work's phase (0 forward, 1 B, 2 W), chunk and microbatch.
std::vector<int64_t> flattenOrders(
    const std::vector<std::vector<sim::Work>> &orders);

/// `flat` read back into `stages` orders; "" or what is wrong with it (the
/// works' ranges and coverage are the simulator's to check).
std::string unflattenOrders(const std::vector<int64_t> &flat, int stages,
                            std::vector<std::vector<sim::Work>> &orders);

} // namespace strata::pipeline

#endif
