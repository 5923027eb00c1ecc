//===- NcclPlanTest.cpp - communicators of a compiled plan ----------------===//
//
// What each process of a launcher would create NCCL communicators for,
// reading only its own rank of a compiled plan (gpt-tiny, c = 2, p = 2,
// d = 1, the fixture's): every member of a set must join the same
// communicators, so each must know the streams its peers' collectives
// run on, templates of other stages included.
//
//===----------------------------------------------------------------------===//
#include "runtime/cuda/Nccl.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace {

using namespace strata::runtime;
using namespace strata::runtime::cuda;

/// The plan as the process of `rank` loads it: its own rank only.
Plan loadedBy(uint32_t rank) {
  Plan plan;
  LoadOptions options;
  options.ranks = std::vector<uint32_t>{rank};
  EXPECT_EQ(loadPlan(STRATA_NCCL_TEST_PLAN, plan, options), "");
  return plan;
}

bool has(const std::vector<CommunicatorSet> &sets, const CommunicatorSet &set) {
  return std::find(sets.begin(), sets.end(), set) != sets.end();
}

TEST(NcclPlan, EveryMemberOfASetJoinsItsCommunicators) {
  uint32_t world = loadedBy(0).world();
  ASSERT_EQ(world, 4u);
  std::vector<std::vector<CommunicatorSet>> sets(world);
  for (uint32_t r = 0; r < world; ++r)
    sets[r] = communicatorSets(loadedBy(r), r);
  // Each set a rank joins, every other member joins too.
  for (uint32_t r = 0; r < world; ++r)
    for (const CommunicatorSet &set : sets[r])
      for (int member : set.ranks)
        EXPECT_TRUE(has(sets[size_t(member)], set))
            << "rank " << r << " joins a set on the " << streamName(set.stream)
            << " stream that rank " << member << " does not";
  // Rank 0's cp peer is rank 1 (tp, then cp): attention's exchanges on the
  // compute stream, the gradients' reduction on the communication stream,
  // a communicator for each, on both stages (rank 2 holds stage 1's).
  EXPECT_TRUE(has(sets[0], {{0, 1}, Stream::Compute}));
  EXPECT_TRUE(has(sets[0], {{0, 1}, Stream::Comm}));
  EXPECT_TRUE(has(sets[2], {{2, 3}, Stream::Compute}));
  EXPECT_TRUE(has(sets[2], {{2, 3}, Stream::Comm}));
  // The pipeline line, once per transfer stream.
  for (Stream stream : kTransferStreams)
    EXPECT_TRUE(has(sets[1], {{1, 3}, stream}));
}

} // namespace
