//===- MpiTransport.cpp - one process per rank under mpirun or srun -------===//
//
// Non-blocking sends and receives, polled against the deadline, so that a
// rank whose peer died or hangs reports it instead of blocking in MPI. A
// rank's two streams (its thread and its communication thread) both use
// MPI: every call holds one lock, which MPI_THREAD_SERIALIZED allows.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Transport.h"

#include <cstdio>
#include <cstdlib>
// The C API only: no C++ bindings to link.
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <initializer_list>
#include <list>
#include <mpi.h>
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
  return launcherValue(
      {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_NTASKS"}, 0);
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

namespace {

bool started = false;
std::mutex mpiMutex; // held around every MPI call

/// Calls an MPI function under the lock.
template <typename Fn> int locked(Fn fn) {
  std::lock_guard<std::mutex> lock(mpiMutex);
  return fn();
}

class MpiTransport : public Transport {
public:
  MpiTransport() {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
    if (provided < MPI_THREAD_SERIALIZED) {
      std::fprintf(stderr, "strata-run: error: this MPI cannot be called from "
                           "a rank's two threads (MPI_THREAD_SERIALIZED)\n");
      MPI_Abort(MPI_COMM_WORLD, 1);
    }
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &world);
    started = true;
  }
  int rank() const override { return me; }
  int size() const override { return world; }

  void exchange(int to, const void *send, size_t sendBytes, int from,
                void *recv, size_t recvBytes, int tag,
                Clock::time_point deadline, const std::string &what) override {
    MPI_Request sent, received;
    locked([&] {
      MPI_Irecv(recv, static_cast<int>(recvBytes), MPI_BYTE, from, tag,
                MPI_COMM_WORLD, &received);
      return MPI_Isend(send, static_cast<int>(sendBytes), MPI_BYTE, to, tag,
                       MPI_COMM_WORLD, &sent);
    });
    wait(sent, to, deadline, what);
    finishReceive(received, from, recvBytes, deadline, what);
  }

  void send(int to, const void *data, size_t bytes, int tag,
            Clock::time_point deadline, const std::string &what) override {
    MPI_Request request;
    locked([&] {
      return MPI_Isend(data, static_cast<int>(bytes), MPI_BYTE, to, tag,
                       MPI_COMM_WORLD, &request);
    });
    wait(request, to, deadline, what);
  }

  void recv(int from, void *data, size_t bytes, int tag,
            Clock::time_point deadline, const std::string &what) override {
    MPI_Request request;
    locked([&] {
      return MPI_Irecv(data, static_cast<int>(bytes), MPI_BYTE, from, tag,
                       MPI_COMM_WORLD, &request);
    });
    finishReceive(request, from, bytes, deadline, what);
    reap();
  }

  void post(int to, const void *data, size_t bytes, int tag) override {
    reap();
    std::lock_guard<std::mutex> lock(pendingMutex);
    auto &message = pending.emplace_back();
    message.bytes.assign(static_cast<const uint8_t *>(data),
                         static_cast<const uint8_t *>(data) + bytes);
    message.to = to;
    locked([&] {
      return MPI_Isend(message.bytes.data(), static_cast<int>(bytes), MPI_BYTE,
                       to, tag, MPI_COMM_WORLD, &message.request);
    });
  }

  void flush(Clock::time_point deadline) override {
    std::lock_guard<std::mutex> lock(pendingMutex);
    for (Posted &message : pending)
      wait(message.request, message.to, deadline,
           "delivering a pipeline transfer");
    pending.clear();
  }

private:
  /// A posted send and the copy of its bytes, kept until it completes.
  struct Posted {
    std::vector<uint8_t> bytes;
    int to = 0;
    MPI_Request request = MPI_REQUEST_NULL;
  };
  /// Forgets posted sends that have completed.
  void reap() {
    std::lock_guard<std::mutex> lock(pendingMutex);
    pending.remove_if([](Posted &message) {
      int flag = 0;
      locked(
          [&] { return MPI_Test(&message.request, &flag, MPI_STATUS_IGNORE); });
      return flag != 0;
    });
  }
  std::mutex pendingMutex;
  std::list<Posted> pending;

  /// Waits for a receive and checks it got the bytes it expected: a
  /// shorter message means the ranks' programs disagree.
  void finishReceive(MPI_Request &request, int from, size_t bytes,
                     Clock::time_point deadline, const std::string &what) {
    MPI_Status status;
    wait(request, from, deadline, what, &status);
    int count = 0;
    locked([&] { return MPI_Get_count(&status, MPI_BYTE, &count); });
    if (size_t(count) != bytes)
      throw CommTimeout("rank " + std::to_string(me) + ": in " + what +
                        ", rank " + std::to_string(from) + " sent " +
                        std::to_string(count) + " bytes where " +
                        std::to_string(bytes) +
                        " were expected (the ranks' programs disagree)");
  }

  void wait(MPI_Request &request, int peer, Clock::time_point deadline,
            const std::string &what, MPI_Status *status = MPI_STATUS_IGNORE) {
    while (true) {
      int flag = 0;
      if (locked([&] { return MPI_Test(&request, &flag, status); }) !=
          MPI_SUCCESS)
        throw CommTimeout("rank " + std::to_string(me) + ": MPI failed in " +
                          what + " with rank " + std::to_string(peer));
      if (flag)
        return;
      if (Clock::now() > deadline)
        throw CommTimeout("rank " + std::to_string(me) + ": timed out in " +
                          what + " waiting for rank " + std::to_string(peer));
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }

  int me = 0, world = 1;
};

} // namespace

std::unique_ptr<Transport> makeMpiTransport() {
  return std::make_unique<MpiTransport>();
}

void finishMpi() {
  if (started)
    MPI_Finalize();
  started = false;
}

} // namespace strata::runtime

namespace strata::runtime {

void abortMpi() {
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::_Exit(1);
}

} // namespace strata::runtime
