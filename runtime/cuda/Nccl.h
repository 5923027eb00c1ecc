//===- Nccl.h - NCCL, loaded when asked, and its communicators --*- C++ -*-===//
//
// The collectives of ranks that are processes with a GPU each (under a
// launcher) go through NCCL. libnccl.so.2 is loaded with dlopen, as the
// driver and cuBLASLt are, only by the cuda backend under a launcher;
// nccl.h is read for types only. A rank needs one communicator per
// distinct set of two or more ranks it talks to: each of the plan's
// groups, and its pipeline line (the ranks with its tp and dp coordinates
// on every stage) for the transfers. The entry points are a table, so the
// communicators' creation can be tested with a stand-in where no GPU is.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_NCCL_H
#define STRATA_RUNTIME_CUDA_NCCL_H

#include "runtime/base/LibrarySearch.h"
#include "runtime/comm/Transport.h"
#include "runtime/plan/Plan.h"

#include <nccl.h>

#include <array>
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

/// The sets of ranks `rank` needs a communicator for, in the order every
/// rank creates them: the plan's groups in order, each set once, then the
/// pipeline line once per transfer stream, always last and always its own
/// (its transfers run on streams of their own, and NCCL orders the work of
/// one communicator only within a stream); sets of one rank left out.
std::vector<std::vector<int>> communicatorSets(const Plan &plan, uint32_t rank);

/// Creates the communicators of `rank` (communicatorSets): the groups'
/// into `comms`, the pipeline line's into `lines`, one per transfer stream
/// in kTransferStreams' order (null for one stage).
/// Each set's first rank makes its unique id and posts it to the others
/// over `transport`; then the rank joins all its sets in one NCCL group
/// call, so no order between sets can deadlock. "" or why not.
std::string createCommunicators(const NcclApi &api, const Plan &plan,
                                uint32_t rank, Transport &transport,
                                Clock::time_point deadline,
                                std::map<std::vector<int>, ncclComm_t> &comms,
                                std::array<ncclComm_t, kTransferStreamCount> &lines);

} // namespace strata::runtime::cuda

#endif
