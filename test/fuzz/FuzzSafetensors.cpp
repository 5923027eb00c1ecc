//===- FuzzSafetensors.cpp - the safetensors reader
//---------------------------===//
//
// Weights and checkpoint shards travel: any bytes as a safetensors file
// are refused or read (every dtype it widens), without a crash or a read
// past the file.
//
//===----------------------------------------------------------------------===//
#include "FuzzFiles.h"
#include "runtime/io/Safetensors.h"

using namespace strata::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string path = strata::fuzz::writeFile(
      "weights.safetensors",
      std::string_view(reinterpret_cast<const char *>(data), size));
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;
  (void)readSafetensors(path, tensors, &metadata);
  return 0;
}
