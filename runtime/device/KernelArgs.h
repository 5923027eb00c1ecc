//===- KernelArgs.h - a generated kernel's parameters -----------*- C++ -*-===//
//
// The launch contract of compiler/codegen/CudaKernel.h, on the runtime's
// side, from the same catalog: a pointer per operand of the kernel in
// catalog order (null for an absent optional one; a fused group's kernel
// takes each member's in turn), then one 64-bit integer
// per Int attribute with the rank's resolved value. Every parameter is 8
// bytes, so each has a slot of its own and cuLaunchKernel gets a pointer to
// each slot.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DEVICE_KERNELARGS_H
#define STRATA_RUNTIME_DEVICE_KERNELARGS_H

#include "runtime/device/Backend.h"

#include <cstdint>
#include <vector>

namespace strata::runtime {

class KernelArgs {
public:
  /// Lays out the parameters of `op` over `operands` (in catalog order,
  /// as the executor resolves them). The slots are reused: a pointer from
  /// params() holds until the next build.
  void build(const LaunchOp &op, const std::vector<Operand> &operands);

  /// For cuLaunchKernel's kernelParams.
  void **params() { return pointers.data(); }
  /// Each parameter's 8 bytes, in order.
  const std::vector<uint64_t> &values() const { return slots; }

private:
  std::vector<uint64_t> slots;
  std::vector<void *> pointers;
};

} // namespace strata::runtime

#endif
