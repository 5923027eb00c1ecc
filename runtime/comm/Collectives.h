//===- Collectives.h - a rank's communication, on streams -------*- C++ -*-===//
//
// What the executor needs to communicate: the plan's collectives over its
// groups, and pipeline transfers posted in exchange groups (a step's sends
// with the next segment's receives, as Megatron's batched isend/irecv, so
// that sends which block until matched, as NCCL's do, cannot deadlock).
// Both run on a stream of the rank's backend. Groups are set up once, when
// the plan loads. The ring implementation over point-to-point transports
// (runtime/comm/RingCollectives.h) runs for CPU ranks, as threads or MPI
// processes.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_COLLECTIVES_H
#define STRATA_RUNTIME_COMM_COLLECTIVES_H

#include "runtime/device/Backend.h"

#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace strata::runtime {

/// One pipeline transfer of an exchange group.
struct Transfer {
  Operand buffer;
  int peer = 0;      // world rank
  int tag = 0;       // channel and microbatch
  std::string where; // a receive's, for its timeout's message
};

class Collectives {
public:
  virtual ~Collectives() = default;

  /// Sets up the plan's communication groups for this rank; "" or why not.
  virtual std::string createGroups(const Plan &plan, uint32_t rank) = 0;

  /// A collective of the plan, on `stream`; `where` names the instruction
  /// for a timeout's message.
  virtual void collective(Stream stream, const CollectiveOp &op, Operand in,
                          Operand out, const std::string &where) = 0;

  /// Posts `sends` and `receives` together on `stream`; the group ends when
  /// every one has completed.
  virtual void exchange(Stream stream, std::vector<Transfer> sends,
                        std::vector<Transfer> receives) = 0;

  /// Sums `count` floats over the world ranks `group`, from the host, now
  /// (the loss averaged over data-parallel replicas).
  virtual void hostAllReduce(const std::vector<int> &group, float *values,
                             size_t count, const std::string &what) = 0;

  /// Waits until posted sends have left (before the rank ends).
  virtual void flush() = 0;

  /// Bytes sent, by kind ("all_reduce_sum over dp").
  virtual std::map<std::string, uint64_t> bytesByKind() const = 0;
};

/// A gather's or a reduce-scatter's blocks along its `dim`: the whole
/// tensor is [outer][n][inner], a rank's part (the gather's input, the
/// scatter's output) [outer][inner]. The part, and its `outer`.
inline const Buffer &partOf(const CollectiveOp &op, Operand in, Operand out) {
  return op.kind == CollectiveKind::AllGather ? *in.buffer : *out.buffer;
}
inline int64_t outerBlocks(const Buffer &part, int32_t dim) {
  int64_t outer = 1;
  for (int32_t d = 0; d < dim; ++d)
    outer *= part.shape[d];
  return outer;
}

/// The bytes a rank sent, by kind of collective; counted from any thread.
class ByteCounts {
public:
  void add(const std::string &kind, uint64_t sent) {
    std::lock_guard<std::mutex> lock(mutex);
    bytes[kind] += sent;
  }
  std::map<std::string, uint64_t> snapshot() const {
    std::lock_guard<std::mutex> lock(mutex);
    return bytes;
  }

private:
  mutable std::mutex mutex;
  std::map<std::string, uint64_t> bytes;
};

/// Every message tag a rank uses, in one place: each stream's collectives
/// (a reduction's and a gather's rounds), the host's, the final gathers to
/// rank 0, NCCL's unique ids, and the pipeline transfers from
/// kFirstTransferTag on.
enum MessageTag : int {
  kTagComputeReduce = 1,
  kTagComputeGather = 2,
  kTagCommReduce = 3,
  kTagCommGather = 4,
  kTagHost = 5,
  kTagGatherParams = 7,
  kTagGatherTrace = 8,
  kTagNcclId = 9,
  kTagContextReduce = 10,
  kTagContextGather = 11,
  kFirstTransferTag = 16,
};

/// A pipeline transfer's tag: its channel and microbatch (mod 64), so that
/// a receive can only match the transfer it waits for.
static_assert(kFirstTransferTag + (kMaxChannels - 1) * 64 + 63 <= 32767,
              "a plan's channels must give tags every MPI accepts");
inline int transferTag(uint32_t channel, int64_t microbatch) {
  return kFirstTransferTag + int(channel * 64 + (microbatch & 63));
}

} // namespace strata::runtime

#endif
