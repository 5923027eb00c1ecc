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

/// Writes the report into `text`: the GPU (or none, and why), then every
/// library whether or not there is a GPU. Returns "" when the cuda backend
/// can run here (a driver, a GPU, cuBLASLt), else the first reason it
/// cannot. cuDNN, NCCL and NVRTC are reported but not needed: attention
/// runs strata's own kernels without cuDNN, ranks as threads communicate
/// without NCCL, and plans carry their kernels compiled.
std::string describeCudaEnvironment(std::string &text);

} // namespace strata::runtime::cuda

#endif
