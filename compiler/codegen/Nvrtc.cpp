//===- Nvrtc.cpp - NVRTC, loaded only when asked --------------------------===//
#include "compiler/codegen/Nvrtc.h"

#include <cstdlib>
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

/// NVRTC from the library path, else the CUDA Toolkit's usual place.
const Api *loadApi(std::string &error) {
  static Api api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    // The library path first, then the toolkit ($CUDA_HOME, else its
    // usual place).
    const char *home = std::getenv("CUDA_HOME");
    std::string toolkit =
        std::string(home && *home ? home : "/usr/local/cuda") + "/lib64/";
    void *library = nullptr;
    for (std::string name : {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"})
      if ((library = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL)) ||
          (library = dlopen((toolkit + name).c_str(), RTLD_NOW | RTLD_LOCAL)))
        break;
    if (!library) {
      failure = "--target cuda needs NVRTC from the CUDA Toolkit "
                "(libnvrtc.so), found neither on the library path nor in " +
                toolkit;
      return;
    }
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
  // No contraction into fused multiply-adds: the kernels round each
  // product and sum as the CPU backend does (built without FMA).
  const char *options[] = {target.c_str(), "--std=c++17", "--fmad=false"};
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
