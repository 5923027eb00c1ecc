//===- StashSlotsTest.cpp - stash slots, alone and shared ------------------===//
//
// planStashSlots on the schedules' own orders: a pool alone takes as many
// slots as it ever holds; pools that share a slot class take no more than
// that and, on ZB-V's stages with equal pools, exactly the most the stage
// holds at once; no two microbatches ever hold one slot at once, and B
// never fills the slot it reads.
//
//===----------------------------------------------------------------------===//
#include "compiler/PipelineSchedules.h"
#include "compiler/StashSlots.h"

#include <gtest/gtest.h>

#include <functional>
#include <set>

using namespace strata;
using pipeline::ScheduleKind;
using pipeline::StashKey;
using pipeline::StashMove;
using Does = StashMove::Does;

namespace {

/// A stage's order as stash moves (pipeline::stashMoves, as the lowering
/// makes them); a chunk's stash group is its index on the stage.
std::vector<std::vector<StashMove>>
movesOf(const std::vector<sim::Work> &order, bool cut,
        const std::function<int64_t(int)> &group) {
  std::vector<std::vector<StashMove>> steps;
  for (const sim::Work &w : order)
    steps.push_back(
        pipeline::stashMoves(w.phase, group(w.chunk), w.microbatch, cut));
  return steps;
}

/// The most bytes the stage holds at once (a step's takes before its
/// frees): what no slot layout can go under.
int64_t mostAtOnce(const std::vector<std::vector<StashMove>> &steps,
                   const std::map<StashKey, int64_t> &bytes) {
  int64_t now = 0, most = 0;
  for (const auto &does : steps)
    for (const StashMove &move : does) {
      if (move.does == Does::Take)
        most = std::max(most, now += bytes.at(move.key));
      else if (move.does == Does::Free)
        now -= bytes.at(move.key);
    }
  return most;
}

/// Replays `slots`: every take lands where its class holds none of its
/// bytes (slot k of a class whose slot is S bytes: [k·S, k·S + its own);
/// a class placed by bytes has S = the granule), inside the class's
/// slots; every use and free names the slot its take got. "" or what is
/// wrong. A pool of no bytes (where `bytes` says) names no slot.
std::string replay(const std::vector<std::vector<StashMove>> &steps,
                   const pipeline::StashSlots &slots,
                   const std::map<StashKey, int64_t> &bytes = {}) {
  // Per class, the byte ranges held: begin -> end.
  std::map<int64_t, std::map<int64_t, int64_t>> held;
  std::map<std::pair<StashKey, int64_t>, int64_t> slotOf;
  for (size_t i = 0; i < steps.size(); ++i)
    for (const StashMove &move : steps[i]) {
      int64_t cls = slots.classOf.at(move.key);
      int64_t slot = slots.slots[i].at(move.key.second);
      if (auto none = bytes.find(move.key);
          none != bytes.end() && none->second <= 0) {
        if (slot != -1) // a pool of no bytes takes no slot
          return "step " + std::to_string(i) + " gives a pool of no bytes "
                 "slot " + std::to_string(slot);
        continue;
      }
      int64_t stride = std::max<int64_t>(slots.bytesOfClass.at(cls), 1);
      auto size = bytes.find(move.key);
      int64_t own = size == bytes.end() || size->second <= 0
                        ? stride
                        : size->second;
      int64_t begin = slot * stride, end = begin + own;
      if (slot < 0 || end > slots.slotsOfClass.at(cls) * stride)
        return "step " + std::to_string(i) + " names slot " +
               std::to_string(slot);
      std::pair<StashKey, int64_t> at{move.key, move.microbatch};
      if (move.does == Does::Take) {
        std::map<int64_t, int64_t> &ranges = held[cls];
        auto next = ranges.lower_bound(begin);
        if ((next != ranges.end() && next->first < end) ||
            (next != ranges.begin() && std::prev(next)->second > begin))
          return "step " + std::to_string(i) + " fills bytes held";
        ranges[begin] = end;
        slotOf[at] = slot;
      } else {
        if (slotOf.at(at) != slot)
          return "step " + std::to_string(i) + " reads another slot";
        if (move.does == Does::Free) {
          held[cls].erase(begin);
          slotOf.erase(at);
        }
      }
    }
  return "";
}

} // namespace

