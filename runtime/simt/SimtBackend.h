//===- SimtBackend.h - a CUDA plan's kernels on the CPU ---------*- C++ -*-===//
//
// `strata-run --backend simt`: the CPU backend, except that a launch
// carrying generated code runs that code (Simt.h) as the CUDA backend
// would, a fused group as its one kernel given every member's operands,
// instead of the CPU's kernel. Gemms, collectives, copies, events, graphs
// and arenas stay the CPU's. It checks a CUDA plan's kernels and how the
// executor drives them on a machine without a GPU; it says nothing about
// speed.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_SIMT_SIMTBACKEND_H
#define STRATA_RUNTIME_SIMT_SIMTBACKEND_H

#include "runtime/cpu/CpuBackend.h"
#include "runtime/simt/Simt.h"

#include <memory>
#include <vector>

namespace strata::runtime::simt {

class SimtBackend : public cpu::CpuBackend {
public:
  using CpuBackend::CpuBackend;

  /// Compiles the code objects the rank's launches run; "" or why not (a
  /// unit the host compiler refuses).
  std::string prepare(const Plan &plan, const RankPlan &rank) override;
  bool runsFusedKernels() const override { return true; }

protected:
  /// Throws on a kernel the model finds wrong (a barrier not every thread
  /// reaches, ...): the rank's run ends with it.
  void runLaunch(const LaunchOp &op,
                 const std::vector<Operand> &operands) override;

private:
  std::vector<std::shared_ptr<const Kernel>> kernels; // by code index
};

} // namespace strata::runtime::simt

#endif
