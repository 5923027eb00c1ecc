//===- Nvrtc.h - CUDA C++ to PTX at compile time ----------------*- C++ -*-===//
//
// NVRTC, from the CUDA Toolkit, loaded with dlopen when the CUDA target is
// asked for: strata-compile builds and runs CPU plans on a machine without
// CUDA. NVRTC needs no GPU.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_CODEGEN_NVRTC_H
#define STRATA_COMPILER_CODEGEN_NVRTC_H

#include <string>

namespace strata::codegen {

/// The architectures the CUDA target generates for.
bool isCudaArch(const std::string &arch);
inline constexpr const char *kCudaArchs = "sm_80 or sm_90a";

/// Compiles `source` (one translation unit called `name`) to PTX for
/// `arch` (sm_80, sm_90a). Returns "" or the error with NVRTC's log.
std::string compileToPtx(const std::string &source, const std::string &name,
                         const std::string &arch, std::string &ptx);

} // namespace strata::codegen

#endif
