//===- Nvrtc.cpp - NVRTC, loaded only when asked --------------------------===//
#include "compiler/codegen/Nvrtc.h"
#include "runtime/base/LibrarySearch.h"

#include <dlfcn.h>
#include <mutex>
#include <vector>

namespace strata::codegen {
namespace {

// The NVRTC entry points used, as nvrtc.h declares them (the header is not
// needed to build strata-compile).
using Result = int;
using Program = struct Opaque *;
struct Api {
  Result (*create)(Program *, const char *, const char *, int,
                   const char *const *, const char *const *);
  Result (*compile)(Program, int, const char *const *);
  Result (*ptxSize)(Program, size_t *);
  Result (*ptx)(Program, char *);
  Result (*logSize)(Program, size_t *);
  Result (*log)(Program, char *);
  Result (*destroy)(Program *);
  const char *(*errorText)(Result);
};

/// NVRTC, wherever CUDA's libraries are looked for (LibrarySearch.h).
const Api *loadApi(std::string &error) {
  static Api api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    // Where the cuda backend looks for CUDA's libraries
    // (runtime/base/LibrarySearch.h): a GPU node's NVRTC may be a wheel's.
    std::string error;
    runtime::FoundLibrary found = runtime::openCudaLibrary(
        runtime::LibrarySearch::fromEnvironment(), runtime::kNvrtcNames,
        "--target cuda needs NVRTC from the CUDA Toolkit", error);
    if (!found.handle) {
      failure = error;
      return;
    }
    void *library = found.handle;
    auto get = [&](auto &fn, const char *symbol) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(
          dlsym(library, symbol));
      return fn != nullptr;
    };
    if (!get(api.create, "nvrtcCreateProgram") ||
        !get(api.compile, "nvrtcCompileProgram") ||
        !get(api.ptxSize, "nvrtcGetPTXSize") || !get(api.ptx, "nvrtcGetPTX") ||
        !get(api.logSize, "nvrtcGetProgramLogSize") ||
        !get(api.log, "nvrtcGetProgramLog") ||
        !get(api.destroy, "nvrtcDestroyProgram") ||
        !get(api.errorText, "nvrtcGetErrorString"))
      failure = "libnvrtc.so lacks the NVRTC entry points strata uses";
  });
  error = failure;
  return failure.empty() ? &api : nullptr;
}

} // namespace

bool isCudaArch(const std::string &arch) {
  return arch == "sm_80" || arch == "sm_90a";
}

std::string compileToPtx(const std::string &source, const std::string &name,
                         const std::string &arch, std::string &ptx) {
  if (!isCudaArch(arch))
    return "unknown CUDA architecture '" + arch + "' (" + kCudaArchs + ")";
  std::string error;
  const Api *api = loadApi(error);
  if (!api)
    return error;
  Program program = nullptr;
  std::string file = name + ".cu";
  if (Result r = api->create(&program, source.c_str(), file.c_str(), 0, nullptr,
                             nullptr))
    return std::string("NVRTC cannot take ") + file + ": " + api->errorText(r);
  std::string target = "--gpu-architecture=compute_" + arch.substr(3);
  // Products and sums contract into fused multiply-adds (one rounding
  // where the CPU backend, built without FMA, rounds twice): what every
  // GPU kernel library does, and half the instructions of an online
  // softmax or a norm (docs/design.md, "FMA in generated code").
  const char *options[] = {target.c_str(), "--std=c++17", "--fmad=true"};
  Result compiled = api->compile(program, 3, options);
  if (compiled) {
    size_t size = 0;
    api->logSize(program, &size);
    std::vector<char> log(size + 1, 0);
    api->log(program, log.data());
    api->destroy(&program);
    return "NVRTC cannot compile " + file + " for " + arch + ":\n" + log.data();
  }
  size_t size = 0;
  api->ptxSize(program, &size);
  ptx.assign(size, '\0');
  api->ptx(program, ptx.data());
  if (!ptx.empty() && ptx.back() == '\0')
    ptx.pop_back();
  api->destroy(&program);
  return "";
}

} // namespace strata::codegen
