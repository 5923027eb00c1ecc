//===- PlanCheck.h - every instruction against its contract -----*- C++ -*-===//
//
// What the loader checks of each instruction, once its buffers are known:
// a gemm's sizes against its operands, a launch against the kernel catalog
// (KernelCatalog.cpp), a collective against its group, a transfer's peer,
// an event's index. strata-compile runs the same checks (it loads the plan
// it is about to write), so a plan the runtime would refuse is never
// written.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_PLANCHECK_H
#define STRATA_RUNTIME_PLAN_PLANCHECK_H

#include "runtime/plan/Hyper.h"
#include "runtime/plan/Plan.h"

#include <string>
#include <vector>

namespace strata::runtime {

/// What an instruction's check needs beyond its rank's buffers.
struct CheckContext {
  const Plan *plan = nullptr;
  uint32_t rank = 0;
  uint32_t events = 0;    // the rank's event count
  uint64_t vocabSize = 0; // the plan's: every label is below it
};

/// "bf16[2, 64]": a buffer's dtype and shape, for messages.
std::string shapeText(const Buffer &buffer);
/// "'t3' bf16[2, 64]": a buffer's name, dtype and shape.
std::string named(const Buffer &buffer);

/// A launch against its kernel's contract; "" when it keeps it.
std::string checkLaunch(const LaunchOp &launch,
                        const std::vector<Buffer> &buffers,
                        const CheckContext &context);

/// "program 'P', instruction N (model.model:3:5): ", the prefix of an
/// instruction's errors.
std::string instructionWhere(const Plan &plan, const Program &program, size_t n,
                             uint32_t location);

/// Any instruction; "" when right.
std::string checkInstruction(const Instruction &instruction,
                             const std::vector<Buffer> &buffers,
                             const CheckContext &context);

} // namespace strata::runtime

#endif
