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

std::vector<std::vector<int>> communicatorSets(const Plan &plan,
                                               uint32_t rank) {
  std::vector<std::vector<int>> sets;
  // A group restricted to some stages (the tied embedding's first and
  // last) names ranks of those stages even for a rank of another: not its.
  auto add = [&](std::vector<int> members) {
    if (members.size() > 1 &&
        std::find(members.begin(), members.end(), int(rank)) != members.end() &&
        std::find(sets.begin(), sets.end(), members) == sets.end())
      sets.push_back(std::move(members));
  };
  for (uint32_t g = 0; g < plan.groups.size(); ++g)
    add(plan.groupMembers(g, rank));
  if (std::vector<int> line = pipelineLine(plan, rank); line.size() > 1)
    for (int s = 0; s < kTransferStreamCount; ++s)
      sets.push_back(line);
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
                                std::map<std::vector<int>, ncclComm_t> &comms,
                                std::array<ncclComm_t, kTransferStreamCount> &lines) {
  std::vector<std::vector<int>> sets = communicatorSets(plan, rank);
  bool hasLine = plan.pipelineParallel > 1;
  std::vector<ncclUniqueId> ids(sets.size());
  // The ids: each set's first rank makes one and posts it to the others
  // (posts never wait), then every rank takes its own, in the same order.
  for (size_t s = 0; s < sets.size(); ++s) {
    if (sets[s][0] != int(rank))
      continue;
    if (std::string error =
            api.error(api.ncclGetUniqueId(&ids[s]), "ncclGetUniqueId");
        !error.empty())
      return error;
    for (size_t m = 1; m < sets[s].size(); ++m)
      transport.post(sets[s][m], &ids[s], sizeof ids[s], kTagNcclId);
  }
  try {
    for (size_t s = 0; s < sets.size(); ++s)
      if (sets[s][0] != int(rank))
        transport.recv(sets[s][0], &ids[s], sizeof ids[s], kTagNcclId, deadline,
                       "taking NCCL's unique id");
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
    int index = int(rankIndex(sets[s], int(rank)));
    failure = api.error(
        api.ncclCommInitRank(&made[s], int(sets[s].size()), ids[s], index),
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
  lines = {};
  size_t groups = sets.size() - (hasLine ? kTransferStreamCount : 0);
  for (size_t s = 0; s < sets.size(); ++s)
    if (s < groups)
      comms[sets[s]] = made[s];
    else
      lines[s - groups] = made[s];
  return "";
}

} // namespace strata::runtime::cuda
