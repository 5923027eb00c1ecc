//===- Simt.cpp - a generated kernel compiled and run on the host ---------===//
#include "runtime/simt/Simt.h"
#include "runtime/base/WholeFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <mutex>
#include <regex>
#include <spawn.h>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char **environ;

namespace strata::runtime::simt {

extern const char *const kRuntimeHeader; // SimtRuntime.h's text

namespace {

std::string trim(const std::string &text) {
  size_t begin = text.find_first_not_of(" \t\n");
  size_t end = text.find_last_not_of(" \t\n");
  return begin == std::string::npos ? "" : text.substr(begin, end - begin + 1);
}

/// The host compiler as an argument vector: STRATA_SIMT_CXX split at
/// spaces ("ccache g++"), or the launcher and compiler the build used.
std::vector<std::string> compilerArguments() {
  std::string command;
  if (const char *cxx = std::getenv("STRATA_SIMT_CXX"); cxx && *cxx)
    command = cxx;
  else if (access(STRATA_SIMT_CXX, X_OK) != 0)
    command = "c++"; // a build moved off the machine that built it
  else
    command = std::string(STRATA_SIMT_LAUNCHER) + " " + STRATA_SIMT_CXX;
  std::vector<std::string> args;
  std::istringstream words(command);
  for (std::string word; words >> word;)
    args.push_back(word);
  return args;
}

/// Runs args[0] (found on PATH) with args, its stderr into `log`; its exit
/// status, or -1 when it could not run or died of a signal.
int runWithStderrTo(const std::vector<std::string> &args,
                    const std::string &log) {
  std::vector<char *> argv;
  for (const std::string &arg : args)
    argv.push_back(const_cast<char *>(arg.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 2, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  pid_t pid;
  int error =
      posix_spawnp(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (error != 0) {
    std::ofstream(log) << "cannot run " << args[0] << ": "
                       << std::strerror(error) << "\n";
    return -1;
  }
  int status;
  while (waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return -1;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/// A directory of this process's own for the units and libraries.
const std::string &workDirectory() {
  // Never destroyed: the exit handler below runs after the destructors of
  // statics made before it was registered, this one among them (ASan saw
  // it read the freed name).
  static const std::string &dir = *new std::string([] {
    const char *tmp = std::getenv("TMPDIR");
    std::string pattern =
        std::string(tmp && *tmp ? tmp : "/tmp") + "/strata-simt-XXXXXX";
    if (!mkdtemp(pattern.data()))
      return std::string();
    std::ofstream(pattern + "/SimtRuntime.h") << kRuntimeHeader;
    std::atexit([] {
      std::remove((workDirectory() + "/SimtRuntime.h").c_str());
      rmdir(workDirectory().c_str());
    });
    return pattern;
  }());
  return dir;
}

/// One launch at a time in the process (see Kernel::launch).
std::mutex launchMutex;

/// The unit as the host compiles it: dynamic shared memory declarations
/// made pointers into the model's buffer, and an entry that unpacks
/// cuLaunchKernel-style parameters appended; "" in `error` or why the
/// kernel's signature cannot be read.
std::string hostUnit(const std::string &source, const std::string &name,
                     std::string &error) {
  static const std::regex dynamicShared(
      R"(extern\s+__shared__\s+([A-Za-z_][A-Za-z_0-9 ]*?)\s*\b([A-Za-z_]\w*)\s*\[\s*\]\s*;)");
  std::string unit = std::regex_replace(
      source, dynamicShared, "$1 *$2 = ($1 *)::simt::dynamicShared();");
  // The kernel's declaration: __global__, its name, its parameters (the
  // name on a line of its own, or after the qualifiers on one line).
  std::smatch found;
  size_t open = std::string::npos;
  if (std::regex_search(unit, found,
                        std::regex("__global__[^;{]*\\b" + name + "\\s*\\(")))
    open = size_t(found.position(0) + found.length(0) - 1);
  size_t close = open == std::string::npos ? open : unit.find(')', open);
  if (close == std::string::npos) {
    error = "no signature for kernel " + name + " in its unit";
    return "";
  }
  std::string params = unit.substr(open + 1, close - open - 1);
  std::string call;
  size_t index = 0;
  for (size_t begin = 0; begin <= params.size(); ++index) {
    size_t comma = params.find(',', begin);
    if (comma == std::string::npos)
      comma = params.size();
    std::string param = trim(params.substr(begin, comma - begin));
    begin = comma + 1;
    if (param.empty())
      break;
    size_t nameAt = param.find_last_not_of(
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_");
    if (nameAt == std::string::npos) {
      error = "kernel " + name + ": cannot read parameter '" + param + "'";
      return "";
    }
    std::string type = param.substr(0, nameAt + 1);
    call += (index ? ", " : "") + std::string("*(") + type + " *)args[" +
            std::to_string(index) + "]";
  }
  unit += "\nextern \"C\" void strataSimtEntry(void **args) {\n  " + name +
          "(" + call + ");\n}\n";
  error.clear();
  return unit;
}

} // namespace

std::shared_ptr<const Kernel> Kernel::build(const std::string &source,
                                            const std::string &name,
                                            std::string &error) {
  static std::mutex mutex;
  static std::map<std::pair<std::string, std::string>,
                  std::shared_ptr<const Kernel>>
      built;
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<const Kernel> &kernel = built[{name, source}];
  if (!kernel) {
    auto made = std::make_shared<Kernel>();
    error = made->compile(source, name);
    if (!error.empty()) {
      built.erase({name, source});
      return nullptr;
    }
    kernel = made;
  }
  error.clear();
  return kernel;
}

std::string Kernel::compile(const std::string &source,
                            const std::string &name) {
  kernelName = name;
  std::string error;
  std::string unit = hostUnit(source, name, error);
  if (!error.empty())
    return error;
  const std::string &dir = workDirectory();
  if (dir.empty())
    return "cannot make a directory for host-compiled kernels";
  static int serial = 0;
  // The file names are strata's own: nothing from the plan names a file.
  std::string stem = dir + "/kernel-" + std::to_string(serial++);
  std::ofstream(stem + ".cpp") << unit;
  // An argument vector, no shell: neither the plan nor a path with spaces
  // or quotes can become a command.
  std::vector<std::string> args = compilerArguments();
  for (const char *flag : {"-std=c++17", "-O1", "-w", "-fPIC", "-shared"})
    args.push_back(flag);
  args.insert(args.end(), {"-include", dir + "/SimtRuntime.h", "-o",
                           stem + ".so", stem + ".cpp"});
  int status = runWithStderrTo(args, stem + ".log");
  std::string log;
  readFileWhole(stem + ".log", log); // what the compiler said, if anything
  std::remove((stem + ".cpp").c_str());
  std::remove((stem + ".log").c_str());
  if (status != 0) {
    std::remove((stem + ".so").c_str());
    return "the host compiler refused kernel " + name + ":\n" + log;
  }
  library = dlopen((stem + ".so").c_str(), RTLD_NOW | RTLD_LOCAL);
  std::remove((stem + ".so").c_str());
  if (!library)
    return std::string("cannot load the host-compiled kernel: ") + dlerror();
  entry = reinterpret_cast<LaunchFn>(dlsym(library, "strataSimtLaunch"));
  if (!entry)
    return "the host-compiled kernel has no strataSimtLaunch";
  return "";
}

std::string Kernel::launch(std::array<uint32_t, 3> grid,
                           std::array<uint32_t, 3> block, uint32_t sharedBytes,
                           void **params) const {
  if (!entry)
    return "the kernel was not built";
  char error[512] = "";
  std::lock_guard<std::mutex> lock(launchMutex);
  if (entry(grid.data(), block.data(), sharedBytes, params, error,
            sizeof error) != 0)
    return error;
  return "";
}

Kernel::~Kernel() {
  if (library)
    dlclose(library);
}

} // namespace strata::runtime::simt
