//===- WholeFile.cpp - files written whole or not at all ------------------===//
#include "runtime/base/WholeFile.h"
#include "runtime/base/Text.h"

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

/// How a message names the file: quoted, or "the standard input" for "-".
std::string shown(const std::string &path) {
  return path == "-" ? "the standard input" : "'" + path + "'";
}

std::string tooLarge(const std::string &path, const FileKind &kind,
                     const std::string &size) {
  return shown(path) + " is " + size + "; a " + kind.name + " is at most " +
         humanBytes(kind.maxBytes);
}

/// checkReadable on an open descriptor; `size` is a regular file's size
/// (0 for a pipe).
std::string checkOpen(int fd, const std::string &path, const FileKind &kind,
                      uint64_t &size) {
  struct stat st;
  if (::fstat(fd, &st) != 0)
    return "cannot read " + std::string(kind.name) + " " + shown(path) + ": " +
           std::strerror(errno);
  fs::file_type type = S_ISDIR(st.st_mode)    ? fs::file_type::directory
                       : S_ISCHR(st.st_mode)  ? fs::file_type::character
                       : S_ISBLK(st.st_mode)  ? fs::file_type::block
                       : S_ISSOCK(st.st_mode) ? fs::file_type::socket
                                              : fs::file_type::regular;
  if (type != fs::file_type::regular)
    return "cannot read " + std::string(kind.name) + " " + shown(path) +
           ": it is " + kindOf(type) + ", not a file";
  size = S_ISREG(st.st_mode) ? uint64_t(st.st_size) : 0;
  if (size > kind.maxBytes)
    return tooLarge(path, kind, humanBytes(size));
  return "";
}

/// readFileWhole into a string or a byte vector (a plan, a text dataset),
/// so that neither is read into one and copied into the other.
template <typename Bytes>
std::string readInto(const std::string &path, Bytes &out,
                     const FileKind &kind) {
  out.clear();
  bool standardInput = path == "-";
  int fd = standardInput ? 0 : ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "cannot open " + std::string(kind.name) + " '" + path +
           "': " + std::strerror(errno);
  auto done = [&](std::string error) {
    if (!standardInput)
      ::close(fd);
    return error;
  };
  uint64_t size = 0;
  if (std::string error = checkOpen(fd, path, kind, size); !error.empty())
    return done(error);
  out.reserve(size_t(size)); // sized once for a regular file: no regrowth
  char buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return done("cannot read " + shown(path) + ": " + std::strerror(errno));
    if (n == 0)
      break;
    // A pipe (or a file still growing) is cut where its kind ends.
    if (out.size() + size_t(n) > kind.maxBytes) {
      out.clear();
      return done(
          tooLarge(path, kind, "more than " + humanBytes(kind.maxBytes)));
    }
    out.insert(out.end(), buffer, buffer + n);
  }
  return done("");
}

} // namespace

std::string checkReadable(const std::string &path, const FileKind &kind) {
  uint64_t size = 0;
  if (path == "-")
    return checkOpen(0, path, kind, size);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return "cannot open " + std::string(kind.name) + " '" + path +
           "': " + std::strerror(errno);
  std::string error = checkOpen(fd, path, kind, size);
  ::close(fd);
  return error;
}

std::string readFileWhole(const std::string &path, std::string &out,
                          const FileKind &kind) {
  return readInto(path, out, kind);
}

std::string readFileWhole(const std::string &path, std::vector<uint8_t> &out,
                          const FileKind &kind) {
  return readInto(path, out, kind);
}

std::string checkNotInput(const std::string &output, const std::string &input,
                          const FileKind &inputKind) {
  std::error_code ec;
  if (output == "-" || input == "-" || !fs::exists(output, ec) ||
      !fs::equivalent(output, input, ec))
    return "";
  return "refusing to write '" + output + "': it is the " + inputKind.name +
         " '" + input + "' being read (name another output)";
}

void syncDirectory(const std::string &path) {
  int fd = ::open(path.empty() ? "." : path.c_str(),
                  O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

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

WholeFileWriter::~WholeFileWriter() {
  if (fd >= 0) {
    ::close(fd);
    ::unlink(temporary.c_str());
  }
}

std::string WholeFileWriter::open(const std::string &path) {
  fs::path resolved;
  if (std::string error = targetOf(path, resolved); !error.empty())
    return error;
  target = resolved.string();
  // A name of its own, whoever else writes the same target (another
  // writer in this process, a temporary a killed run left).
  std::string name = target + ".tmp.XXXXXX";
  fd = ::mkostemp(name.data(), O_CLOEXEC);
  if (fd < 0)
    return "cannot write '" + name + "': " + std::strerror(errno);
  temporary = name;
  // mkostemp makes it 0600; a file strata writes is as any other.
  mode_t mask = ::umask(0);
  ::umask(mask);
  ::fchmod(fd, 0666 & ~mask);
  return "";
}

std::string WholeFileWriter::write(std::string_view bytes) {
  // Small pieces gather in a buffer, one system call a megabyte; a large
  // one goes out as it is, not copied.
  constexpr size_t kBuffer = 1u << 20;
  if (bytes.size() < kBuffer) {
    buffered.append(bytes);
    return buffered.size() < kBuffer ? "" : flush();
  }
  if (std::string error = flush(); !error.empty())
    return error;
  return writeOut(bytes);
}

std::string WholeFileWriter::flush() {
  std::string error = writeOut(buffered);
  buffered.clear();
  return error;
}

std::string WholeFileWriter::writeOut(std::string_view bytes) {
  while (!bytes.empty()) {
    ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return "cannot write '" + temporary +
             "': " + std::strerror(n < 0 ? errno : ENOSPC);
    bytes.remove_prefix(size_t(n));
  }
  return "";
}

std::string WholeFileWriter::commit() {
  if (std::string error = flush(); !error.empty())
    return error; // the destructor removes the temporary
  bool ok = ::fsync(fd) == 0;
  int error = errno;
  if (::close(fd) != 0 && ok) {
    ok = false;
    error = errno;
  }
  fd = -1;
  if (ok && ::rename(temporary.c_str(), target.c_str()) == 0) {
    syncDirectory(fs::path(target).parent_path().string());
    return "";
  }
  if (ok)
    error = errno;
  ::unlink(temporary.c_str());
  return (ok ? "cannot rename '" + temporary + "' to '" + target + "': "
             : "cannot write '" + temporary + "': ") +
         std::strerror(error);
}

std::string writeFileWhole(const std::string &path, std::string_view bytes) {
  WholeFileWriter file;
  std::string error = file.open(path);
  if (error.empty())
    error = file.write(bytes);
  if (error.empty())
    error = file.commit();
  return error;
}

} // namespace strata::runtime
