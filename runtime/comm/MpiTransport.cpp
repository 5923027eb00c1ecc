//===- MpiTransport.cpp - one process per rank under mpirun or srun -------===//
//
// Non-blocking sends and receives, polled against the deadline, so that a
// rank whose peer died or hangs reports it instead of blocking in MPI. A
// rank's streams (its thread, its communication and transfer threads) all
// use MPI: every call holds one lock, which MPI_THREAD_SERIALIZED allows. MPI
// itself is reached through libstrata-mpi.so (MpiShim.h), loaded when the
// transport is made: strata-run links no MPI.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/MpiShim.h"
#include "runtime/comm/Transport.h"

#include <dlfcn.h>
#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace strata::runtime {

namespace {

/// The first of the launchers' variables for one value that is set (Open
/// MPI's, MPICH's, PMIx's, Slurm's), or `absent`.
int launcherValue(std::initializer_list<const char *> names, int absent) {
  for (const char *name : names)
    if (const char *value = std::getenv(name))
      return std::atoi(value);
  return absent;
}

} // namespace

int launcherWorldSize() {
  // Slurm's step variable, not SLURM_NTASKS: an sbatch script's shell has
  // that too, and a strata-run started there without srun is one process.
  return launcherValue({"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE",
                        "SLURM_STEP_NUM_TASKS"},
                       0);
}

int launcherRank() {
  return launcherValue(
      {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}, -1);
}

int launcherLocalRank() {
  return launcherValue({"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID",
                        "PMIX_LOCAL_RANK", "SLURM_LOCALID"},
                       0);
}

int launcherLocalSize() {
  return launcherValue({"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS",
                        "PMIX_LOCAL_SIZE", "SLURM_NTASKS_PER_NODE"},
                       0);
}

