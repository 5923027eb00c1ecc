//===- FuzzFiles.h - a fuzz input as the files a reader opens ---*- C++ -*-===//
//
// Readers of files that travel (datasets, checkpoints, safetensors) take
// paths: each input is written to files in a directory of the process's
// own on tmpfs, then read back through the reader as a user's would be.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TEST_FUZZ_FUZZFILES_H
#define STRATA_TEST_FUZZ_FUZZFILES_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>
#include <unistd.h>

namespace strata::fuzz {

/// A directory for this process's files, made once.
inline const std::string &scratch() {
  static const std::string dir = [] {
    std::string pattern =
        (access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp") +
        std::string("/strata-fuzz-XXXXXX");
    if (!mkdtemp(pattern.data()))
      std::abort();
    return pattern;
  }();
  return dir;
}

/// Writes `bytes` to scratch()/name; returns the path.
inline std::string writeFile(const std::string &name, std::string_view bytes) {
  std::string path = scratch() + "/" + name;
  FILE *file = std::fopen(path.c_str(), "wb");
  if (!file)
    std::abort();
  if (!bytes.empty())
    std::fwrite(bytes.data(), 1, bytes.size(), file);
  std::fclose(file);
  return path;
}

/// Splits an input in two at a 4-byte little-endian length that leads it
/// (the rest goes to the second part when the length overreaches).
inline void splitInput(const uint8_t *data, size_t size,
                       std::string_view &first, std::string_view &second) {
  const char *text = reinterpret_cast<const char *>(data);
  if (size < 4) {
    first = std::string_view(text, size);
    second = {};
    return;
  }
  uint32_t length = uint32_t(data[0]) | uint32_t(data[1]) << 8 |
                    uint32_t(data[2]) << 16 | uint32_t(data[3]) << 24;
  size_t rest = size - 4;
  if (length > rest)
    length = uint32_t(rest);
  first = std::string_view(text + 4, length);
  second = std::string_view(text + 4 + length, rest - length);
}

} // namespace strata::fuzz

#endif
