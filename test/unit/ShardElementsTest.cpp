//===- ShardElementsTest.cpp - a shard's elements, whole or in ranges -----===//
//
// forEachShardElement (runtime/plan/Plan.h) walks a rank's shard of a
// parameter and names each element's place in the global tensor and
// whether it is vocabulary padding. Threads share the walk by ranges
// (parameter initialization), so any split must visit exactly what the
// whole walk does.
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <tuple>
#include <vector>

using namespace strata::runtime;

namespace {

using Visit = std::tuple<int64_t, int64_t, bool>;

std::vector<Visit> walk(const Param &param, const std::vector<int64_t> &local,
                        int64_t begin = 0, int64_t end = -1) {
  std::vector<Visit> out;
  forEachShardElement(
      param, local,
      [&](int64_t e, int64_t global, bool padding) {
        out.emplace_back(e, global, padding);
      },
      begin, end);
  return out;
}

} // namespace

TEST(ShardElements, RangesSplitTheWholeWalk) {
  // The second of two vocabulary-parallel shards of an embedding of 11
  // rows padded to 12: rows 6..11 of the global [11, 5], the last padding.
  Param param;
  param.globalShape = {11, 5};
  param.paddedShape = {12, 5};
  param.splitDim = 0;
  param.shardOffset = {6, 0};
  const std::vector<int64_t> local = {6, 5};
  std::vector<Visit> whole = walk(param, local);
  ASSERT_EQ(whole.size(), 30u);
  EXPECT_EQ(whole[0], Visit(0, 30, false));
  EXPECT_EQ(whole[7], Visit(7, 37, false));
  for (int64_t e = 0; e < 30; ++e) // global row 11 is padding
    EXPECT_EQ(std::get<2>(whole[size_t(e)]), e >= 25) << e;
  for (int64_t chunk : {1, 3, 7, 29, 30, 64}) {
    std::vector<Visit> pieced;
    for (int64_t begin = 0; begin < 30; begin += chunk) {
      std::vector<Visit> part = walk(param, local, begin, begin + chunk);
      pieced.insert(pieced.end(), part.begin(), part.end());
    }
    EXPECT_EQ(pieced, whole) << "chunks of " << chunk;
  }
  EXPECT_TRUE(walk(param, local, 30, 40).empty());
}

TEST(ShardElements, AColumnShardOfAThreeDimensionalTensor) {
  // Columns 2..3 of a [2, 3, 4] tensor: a range starting mid-row lands on
  // the right element.
  Param param;
  param.globalShape = {2, 3, 4};
  param.paddedShape = {2, 3, 4};
  param.splitDim = 2;
  param.shardOffset = {0, 0, 2};
  const std::vector<int64_t> local = {2, 3, 2};
  std::vector<Visit> whole = walk(param, local);
  ASSERT_EQ(whole.size(), 12u);
  EXPECT_EQ(whole[5], Visit(5, 2 * 4 + 3, false)); // (0, 2, 1) is (0, 2, 3)
  std::vector<Visit> tail = walk(param, local, 5);
  ASSERT_EQ(tail.size(), 7u);
  EXPECT_EQ(tail.front(), whole[5]);
  EXPECT_EQ(tail.back(), whole[11]);
  EXPECT_EQ(whole[11], Visit(11, 12 + 2 * 4 + 3, false)); // (1, 2, 3)
}
