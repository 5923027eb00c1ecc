//===- Communicator.h - collectives over a rank's mesh groups ---*- C++ -*-===//
//
// Ring all-reduce, all-gather and reduce-scatter over a Transport, among
// the ranks of a mesh group (the ranks that differ only along the given
// axes). A ring sends each rank (n−1)/n of the data per phase: the bytes a
// rank sends are counted per collective and axis. An all-reduce computes
// each chunk's sum on one rank and copies it to the others, so every rank
// holds bitwise the same result.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_COMMUNICATOR_H
#define STRATA_RUNTIME_COMM_COMMUNICATOR_H

#include "runtime/comm/Transport.h"
#include "runtime/exec/KernelTable.h"
#include "runtime/exec/RankMemory.h"

#include <map>
#include <vector>

namespace strata::runtime {

class Communicator {
public:
  Communicator(Transport &transport, const MeshShape &mesh,
               std::chrono::milliseconds timeout)
      : transport(transport), mesh(mesh), timeout(timeout) {}

  int rank() const { return transport.rank(); }

  /// The world ranks of this rank's group over `axes`, in mesh order.
  std::vector<int> group(const std::vector<int64_t> &axes) const;

  void allReduce(const std::vector<int> &group, float *data, size_t count,
                 bool max, const std::string &what);
  void allGather(const std::vector<int> &group, const void *in, void *out,
                 size_t bytesEach, const std::string &what);
  void reduceScatter(const std::vector<int> &group, const float *in,
                     float *out, size_t countEach, const std::string &what);

  /// Runs a collective or pipeline transfer of the plan on this rank's
  /// memory; `where` says which instruction, for a timeout's message, and
  /// `microbatch` which microbatch a transfer carries.
  void run(const Instruction &instruction, RankMemory &memory,
           const std::string &where, int64_t microbatch = -1);

  /// Waits for this rank's posted transfers to leave.
  void flush() { transport.flush(deadline()); }

  /// Bytes sent, by collective and axes ("all_reduce over tp").
  std::map<std::string, uint64_t> bytesByKind;

private:
  Clock::time_point deadline() const { return Clock::now() + timeout; }
  void ringReduceScatter(const std::vector<int> &group, float *data,
                         const std::vector<size_t> &begin, bool max,
                         const std::string &what);
  void transfer(const Instruction &instruction, RankMemory &memory,
                const std::string &where, int64_t microbatch);
  void ringAllGather(const std::vector<int> &group, uint8_t *data,
                     const std::vector<size_t> &begin,
                     const std::string &what);

  Transport &transport;
  MeshShape mesh;
  std::chrono::milliseconds timeout;
};

} // namespace strata::runtime

#endif
