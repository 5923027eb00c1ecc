//===- Safetensors.h - the safetensors format -------------------*- C++ -*-===//
//
// An 8-byte little-endian header length, a JSON header naming each tensor's
// dtype, shape and byte range, then the data. Written through a temporary
// name and a rename.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_IO_SAFETENSORS_H
#define STRATA_RUNTIME_IO_SAFETENSORS_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata::runtime {

struct HostTensor {
  std::vector<int64_t> shape;
  std::vector<float> values;
};

/// Writes f32 tensors, and `metadata` as the header's __metadata__;
/// returns "" or the error.
std::string
writeSafetensors(const std::string &path,
                 const std::map<std::string, HostTensor> &tensors,
                 const std::map<std::string, std::string> &metadata = {});

/// Reads the floating-point tensors of a file (F32, and F64, F16 and BF16
/// widened or narrowed to f32; tensors of other dtypes, such as masks, are
/// left out), and its __metadata__ if asked; returns "" or the error.
std::string
readSafetensors(const std::string &path,
                std::map<std::string, HostTensor> &tensors,
                std::map<std::string, std::string> *metadata = nullptr);

} // namespace strata::runtime

#endif
