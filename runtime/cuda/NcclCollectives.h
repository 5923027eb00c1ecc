//===- NcclCollectives.h - collectives of processes with GPUs ---*- C++ -*-===//
//
// The collectives and pipeline transfers of ranks that are processes
// under a launcher, one GPU each, over NCCL's communicators (Nccl.h), on
// the rank's CUDA streams. Gathers and scatters along a later dimension
// go through a scratch buffer, reordered with 2D copies between NCCL's
// [n][outer][inner] and the plan's [outer][n][inner]. A transfer to the
// rank itself (virtual stages on one stage) is a device copy through a
// buffer the stream allocates. The host's all-reduce (the logged loss)
// goes over the transport. NCCL's sums are its own order, not the ring's:
// layouts match one device within the parity suite's tolerance, not bit
// for bit.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_NCCLCOLLECTIVES_H
#define STRATA_RUNTIME_CUDA_NCCLCOLLECTIVES_H

#include "runtime/comm/RingCollectives.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/cuda/Nccl.h"

#include <deque>

namespace strata::runtime::cuda {

/// The ring's groups, host all-reduce (the logged loss, over the
/// transport), flush and byte counts as they are; collectives and
/// exchanges over NCCL.
class NcclCollectives : public RingCollectives {
public:
  NcclCollectives(Transport &transport, CudaBackend &device,
                  std::chrono::milliseconds timeout);
  ~NcclCollectives() override;

  /// NCCL, the communicators and the scratch buffer; "" or why not.
  std::string createGroups(const Plan &plan, uint32_t rank) override;
  void collective(Stream stream, const CollectiveOp &op, Operand in,
                  Operand out, const std::string &where) override;
  void exchange(Stream stream, std::vector<Transfer> sends,
                std::vector<Transfer> receives) override;

private:
  /// Copies `height` rows of `width` bytes between pitched layouts.
  void copyRows(CUstream stream, void *to, size_t toPitch, const void *from,
                size_t fromPitch, size_t width, size_t height);

  CudaBackend &device;
  const NcclApi *api = nullptr;
  std::map<CommunicatorSet, ncclComm_t> comms;
  // Per plan group, per stream (null where it runs nothing).
  std::vector<std::array<ncclComm_t, kStreams>> groupComms;
  std::vector<int> line; // the pipeline line
  // The line's, one per transfer stream (kTransferStreams' order).
  std::array<ncclComm_t, kTransferStreamCount> lineComms = {};
  // For gathers and scatters along a later dim: one per stream, since a
  // stream's collective may be in flight while the other's runs.
  void *scratch[kStreams] = {};
  std::map<int, std::deque<CUdeviceptr>> toSelf; // by tag
};

} // namespace strata::runtime::cuda

#endif
