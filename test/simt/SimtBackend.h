//===- SimtBackend.h - a CUDA plan's kernels on the CPU ---------*- C++ -*-===//
//
// The CPU backend with one difference: a launch that carries generated
// code runs that code (test/simt/Simt.h) as the CUDA backend would, a
// fused group as its one kernel, instead of the CPU's kernel. Gemms,
// copies, events and arenas stay the CPU's. For tests on machines without
// a GPU.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TEST_SIMT_SIMTBACKEND_H
#define STRATA_TEST_SIMT_SIMTBACKEND_H

#include "Simt.h"
#include "runtime/cpu/CpuBackend.h"

#include <memory>
#include <vector>

namespace strata::simt {

class SimtBackend : public runtime::cpu::CpuBackend {
public:
  /// Compiles every code object of the plan for the host.
  std::string prepare(const runtime::Plan &plan,
                      const runtime::RankPlan &rank) override;
  void launch(runtime::Stream stream, const runtime::LaunchOp &op,
              const std::vector<runtime::Operand> &operands) override;
  bool runsFusedKernels() const override { return true; }
  // Launches run when called, so there is nothing to record.
  bool recordsGraphs() const override { return false; }

  /// The first launch's error, or "".
  const std::string &error() const { return firstError; }

private:
  std::vector<std::unique_ptr<Kernel>> kernels; // by code index
  std::string firstError;
};

} // namespace strata::simt

#endif