TEST(StashSlots, APoolAloneHoldsItsMicrobatchesInFlight) {
  // 1F1B, one pool: stage s holds p - s microbatches, one slot each.
  int p = 4, m = 8;
  for (int s = 0; s < p; ++s) {
    auto steps =
        movesOf(pipeline::stageOrder(ScheduleKind::OneFOneB, p, 1, m, s),
                false, [](int) { return 0; });
    pipeline::StashSlots slots =
        pipeline::planStashSlots(steps, {{{0, 0}, 1000}});
    EXPECT_FALSE(slots.shared);
    EXPECT_EQ(slots.slotsOfClass.at(0), p - s);
    EXPECT_EQ(slots.bytes, 1000 * (p - s));
    EXPECT_EQ(replay(steps, slots), "");
  }
}

TEST(StashSlots, AVsTwoChunksShareTheirSlots) {
  // ZB-V, gpt-tiny's pools on its middle stages (one layer a chunk; bytes
  // kept until B, held until W, passed from B to W): each chunk and pool
  // alone takes 2.8-3.4 MB a stage at p = 4, m = 16; sharing, exactly
  // the most the stage ever holds at once.
  int p = 4, m = 16;
  auto orders = pipeline::scheduleOrders(ScheduleKind::ZeroBubbleV, p, 2, m);
  for (int s = 1; s < p; ++s) {
    auto steps = movesOf(orders[size_t(s)], true,
                         [&](int chunk) { return chunk == s ? 0 : 1; });
    std::map<StashKey, int64_t> bytes;
    for (int64_t g : {0, 1})
      for (auto [pool, size] :
           {std::pair{0, 148480}, {1, 114688}, {2, 148480}})
        bytes[{g, pool}] = size;
    pipeline::StashSlots slots = pipeline::planStashSlots(steps, bytes);
    EXPECT_TRUE(slots.shared) << "stage " << s;
    EXPECT_EQ(slots.bytes, mostAtOnce(steps, bytes)) << "stage " << s;
    EXPECT_EQ(slots.bytes, 2253824) << "stage " << s;
    EXPECT_EQ(replay(steps, slots, bytes), "") << "stage " << s;
  }
}

TEST(StashSlots, NeverBelowWhatIsHeldAtOnceNorAboveEachAlone) {
  // Every schedule's stages, pools of unequal and equal bytes: the chosen
  // slots replay without two microbatches in one slot, take at least the
  // most held at once and at most what each pool alone takes.
  int checked = 0;
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 3 * p}) {
      for (ScheduleKind kind :
           {ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
            ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleH2,
            ScheduleKind::ZeroBubbleV}) {
        int v = kind == ScheduleKind::Interleaved ||
                        kind == ScheduleKind::ZeroBubbleV
                    ? 2
                    : 1;
        bool cut = sim::cutsBackward(kind);
        auto orders = pipeline::scheduleOrders(kind, p, v, m);
        for (int s = 0; s < p; ++s) {
          auto group = [&](int chunk) {
            return kind == ScheduleKind::ZeroBubbleV
                       ? int64_t(chunk == s ? 0 : 1)
                       : int64_t(chunk / p);
          };
          auto steps = movesOf(orders[size_t(s)], cut, group);
          for (int64_t unequal : {0, 1}) {
            std::map<StashKey, int64_t> bytes;
            for (int64_t g = 0; g < v; ++g)
              for (int pool = 0; pool < 3; ++pool)
                bytes[{g, pool}] = 64 * (3 + pool + unequal * (g + 2 * pool));
            pipeline::StashSlots slots = pipeline::planStashSlots(steps, bytes);
            ASSERT_EQ(replay(steps, slots, bytes), "")
                << pipeline::scheduleName(kind) << " p=" << p << " m=" << m
                << " stage " << s;
            EXPECT_GE(slots.bytes, mostAtOnce(steps, bytes));
            int64_t each = 0; // every pool alone
            std::map<StashKey, int64_t> now, most;
            for (const auto &does : steps)
              for (const StashMove &move : does)
                if (move.does == Does::Take)
                  most[move.key] = std::max(most[move.key], ++now[move.key]);
                else if (move.does == Does::Free)
                  --now[move.key];
            for (auto [key, count] : most)
              each += count * bytes[key];
            EXPECT_LE(slots.bytes, each);
            ++checked;
          }
        }
      }
    }
  EXPECT_GT(checked, 300);
}

