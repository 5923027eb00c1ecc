//===- StepName.cpp - a schedule step as the simulator names it -----------===//
#include "runtime/exec/StepName.h"

namespace strata::runtime {

std::optional<sim::Work> workOf(const Program &program, int64_t microbatch) {
  sim::Phase phase;
  switch (program.phase) {
  case Phase::Forward:
    phase = sim::Phase::Forward;
    break;
  case Phase::Backward:
    phase = sim::Phase::Backward;
    break;
  case Phase::Weight:
    phase = sim::Phase::Weight;
    break;
  case Phase::Microbatch:
  case Phase::Optimizer:
    return std::nullopt;
  }
  return sim::Work{phase, program.chunk, int(microbatch)};
}

std::string stepName(const Program &program, int64_t microbatch) {
  if (std::optional<sim::Work> work = workOf(program, microbatch))
    return sim::describe(*work);
  if (program.phase == Phase::Microbatch)
    return "M" + std::to_string(microbatch);
  return "optimizer";
}

} // namespace strata::runtime
