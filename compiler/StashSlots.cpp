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

/// The slots of `steps` under `classOf`: a take gets its class's lowest
/// free slot.
StashSlots assign(const std::vector<std::vector<StashMove>> &steps,
                  const Classes &classOf,
                  const std::map<StashKey, int64_t> &bytes,
                  const std::map<StashKey, int64_t> &ifShared) {
  StashSlots out;
  out.classOf = classOf;
  std::map<int64_t, std::vector<bool>> busy;
  std::map<std::pair<StashKey, int64_t>, int64_t> slotOf;
  for (const std::vector<StashMove> &moves : steps) {
    std::map<int, int64_t> &slot = out.slots.emplace_back();
    for (const StashMove &move : moves) {
      int64_t cls = classOf.at(move.key);
      std::pair<StashKey, int64_t> at{move.key, move.microbatch};
      // A pool of no bytes needs no slot; naming one would only tell the
      // runtime's recorded graphs apart for nothing.
      auto size = bytes.find(move.key);
      if (size == bytes.end() || size->second <= 0) {
        slot[move.key.second] = -1;
        continue;
      }
      std::vector<bool> &used = busy[cls];
      if (move.does == StashMove::Does::Take) {
        int64_t free = std::find(used.begin(), used.end(), false) - used.begin();
        if (free == int64_t(used.size()))
          used.push_back(false);
        used[size_t(free)] = true;
        slotOf[at] = free;
        out.slotsOfClass[cls] = std::max(out.slotsOfClass[cls], free + 1);
        slot[move.key.second] = free;
        continue;
      }
      auto it = slotOf.find(at);
      slot[move.key.second] = it == slotOf.end() ? -1 : it->second;
      if (move.does == StashMove::Does::Free && it != slotOf.end()) {
        used[size_t(it->second)] = false;
        slotOf.erase(it);
      }
    }
  }
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
/// each take's bytes placed, in the steps' order, the fewer of two ways:
/// best fit among the blocks free then (freed blocks merged with their
/// neighbours), as the memory plan places a program's workspace; or lanes,
/// each take the free lane that holds it with the least to spare, else the
/// last lane grown where it is free, else a new lane of its size. Bytes
/// are free again after the step that frees them (a step's takes come
/// before its frees, so B's passed bytes never land on the slot it frees).
/// Keys of unequal bytes that come and go by turns (a V's first and last
/// chunk on the first stage, the pool B frees and the one it fills) then
/// share bytes without each rounding up to the largest. A step's slot is
/// its place in granules; a program meets about as many places as a slot
/// class has slots, not more as the microbatches grow (each is a CUDA
/// graph of its own). Keys of zero bytes name no slot. Nothing where fewer
/// than two keys have bytes (the classes above do that), or where a place
/// would not fit in a slot number (int32, as the plan has them).
std::optional<StashSlots>
assignBytes(const std::vector<std::vector<StashMove>> &steps,
            const std::map<StashKey, int64_t> &bytes,
            const std::map<StashKey, int64_t> &ifShared, int64_t granule,
            int64_t toBeat, bool &tooFine) {
  tooFine = false;
  Classes classOf;
  int64_t shared = 0, next = 1, sized = 0;
  for (auto [key, size] : bytes) {
    classOf[key] = size > 0 ? shared : next++;
    sized += size > 0;
  }
  if (sized < 2)
    return std::nullopt;
  // The lives: [first step, last step] of each take of a key with bytes.
  struct Life {
    int64_t first, last, size, place = -1;
  };
  std::vector<Life> lives;
  std::map<std::pair<StashKey, int64_t>, size_t> open;
  int64_t count = int64_t(steps.size());
  for (int64_t step = 0; step < count; ++step)
    for (const StashMove &move : steps[size_t(step)]) {
      int64_t size = bytes.at(move.key);
      if (size <= 0)
        continue;
      std::pair<StashKey, int64_t> at{move.key, move.microbatch};
      if (move.does == StashMove::Does::Take) {
        open[at] = lives.size();
        lives.push_back(
            {step, count - 1, size / granule + (size % granule != 0)});
      } else if (move.does == StashMove::Does::Free) {
        auto it = open.find(at);
        if (it != open.end()) {
          lives[it->second].last = step;
          open.erase(it);
        }
      }
    }
  // The steps' slots once each life has its place (`most` granules).
  auto placed = [&](int64_t most) {
    StashSlots out;
    out.classOf = classOf;
    out.shared = true;
    size_t nextLife = 0;
    std::map<std::pair<StashKey, int64_t>, int64_t> placeOf;
    for (const std::vector<StashMove> &moves : steps) {
      std::map<int, int64_t> &slot = out.slots.emplace_back();
      for (const StashMove &move : moves) {
        int64_t size = bytes.at(move.key);
        std::pair<StashKey, int64_t> at{move.key, move.microbatch};
        if (size <= 0) { // no bytes, no slot (as assign's)
          slot[move.key.second] = -1;
          continue;
        }
        if (move.does == StashMove::Does::Take) {
          int64_t place = lives[nextLife++].place;
          placeOf[at] = place;
          slot[move.key.second] = place;
          continue;
        }
        auto it = placeOf.find(at);
        slot[move.key.second] = it == placeOf.end() ? -1 : it->second;
        if (move.does == StashMove::Does::Free && it != placeOf.end())
          placeOf.erase(it);
      }
    }
    out.slotsOfClass[shared] = most;
    for (auto [key, cls] : classOf)
      out.bytesOfClass[cls] = cls == shared ? granule : 0;
    out.bytes = saturatingMul(most, granule);
    for (auto [key, extra] : ifShared)
      if (classOf.count(key) && classOf.at(key) == shared)
        out.bytes = saturatingAdd(out.bytes, std::max<int64_t>(extra, 0));
    return std::optional<StashSlots>(std::move(out));
  };
  // What no placement goes under, the most granules live at one step and
  // the shared keys' receives: where that does not beat `toBeat`, nothing
  // to place (the searches price many orders).
  int64_t extra = 0;
  for (auto [key, more] : ifShared)
    if (classOf.count(key) && classOf.at(key) == shared)
      extra = saturatingAdd(extra, std::max<int64_t>(more, 0));
  std::vector<__int128> starting(static_cast<size_t>(count) + 1, 0);
  for (const Life &life : lives) {
    starting[size_t(life.first)] += life.size;
    starting[size_t(life.last) + 1] -= life.size;
  }
  __int128 live = 0, mostLive = 0;
  for (int64_t step = 0; step < count; ++step)
    mostLive = std::max(mostLive, live += starting[size_t(step)]);
  if (mostLive * granule + extra >= toBeat)
    return std::nullopt;
  std::vector<std::vector<size_t>> endingAt(static_cast<size_t>(count));
  for (size_t i = 0; i < lives.size(); ++i)
    endingAt[size_t(lives[i].last)].push_back(i);
  // Best fit among the free blocks (merged with their neighbours), in
  // the steps' order.
  int64_t fitMost = 0;
  {
    BestFit arena;
    size_t life = 0;
    for (int64_t step = 0; step < count; ++step) {
      for (; life < lives.size() && lives[life].first == step; ++life) {
        lives[life].place = arena.take(lives[life].size);
        fitMost = std::max(fitMost, arena.top());
      }
      for (size_t ended : endingAt[size_t(step)])
        arena.release(lives[ended].place, lives[ended].size);
    }
  }
  struct Lane {
    int64_t place, size;
    bool free;
  };
  std::vector<Lane> lanes;
  std::set<std::pair<int64_t, size_t>> freeLanes; // (size, lane)
  std::vector<size_t> laneOf(lives.size());
  std::vector<int64_t> fitPlace(lives.size());
  for (size_t i = 0; i < lives.size(); ++i)
    fitPlace[i] = lives[i].place;
  int64_t most = 0;
  size_t life = 0;
  for (int64_t step = 0; step < count; ++step) {
    for (; life < lives.size() && lives[life].first == step; ++life) {
      int64_t size = lives[life].size;
      size_t best = lanes.size();
      if (auto fit = freeLanes.lower_bound({size, 0}); fit != freeLanes.end()) {
        best = fit->second;
        freeLanes.erase(fit);
      } else if (!lanes.empty() && lanes.back().free) {
        best = lanes.size() - 1;
        freeLanes.erase({lanes[best].size, best});
        most += size - lanes[best].size;
        lanes[best].size = size;
      } else {
        lanes.push_back({most, size, true});
        most = saturatingAdd(most, size);
      }
      lanes[best].free = false;
      laneOf[life] = best;
      lives[life].place = lanes[best].place;
    }
    for (size_t ended : endingAt[size_t(step)]) {
      Lane &lane = lanes[laneOf[ended]];
      lane.free = true;
      freeLanes.insert({lane.size, laneOf[ended]});
    }
  }
  if (fitMost < most) {
    for (size_t i = 0; i < lives.size(); ++i)
      lives[i].place = fitPlace[i];
    most = fitMost;
  }
  if (most > INT32_MAX) {
    tooFine = true;
    return std::nullopt;
  }
  return placed(most);
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
    placed = assignBytes(steps, sizes, ifShared, granule, best.bytes, tooFine);
  if (placed && placed->bytes < best.bytes)
    best = std::move(*placed);
  return best;
}

} // namespace strata::pipeline