namespace {

/// The shim's functions, looked up once.
struct Shim {
#define STRATA_MPI_POINTER(name) decltype(&::name) name = nullptr;
  STRATA_MPI_SHIM_FUNCTIONS(STRATA_MPI_POINTER)
#undef STRATA_MPI_POINTER
};
Shim shim;
bool loaded = false, started = false;
std::mutex mpiMutex; // held around every MPI call

/// The directory of the running executable, with its trailing slash.
std::string executableDirectory() {
  char path[4096];
  ssize_t length = readlink("/proc/self/exe", path, sizeof path - 1);
  if (length <= 0)
    return "";
  std::string text(path, size_t(length));
  return text.substr(0, text.rfind('/') + 1);
}

/// Loads libstrata-mpi.so: from the build's lib/ beside the executable's
/// bin/, the executable's own directory, or the library path. "" or why
/// not.
std::string loadShim() {
  if (loaded)
    return "";
  const std::string prefix = "this process was started by an MPI launcher, "
                             "but strata's MPI shim does not load: ";
  std::string directory = executableDirectory();
  void *library = nullptr;
  // One that is there but does not load (its MPI missing) says why.
  for (const std::string &candidate :
       {directory + "../lib/libstrata-mpi.so", directory + "libstrata-mpi.so"})
    if (!library && access(candidate.c_str(), F_OK) == 0 &&
        !(library = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL)))
      return prefix + dlerror();
  if (!library &&
      !(library = dlopen("libstrata-mpi.so", RTLD_NOW | RTLD_LOCAL)))
    return prefix + dlerror() + " (looked in " + directory + "../lib, " +
           directory + " and the library path)";
#define STRATA_MPI_LOOKUP(name)                                                \
  shim.name = reinterpret_cast<decltype(shim.name)>(dlsym(library, #name));    \
  if (!shim.name)                                                              \
    return "strata's MPI shim has no " #name " (it is from another build)";
  STRATA_MPI_SHIM_FUNCTIONS(STRATA_MPI_LOOKUP)
#undef STRATA_MPI_LOOKUP
  loaded = true;
  return "";
}

/// Calls a function of the shim under the lock.
template <typename Fn> int locked(Fn fn) {
  std::lock_guard<std::mutex> lock(mpiMutex);
  return fn();
}

class MpiTransport : public Transport {
public:
  MpiTransport(int me, int world) : me(me), world(world) {}
  int rank() const override { return me; }
  int size() const override { return world; }

  void exchange(int to, const void *send, size_t sendBytes, int from,
                void *recv, size_t recvBytes, int tag,
                Clock::time_point deadline, const std::string &what) override {
    void *received = startReceive(recv, recvBytes, from, tag, what);
    void *sent = startSend(send, sendBytes, to, tag, what);
    wait(sent, to, deadline, what);
    finishReceive(received, from, recvBytes, deadline, what);
  }

  void send(int to, const void *data, size_t bytes, int tag,
            Clock::time_point deadline, const std::string &what) override {
    wait(startSend(data, bytes, to, tag, what), to, deadline, what);
  }

  void recv(int from, void *data, size_t bytes, int tag,
            Clock::time_point deadline, const std::string &what) override {
    finishReceive(startReceive(data, bytes, from, tag, what), from, bytes,
                  deadline, what);
    reap();
  }

  void post(int to, const void *data, size_t bytes, int tag) override {
    reap();
    Posted message;
    message.bytes.assign(static_cast<const uint8_t *>(data),
                         static_cast<const uint8_t *>(data) + bytes);
    message.to = to;
    // The send reads the copy's heap bytes, which moving it keeps.
    message.request = startSend(message.bytes.data(), bytes, to, tag,
                                "posting a pipeline transfer");
    std::lock_guard<std::mutex> lock(pendingMutex);
    pending.push_back(std::move(message));
  }

  void flush(Clock::time_point deadline) override {
    std::lock_guard<std::mutex> lock(pendingMutex);
    // Each forgotten as soon as it is done (the shim has freed it).
    while (!pending.empty()) {
      wait(pending.front().request, pending.front().to, deadline,
           "delivering a pipeline transfer");
      pending.pop_front();
    }
  }

private:
  /// Starts a send; the shim's request.
  void *startSend(const void *data, size_t bytes, int to, int tag,
                  const std::string &what) {
    void *request = nullptr;
    if (locked([&] {
          return shim.strata_mpi_isend(data, bytes, to, tag, &request);
        }) != 0)
      throw CommTimeout(failed(what, to));
    return request;
  }
  /// Starts a receive; the shim's request.
  void *startReceive(void *data, size_t bytes, int from, int tag,
                     const std::string &what) {
    void *request = nullptr;
    if (locked([&] {
          return shim.strata_mpi_irecv(data, bytes, from, tag, &request);
        }) != 0)
      throw CommTimeout(failed(what, from));
    return request;
  }
  std::string failed(const std::string &what, int peer) const {
    return "rank " + std::to_string(me) + ": MPI failed in " + what +
           " with rank " + std::to_string(peer);
  }

  /// A posted send and the copy of its bytes, kept until it completes.
  struct Posted {
    std::vector<uint8_t> bytes;
    int to = 0;
    void *request = nullptr; // the shim's
  };
  /// Forgets posted sends that have completed.
  void reap() {
    std::lock_guard<std::mutex> lock(pendingMutex);
    pending.remove_if([](Posted &message) {
      int done = 0;
      uint64_t bytes = 0;
      locked(
          [&] { return shim.strata_mpi_test(message.request, &done, &bytes); });
      return done != 0; // the shim freed the request
    });
  }
  std::mutex pendingMutex;
  std::list<Posted> pending;

  /// Waits for a receive and checks it got the bytes it expected: a
  /// shorter message means the ranks' programs disagree.
  void finishReceive(void *request, int from, size_t bytes,
                     Clock::time_point deadline, const std::string &what) {
    uint64_t count = wait(request, from, deadline, what);
    if (count != bytes)
      throw CommTimeout("rank " + std::to_string(me) + ": in " + what +
                        ", rank " + std::to_string(from) + " sent " +
                        std::to_string(count) + " bytes where " +
                        std::to_string(bytes) +
                        " were expected (the ranks' programs disagree)");
  }

  /// Polls `request` until it is done; the bytes it moved.
  uint64_t wait(void *request, int peer, Clock::time_point deadline,
                const std::string &what) {
    while (true) {
      int done = 0;
      uint64_t bytes = 0;
      if (locked([&] {
            return shim.strata_mpi_test(request, &done, &bytes);
          }) != 0)
        throw CommTimeout(failed(what, peer));
      if (done)
        return bytes;
      if (Clock::now() > deadline)
        throw CommTimeout("rank " + std::to_string(me) + ": timed out in " +
                          what + " waiting for rank " + std::to_string(peer));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  int me = 0, world = 1;
};

} // namespace

std::string makeMpiTransport(std::unique_ptr<Transport> &transport) {
  if (std::string error = loadShim(); !error.empty())
    return error;
  int me = 0, world = 1;
  char error[512] = {};
  if (shim.strata_mpi_start(&me, &world, error, sizeof error) != 0)
    return std::string("MPI does not start: ") + error;
  started = true;
  transport = std::make_unique<MpiTransport>(me, world);
  return "";
}

void finishMpi() {
  if (started)
    shim.strata_mpi_finish();
  started = false;
}

void abortMpi() {
  if (started)
    shim.strata_mpi_abort();
  std::_Exit(1);
}

} // namespace strata::runtime
