//===- StepName.h - a schedule step as the simulator names it ---*- C++ -*-===//
//
// What a step of a plan's schedule is to the pipeline simulator — the
// forward (F), input gradient (B) or weights' gradient (W) of a chunk for
// a microbatch — and its name in traces, timelines and pictures: F3.1
// (microbatch 3 on chunk 1), M3 (a whole microbatch), optimizer.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_EXEC_STEPNAME_H
#define STRATA_RUNTIME_EXEC_STEPNAME_H

#include "runtime/plan/Plan.h"
#include "runtime/schedule/PipelineSim.h"

#include <optional>
#include <string>

namespace strata::runtime {

/// The simulator's work for a step of a chunk's program; nullopt for a
/// whole microbatch or the optimizer.
std::optional<sim::Work> workOf(const Program &program, int64_t microbatch);

/// "F3.1", "B3.1", "W3.1", "M3" or "optimizer".
std::string stepName(const Program &program, int64_t microbatch);

} // namespace strata::runtime

#endif
