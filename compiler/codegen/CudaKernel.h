//===- CudaKernel.h - CUDA C++ for one launch of the catalog ----*- C++ -*-===//
//
// The CUDA target's code generation: each exec.launch becomes one CUDA C++
// translation unit with one kernel, specialized for the launch's shapes,
// dtypes and constant attributes, which NVRTC compiles to PTX at compile
// time (Nvrtc.h). No MLIR here: a launch is described by plain values, so
// the emitters can be tested without the compiler around them.
//
// The launch contract, the same for every kernel (the runtime's cuda
// backend builds its arguments the same way, from the catalog): the
// kernel's parameters are a pointer per operand of the catalog, inputs then
// outputs, null for an absent optional one, then one 64-bit integer per
// Int attribute (Kernels.def's INT), in the catalog's order, carrying the
// rank's resolved value. Float, Bool and Ints attributes are constants of
// the source. `sharedBytes` is the kernel's dynamic shared memory; past
// 48 KiB the launcher must allow it first (cuFuncSetAttribute). A kernel's
// module-scope scratch is its own: launches run on the compute stream, in
// order, and each rank loads its own modules.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_CODEGEN_CUDAKERNEL_H
#define STRATA_COMPILER_CODEGEN_CUDAKERNEL_H

#include "runtime/plan/KernelCatalog.h"
#include "runtime/plan/Plan.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::codegen {

/// An operand of a launch: its buffer's dtype and shape, or absent.
struct OperandDesc {
  runtime::DType dtype = runtime::DType::F32;
  std::vector<int64_t> shape;
  bool present = true;
  int64_t elements() const;
};

/// An attribute's value: `i` for Int and Bool, `f` for Float, `list` for
/// Ints. `perRank`: the value differs between the template's ranks (only
/// an Int attribute the kernel reads at run time may).
struct AttrDesc {
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> list;
  bool perRank = false;
};

struct LaunchDesc {
  runtime::KernelId kernel = runtime::KernelId::Fill;
  std::vector<OperandDesc> operands; // in the catalog's order
  std::vector<AttrDesc> attrs;       // in the catalog's order
};

/// What an emitter writes: the kernel's body, the file-scope declarations
/// it needs (constant tables, scratch, a template's shape constants), the
/// CUDA files of compiler/codegen/cuda/ it calls into (CudaSources.h), and
/// its launch shape.
struct KernelCode {
  std::vector<std::string> sources;
  std::string globals;
  std::string body;
  std::array<uint32_t, 3> grid = {1, 1, 1}, block = {1, 1, 1};
  uint32_t sharedBytes = 0; // dynamic shared memory
  // The launch bounds' minimum resident blocks per SM, which caps a
  // thread's registers; 0: enough blocks to fill half an SM.
  uint32_t blocksPerSm = 0;
};

/// The launch against the kernel catalog's rules, as a plan load checks
/// it (runtime/plan); "" or what breaks them.
std::string checkAgainstCatalog(const LaunchDesc &launch);

/// Generates the kernel for `launch`. Returns "" or why the launch cannot
/// be generated (checkAgainstCatalog first). Two launches whose units
/// (kernelUnit) are equal share one kernel.
std::string emitKernel(const LaunchDesc &launch, KernelCode &code);

/// The translation unit of an emitted kernel, the kernel called `name`.
std::string kernelUnit(const LaunchDesc &launch, const KernelCode &code,
                       const std::string &name);

/// Kernels whose one output's element i reads element i of each input
/// (or i modulo the size of an input broadcast over the rows), with no
/// Int attribute: what the fusion pass chains (FuseElementwise.cpp).
bool isPointwise(runtime::KernelId kernel);

/// Kernels that may close a fused group of pointwise launches: the norms'
/// forwards, whose input the group writes (the residual add before a
/// norm). They run a row per warp, the members first on the row's
/// elements.
bool closesFusedGroup(runtime::KernelId kernel);

/// A member of a fused kernel: its launch, and an id per operand of the
/// buffer it names: equal ids exactly when the same bytes (two names of
/// the same elements get one id).
struct FusedMember {
  LaunchDesc launch;
  std::vector<int> buffers;
};

/// One kernel that computes pointwise `members` in order, in one pass over
/// their elements: an input an earlier member wrote is read from a
/// register (as its buffer holds it: bf16-rounded for a bf16 buffer),
/// what comes from memory is loaded once; every output is stored. A last
/// member that closesFusedGroup runs after the others on each row, reading
/// what they stored (from the same thread's writes). Whether the members
/// may be one kernel is the fusion pass's decision: this checks their
/// kinds, order and counts, not their bytes. Its
/// parameters, the launch contract of a fused group: a pointer per operand of
/// each member, the members in order. "" or why the members cannot be one
/// kernel.
std::string emitFused(const std::vector<FusedMember> &members,
                      KernelCode &code);
/// The device-side communicator's kernels, one unit
/// (CollectiveKernels.cpp): strata_all_reduce_{f32,bf16},
/// strata_reduce_scatter_{f32,bf16}, strata_all_gather. Built into
/// strata-run as PTX (runtime/cuda/DeviceCollectives.h).
std::string collectiveKernelsUnit();

/// The translation unit of a fused kernel, the kernel called `name`.
std::string fusedUnit(const std::vector<FusedMember> &members,
                      const KernelCode &code, const std::string &name);

} // namespace strata::codegen

#endif
