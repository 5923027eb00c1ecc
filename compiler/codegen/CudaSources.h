//===- CudaSources.h - the kernels' CUDA files, as the units hold them -*- C++
//-*-===//
//
// The hand-written CUDA of the kernels lives in compiler/codegen/cuda/ as
// .cuh files that are read, formatted and tuned as CUDA; the build links
// their text in. A unit holds the files its kernel needs, their
// `#include "x.cuh"` lines replaced by the files' text (each file once),
// and a stub the emitter writes: the launch's shape as constants and a
// kernel with the launch contract's C name that calls the family's
// template (CudaKernel.h).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_CODEGEN_CUDASOURCES_H
#define STRATA_COMPILER_CODEGEN_CUDASOURCES_H

#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace strata::codegen {

/// The text of compiler/codegen/cuda/`file` as it was built in, or null.
const char *cudaSourceFile(std::string_view file);

/// Every file of compiler/codegen/cuda/, by name.
std::vector<std::string> cudaSourceNames();

/// The files' text with their includes expanded, each file once: those in
/// `included` are left out, and every file written is added to it. A file
/// that is not built in becomes an #error line, which NVRTC reports.
std::string expandCudaSources(const std::vector<std::string> &files,
                              std::set<std::string> &included);

} // namespace strata::codegen

#endif
