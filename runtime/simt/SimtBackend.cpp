//===- SimtBackend.cpp - a CUDA plan's kernels on the CPU -----------------===//
#include "runtime/simt/SimtBackend.h"
#include "runtime/device/KernelArgs.h"

#include <stdexcept>

namespace strata::runtime::simt {

std::string SimtBackend::prepare(const Plan &plan, const RankPlan &rank) {
  if (std::string error = CpuBackend::prepare(plan, rank); !error.empty())
    return error;
  kernels.assign(plan.code.size(), nullptr);
  for (const Program &program : rank.programs)
    for (const Instruction &instruction : program.instructions) {
      const LaunchOp *launch = instruction.launch();
      if (!launch || launch->code < 0 || kernels[size_t(launch->code)])
        continue;
      const CodeObject &object = plan.code[size_t(launch->code)];
      std::string error;
      kernels[size_t(launch->code)] =
          Kernel::build(object.source, object.name, error);
      if (!error.empty())
        return error;
    }
  return "";
}

void SimtBackend::runLaunch(const LaunchOp &op,
                            const std::vector<Operand> &operands) {
  // The loader gives every launch of a CUDA plan code and a grid and block
  // of three dimensions (fused members, which have none, are skipped by
  // the executor), and prepare() built each: no CPU kernel stands in.
  const Kernel &kernel = *kernels.at(size_t(op.code));
  KernelArgs args;
  args.build(op, operands);
  std::string error = kernel.launch({op.grid[0], op.grid[1], op.grid[2]},
                                    {op.block[0], op.block[1], op.block[2]},
                                    op.sharedBytes, args.params());
  if (!error.empty())
    throw std::runtime_error("kernel " + kernel.name() + ": " + error);
}

} // namespace strata::runtime::simt
