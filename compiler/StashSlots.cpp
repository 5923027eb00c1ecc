//===- StashSlots.cpp - the stash slot each step of a stage takes ---------===//
#include "compiler/StashSlots.h"

#include <algorithm>
#include <cstdint>
#include <functional>
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
  return best;
}

} // namespace strata::pipeline