TEST(StashSlots, APoolOfNoBytesStaysAlone) {
  // The first chunk's B only receives: its forward pool keeps nothing, and
  // sharing it would cost its class a slot for nothing.
  std::vector<std::vector<StashMove>> steps = {
      {{{0, 0}, 0, Does::Take}, {{0, 1}, 0, Does::Take}},
      {{{0, 1}, 0, Does::Use}, {{0, 2}, 0, Does::Take}, {{0, 0}, 0, Does::Free}},
      {{{0, 1}, 0, Does::Free}, {{0, 2}, 0, Does::Free}}};
  pipeline::StashSlots slots =
      pipeline::planStashSlots(steps, {{{0, 0}, 0}, {{0, 1}, 512}, {{0, 2}, 512}});
  EXPECT_NE(slots.classOf.at({0, 0}), slots.classOf.at({0, 1}));
  EXPECT_EQ(slots.bytes, 1024); // held and passed live together in B
  EXPECT_EQ(replay(steps, slots, {{{0, 0}, 0}, {{0, 1}, 512}, {{0, 2}, 512}}),
            "");
}

TEST(StashSlots, SharingPaysForTheReceivesItMovesOut) {
  // Two pools of 100 bytes busiest at different times: sharing takes one
  // slot of 100 instead of two. A receive into a shared pool lands in a
  // buffer of its own: at 40 bytes sharing still pays, at 150 it does not.
  std::vector<std::vector<StashMove>> steps = {
      {{{0, 0}, 0, Does::Take}}, {{{0, 0}, 0, Does::Free}},
      {{{1, 0}, 0, Does::Take}}, {{{1, 0}, 0, Does::Free}}};
  std::map<StashKey, int64_t> bytes = {{{0, 0}, 100}, {{1, 0}, 100}};
  pipeline::StashSlots shared = pipeline::planStashSlots(steps, bytes);
  EXPECT_TRUE(shared.shared);
  EXPECT_EQ(shared.bytes, 100);
  shared = pipeline::planStashSlots(steps, bytes, {{{1, 0}, 40}});
  EXPECT_TRUE(shared.shared);
  EXPECT_EQ(shared.bytes, 140);
  pipeline::StashSlots alone =
      pipeline::planStashSlots(steps, bytes, {{{1, 0}, 150}});
  EXPECT_FALSE(alone.shared);
  EXPECT_EQ(alone.bytes, 200);
  EXPECT_EQ(replay(steps, alone), "");
}

TEST(StashSlots, PlacedByBytesWhereSlotsWouldRoundUp) {
  // Two small microbatches of one pool live beside a large one, then two
  // large ones together: each pool alone takes 2 x 640 + 2 x 256 bytes,
  // one class of 640-byte slots 3 x 640; placed by bytes, the small ones
  // lie where the second large one goes once they are freed: 1280.
  std::vector<std::vector<StashMove>> steps = {
      {{{0, 0}, 0, Does::Take}},
      {{{1, 0}, 0, Does::Take}},
      {{{1, 0}, 1, Does::Take}},
      {{{1, 0}, 0, Does::Free}},
      {{{1, 0}, 1, Does::Free}},
      {{{0, 0}, 1, Does::Take}},
      {{{0, 0}, 0, Does::Free}},
      {{{0, 0}, 1, Does::Free}}};
  std::map<StashKey, int64_t> bytes = {{{0, 0}, 640}, {{1, 0}, 256}};
  pipeline::StashSlots slots = pipeline::planStashSlots(steps, bytes);
  EXPECT_EQ(slots.bytes, 1280);
  EXPECT_EQ(slots.bytes, mostAtOnce(steps, bytes));
  EXPECT_EQ(slots.bytesOfClass.at(slots.classOf.at({0, 0})),
            pipeline::kStashGranule);
  EXPECT_EQ(replay(steps, slots, bytes), "");
}

TEST(StashSlots, AVsFirstStagePlacedByBytes) {
  // ZB-V's first stage, gpt-tiny with four layers a chunk (32 layers, p =
  // 4): the first chunk's forward values all held until W (its B has no
  // gradient to send), the last chunk's kept, held and passed pools of
  // other sizes. Slot classes round the last chunk's held slot up to the
  // first's (9,626,112 bytes); placed by bytes, less, and never under the
  // most held at once.
  int p = 4, m = 16;
  auto orders = pipeline::scheduleOrders(ScheduleKind::ZeroBubbleV, p, 2, m);
  auto steps = movesOf(orders[0], true,
                       [](int chunk) { return chunk == 0 ? 0 : 1; });
  std::map<StashKey, int64_t> bytes = {
      {{0, 0}, 0},      {{0, 1}, 1052672}, {{0, 2}, 16384},
      {{1, 0}, 610304}, {{1, 1}, 540672},  {{1, 2}, 594432}};
  pipeline::StashSlots slots = pipeline::planStashSlots(steps, bytes);
  EXPECT_LT(slots.bytes, 9626112);
  EXPECT_GE(slots.bytes, mostAtOnce(steps, bytes));
  EXPECT_EQ(replay(steps, slots, bytes), "");
}
