//===- SimtBackend.cpp - a CUDA plan's kernels on the CPU -----------------===//
#include "SimtBackend.h"

#include "runtime/cuda/LaunchArgs.h"

namespace strata::simt {

using namespace runtime;

std::string SimtBackend::prepare(const Plan &plan, const RankPlan &rank) {
  if (std::string error = CpuBackend::prepare(plan, rank); !error.empty())
    return error;
  kernels.clear();
  for (const CodeObject &object : plan.code) {
    auto kernel = std::make_unique<Kernel>();
    if (std::string error = kernel->build(object.source, object.name);
        !error.empty())
      return error;
    kernels.push_back(std::move(kernel));
  }
  return "";
}

void SimtBackend::launch(Stream stream, const LaunchOp &op,
                         const std::vector<Operand> &operands) {
  if (op.code < 0 || size_t(op.code) >= kernels.size()) {
    CpuBackend::launch(stream, op, operands);
    return;
  }
  synchronizeStream(stream); // what the CPU queued before runs first
  cuda::LaunchArgs args;
  args.build(op, operands);
  auto dims = [](const std::vector<uint32_t> &v) {
    return std::array<uint32_t, 3>{v.size() > 0 ? v[0] : 1,
                                   v.size() > 1 ? v[1] : 1,
                                   v.size() > 2 ? v[2] : 1};
  };
  std::string error = kernels[size_t(op.code)]->launch(
      dims(op.grid), dims(op.block), op.sharedBytes, args.params());
  if (!error.empty() && firstError.empty())
    firstError = "kernel " + std::to_string(op.code) + ": " + error;
}

} // namespace strata::simt
