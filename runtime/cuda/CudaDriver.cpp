//===- CudaDriver.cpp - the CUDA driver API, loaded only when asked -------===//
#include "runtime/cuda/CudaDriver.h"

#include <dlfcn.h>
#include <mutex>
#include <stdexcept>

namespace strata::runtime::cuda {

namespace {

Driver loaded;
std::string loadError;
DriverInfo loadedInfo;
std::once_flag loadOnce;

// The symbol a name of cuda.h stands for: its macro expansion, as text.
#define STRATA_SYMBOL_TEXT(name) #name
#define STRATA_SYMBOL(name) STRATA_SYMBOL_TEXT(name)

std::string load() {
  // Kept open for the process's life: the backend's calls go through it.
  void *library = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!library)
    return "the cuda backend needs an NVIDIA GPU and its driver; this "
           "machine has no driver (libcuda.so.1 is not there)";
  Driver d;
  std::string missing;
#define STRATA_CUDA_LOOKUP(name)                                               \
  d.name =                                                                     \
      reinterpret_cast<decltype(d.name)>(dlsym(library, STRATA_SYMBOL(name))); \
  if (!d.name && missing.empty())                                              \
    missing = STRATA_SYMBOL(name);
  STRATA_CUDA_DRIVER_ENTRIES(STRATA_CUDA_LOOKUP)
#undef STRATA_CUDA_LOOKUP
  if (!missing.empty())
    return "libcuda.so.1 lacks the driver API's " + missing +
           ": the NVIDIA driver is older than CUDA 12 or not one strata can "
           "use";
  if (d.cuDriverGetVersion(&loadedInfo.version) != CUDA_SUCCESS)
    loadedInfo.version = 0;
  CUresult started = d.cuInit(0);
  if (started == CUDA_ERROR_NO_DEVICE)
    return "the cuda backend needs an NVIDIA GPU; the driver finds none";
  if (started != CUDA_SUCCESS)
    return "the NVIDIA driver does not start: " + d.error(started, "cuInit");
  if (d.cuDeviceGetCount(&loadedInfo.devices) != CUDA_SUCCESS ||
      loadedInfo.devices == 0)
    return "the cuda backend needs an NVIDIA GPU; the driver finds none";
  loaded = d;
  return "";
}

} // namespace

std::string Driver::error(CUresult result, const char *call) const {
  if (result == CUDA_SUCCESS)
    return "";
  const char *name = nullptr, *text = nullptr;
  if (cuGetErrorName)
    cuGetErrorName(result, &name);
  if (cuGetErrorString)
    cuGetErrorString(result, &text);
  std::string message = std::string(call) + ": ";
  message += name ? name : "CUDA error " + std::to_string(int(result));
  if (text)
    message += std::string(" (") + text + ")";
  return message;
}

std::string probeDriver(DriverInfo &info) {
  std::call_once(loadOnce, [] { loadError = load(); });
  info = loadedInfo;
  return loadError;
}

const Driver &driver() { return loaded; }

void check(CUresult result, const char *call) {
  if (result != CUDA_SUCCESS)
    throw std::runtime_error(loaded.error(result, call));
}

} // namespace strata::runtime::cuda
