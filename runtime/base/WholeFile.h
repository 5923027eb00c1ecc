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
#ifndef STRATA_RUNTIME_BASE_WHOLEFILE_H
#define STRATA_RUNTIME_BASE_WHOLEFILE_H

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

/// What a reader takes: its name in messages ("plan", "model file") and
/// the largest such file it reads. Every file strata reads is checked
/// against its kind before a byte is read, so that a wrong path (a
/// directory, /dev/zero, a 40 GB log) is refused in one line instead of
/// filling the memory or throwing from deep inside a stream.
struct FileKind {
  const char *name;
  uint64_t maxBytes;
};

inline constexpr uint64_t kMiB = uint64_t(1) << 20, kGiB = uint64_t(1) << 30;
inline constexpr FileKind kAnyFile{"file", ~uint64_t(0)};
inline constexpr FileKind kModelFile{"model file", 64 * kMiB};
inline constexpr FileKind kIrFile{"IR file", 1 * kGiB};
/// FlatBuffers address at most 2 GiB.
inline constexpr FileKind kPlanFile{"plan", 2 * kGiB};
inline constexpr FileKind kJsonFile{"JSON file", 256 * kMiB};
inline constexpr FileKind kTokenizerFile{"tokenizer file", 256 * kMiB};
inline constexpr FileKind kTraceFile{"trace", 4 * kGiB};
/// --data-path's text, held in memory whole.
inline constexpr FileKind kTextData{"data file", 4 * kGiB};
/// Weights and checkpoints are as large as the model: only not a device.
inline constexpr FileKind kWeightsFile{"weights file", ~uint64_t(0)};

/// "" or why `path` is not a `kind` strata can read: missing, unreadable,
/// a directory, a device or a socket, or larger than kind.maxBytes. A pipe
/// passes; readFileWhole stops reading it past kind.maxBytes. "-" is the
/// standard input.
std::string checkReadable(const std::string &path, const FileKind &kind);

/// The bytes of `path` into `out`, after checkReadable; "" or why not,
/// naming the file.
std::string readFileWhole(const std::string &path, std::string &out,
                          const FileKind &kind = kAnyFile);
std::string readFileWhole(const std::string &path, std::vector<uint8_t> &out,
                          const FileKind &kind = kAnyFile);

/// "" or why writing `output` would replace `input` (the same file by
/// another name too): `strata-compile m.model -o m.model` must not destroy
/// the model it reads.
std::string checkNotInput(const std::string &output, const std::string &input,
                          const FileKind &inputKind);

/// Makes the entries of directory `path` durable (a rename inside it).
void syncDirectory(const std::string &path);

/// Whether writeFileWhole could write `path` now (what it would refuse, a
/// directory it cannot write in): "" or why not. Checked before a run, so
/// that a long one does not end in an error it could have given first.
std::string checkWritable(const std::string &path);

} // namespace strata::runtime

#endif
