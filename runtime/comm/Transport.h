//===- Transport.h - point-to-point messages between ranks ------*- C++ -*-===//
//
// What the collectives are built on: one exchange (send to one peer,
// receive from another) at a time. Every receive has a deadline; when it
// passes, CommTimeout names the peer that did not answer, so that a dead or
// stuck rank ends the run with a message instead of a hang. The ring
// collectives (runtime/comm/RingCollectives.h) run the same on every
// transport: threads of one process (`local`), processes under mpirun or
// srun (`mpi`). A rank's streams use its transport at once, the
// collectives' with tags of their own, the transfers' with their channel's.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_TRANSPORT_H
#define STRATA_RUNTIME_COMM_TRANSPORT_H

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>

namespace strata::runtime {

using Clock = std::chrono::steady_clock;

struct CommTimeout : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Transport {
public:
  virtual ~Transport() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// Sends `sendBytes` to `to` and receives `recvBytes` from `from`, both
  /// with `tag`. Throws CommTimeout (naming `what` and the peer) if the
  /// receive has not completed by `deadline`.
  virtual void exchange(int to, const void *send, size_t sendBytes, int from,
                        void *recv, size_t recvBytes, int tag,
                        Clock::time_point deadline,
                        const std::string &what) = 0;

  /// One-way messages (gathering checkpoints to rank 0).
  virtual void send(int to, const void *data, size_t bytes, int tag,
                    Clock::time_point deadline, const std::string &what) = 0;
  /// Receives the oldest message from `from` with `tag` (messages with
  /// other tags may arrive before it and wait their turn).
  virtual void recv(int from, void *data, size_t bytes, int tag,
                    Clock::time_point deadline, const std::string &what) = 0;

  /// Sends without waiting for the receiver: the bytes are copied, so the
  /// caller may reuse its buffer at once. Pipeline transfers use this, so
  /// that a stage never blocks on a send and only receives order the
  /// stages.
  virtual void post(int to, const void *data, size_t bytes, int tag) = 0;
  /// Waits until every posted message has left (before shutting down).
  virtual void flush(Clock::time_point deadline) = 0;
};

/// The transports of `ranks` threads of this process, one per rank.
class LocalHub;
std::shared_ptr<LocalHub> makeLocalHub(int ranks);
std::unique_ptr<Transport> makeLocalTransport(std::shared_ptr<LocalHub> hub,
                                              int rank);

/// This process's rank under an MPI launcher, if it was started by one
/// (mpirun or srun set the environment): loads MPI (libstrata-mpi.so,
/// MpiShim.h) and initializes it. "" or why not.
std::string makeMpiTransport(std::unique_ptr<Transport> &transport);
/// The world size the launcher's environment announces, or 0 without one.
int launcherWorldSize();
/// This process's rank as the launcher's environment announces it (read
/// before MPI starts, to load only this rank's part of a plan), or -1.
int launcherRank();
/// This process's index among the launcher's processes on its node (which
/// GPU it takes), or 0.
int launcherLocalRank();
/// How many of the launcher's processes run on this node, or 0 if the
/// launcher does not say.
int launcherLocalSize();
/// Ends MPI (after the last exchange), if it was started.
void finishMpi();
/// Ends every process of the MPI job, after an error this rank reported.
[[noreturn]] void abortMpi();

} // namespace strata::runtime

#endif
