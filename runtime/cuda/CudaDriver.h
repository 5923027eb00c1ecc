//===- CudaDriver.h - the CUDA driver, loaded only when asked ---*- C++ -*-===//
//
// strata-run links no CUDA library: it must start and run CPU plans on a
// machine with no GPU and no NVIDIA driver. The cuda backend loads
// libcuda.so.1 with dlopen when --backend cuda asks for it, and takes the
// driver API's entry points it uses from there.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUDADRIVER_H
#define STRATA_RUNTIME_CUDA_CUDADRIVER_H

#include <string>

namespace strata::runtime::cuda {

/// What the machine's driver offers: its version and its devices.
struct DriverInfo {
  int version = 0; // as cuDriverGetVersion reports it: 13000 for 13.0
  int devices = 0;
};

/// Loads the driver and counts its devices. Returns "" or one line saying
/// why the cuda backend cannot run here (no driver, no device, a driver
/// that fails to start).
std::string probeDriver(DriverInfo &info);

} // namespace strata::runtime::cuda

#endif
