//===- WholeFile.cpp - files written whole or not at all ------------------===//
#include "runtime/io/WholeFile.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::runtime {

namespace fs = std::filesystem;

namespace {

/// What a file that is not a regular one is, for the message.
const char *kindOf(fs::file_type type) {
  switch (type) {
  case fs::file_type::directory:
    return "a directory";
  case fs::file_type::character:
  case fs::file_type::block:
    return "a device";
  case fs::file_type::fifo:
    return "a pipe";
  case fs::file_type::socket:
    return "a socket";
  default:
    return "not a regular file";
  }
}

/// Writes all of `bytes` to `fd` and flushes them to the disk.
bool writeAll(int fd, std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return false;
    bytes.remove_prefix(size_t(n));
  }
  return ::fsync(fd) == 0;
}

/// The file `path` names (a link's target, which need not exist yet), or
/// why strata will not replace it.
std::string targetOf(const std::string &path, fs::path &target) {
  std::error_code ec;
  target = path;
  if (fs::is_symlink(fs::symlink_status(target, ec))) {
    target = fs::weakly_canonical(target, ec);
    if (ec)
      return "cannot write '" + path + "': cannot follow the link (" +
             ec.message() + ")";
  }
  fs::file_status status = fs::status(target, ec);
  if (fs::exists(status) && !fs::is_regular_file(status))
    return "cannot write '" + path + "': it is " + kindOf(status.type()) +
           ", and strata writes only regular files (a new file replaces "
           "an old one whole)";
  return "";
}

} // namespace

std::string checkWritable(const std::string &path) {
  fs::path target;
  if (std::string error = targetOf(path, target); !error.empty())
    return error;
  fs::path dir = target.parent_path();
  if (dir.empty())
    dir = ".";
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    return "cannot write '" + path + "': its directory '" + dir.string() +
           "': " + std::strerror(errno);
  return "";
}

std::string writeFileWhole(const std::string &path, std::string_view bytes) {
  fs::path target;
  if (std::string error = targetOf(path, target); !error.empty())
    return error;
  std::string temporary =
      target.string() + ".tmp." + std::to_string(::getpid());
  int fd =
      ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0)
    return "cannot write '" + temporary + "': " + std::strerror(errno);
  bool written = writeAll(fd, bytes);
  int writeErrno = errno;
  if (::close(fd) != 0 && written) {
    written = false;
    writeErrno = errno;
  }
  if (!written) {
    ::unlink(temporary.c_str());
    return "cannot write '" + temporary + "': " + std::strerror(writeErrno);
  }
  if (::rename(temporary.c_str(), target.c_str()) != 0) {
    std::string error = std::strerror(errno);
    ::unlink(temporary.c_str());
    return "cannot rename '" + temporary + "' to '" + target.string() +
           "': " + error;
  }
  return "";
}

} // namespace strata::runtime
