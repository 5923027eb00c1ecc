//===- SimtBackend.cpp - a CUDA plan's kernels on the CPU -----------------===//
#include "runtime/simt/SimtBackend.h"
#include "runtime/cuda/LaunchArgs.h"

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
  if (op.code < 0 || size_t(op.code) >= kernels.size() ||
      !kernels[size_t(op.code)]) {
    CpuBackend::runLaunch(op, operands);
    return;
  }
  cuda::LaunchArgs args;
  args.build(op, operands);
  auto dims = [](const std::vector<uint32_t> &v) {
    return std::array<uint32_t, 3>{v.size() > 0 ? v[0] : 1,
                                   v.size() > 1 ? v[1] : 1,
                                   v.size() > 2 ? v[2] : 1};
  };
  std::string error = kernels[size_t(op.code)]->launch(
      dims(op.grid), dims(op.block), op.sharedBytes, args.params());
  if (!error.empty())
    throw std::runtime_error("kernel " + kernels[size_t(op.code)]->name() +
                             ": " + error);
}

} // namespace strata::runtime::simt
