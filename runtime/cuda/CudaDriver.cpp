//===- CudaDriver.cpp - the CUDA driver API, loaded only when asked -------===//
#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>

namespace strata::runtime::cuda {

namespace {

// The driver API's result and the three entry points the probe uses, as
// cuda.h declares them (the header is not needed to build strata-run).
using CUresult = int;
constexpr CUresult kSuccess = 0;
constexpr CUresult kNoDevice = 100; // CUDA_ERROR_NO_DEVICE
using InitFn = CUresult (*)(unsigned);
using CountFn = CUresult (*)(int *);
using VersionFn = CUresult (*)(int *);

} // namespace

std::string probeDriver(DriverInfo &info) {
  // Kept open for the process's life: the backend's calls go through it.
  void *driver = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!driver)
    return "the cuda backend needs an NVIDIA GPU and its driver; this "
           "machine has no driver (libcuda.so.1 is not there)";
  auto init = reinterpret_cast<InitFn>(dlsym(driver, "cuInit"));
  auto count = reinterpret_cast<CountFn>(dlsym(driver, "cuDeviceGetCount"));
  auto version =
      reinterpret_cast<VersionFn>(dlsym(driver, "cuDriverGetVersion"));
  if (!init || !count || !version)
    return "libcuda.so.1 lacks the driver API's cuInit, cuDeviceGetCount or "
           "cuDriverGetVersion: it is not an NVIDIA driver strata can use";
  if (version(&info.version) != kSuccess)
    info.version = 0;
  CUresult started = init(0);
  if (started == kNoDevice)
    return "the cuda backend needs an NVIDIA GPU; the driver finds none";
  if (started != kSuccess)
    return "the NVIDIA driver does not start (cuInit returned " +
           std::to_string(started) + ")";
  if (count(&info.devices) != kSuccess || info.devices == 0)
    return "the cuda backend needs an NVIDIA GPU; the driver finds none";
  return "";
}

} // namespace strata::runtime::cuda
