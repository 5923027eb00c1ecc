//===- Environment.cpp - what a GPU node offers the cuda backend ----------===//
#include "runtime/cuda/Environment.h"
#include "runtime/base/LibrarySearch.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/Cudnn.h"
#include "runtime/cuda/Nccl.h"

#include <dlfcn.h>

#include <cstdio>

namespace strata::runtime::cuda {

namespace {

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / (1ull << 30));
  return text;
}

/// "13.0" from a version written major * 1000 + minor * 10.
std::string driverVersion(int version) {
  return std::to_string(version / 1000) + "." +
         std::to_string(version % 1000 / 10);
}

/// "13.1.0" from a version written major * 10000 + minor * 100 + patch
/// (cuBLASLt's, and NCCL's since 2.9).
std::string dottedVersion(int64_t version) {
  return std::to_string(version / 10000) + "." +
         std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

std::string libraryLine(const std::string &version, const FoundLibrary &found) {
  return version + " at " + found.where();
}

/// The GPU's lines; "" or why there is none.
std::string describeGpu(std::string &text) {
  DriverInfo driverInfo;
  if (std::string error = probeDriver(driverInfo); !error.empty()) {
    text += "gpu: none: " + error + "\n";
    return error;
  }
  Gpu gpu;
  if (std::string error = openDevice(0, gpu.context, gpu.info);
      !error.empty()) {
    text += "gpu: none: " + error + "\n";
    return error;
  }
  const DeviceInfo &info = gpu.info;
  text += "gpu: " + info.name + "\n";
  text += "gpus: " + std::to_string(driverInfo.devices) + "\n";
  text += "compute capability: " + std::to_string(info.major) + "." +
          std::to_string(info.minor) + "\n";
  text += "multiprocessors: " + std::to_string(info.multiprocessors) + "\n";
  text += "memory: " + gib(info.totalBytes) + " (" + gib(info.freeBytes) +
          " free)\n";
  text += "driver: CUDA " + driverVersion(driverInfo.version) + "\n";
  return "";
}

} // namespace

std::string describeCudaEnvironment(std::string &text) {
  // The libraries are reported whether or not there is a GPU: a node
  // without a driver is still asked what it has.
  std::string failure = describeGpu(text);
  if (std::string error = loadCublasLt(); !error.empty()) {
    text += "cublasLt: not found: " + error + "\n";
    if (failure.empty())
      failure = error;
  } else {
    text += "cublasLt: " +
            libraryLine(dottedVersion(int64_t(cublasLtVersion())),
                        cublasLtLibrary()) +
            "\n";
  }

  std::string cudnnError;
  if (const CudnnApi *cudnn = loadCudnn(cudnnError))
    text += "cudnn: " +
            libraryLine(cudnnVersionText(cudnn->version), cudnn->library) +
            "\n";
  else
    text += "cudnn: none (attention runs strata's own kernels): " +
            cudnnError + "\n";

  std::string ncclError;
  if (const NcclApi *nccl = loadNccl(ncclError)) {
    int version = 0;
    nccl->ncclGetVersion(&version);
    text +=
        "nccl: " + libraryLine(dottedVersion(version), nccl->library) + "\n";
  } else {
    text +=
        "nccl: not found (needed only under a launcher): " + ncclError + "\n";
  }

  std::string nvrtcError;
  FoundLibrary nvrtc = openCudaLibrary(LibrarySearch::fromEnvironment(),
                                       kNvrtcNames, "NVRTC", nvrtcError);
  if (!nvrtc.handle) {
    text +=
        "nvrtc: not found (plans carry their kernels compiled): " + nvrtcError +
        "\n";
  } else {
    using VersionFn = int (*)(int *, int *);
    auto version =
        reinterpret_cast<VersionFn>(dlsym(nvrtc.handle, "nvrtcVersion"));
    int major = 0, minor = 0;
    if (version)
      version(&major, &minor);
    text += "nvrtc: " +
            libraryLine(std::to_string(major) + "." + std::to_string(minor),
                        nvrtc) +
            "\n";
  }
  return failure;
}

} // namespace strata::runtime::cuda
