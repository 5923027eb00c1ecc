//===- WholeFile.h - files written whole or not at all ----------*- C++ -*-===//
//
// Every file strata writes (plans, parameters, traces, pictures, kernels,
// printed IR) goes through writeFileWhole: into a temporary file beside the
// target, flushed to the disk, then renamed over it, and the rename made
// durable. A reader, or a crash at any moment, sees the old file or the new
// one, never part of one. readFileWhole is the reading side. A
// path that exists and is not a regular file (a directory, a device such
// as /dev/null, a pipe, a socket) is refused rather than renamed over; a
// symbolic link is followed, and the file it names is replaced.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_IO_WHOLEFILE_H
#define STRATA_RUNTIME_IO_WHOLEFILE_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace strata::runtime {

/// A file written whole in pieces (a stream of tokens, say): the bytes go
/// to the temporary as they come, and commit() flushes them to the disk and
/// renames the temporary over the target. Destroyed uncommitted, it
/// removes the temporary.
class WholeFileWriter {
public:
  WholeFileWriter() = default;
  WholeFileWriter(const WholeFileWriter &) = delete;
  WholeFileWriter &operator=(const WholeFileWriter &) = delete;
  ~WholeFileWriter();

  /// "" or why `path` cannot be written (what writeFileWhole refuses).
  std::string open(const std::string &path);
  std::string write(std::string_view bytes);
  std::string commit();

private:
  std::string flush();
  std::string writeOut(std::string_view bytes);

  std::string target, temporary, buffered;
  int fd = -1;
};

/// Writes `bytes` to `path` whole or not at all; "" or why not.
std::string writeFileWhole(const std::string &path, std::string_view bytes);
inline std::string writeFileWhole(const std::string &path,
                                  const std::vector<uint8_t> &bytes) {
  return writeFileWhole(
      path, std::string_view(reinterpret_cast<const char *>(bytes.data()),
                             bytes.size()));
}

/// The bytes of `path` into `out`; "" or why not, naming the file.
std::string readFileWhole(const std::string &path, std::string &out);

/// Makes the entries of directory `path` durable (a rename inside it).
void syncDirectory(const std::string &path);

/// Whether writeFileWhole could write `path` now (what it would refuse, a
/// directory it cannot write in): "" or why not. Checked before a run, so
/// that a long one does not end in an error it could have given first.
std::string checkWritable(const std::string &path);

} // namespace strata::runtime

#endif
