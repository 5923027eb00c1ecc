//===- Cudnn.cpp - cuDNN, loaded when found -------------------------------===//
#include "runtime/cuda/Cudnn.h"

#include <dlfcn.h>

#include <mutex>

namespace strata::runtime::cuda {

std::string CudnnApi::error(Status status, const char *call) const {
  if (status == 0)
    return "";
  const char *text =
      cudnnGetErrorString ? cudnnGetErrorString(status) : nullptr;
  return std::string(call) + ": " +
         (text ? text : "cuDNN status " + std::to_string(status));
}

std::string cudnnVersionText(size_t version) {
  size_t major = version >= 10000 ? version / 10000 : version / 1000;
  size_t minor = version >= 10000 ? version / 100 % 100 : version / 100 % 10;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(version % 100);
}

const CudnnApi *loadCudnn(std::string &error) {
  static CudnnApi api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string error;
    FoundLibrary found = openCudaLibrary(
        LibrarySearch::fromEnvironment(), {"libcudnn.so.9", "libcudnn.so"},
        "cuDNN's fused attention needs cuDNN 9", error);
    if (!found.handle) {
      failure = error;
      return;
    }
    api.library = found;
#define STRATA_CUDNN_LOOKUP(name)                                              \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(found.handle, #name)); \
  if (!api.name) {                                                             \
    failure = found.path + " lacks " #name;                                    \
    return;                                                                    \
  }
    STRATA_CUDNN_LOOKUP(cudnnGetVersion)
    STRATA_CUDNN_LOOKUP(cudnnGetErrorString)
    STRATA_CUDNN_LOOKUP(cudnnCreate)
    STRATA_CUDNN_LOOKUP(cudnnDestroy)
    STRATA_CUDNN_LOOKUP(cudnnSetStream)
    STRATA_CUDNN_LOOKUP(cudnnBackendCreateDescriptor)
    STRATA_CUDNN_LOOKUP(cudnnBackendDestroyDescriptor)
    STRATA_CUDNN_LOOKUP(cudnnBackendFinalize)
    STRATA_CUDNN_LOOKUP(cudnnBackendSetAttribute)
    STRATA_CUDNN_LOOKUP(cudnnBackendGetAttribute)
    STRATA_CUDNN_LOOKUP(cudnnBackendExecute)
#undef STRATA_CUDNN_LOOKUP
    api.version = api.cudnnGetVersion();
    if (api.version < kCudnnOldest)
      failure = found.path + " is cuDNN " + cudnnVersionText(api.version) +
                ", older than " + cudnnVersionText(kCudnnOldest) +
                ", the first whose fused attention strata takes";
  });
  error = failure;
  return failure.empty() ? &api : nullptr;
}

} // namespace strata::runtime::cuda
