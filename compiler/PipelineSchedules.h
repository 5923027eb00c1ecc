//===- PipelineSchedules.h - the pipeline schedules' orders -----*- C++ -*-===//
//
// The order each pipeline stage runs its forwards and backwards in: gpipe,
// 1F1B and interleaved 1F1B as Megatron-LM's schedules
// (megatron/core/pipeline_parallel/schedules.py) order them, and the
// zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., ICLR 2024), whose
// backwards are cut in two: B, the input's gradient, and W, the weights'.
// Plain C++: the Schedule pass writes these orders into dist.schedule ops,
// and the unit tests pin them.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_PIPELINESCHEDULES_H
#define STRATA_COMPILER_PIPELINESCHEDULES_H

#include "runtime/schedule/PipelineSim.h"
#include "runtime/schedule/ScheduleNames.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace strata::pipeline {

// The kinds and their names (runtime/schedule/ScheduleNames.h).
using sim::parseSchedule;
using sim::ScheduleKind;
using sim::scheduleName;

/// What a schedule needs of p stages, v chunks per stage and m
/// microbatches; "" when it fits, else the message.
std::string checkSchedule(ScheduleKind kind, int stages, int chunksPerStage,
                          int microbatches);

/// Forwards a stage runs before its steady state: 1F1B, ZB-H1 and the
/// interleaved schedule run one more forward before the first backward
/// (their steady state starts with it), ZB-H2 runs the first B next.
int warmupCount(ScheduleKind kind, int stages, int chunksPerStage,
                int microbatches, int stage);

/// The order of work on `stage` (chunk c = j·p + stage for the stage's
/// j-th chunk), and with `exchange` where the stage posts its pipeline
/// transfers, as Megatron's schedules do: one flag per work, true where an
/// exchange point comes before it. GPipe and 1F1B have one before every
/// work (1F1B's steady state: send_forward_recv_backward between a forward
/// and its backward, send_backward_recv_forward after); the interleaved
/// schedule's steady-state forward-backward pairs share one (its batched
/// four-way exchange), its warm-up forwards and cool-down backwards each
/// have one; the zero-bubble schedules have one before every work.
std::vector<sim::Work> stageOrder(ScheduleKind kind, int stages,
                                  int chunksPerStage, int microbatches,
                                  int stage,
                                  std::vector<bool> *exchange = nullptr);

/// ZB-H1's orders with stage r holding min(r, most) W's back instead of
/// r: most = 0 is 1F1B with each W right after its B, most = p − 1 ZB-H1.
/// A held W keeps its microbatch's share of the stash longer; zb-auto
/// weighs the holes it fills against that.
std::vector<std::vector<sim::Work>> zeroBubbleH1Holding(int p, int m,
                                                        int most);

/// ZB-H1 within a stash limit: stage r holds back as many of its first r
/// W's as keep its stash within `limit` bytes, counted from its chunk's
/// three pools' slot bytes (`slotBytes[r]`: kept until B, held until W,
/// passed from B to W); limit 0 is what the most-keeping stage keeps under
/// 1F1B's order with each W right after its B. Each stage's count goes to
/// `held`. A held W keeps about what a forward in flight keeps once
/// attention keeps no s x s scores (16 h a token a layer against 16-17 h),
/// so the paper's "ZB-H1 keeps 1F1B's memory" holds only this way. ""
/// or, where even holding none is over the limit, why.
std::string zeroBubbleH1Within(
    int p, int m, const std::vector<std::array<int64_t, 3>> &slotBytes,
    int64_t limit, std::vector<std::vector<sim::Work>> &orders,
    std::vector<int> &held);

/// ZB-V within a stash limit: each stage runs ZB-V's order, except that
/// where a forward or a B would take its stash past `limit` bytes while
/// W's wait, it runs the oldest of them first (a W frees its microbatch's
/// slots and waits on nothing but its own B, so no order it makes can
/// hang). Counted from each chunk's three pools' slot bytes (`slotBytes[c]`
/// for chunk c of 2p: kept until B, held until W, passed from B to W), as
/// the stash's running sum (its live slots' bytes; the memory plan's slot
/// layout may round above it). Limit 0 is, on each stage, the most that
/// stage keeps up to its last forward: ZB-V's cool-down runs B's first and
/// holds their W's back to fill its holes, and each B adds the values it
/// passes to W, so a stage whose passed values weigh more than a forward's
/// would keep most at its very end, past the warm-up's 2p chunks in flight
/// (1F1B's memory). Each stage's count of W's run early goes to `early`.
/// "" or what is wrong with the input, or, where a stage keeps more than
/// `limit` even with each W right after its B (the least any order of its
/// works keeps: ZB-V's steady state runs them so already, and a cool-down
/// B passing W more than a forward keeps can put it above the default),
/// why.
std::string zeroBubbleVWithin(
    int p, int m, const std::vector<std::array<int64_t, 3>> &slotBytes,
    int64_t limit, std::vector<std::vector<sim::Work>> &orders,
    std::vector<int> &early);

/// ZB-V's orders with each W right after its B: what zb-v's stash is
/// measured under (B's values for W written over the forward's where
/// that keeps least), before its cool-down holds back the W's that fit.
std::vector<std::vector<sim::Work>> zeroBubbleVEachWAfterItsB(int p, int m);

/// Each stage's count of W's held back, for a message: "0,0,1,1", or for
/// more than 8 stages "0 to 11".
std::string describeHeld(const std::vector<int> &held);

/// Every stage's order (and exchange points). zb-auto's is its search at
/// unit costs, memory counted in microbatches (run again on each call; the
/// Schedule pass searches with a plan's own costs, which may give another
/// order); none where the search refuses p and m.
std::vector<std::vector<sim::Work>>
scheduleOrders(ScheduleKind kind, int stages, int chunksPerStage,
               int microbatches,
               std::vector<std::vector<bool>> *exchange = nullptr);

} // namespace strata::pipeline

#endif
