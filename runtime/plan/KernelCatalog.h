//===- KernelCatalog.h - the kernels a plan may launch ----------*- C++ -*-===//
//
// Generated from Kernels.def: the KernelId of every kernel, its operands'
// and attributes' names and positions (kernels::LayerNormFwd::op::x,
// kernels::LayerNormFwd::attr::epsilon), and what the checker knows of
// each (counts, dtypes, attribute kinds).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_KERNELCATALOG_H
#define STRATA_RUNTIME_PLAN_KERNELCATALOG_H

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime {

enum class KernelId : uint16_t {
#define KERNEL(Name, text) Name,
#include "runtime/plan/Kernels.def"
  Count
};
inline constexpr int kKernelCount = static_cast<int>(KernelId::Count);

/// The most ranks a group of the device-side communicator holds: its
/// kernels (compiler/codegen/CollectiveKernels.cpp) take every rank's
/// pointers as one parameter of this many slots, which the runtime fills
/// (runtime/cuda/DeviceCollectives.cpp).
inline constexpr size_t kMaxDeviceGroup = 16;

/// The dtypes an operand may have.
enum class DTypes : uint8_t { Float, F32, I32 };
/// An attribute's kind; a Bool is stored as an integer 0 or 1.
enum class AttrKind : uint8_t { Int, Float, Bool, Ints };

struct OperandSpec {
  const char *name;
  DTypes dtypes;
  bool output;
  bool optional;
};

struct AttrSpec {
  const char *name;
  AttrKind kind;
};

struct KernelSpec {
  const char *name;
  std::vector<OperandSpec> operands; // inputs, then outputs
  std::vector<AttrSpec> attrs;
  const char *math = ""; // what it computes (MATH in Kernels.def)
  int inputs() const;
};

/// Every kernel's spec, by KernelId.
const KernelSpec &kernelSpec(KernelId id);
/// The id of a kernel name, or -1.
int findKernel(const std::string &name);
inline const char *kernelName(KernelId id) { return kernelSpec(id).name; }
/// The scale of attention's scores, 1/√(head dimension), written once:
/// the fused kernels (the CPU's, the generated ones, cuDNN's graphs) take
/// it as a float, the unfused path's gemms as their alpha.
inline double attentionScale(int64_t headDim) {
  return 1.0 / std::sqrt(double(headDim));
}
/// What a fused kernel computes: its members' names joined by '+'
/// ("add+gelu_fwd"), the `kernel` of its generated code.
std::string fusedKernelName(const std::vector<KernelId> &members);

/// Operand and attribute positions by name, for kernels and their callers:
/// kernels::GeluBwd::op::dy is the position of GeluBwd's `dy` operand.
namespace kernels {
#define KERNEL(Name, text)                                                     \
  namespace Name {                                                             \
  namespace op {                                                               \
  enum : unsigned {
#define IN(operand, dtypes) operand,
#define OUT(operand, dtypes) operand,
#define END_KERNEL()                                                           \
  count                                                                        \
  }                                                                            \
  ;                                                                            \
  }                                                                            \
  }
#include "runtime/plan/Kernels.def"

#define KERNEL(Name, text)                                                     \
  namespace Name {                                                             \
  namespace attr {                                                             \
  enum : unsigned {
#define INT(a) a,
#define FLOAT(a) a,
#define BOOL(a) a,
#define INTS(a) a,
#define END_KERNEL()                                                           \
  count                                                                        \
  }                                                                            \
  ;                                                                            \
  }                                                                            \
  }
#include "runtime/plan/Kernels.def"
} // namespace kernels

} // namespace strata::runtime

#endif
