//===- BestFit.h - blocks of an arena, each take the best fit ---*- C++ -*-===//
//
// An arena handed out in blocks: a take gets the smallest free block that
// holds it (what it leaves stays free), else the free block that ends at
// the top grown into fresh memory, else fresh memory at the top; a block
// given back is merged with its free neighbours. PlanMemory places a
// program's workspace with it, planStashSlots a stage's stash. Plain C++.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_BESTFIT_H
#define STRATA_COMPILER_BESTFIT_H

#include <cstdint>
#include <iterator>
#include <map>
#include <set>
#include <utility>

namespace strata {

class BestFit {
public:
  /// Where `size` units go.
  int64_t take(int64_t size) {
    auto fit = bySize.lower_bound({size, INT64_MIN});
    if (fit != bySize.end()) {
      auto [have, at] = *fit;
      forget(at, have);
      if (have > size)
        remember(at + size, have - size);
      return at;
    }
    if (!freeAt.empty() &&
        freeAt.rbegin()->first + freeAt.rbegin()->second == end) {
      auto [at, have] = *freeAt.rbegin();
      forget(at, have);
      end = at + size;
      return at;
    }
    int64_t at = end;
    end += size;
    return at;
  }

  /// `size` units at `at`, taken before, are free again.
  void release(int64_t at, int64_t size) {
    auto after = freeAt.lower_bound(at);
    if (after != freeAt.end() && after->first == at + size) {
      size += after->second;
      bySize.erase({after->second, after->first});
      after = freeAt.erase(after);
    }
    if (after != freeAt.begin()) {
      auto before = std::prev(after);
      if (before->first + before->second == at) {
        at = before->first;
        size += before->second;
        forget(before->first, before->second);
      }
    }
    remember(at, size);
  }

  /// The arena's size so far: the end of the highest block ever taken.
  int64_t top() const { return end; }

private:
  void remember(int64_t at, int64_t size) {
    freeAt[at] = size;
    bySize.insert({size, at});
  }
  void forget(int64_t at, int64_t size) {
    freeAt.erase(at);
    bySize.erase({size, at});
  }

  std::map<int64_t, int64_t> freeAt;            // place -> size
  std::set<std::pair<int64_t, int64_t>> bySize; // (size, place)
  int64_t end = 0;
};

} // namespace strata

#endif
