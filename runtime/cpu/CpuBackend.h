//===- CpuBackend.h - run instructions on the CPU ---------------*- C++ -*-===//
#ifndef STRATA_RUNTIME_CPU_CPUBACKEND_H
#define STRATA_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/exec/Hyper.h"
#include "runtime/exec/RankMemory.h"

#include <vector>

namespace strata::runtime::cpu {

/// Runs one instruction. Kernels compute in f32: a bf16 operand is widened
/// into scratch first, and a bf16 result rounded back (to nearest even)
/// after, which is how bf16 training is emulated on a CPU.
class CpuBackend {
public:
  CpuBackend();
  void run(const Instruction &instruction, RankMemory &memory,
           const Hyper &hyper);

private:
  std::vector<std::vector<float>> scratch;
};

} // namespace strata::runtime::cpu

#endif
