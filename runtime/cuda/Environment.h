//===- Environment.h - what a GPU node offers the cuda backend --*- C++ -*-===//
//
// strata-run --cuda-info: the GPU, the driver and the CUDA libraries the
// cuda backend would use, and where each was found (LibrarySearch.h), in
// lines a person reads and a script parses ("key: value").
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_ENVIRONMENT_H
#define STRATA_RUNTIME_CUDA_ENVIRONMENT_H

#include <string>

namespace strata::runtime::cuda {

/// Writes the report into `text`. Returns "" when the cuda backend can run
/// here (a driver, a GPU, cuBLASLt), else the first reason it cannot; the
/// report then holds what was found before it. NCCL and NVRTC are reported
/// but not needed: ranks as threads communicate without NCCL, and plans
/// carry their kernels compiled.
std::string describeCudaEnvironment(std::string &text);

} // namespace strata::runtime::cuda

#endif
