//===- StashSlots.cpp - the stash slot each step of a stage takes ---------===//
#include "compiler/StashSlots.h"
#include "compiler/BestFit.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <set>
#include <tuple>

namespace strata::pipeline {

int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

int64_t saturatingMul(int64_t a, int64_t b) {
  int64_t product;
  return __builtin_mul_overflow(a, b, &product) ? INT64_MAX : product;
}

namespace {

/// The coarsest granule tried: slot numbers are int32, so 2^31 of these
/// cover any stash a plan can size.
constexpr int64_t kMostGranule = int64_t(1) << 40;

using Classes = std::map<StashKey, int64_t>;

/// Each step's slot of each pool it names: a take's from `take(move)`, a
/// use's and a free's the one its take got (`release(move, slot)` is told
/// of each free), -1 for a use or free never taken. A pool of no bytes
/// names none: a slot would only tell the runtime's recorded graphs apart
/// for nothing.
template <class Take, class Release>
std::vector<std::map<int, int64_t>>
slotsOfSteps(const std::vector<std::vector<StashMove>> &steps,
             const std::map<StashKey, int64_t> &bytes, Take &&take,
             Release &&release) {
  std::vector<std::map<int, int64_t>> out;
  std::map<std::pair<StashKey, int64_t>, int64_t> slotOf;
  for (const std::vector<StashMove> &moves : steps) {
    std::map<int, int64_t> &slot = out.emplace_back();
    for (const StashMove &move : moves) {
      int64_t &named = slot[move.key.second];
      auto size = bytes.find(move.key);
      std::pair<StashKey, int64_t> at{move.key, move.microbatch};
      if (size == bytes.end() || size->second <= 0) {
        named = -1;
      } else if (move.does == StashMove::Does::Take) {
        named = slotOf[at] = take(move);
      } else {
        auto it = slotOf.find(at);
        named = it == slotOf.end() ? -1 : it->second;
        if (move.does == StashMove::Does::Free && it != slotOf.end()) {
          release(move, it->second);
          slotOf.erase(it);
        }
      }
    }
  }
  return out;
}

/// The slots of `steps` under `classOf`: a take gets its class's lowest
/// free slot.
StashSlots assign(const std::vector<std::vector<StashMove>> &steps,
                  const Classes &classOf,
                  const std::map<StashKey, int64_t> &bytes,
                  const std::map<StashKey, int64_t> &ifShared) {
  StashSlots out;
  out.classOf = classOf;
  std::map<int64_t, std::vector<bool>> busy;
  out.slots = slotsOfSteps(
      steps, bytes,
      [&](const StashMove &move) {
        int64_t cls = classOf.at(move.key);
        std::vector<bool> &used = busy[cls];
        int64_t free = std::find(used.begin(), used.end(), false) - used.begin();
        if (free == int64_t(used.size()))
          used.push_back(false);
        used[size_t(free)] = true;
        out.slotsOfClass[cls] = std::max(out.slotsOfClass[cls], free + 1);
        return free;
      },
      [&](const StashMove &move, int64_t slot) {
        busy[classOf.at(move.key)][size_t(slot)] = false;
      });
  std::map<int64_t, int> members;
  for (auto [key, cls] : classOf) {
    auto size = bytes.find(key);
    int64_t of = size == bytes.end() ? 0 : size->second;
    out.bytesOfClass[cls] = std::max(out.bytesOfClass[cls], of);
    out.shared = out.shared || ++members[cls] > 1;
  }
  for (auto [cls, count] : out.slotsOfClass)
    out.bytes = saturatingAdd(out.bytes,
                              saturatingMul(count, out.bytesOfClass[cls]));
  for (auto [key, extra] : ifShared) {
    auto cls = classOf.find(key);
    if (cls != classOf.end() && members[cls->second] > 1)
      out.bytes = saturatingAdd(out.bytes, std::max<int64_t>(extra, 0));
  }
  return out;
}

/// Classes where `together` says which keys share (keys of zero bytes
/// never do), numbered in key order.
Classes grouping(const std::map<StashKey, int64_t> &bytes,
                 const std::function<bool(StashKey, StashKey)> &together) {
  Classes classOf;
  int64_t next = 0;
  for (auto [key, size] : bytes) {
    auto with = classOf.end();
    if (size > 0)
      with = std::find_if(classOf.begin(), classOf.end(), [&](auto &entry) {
        return bytes.at(entry.first) > 0 && together(entry.first, key);
      });
    classOf[key] = with != classOf.end() ? with->second : next++;
  }
  return classOf;
}

/// Every key of nonzero bytes in one class whose slot is `granule` bytes,
/// each take's bytes placed, in the steps' order, where they fit best
/// among the blocks free then (compiler/BestFit.h, as the memory plan
/// places a program's workspace); bytes are free again at the move that
/// frees them (a step's takes come before its frees, so B's passed bytes
/// never land on the slot it frees). Keys of unequal bytes that come and
/// go by turns (a V's first and last chunk on the first stage, the pool B
/// frees and the one it fills) then share bytes without each rounding up
/// to the largest. A step's slot is its place in granules; a program meets
/// about as many places as a slot class has slots, not more as the
/// microbatches grow (each is a CUDA graph of its own). Nothing where
/// fewer than two keys have bytes (the classes above do that); `tooFine`
/// where a place would not fit in a slot number (int32, as the plan has
/// them).
std::optional<StashSlots>
assignBytes(const std::vector<std::vector<StashMove>> &steps,
            const std::map<StashKey, int64_t> &bytes,
            const std::map<StashKey, int64_t> &ifShared, int64_t granule,
            bool &tooFine) {
  tooFine = false;
  StashSlots out;
  int64_t shared = 0, next = 1, sized = 0;
  for (auto [key, size] : bytes) {
    out.classOf[key] = size > 0 ? shared : next++;
    sized += size > 0;
  }
  if (sized < 2)
    return std::nullopt;
  auto granules = [&](const StashMove &move) {
    int64_t size = bytes.at(move.key);
    return size / granule + (size % granule != 0);
  };
  BestFit arena;
  out.slots = slotsOfSteps(
      steps, bytes,
      [&](const StashMove &move) { return arena.take(granules(move)); },
      [&](const StashMove &move, int64_t at) {
        arena.release(at, granules(move));
      });
  if (arena.top() > INT32_MAX) {
    tooFine = true;
    return std::nullopt;
  }
  out.shared = true;
  out.slotsOfClass[shared] = arena.top();
  for (auto [key, cls] : out.classOf)
    out.bytesOfClass[cls] = cls == shared ? granule : 0;
  out.bytes = saturatingMul(arena.top(), granule);
  for (auto [key, extra] : ifShared)
    if (out.classOf.count(key) && out.classOf.at(key) == shared)
      out.bytes = saturatingAdd(out.bytes, std::max<int64_t>(extra, 0));
  return out;
}

} // namespace

std::vector<StashMove> stashMoves(sim::Phase phase, int64_t group,
                                  int64_t microbatch, bool cut) {
  using Does = StashMove::Does;
  auto move = [&](int pool, Does does) {
    return StashMove{{group, pool}, microbatch, does};
  };
  switch (phase) {
  case sim::Phase::Forward:
    if (cut)
      return {move(0, Does::Take), move(1, Does::Take)};
    return {move(0, Does::Take)};
  case sim::Phase::Backward:
    if (cut)
      return {move(1, Does::Use), move(2, Does::Take), move(0, Does::Free)};
    return {move(0, Does::Free)};
  case sim::Phase::Weight:
    return {move(1, Does::Free), move(2, Does::Free)};
  }
  return {};
}

StashSlots planStashSlots(const std::vector<std::vector<StashMove>> &steps,
                          const std::map<StashKey, int64_t> &bytes,
                          const std::map<StashKey, int64_t> &ifShared) {
  // Every key a step names has a size (zero where none is given).
  std::map<StashKey, int64_t> sizes;
  for (const std::vector<StashMove> &moves : steps)
    for (const StashMove &move : moves) {
      auto size = bytes.find(move.key);
      sizes[move.key] = size == bytes.end() ? 0 : size->second;
    }
  const std::function<bool(StashKey, StashKey)> groupings[] = {
      [](StashKey, StashKey) { return false; },
      [&](StashKey a, StashKey b) { return sizes.at(a) == sizes.at(b); },
      [](StashKey a, StashKey b) { return a.second == b.second; },
      [](StashKey, StashKey) { return true; }};
  StashSlots best;
  bool first = true;
  for (const auto &together : groupings) {
    StashSlots tried =
        assign(steps, grouping(sizes, together), sizes, ifShared);
    if (first || tried.bytes < best.bytes)
      best = std::move(tried);
    first = false;
  }
  // Bytes placed anywhere: at the arena's alignment, or coarser where the
  // places would not fit a slot number.
  std::optional<StashSlots> placed;
  int64_t sized = std::count_if(sizes.begin(), sizes.end(),
                                [](auto &entry) { return entry.second > 0; });
  bool tooFine = sized >= 2;
  for (int64_t granule = kStashGranule; tooFine && granule <= kMostGranule;
       granule *= 2)
    placed = assignBytes(steps, sizes, ifShared, granule, tooFine);
  if (placed && placed->bytes < best.bytes)
    best = std::move(*placed);
  return best;
}

} // namespace strata::pipeline
