//===- KernelArgs.cpp - a generated kernel's parameters -------------------===//
#include "runtime/device/KernelArgs.h"

#include <cstring>

namespace strata::runtime {

void KernelArgs::build(const LaunchOp &op,
                       const std::vector<Operand> &operands) {
  // One operand per catalog operand (the loader checks the count), an
  // absent one null.
  const KernelSpec &spec = kernelSpec(op.kernel);
  slots.clear();
  for (const Operand &operand : operands)
    slots.push_back(uint64_t(reinterpret_cast<uintptr_t>(operand.data)));
  for (size_t a = 0; a < spec.attrs.size(); ++a)
    if (spec.attrs[a].kind == AttrKind::Int) {
      uint64_t bits;
      std::memcpy(&bits, &op.attrs[a].i, 8);
      slots.push_back(bits);
    }
  pointers.resize(slots.size());
  for (size_t i = 0; i < slots.size(); ++i)
    pointers[i] = &slots[i];
}

} // namespace strata::runtime
