//===- DeviceChecks.h - whether a plan can run on a GPU ---------*- C++ -*-===//
//
// What the cuda backend checks before anything runs, as plain functions of
// the plan and the device's properties, so that a machine without a GPU
// tests them: the architecture the plan's PTX was made for against the
// device's, and the memory the process's ranks need against what is free.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_DEVICECHECKS_H
#define STRATA_RUNTIME_CUDA_DEVICECHECKS_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <string>

namespace strata::runtime::cuda {

/// The device, as the checks see it.
struct DeviceInfo {
  std::string name;                 // "NVIDIA H100 80GB HBM3"
  int major = 0, minor = 0;         // compute capability
  uint64_t freeBytes = 0;           // cuMemGetInfo's free
  uint64_t totalBytes = 0;          // and its total
  int multiprocessors = 0;
  uint64_t sharedPerBlockOptIn = 0; // the most dynamic shared memory
};

/// "" if the plan is one of the cuda target (strata-compile --target cuda),
/// which the cuda and simt backends run; else how to make one.
std::string checkCudaPlan(const Plan &plan);

/// "" if PTX made for `arch` (sm_80, sm_90a) runs on the device; else why
/// not. PTX for sm_80 runs on any later GPU (the driver compiles it); an
/// architecture-specific target (the `a` of sm_90a) only on its own.
std::string checkArchitecture(const std::string &arch,
                              const DeviceInfo &device);

/// "" if `ranks` ranks of the plan from `first` fit in the device's free
/// memory, with `extraPerRank` bytes each beyond their arenas (cuBLASLt's
/// workspaces); else the ranks' needs against what is free.
std::string checkDeviceMemory(const Plan &plan, uint32_t first, uint32_t ranks,
                              uint64_t extraPerRank, const DeviceInfo &device);

/// "" if every launch's dynamic shared memory is within the device's limit;
/// else the first kernel past it.
std::string checkSharedMemory(const Plan &plan, const RankPlan &rank,
                              const DeviceInfo &device);

} // namespace strata::runtime::cuda

#endif
