//===- Nccl.cpp - NCCL, loaded only when asked, and its communicators -----===//
#include "runtime/cuda/Nccl.h"
#include "runtime/comm/Collectives.h"
#include "runtime/comm/RingCollectives.h"

#include <dlfcn.h>

#include <algorithm>
#include <mutex>

namespace strata::runtime::cuda {

std::string NcclApi::error(ncclResult_t result, const char *call) const {
  if (result == ncclSuccess)
    return "";
  const char *text = ncclGetErrorString ? ncclGetErrorString(result) : nullptr;
  return std::string(call) + ": " +
         (text ? text : "NCCL error " + std::to_string(int(result)));
}

const NcclApi *loadNccl(std::string &error) {
  static NcclApi api;
  static std::string failure;
  static std::once_flag once;
  std::call_once(once, [] {
    std::string error;
    FoundLibrary found = openCudaLibrary(
        LibrarySearch::fromEnvironment(), {"libnccl.so.2", "libnccl.so"},
        "the cuda backend under a launcher needs NCCL", error);
    if (!found.handle) {
      failure = error + "; --staged-collectives runs without it";
      return;
    }
    api.library = found;
    void *library = found.handle;
#define STRATA_NCCL_LOOKUP(name)                                               \
  api.name = reinterpret_cast<decltype(api.name)>(dlsym(library, #name));      \
  if (!api.name) {                                                             \
    failure = "libnccl lacks " #name;                                          \
    return;                                                                    \
  }
    STRATA_NCCL_ENTRIES(STRATA_NCCL_LOOKUP)
#undef STRATA_NCCL_LOOKUP
  });
  error = failure;
  return failure.empty() ? &api : nullptr;
}

std::vector<CommunicatorSet> communicatorSets(const Plan &plan, uint32_t rank) {
  std::vector<CommunicatorSet> sets;
  // A group restricted to some stages (the tied embedding's first and
  // last) names ranks of those stages even for a rank of another: not its.
  auto add = [&](CommunicatorSet set) {
    if (set.ranks.size() > 1 &&
        std::find(set.ranks.begin(), set.ranks.end(), int(rank)) !=
            set.ranks.end() &&
        std::find(sets.begin(), sets.end(), set) == sets.end())
      sets.push_back(std::move(set));
  };
  for (uint32_t g = 0; g < plan.groups.size(); ++g) {
    if (!plan.groups[g].streams)
      continue; // no collective runs over it
    std::vector<int> members = plan.groupMembers(g, rank);
    for (int s = 0; s < kStreams; ++s)
      if (plan.groups[g].streams & (1u << s))
        add({members, Stream(s)});
  }
  if (std::vector<int> line = pipelineLine(plan, rank); line.size() > 1)
    for (Stream stream : kTransferStreams)
      sets.push_back({line, stream});
  return sets;
}

std::vector<int> pipelineLine(const Plan &plan, uint32_t rank) {
  std::vector<int> line;
  for (uint32_t stage = 0; stage < plan.pipelineParallel; ++stage)
    line.push_back(int(plan.onStage(rank, stage)));
  return line;
}

std::string createCommunicators(const NcclApi &api, const Plan &plan,
                                uint32_t rank, Transport &transport,
                                Clock::time_point deadline,
                                std::map<CommunicatorSet, ncclComm_t> &comms) {
  std::vector<CommunicatorSet> sets = communicatorSets(plan, rank);
  std::vector<ncclUniqueId> ids(sets.size());
  // The ids: each set's first rank makes one and posts it to the others
  // (posts never wait), then every rank takes its own, in the same order.
  for (size_t s = 0; s < sets.size(); ++s) {
    const std::vector<int> &ranks = sets[s].ranks;
    if (ranks[0] != int(rank))
      continue;
    if (std::string error =
            api.error(api.ncclGetUniqueId(&ids[s]), "ncclGetUniqueId");
        !error.empty())
      return error;
    for (size_t m = 1; m < ranks.size(); ++m)
      transport.post(ranks[m], &ids[s], sizeof ids[s], kTagNcclId);
  }
  try {
    for (size_t s = 0; s < sets.size(); ++s)
      if (sets[s].ranks[0] != int(rank))
        transport.recv(sets[s].ranks[0], &ids[s], sizeof ids[s], kTagNcclId,
                       deadline, "taking NCCL's unique id");
    transport.flush(deadline);
  } catch (const CommTimeout &timeout) {
    return timeout.what();
  }
  // Every set joined at once: NCCL pairs the inits of a group call.
  if (std::string error = api.error(api.ncclGroupStart(), "ncclGroupStart");
      !error.empty())
    return error;
  std::vector<ncclComm_t> made(sets.size(), nullptr);
  std::string failure;
  for (size_t s = 0; s < sets.size() && failure.empty(); ++s) {
    const std::vector<int> &ranks = sets[s].ranks;
    int index = int(rankIndex(ranks, int(rank)));
    failure = api.error(
        api.ncclCommInitRank(&made[s], int(ranks.size()), ids[s], index),
        "ncclCommInitRank");
  }
  if (std::string error = api.error(api.ncclGroupEnd(), "ncclGroupEnd");
      failure.empty())
    failure = error;
  if (!failure.empty()) {
    for (ncclComm_t comm : made)
      if (comm)
        api.ncclCommDestroy(comm);
    return failure + " (NCCL takes one GPU per rank: --staged-collectives "
                     "runs ranks that share one)";
  }
  for (size_t s = 0; s < sets.size(); ++s)
    comms[sets[s]] = made[s];
  return "";
}

} // namespace strata::runtime::cuda
