//===- Ownership.h - the parts of the flat regions a rank owns --*- C++ -*-===//
//
// The flat optimizer's kernels (Kernels.def: sum_squares, adamw) name the
// same ranges on every rank of a template and let each rank's `part` pick
// its own: a window (begin, length, state) gives the rank with part k the
// elements [begin + k·length, begin + (k + 1)·length), whose state (moments,
// master) starts at `state`. One walk over segments and windows serves the
// CPU kernels and the loader's master segments (the plan checker checks
// the windows' bounds and order, which the walk relies on).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_OWNERSHIP_H
#define STRATA_RUNTIME_PLAN_OWNERSHIP_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace strata::runtime {

/// Fields of a window in a kernel's `windows` list.
inline constexpr size_t kWindowWidth = 3;

/// Calls fn(begin, length, state, segment) for each non-empty piece of a
/// segment (tuples of `width` whose first two fields are begin and length) that
/// lies in the rank's part of a window; `segment` is the tuple's index.
/// Both lists are in increasing order without overlaps (the plan checker
/// makes sure).
template <typename Fn>
void forEachOwned(const std::vector<int64_t> &segments, size_t width,
                  const std::vector<int64_t> &windows, int64_t part, Fn fn) {
  size_t w = 0;
  for (size_t s = 0; s + width <= segments.size(); s += width) {
    int64_t begin = segments[s], end = begin + segments[s + 1];
    while (w + kWindowWidth <= windows.size()) {
      int64_t length = windows[w + 1];
      int64_t from = windows[w] + part * length, to = from + length;
      if (to <= begin) {
        w += kWindowWidth;
        continue;
      }
      if (from >= end)
        break;
      int64_t b = std::max(begin, from), e = std::min(end, to);
      if (e > b)
        fn(b, e - b, windows[w + 2] + (b - from), s / width);
      if (to > end)
        break; // the window goes on into the next segment
      w += kWindowWidth;
    }
  }
}

} // namespace strata::runtime

#endif
