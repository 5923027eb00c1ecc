//===- CudaDriver.h - the CUDA driver, loaded only when asked ---*- C++ -*-===//
//
// strata-run links no CUDA library: it must start and run CPU plans on a
// machine with no GPU and no NVIDIA driver. The cuda backend loads
// libcuda.so.1 with dlopen when --backend cuda asks for it, and takes the
// driver API's entry points it uses from there. cuda.h is read for its
// types only; each entry point is looked up under the versioned name the
// header maps it to (cuMemAlloc is cuMemAlloc_v2).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUDADRIVER_H
#define STRATA_RUNTIME_CUDA_CUDADRIVER_H

#include <cuda.h>

#include <string>

namespace strata::runtime::cuda {

/// The driver API entry points the cuda backend calls.
struct Driver {
#define STRATA_CUDA_DRIVER_ENTRIES(X)                                          \
  X(cuInit)                                                                    \
  X(cuDriverGetVersion)                                                        \
  X(cuDeviceGetCount)                                                          \
  X(cuDeviceGet)                                                               \
  X(cuDeviceGetName)                                                           \
  X(cuDeviceGetAttribute)                                                      \
  X(cuDevicePrimaryCtxRetain)                                                  \
  X(cuCtxSetCurrent)                                                           \
  X(cuMemGetInfo)                                                              \
  X(cuMemAlloc)                                                                \
  X(cuMemFree)                                                                 \
  X(cuMemcpyHtoDAsync)                                                         \
  X(cuMemcpyDtoDAsync)                                                         \
  X(cuMemcpy2DAsync)                                                           \
  X(cuMemAllocAsync)                                                           \
  X(cuMemFreeAsync)                                                            \
  X(cuMemcpyDtoHAsync)                                                         \
  X(cuMemsetD8Async)                                                           \
  X(cuStreamCreate)                                                            \
  X(cuStreamDestroy)                                                           \
  X(cuStreamSynchronize)                                                       \
  X(cuStreamWaitEvent)                                                         \
  X(cuEventCreate)                                                             \
  X(cuEventDestroy)                                                            \
  X(cuEventRecord)                                                             \
  X(cuEventElapsedTime)                                                        \
  X(cuModuleLoadData)                                                          \
  X(cuModuleLoadDataEx)                                                        \
  X(cuModuleUnload)                                                            \
  X(cuModuleGetFunction)                                                       \
  X(cuFuncSetAttribute)                                                        \
  X(cuLaunchKernel)                                                            \
  X(cuStreamBeginCapture)                                                      \
  X(cuStreamEndCapture)                                                        \
  X(cuGraphInstantiate)                                                        \
  X(cuGraphLaunch)                                                             \
  X(cuGraphExecDestroy)                                                        \
  X(cuGraphDestroy)                                                            \
  X(cuGetErrorName)                                                            \
  X(cuGetErrorString)
#define STRATA_CUDA_DECLARE(name) decltype(&::name) name = nullptr;
  STRATA_CUDA_DRIVER_ENTRIES(STRATA_CUDA_DECLARE)
#undef STRATA_CUDA_DECLARE

  /// "cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)"; "" on success.
  std::string error(CUresult result, const char *call) const;
};

/// What the machine's driver offers: its version and its devices.
struct DriverInfo {
  int version = 0; // as cuDriverGetVersion reports it: 13000 for 13.0
  int devices = 0;
};

/// Loads the driver (once per process) and counts its devices. Returns ""
/// or one line saying why the cuda backend cannot run here (no driver, no
/// device, a driver that fails to start or lacks an entry point).
std::string probeDriver(DriverInfo &info);

/// The loaded driver; probeDriver must have succeeded.
const Driver &driver();

/// A device address as the runtime's pointers carry it.
inline CUdeviceptr devicePointer(const void *pointer) {
  return CUdeviceptr(reinterpret_cast<uintptr_t>(pointer));
}

/// Throws std::runtime_error naming `call` when `result` is an error.
void check(CUresult result, const char *call);

} // namespace strata::runtime::cuda

#endif
