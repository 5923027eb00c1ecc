//===- KernelCost.h - what a timed instruction is and must cost -*- C++ -*-===//
//
// --profile-json's detail: each gemm and launch of an iteration named by
// its kind and shape, with the fewest bytes it must move (each operand
// read or written once) and its floating-point operations (gemms and
// attention; the rest is memory-bound and counts none). A performance
// model of a GPU is fitted to these against the measured device times.
// Each launch's work, what a spec's measured kernel rates price
// (cluster/ClusterSpec.h), is its FLOPs where it counts them, else the
// elements of its largest operand: the tensor it sweeps (an embedding's
// is its table, not its tokens, so a rate measured on one vocabulary
// carries to another only roughly).
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

/// Launch `l`'s operand buffers in its kernel's order (null where absent).
std::vector<const Buffer *> launchOperands(const RankPlan &rank,
                                           const LaunchOp &l);

/// The work of launch `l` whose operands (in its kernel's order; null
/// where absent) are `operands`.
KernelWork kernelWork(const LaunchOp &l, const Buffer *const *operands,
                      size_t count);

/// The kernel a gemm's epilogue is as a pass of its own (a CPU's), and
/// the elements it sweeps: add or gelu_fwd over D [m, n], sum_to over
/// op(B) [k, n], whose rows a bias gradient sums. False for none.
bool epilogueWork(const GemmOp &op, KernelWork &out);

/// The cost of instruction `index` of `program`, with the `span` - 1
/// launches after it that it runs fused (1: alone).
InstructionCost instructionCost(const RankPlan &rank, const Program &program,
                                size_t index, size_t span);

} // namespace strata::runtime

#endif
