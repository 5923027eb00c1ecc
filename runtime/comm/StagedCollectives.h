//===- StagedCollectives.h - GPU collectives through the host ---*- C++ -*-===//
//
// The cuda backend's first Collectives: the ring collectives and
// pipeline exchanges (runtime/comm/RingCollectives.h) over the same
// transports, with each operand staged through host memory. When a
// collective is issued, the input is copied to the host once its stream
// gets there (the issuing thread waits), the ring runs there, and the
// result is copied back on the stream.
// Slow (nothing overlaps) but exactly the CPU's arithmetic in the CPU's
// order, for ranks that share one GPU as threads and for processes under
// MPI alike: the cuda parity suite compares against it. It needs only the
// Backend interface, so the CPU parity tests run it too (strata-run
// --staged-collectives), where no GPU is. Issue order is
// execution order, and every rank of a group issues its collectives in the
// same order (the schedule simulator's guarantee for the exchanges).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_COMM_STAGEDCOLLECTIVES_H
#define STRATA_RUNTIME_COMM_STAGEDCOLLECTIVES_H

#include "runtime/comm/RingCollectives.h"

namespace strata::runtime {

/// The ring's groups, host all-reduce, flush and byte counts as they are;
/// its collectives and exchanges on host copies of the operands.
class StagedCollectives : public RingCollectives {
public:
  StagedCollectives(Transport &transport, Backend &device,
                    std::chrono::milliseconds timeout);

  void collective(Stream stream, const CollectiveOp &op, Operand in,
                  Operand out, const std::string &where) override;
  void exchange(Stream stream, std::vector<Transfer> sends,
                std::vector<Transfer> receives) override;

private:
  /// `operand`'s bytes, copied from the device (the stream is idle).
  std::vector<uint8_t> fetch(Stream stream, Operand operand);

  Backend &device;
};

} // namespace strata::runtime

#endif
