//===- Kernels.h - the CPU kernels ------------------------------*- C++ -*-===//
//
// One function per kernel of the catalog (runtime/plan/Kernels.def), named
// run<Kernel>, computing in f32: the backend hands bf16 operands to them
// widened, and rounds what they write back to bf16. Operands and
// attributes are found by their catalog positions (kernels::<Kernel>::op,
// ::attr). Each kernel file says the math it computes.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CPU_KERNELS_H
#define STRATA_RUNTIME_CPU_KERNELS_H

#include "runtime/plan/Hyper.h"
#include "runtime/plan/Plan.h"

#include <cmath>
#include <vector>

namespace strata::runtime::cpu {

/// Loops go parallel past these element counts: cheap arithmetic needs
/// more work per thread than transcendental functions to pay for it.
inline constexpr int64_t kCheap = 65536, kCostly = 16384;

/// The exact (erf) GELU, x·Φ(x): the gelu kernels' and the gemm
/// epilogue's.
inline float gelu(float x) {
  return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752440f));
}

struct KernelArgs {
  const LaunchOp &launch;
  const std::vector<void *> &data;           // per operand; f32 for floats
  const std::vector<const Buffer *> &buffer; // per operand; null if absent

  bool has(unsigned operand) const { return buffer[operand] != nullptr; }
  float *f(unsigned operand) const {
    return static_cast<float *>(data[operand]);
  }
  const int32_t *ids(unsigned operand) const {
    return static_cast<const int32_t *>(data[operand]);
  }
  int64_t count(unsigned operand) const { return buffer[operand]->elements; }
  const std::vector<int64_t> &shape(unsigned operand) const {
    return buffer[operand]->shape;
  }
  int64_t i(unsigned attr) const { return launch.attrs[attr].i; }
  double real(unsigned attr) const { return launch.attrs[attr].f; }
  bool flag(unsigned attr) const { return launch.attrs[attr].i != 0; }
  const std::vector<int64_t> &list(unsigned attr) const {
    return launch.attrs[attr].list;
  }
  /// A slot of the hyper operand (the optimizer kernels').
  float hyper(unsigned operand, HyperSlot slot) const {
    return f(operand)[slot];
  }
};

using KernelFn = void (*)(const KernelArgs &);

/// Every kernel of the catalog: `void runFill(const KernelArgs &);` ...
#define KERNEL(Name, text) void run##Name(const KernelArgs &);
#include "runtime/plan/Kernels.def"

/// The implementation of a kernel, from the table the catalog generates.
KernelFn kernelFunction(KernelId id);

/// D = alpha · op(A) · op(B) + beta · D, batched, then the epilogue
/// (plan.fbs), on f32 operands (bias and aux too).
void gemm(const GemmOp &op, const float *a, const float *b, float *d,
          float *bias, float *aux);

} // namespace strata::runtime::cpu

#endif
