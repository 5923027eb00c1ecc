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

enum class ScheduleKind { GPipe, OneFOneB, Interleaved };

struct ScheduleName {
  ScheduleKind kind;
  const char *flag;  // --pipeline-schedule's value, the plan's field
  const char *title; // in pictures and reports
};

inline constexpr ScheduleName kScheduleNames[] = {
    {ScheduleKind::GPipe, "gpipe", "GPipe"},
    {ScheduleKind::OneFOneB, "1f1b", "1F1B"},
    {ScheduleKind::Interleaved, "interleaved", "interleaved 1F1B"},
};

/// A flag value to its kind; nullopt for anything else.
std::optional<ScheduleKind> parseSchedule(std::string_view flag);
/// The kind's flag value.
const char *scheduleName(ScheduleKind kind);
/// The kind's name in pictures and reports.
const char *scheduleTitle(ScheduleKind kind);
/// Every flag value, for messages: "gpipe, 1f1b or interleaved".
std::string scheduleFlagList();

} // namespace strata::sim

#endif
