//===- DeviceCollectives.h - collectives of ranks on one GPU ----*- C++ -*-===//
//
// The device-side communicator for ranks that are threads of one process
// sharing one GPU: a collective is one kernel over every rank's buffers.
// The ranks meet (CollectiveHub, runtime/comm/LocalCollectives.h) when they
// issue it, each with an event its stream recorded there; the last to
// arrive makes its stream wait for the others' events, launches the kernel
// for every rank (compiler/codegen/CollectiveKernels.cpp, built into
// strata-run as PTX) and records an event every rank's stream then waits
// for. The kernels reduce in the ring's order, as LocalCollectives does on
// the CPU (bit for bit the ring's there). The host's threads wait only for
// each other's issue, never for the GPU. Pipeline exchanges and the host's
// all-reduce go through the host, as StagedCollectives runs them.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_DEVICECOLLECTIVES_H
#define STRATA_RUNTIME_CUDA_DEVICECOLLECTIVES_H

#include "runtime/comm/LocalCollectives.h"
#include "runtime/comm/StagedCollectives.h"
#include "runtime/cuda/CudaBackend.h"

namespace strata::runtime::cuda {

/// The staged collectives' pipeline exchanges, host all-reduce and flush
/// as they are; collectives by one kernel where the ranks meet. The byte
/// counts are the pipeline's (collectives move none between ranks).
class DeviceCollectives : public StagedCollectives {
public:
  DeviceCollectives(std::shared_ptr<CollectiveHub> hub, Transport &transport,
                    CudaBackend &device, std::chrono::milliseconds timeout);
  ~DeviceCollectives() override;

  /// The groups, the kernels (loaded once per process) and this rank's
  /// event; "" or why not.
  std::string createGroups(const Plan &plan, uint32_t rank) override;
  void collective(Stream stream, const CollectiveOp &op, Operand in,
                  Operand out, const std::string &where) override;

private:
  /// Launches the collective's kernel for every rank, on `stream`.
  void launch(CUstream stream, const CollectiveOp &op,
              const std::vector<CollectiveOperands> &ranks);

  std::shared_ptr<CollectiveHub> hub;
  CudaBackend &device;
  Seats seats;
  CUevent ready = nullptr; // recorded where this rank's stream meets
};

} // namespace strata::runtime::cuda

#endif
