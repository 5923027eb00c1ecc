//===- CollectiveLaunch.h - a collective as one communicator kernel -*- C++
//-*-===//
//
// The launch contract of the device-side communicator's kernels
// (compiler/codegen/CollectiveKernels.cpp), written once: which kernel runs
// a collective of ranks sharing a GPU, its arguments and its grid. The cuda
// backend launches it with the driver (DeviceCollectives.cpp); the tests
// run the same kernels by the same contract on the simt model, against the
// CPU's collectives. Nothing here touches CUDA.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_COLLECTIVELAUNCH_H
#define STRATA_RUNTIME_CUDA_COLLECTIVELAUNCH_H

#include "runtime/comm/LocalCollectives.h"
#include "runtime/plan/KernelCatalog.h"

#include <array>
#include <cstdint>
#include <vector>

namespace strata::runtime::cuda {

/// The kernels' first parameter: every rank's input and output.
struct DeviceRanks {
  const void *in[kMaxDeviceGroup];
  void *out[kMaxDeviceGroup];
};

/// The communicator's kernels, by the names CollectiveKernels.cpp gives
/// them.
enum class CollectiveKernel {
  AllReduceF32,
  AllReduceBf16,
  ReduceScatterF32,
  ReduceScatterBf16,
  AllGather
};
inline constexpr const char *kCollectiveKernelNames[] = {
    "strata_all_reduce_f32", "strata_all_reduce_bf16",
    "strata_reduce_scatter_f32", "strata_reduce_scatter_bf16",
    "strata_all_gather"};

/// One launch: kernel `kernel`(ranks, n, a, b), or for an all-reduce
/// (ranks, n, a = elements, max), on `blocks` blocks of 256 threads.
/// a and b are otherwise the blocks along the collective's dimension
/// (outer) and each block's elements (a reduce-scatter) or bytes (an
/// all-gather).
struct CollectiveLaunch {
  CollectiveKernel kernel = CollectiveKernel::AllGather;
  int32_t ranks = 0;
  int64_t a = 0, b = 0;
  int32_t max = 0;
  uint32_t blocks = 1;
  DeviceRanks pointers = {};

  const char *name() const { return kCollectiveKernelNames[int(kernel)]; }
  bool allReduce() const { return kernel <= CollectiveKernel::AllReduceBf16; }
  /// The kernel's argument pointers, in its parameters' order. They point
  /// into this launch: use them while it lives, where it is.
  std::array<void *, 4> args() {
    return {&pointers, &ranks, &a,
            allReduce() ? static_cast<void *>(&max) : &b};
  }
};

/// The launch of `op` over `ranks` (at most kMaxDeviceGroup).
CollectiveLaunch collectiveLaunch(const CollectiveOp &op,
                                  const std::vector<CollectiveOperands> &ranks);

/// Whether a thread per element stays safe for rank `index` whose output
/// and input share bytes: only the same bytes (in place), or, with blocks
/// along the first dimension, a reduce-scatter's output at its own block
/// of the input or an all-gather's input at its own block of the output.
bool safeCollectiveAliasing(const CollectiveOp &op,
                            const CollectiveOperands &rank, size_t index);

} // namespace strata::runtime::cuda

#endif
