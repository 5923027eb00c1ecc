//===- ScheduleNames.h - the pipeline schedules by name ---------*- C++ -*-===//
//
// The schedules `--pipeline-schedule` names and a plan records: each
// kind's flag value and its name in pictures and reports, in one table
// that the compiler's checks, its schedules (compiler/PipelineSchedules.h)
// and strata-inspect read. A schedule is a row here and its order there.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_SCHEDULE_SCHEDULENAMES_H
#define STRATA_RUNTIME_SCHEDULE_SCHEDULENAMES_H

#include <optional>
#include <string>
#include <string_view>

namespace strata::sim {

enum class ScheduleKind {
  GPipe,
  OneFOneB,
  Interleaved,
  ZeroBubbleH1,
  ZeroBubbleH2,
  ZeroBubbleAuto,
  ZeroBubbleV,
};

/// Where a schedule's chunks live. Looped: chunk c on stage c mod p (the
/// last stage hands the next chunk back to the first). V: chunk c on stage
/// c for c < p and on 2p − 1 − c after, so that the first stage holds the
/// first chunk and the last, and the turn stays on the last stage.
enum class Placement { Looped, V };

/// The stage chunk `chunk` lives on under `placement` with `stages`.
inline int stageOf(Placement placement, int chunk, int stages) {
  if (placement == Placement::V && (chunk / stages) % 2 == 1)
    return stages - 1 - chunk % stages;
  return chunk % stages;
}

/// The transfer streams (lanes) a stage posts pipeline transfers on: one
/// per kind (a forward's activations, a backward's gradients) and
/// direction, so that a receive waiting on one never holds back a send on
/// another. A transfer's lane at both of its ends; one to the stage itself
/// goes up. The runtime's streams are these, in this order
/// (kTransferStreams).
inline constexpr int kTransferLanes = 4;
inline int transferLane(int fromStage, int toStage, bool gradient) {
  return (toStage < fromStage ? 1 : 0) + (gradient ? 2 : 0);
}

struct ScheduleName {
  ScheduleKind kind;
  const char *flag;  // --pipeline-schedule's value, the plan's field
  const char *title; // in pictures and reports
  /// Runs each backward cut in two: B, the input's gradient, and W, the
  /// weights' (the zero-bubble schedules, Qi et al. 2024).
  bool cutsBackward = false;
  Placement placement = Placement::Looped;
};

inline constexpr ScheduleName kScheduleNames[] = {
    {ScheduleKind::GPipe, "gpipe", "GPipe"},
    {ScheduleKind::OneFOneB, "1f1b", "1F1B"},
    {ScheduleKind::Interleaved, "interleaved", "interleaved 1F1B"},
    {ScheduleKind::ZeroBubbleH1, "zb-h1", "ZB-H1", true},
    {ScheduleKind::ZeroBubbleH2, "zb-h2", "ZB-H2", true},
    {ScheduleKind::ZeroBubbleAuto, "zb-auto", "zb-auto", true},
    {ScheduleKind::ZeroBubbleV, "zb-v", "ZB-V", true, Placement::V},
};

/// A flag value to its kind; nullopt for anything else.
std::optional<ScheduleKind> parseSchedule(std::string_view flag);
/// The kind's flag value.
const char *scheduleName(ScheduleKind kind);
/// The kind's name in pictures and reports.
const char *scheduleTitle(ScheduleKind kind);
/// Whether the kind runs the backward cut in two (B and W).
bool cutsBackward(ScheduleKind kind);
/// Where the kind places its chunks.
Placement placementOf(ScheduleKind kind);
/// Every flag value, for messages: "gpipe, 1f1b, ... or zb-h2".
std::string scheduleFlagList();

} // namespace strata::sim

#endif
