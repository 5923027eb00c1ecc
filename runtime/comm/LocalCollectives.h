//===- LocalCollectives.h - collectives where the ranks meet ----*- C++ -*-===//
//
// Collectives for ranks that are threads of one process and can read each
// other's buffers. Instead of a ring of messages, the ranks of a group meet
// (CollectiveHub): each arrives when its stream reaches the collective,
// and the last to arrive computes every rank's result in one pass over
// the elements. Each element is reduced in the ring's order (an element of
// chunk c summed from rank c + 1 round to rank c, each rank adding its
// value to what came before, as RingCollectives adds what it receives), in
// f32 with bf16 widened and the result rounded once, so the results are
// the ring's, bit for bit. This is the arithmetic a device-side
// communicator for ranks sharing one GPU computes; on the CPU backend
// (strata-run --local-collectives) it runs on the ranks' streams. Pipeline
// exchanges and the host's all-reduce go over the transport as the ring's
// do.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_LOCALCOLLECTIVES_H
#define STRATA_RUNTIME_COMM_LOCALCOLLECTIVES_H

#include "runtime/comm/RingCollectives.h"

#include <array>
#include <condition_variable>
#include <memory>
#include <tuple>

namespace strata::runtime {

/// One rank's operands of a collective; on a GPU, with the event its
/// stream recorded when it reached the collective.
struct CollectiveOperands {
  Operand in, out;
  void *ready = nullptr;
};

/// A rank's place at its next collective on a plan group and a stream:
/// the group's world ranks, how many collectives those ranks issued on
/// the stream before (every rank of a set issues them in the same order,
/// as the ring's messages between two ranks match in order, so the count
/// names the meeting), and the rank's index among them.
struct Seat {
  const std::vector<int> *ranks = nullptr;
  int stream = 0;
  uint64_t count = 0;
  size_t index = 0;
  int me = 0;
};

/// A rank's seats, from the ring's groups. Counted per set of ranks, not
/// per plan group: two groups may hold the same ranks.
class Seats {
public:
  /// For `plan`'s groups as `ring` (its createGroups ran) holds them.
  void assign(const Plan &plan, const RingCollectives &ring, int me);
  /// The seat at the next collective on `group` and `stream`.
  Seat next(uint32_t group, Stream stream);

private:
  const RingCollectives *ring = nullptr;
  int me = 0;
  std::vector<size_t> setOf, indexIn;                 // per plan group
  std::vector<std::array<uint64_t, kStreams>> issued; // per set of ranks
};

/// Where the ranks of one process meet for their collectives.
class CollectiveHub {
public:
  /// What a meeting's leader does with every rank's operands; its result
  /// (a device's event to wait on, or null) goes to each rank's `Use`
  /// before it leaves, and to `Release` when the last has left.
  using Lead = std::function<void *(const std::vector<CollectiveOperands> &)>;
  using Use = std::function<void(void *)>;

  /// A rank arrives at `seat`'s collective (`kind`, from the plan's
  /// `where`). The last to arrive runs `lead`; every rank then runs `use`
  /// (if any) with its result and leaves, the last running `release` (if
  /// any). Throws CommTimeout naming the ranks that did not come within
  /// `timeout`, and what `lead` threw, on every rank.
  void meet(const Seat &seat, const CollectiveOperands &operands,
            const Lead &lead, const Use &use, const Use &release,
            std::chrono::milliseconds timeout, const char *kind,
            const std::string &where);

private:
  struct Meeting {
    std::vector<CollectiveOperands> ranks;
    std::vector<bool> arrived;
    int count = 0, left = 0;
    bool done = false;
    void *result = nullptr;
    std::string error;
  };
  std::mutex mutex;
  std::condition_variable changed;
  std::map<std::tuple<std::vector<int>, int, uint64_t>, Meeting> meetings;
};
std::shared_ptr<CollectiveHub> makeCollectiveHub();

/// Every rank's result of `op` from every rank's operands (in the group's
/// order), as the ring computes them: what the rank that arrives last
/// runs. Public for the tests that compare it with the ring.
void computeCollective(const CollectiveOp &op,
                       const std::vector<CollectiveOperands> &ranks);

/// The ring's pipeline exchanges, host all-reduce and flush as they are;
/// its collectives computed where the ranks meet. The byte counts are the
/// pipeline's (collectives move none between ranks).
class LocalCollectives : public RingCollectives {
public:
  LocalCollectives(std::shared_ptr<CollectiveHub> hub, Transport &transport,
                   SubmitToStream submit, std::chrono::milliseconds timeout);

  std::string createGroups(const Plan &plan, uint32_t rank) override;
  void collective(Stream stream, const CollectiveOp &op, Operand in,
                  Operand out, const std::string &where) override;

private:
  std::shared_ptr<CollectiveHub> hub;
  Seats seats;
};

} // namespace strata::runtime

#endif
