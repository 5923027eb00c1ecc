//===- ScheduleNames.cpp - the pipeline schedules by name -----------------===//
#include "runtime/schedule/ScheduleNames.h"

namespace strata::sim {

std::optional<ScheduleKind> parseSchedule(std::string_view flag) {
  for (const ScheduleName &row : kScheduleNames)
    if (flag == row.flag)
      return row.kind;
  return std::nullopt;
}

static const ScheduleName &rowOf(ScheduleKind kind) {
  for (const ScheduleName &row : kScheduleNames)
    if (row.kind == kind)
      return row;
  return kScheduleNames[0]; // every kind has a row
}

const char *scheduleName(ScheduleKind kind) { return rowOf(kind).flag; }

const char *scheduleTitle(ScheduleKind kind) { return rowOf(kind).title; }

bool cutsBackward(ScheduleKind kind) { return rowOf(kind).cutsBackward; }

Placement placementOf(ScheduleKind kind) { return rowOf(kind).placement; }

std::string scheduleFlagList() {
  std::string list;
  size_t count = std::size(kScheduleNames);
  for (size_t i = 0; i < count; ++i)
    list += std::string(i == 0           ? ""
                        : i + 1 == count ? " or "
                                         : ", ") +
            kScheduleNames[i].flag;
  return list;
}

} // namespace strata::sim
