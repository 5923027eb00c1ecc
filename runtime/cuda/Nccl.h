//===- Nccl.h - NCCL, loaded when asked, and its communicators --*- C++ -*-===//
//
// The collectives of ranks that are processes with a GPU each (under a
// launcher) go through NCCL. libnccl.so.2 is loaded with dlopen, as the
// driver and cuBLASLt are, only by the cuda backend under a launcher;
// nccl.h is read for types only. A rank needs one communicator per
// distinct set of two or more ranks it talks to and stream it talks on:
// each of the plan's groups, and its pipeline line (the ranks with its
// tp, cp and dp coordinates on every stage) for the transfers. The entry points
// are a table, so the communicators' creation can be tested with a stand-in
// where no GPU is.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_NCCL_H
#define STRATA_RUNTIME_CUDA_NCCL_H

#include "runtime/base/LibrarySearch.h"
#include "runtime/comm/Transport.h"
#include "runtime/plan/Plan.h"

#include <nccl.h>

#include <map>
#include <string>
#include <vector>

namespace strata::runtime::cuda {

/// The NCCL entry points strata calls.
struct NcclApi {
#define STRATA_NCCL_ENTRIES(X)                                                 \
  X(ncclGetUniqueId)                                                           \
  X(ncclCommInitRank)                                                          \
  X(ncclCommDestroy)                                                           \
  X(ncclAllReduce)                                                             \
  X(ncclAllGather)                                                             \
  X(ncclReduceScatter)                                                         \
  X(ncclSend)                                                                  \
  X(ncclRecv)                                                                  \
  X(ncclGroupStart)                                                            \
  X(ncclGroupEnd)                                                              \
  X(ncclGetErrorString)                                                        \
  X(ncclGetVersion)
#define STRATA_NCCL_DECLARE(name) decltype(&::name) name = nullptr;
  STRATA_NCCL_ENTRIES(STRATA_NCCL_DECLARE)
#undef STRATA_NCCL_DECLARE
  FoundLibrary library; // where it was loaded from

  /// "ncclAllReduce: unhandled cuda error (...)"; "" on success.
  std::string error(ncclResult_t result, const char *call) const;
};

/// libnccl.so.2, loaded once per process: the table, or null with why.
const NcclApi *loadNccl(std::string &error);

/// The ranks with `rank`'s tp, cp and dp coordinates on every stage, in
/// stage order: its pipeline transfers' peers.
std::vector<int> pipelineLine(const Plan &plan, uint32_t rank);

/// What a communicator is for: a set of ranks and the stream its work runs
/// on. NCCL orders one communicator's work only within a stream, so ranks
/// that talk on two streams (at d = 1, attention's exchanges over cp on
/// the compute stream and the gradients' reduction over the same ranks on
/// the communication stream) need one for each.
struct CommunicatorSet {
  std::vector<int> ranks;
  Stream stream = Stream::Compute;
  auto operator<=>(const CommunicatorSet &) const = default;
};

/// The communicators `rank` needs, in the order every rank creates them:
/// each of the plan's groups in order, on each stream its collectives run
/// on (Group::streams), each (ranks, stream) once; then the pipeline line
/// on each transfer stream, always last; sets of one rank left out.
std::vector<CommunicatorSet> communicatorSets(const Plan &plan, uint32_t rank);

/// Creates the communicators of `rank` (communicatorSets) into `comms`.
/// Each set's first rank makes its unique id and posts it to the others
/// over `transport`; then the rank joins all its sets in one NCCL group
/// call, so no order between sets can deadlock. "" or why not.
std::string createCommunicators(const NcclApi &api, const Plan &plan,
                                uint32_t rank, Transport &transport,
                                Clock::time_point deadline,
                                std::map<CommunicatorSet, ncclComm_t> &comms);

} // namespace strata::runtime::cuda

#endif
