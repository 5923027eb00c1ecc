//===- KernelCost.h - what a timed instruction is and must cost -*- C++ -*-===//
//
// --profile-json's detail: each gemm and launch of an iteration named by
// its kind and shape, with the fewest bytes it must move (each operand
// read or written once) and its floating-point operations (gemms and
// attention; the rest is memory-bound and counts none). A performance
// model of a GPU is fitted to these against the measured device times.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_EXEC_KERNELCOST_H
#define STRATA_RUNTIME_EXEC_KERNELCOST_H

#include "runtime/plan/Plan.h"

#include <string>
#include <vector>

namespace strata::runtime {

struct KernelWork {
  KernelId kernel;
  double work = 0, flops = 0;
};

struct InstructionCost {
  std::string name;  // "gemm", "attention_fwd", "add+gelu_fwd" (fused)
  std::string shape; // "m=8192 n=2304 k=768 bf16 nt bias", "[8, 1024, 12, 64] bf16 causal"
  double bytes = 0, flops = 0;
  std::vector<KernelWork> members; // a launch's kernels (several if fused)
};

/// The work of launch `l` whose operands (in its kernel's order; null
/// where absent) are `operands`.
KernelWork kernelWork(const LaunchOp &l, const Buffer *const *operands,
                      size_t count);

/// The cost of instruction `index` of `program`, with the `span` - 1
/// launches after it that it runs fused (1: alone).
InstructionCost instructionCost(const RankPlan &rank, const Program &program,
                                size_t index, size_t span);

} // namespace strata::runtime

#endif
