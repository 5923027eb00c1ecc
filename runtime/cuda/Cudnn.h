//===- Cudnn.h - cuDNN, loaded when found -----------------------*- C++ -*-===//
//
// cuDNN 9's fused attention (issue 37) is reached through its C API: the
// backend descriptors of cudnn_graph.h (create, set attributes, finalize,
// execute). libcudnn.so.9 is loaded with dlopen through LibrarySearch, as
// cuBLASLt is, and never linked: a node without it runs strata's own
// attention kernels. The part of the API strata calls is declared here,
// by its ABI (handles and descriptors are pointers, statuses and enums
// ints), so the runtime builds where no cuDNN header is.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUDNN_H
#define STRATA_RUNTIME_CUDA_CUDNN_H

#include "runtime/base/LibrarySearch.h"

#include <cstddef>
#include <cstdint>
#include <string>

typedef struct CUstream_st *CUstream;

namespace strata::runtime::cuda {

/// The oldest cuDNN strata's attention takes: 9.0.0 as cudnnGetVersion
/// writes it.
constexpr size_t kCudnnOldest = 90000;

/// The cuDNN entry points strata calls, with their C signatures.
struct CudnnApi {
  using Status = int; // cudnnStatus_t: 0 is success
  using Handle = void *;
  using Descriptor = void *;

  size_t (*cudnnGetVersion)() = nullptr;
  const char *(*cudnnGetErrorString)(Status) = nullptr;
  Status (*cudnnCreate)(Handle *) = nullptr;
  Status (*cudnnDestroy)(Handle) = nullptr;
  Status (*cudnnSetStream)(Handle, CUstream) = nullptr;
  Status (*cudnnBackendCreateDescriptor)(int type, Descriptor *) = nullptr;
  Status (*cudnnBackendDestroyDescriptor)(Descriptor) = nullptr;
  Status (*cudnnBackendFinalize)(Descriptor) = nullptr;
  Status (*cudnnBackendSetAttribute)(Descriptor, int name, int type,
                                     int64_t count,
                                     const void *elements) = nullptr;
  Status (*cudnnBackendGetAttribute)(Descriptor, int name, int type,
                                     int64_t requested, int64_t *count,
                                     void *elements) = nullptr;
  Status (*cudnnBackendExecute)(Handle, Descriptor plan,
                                Descriptor variantPack) = nullptr;

  FoundLibrary library; // where it was loaded from
  size_t version = 0;   // cudnnGetVersion's

  /// "cudnnBackendFinalize: CUDNN_STATUS_NOT_SUPPORTED"; "" on success.
  std::string error(Status status, const char *call) const;
};

/// "9.19.0" from cudnnGetVersion's number (major * 10000 + minor * 100 +
/// patch since cuDNN 9, major * 1000 + minor * 100 + patch before).
std::string cudnnVersionText(size_t version);

/// libcudnn.so.9, loaded once per process: the table, or null with why
/// (not found, an entry point missing, older than kCudnnOldest).
const CudnnApi *loadCudnn(std::string &error);

} // namespace strata::runtime::cuda

#endif
