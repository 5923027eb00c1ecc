//===- RingCollectives.h - collectives over point-to-point ------*- C++ -*-===//
//
// The CPU backend's Collectives: ring all-reduce, all-gather and
// reduce-scatter over a Transport (runtime/comm/: threads or MPI processes)
// among the ranks of a plan's group, and pipeline exchange groups, each run
// on a stream of the rank's backend over buffers in host memory: the CPU
// backend's streams (the communication stream is its thread), or, staged
// through host memory, the cuda backend's (runtime/comm/StagedCollectives.h). A
// ring sends each rank (n−1)/n of the data per phase; the bytes a rank sends
// are counted per collective and group. An all-reduce computes each chunk's sum
// on one rank and copies it to the others, so every rank holds bitwise the same
// result. Each stream (and the host) uses tags of its own, so that two
// collectives in flight at once on one rank never take each other's messages.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_RINGCOLLECTIVES_H
#define STRATA_RUNTIME_COMM_RINGCOLLECTIVES_H

#include "runtime/comm/Collectives.h"
#include "runtime/comm/Transport.h"

#include <array>
#include <functional>

namespace strata::runtime {

/// Runs a collective's work in the order of `stream`: a name for traces,
/// and the work.
using SubmitToStream =
    std::function<void(Stream, const std::string &, std::function<void()>)>;

/// Runs the work at once: for collectives over host copies (staged) or
/// from the host.
inline void runNow(Stream, const std::string &, std::function<void()> work) {
  work();
}

/// Where `rank` stands in `group` (its size when it is not in it).
size_t rankIndex(const std::vector<int> &group, int rank);

/// What the ring's reductions and every implementation that gives its
/// results share: the ring's chunk c of n over `count` elements is
/// [begin[c], begin[c + 1]); reductions work in f32, a bf16 operand
/// widened and the result rounded once.
std::vector<size_t> ringChunks(size_t count, size_t n);
std::vector<float> widenOperand(Operand operand);
void storeOperand(Operand operand, const float *values);

class RingCollectives : public Collectives {
public:
  RingCollectives(Transport &transport, SubmitToStream submit,
                  std::chrono::milliseconds timeout)
      : transport(transport), submit(std::move(submit)), timeout(timeout) {}

  std::string createGroups(const Plan &plan, uint32_t rank) override;
  void collective(Stream stream, const CollectiveOp &op, Operand in,
                  Operand out, const std::string &where) override;
  void exchange(Stream stream, std::vector<Transfer> sends,
                std::vector<Transfer> receives) override;
  void hostAllReduce(const std::vector<int> &group, float *values, size_t count,
                     const std::string &what) override;
  void flush() override { transport.flush(deadline()); }
  std::map<std::string, uint64_t> bytesByKind() const override {
    return bytes.snapshot();
  }

  /// Plan group `g`'s world ranks for this rank, once createGroups ran.
  const std::vector<int> &group(uint32_t g) const { return members[g]; }
  /// "all_reduce_sum over dp": a collective's kind in reports.
  const std::string &kindName(const CollectiveOp &op) const {
    return kindNames[op.group][int(op.kind)];
  }

private:
  /// The tags of one stream's (or the host's) collectives.
  struct Tags {
    int reduce, gather;
  };
  static Tags tagsOf(Stream stream) {
    if (stream == Stream::Compute)
      return {kTagComputeReduce, kTagComputeGather};
    if (stream == Stream::Context)
      return {kTagContextReduce, kTagContextGather};
    return {kTagCommReduce, kTagCommGather};
  }
  Clock::time_point deadline() const { return Clock::now() + timeout; }
  // Each returns the bytes this rank sent.
  uint64_t allReduce(const std::vector<int> &group, float *data, size_t count,
                     bool max, Tags tags, const std::string &what);
  uint64_t ringReduceScatter(const std::vector<int> &group, float *data,
                             const std::vector<size_t> &begin, bool max,
                             int tag, const std::string &what);
  uint64_t ringAllGather(const std::vector<int> &group, uint8_t *data,
                         const std::vector<size_t> &begin, int tag,
                         const std::string &what);
  uint64_t run(const CollectiveOp &op, Operand in, Operand out, Tags tags,
               const std::string &what);

protected:
  // For the collectives that are this ring with their own collective()
  // (staged, local, device-side, NCCL).
  void countBytes(const std::string &kind, uint64_t sent) {
    bytes.add(kind, sent);
  }
  Transport &transport;
  SubmitToStream submit;
  std::chrono::milliseconds timeout;

private:
  std::vector<std::vector<int>> members; // per plan group
  // By group and kind.
  std::vector<std::array<std::string, kCollectiveKinds>> kindNames;
  ByteCounts bytes;
};

} // namespace strata::runtime

#endif
