//===- optimizer.cuh - gradient norm and multi-tensor AdamW ---------------===//
//
// Over the elements of the flat regions a rank owns (runtime/plan/
// Ownership.h): windows (begin, length, state) give the rank with part k
// elements [begin + k·length, + length), their optimizer state from
// `state`; segments say which are counted (sum_squares) or updated, and
// with weight decay or without (adamw). The owned elements are numbered
// 0..owned-1 window by window; the constant tables of the unit (the
// emitter writes them) hold the windows, where each starts in that
// numbering, and the segments.
//
//   sum_squares: sum = Σ g² over the segments (and, where first_part is 0,
//                over the first segments), in double, added over the grid
//                in a fixed order in two stages (reduce.cuh)
//   adamw:       g = grads · coefficient; m = β1·m + (1-β1)·g;
//                v = β2·v + (1-β2)·g²; p = p·decay - lr_t·m / (√v/c2 + ε)
//                in the CPU backend's order of operations
//
// A thread takes 8 consecutive owned elements at a time and finds their
// window and segment once (a binary search in the tables); where the 8
// lie in one window and one segment and their addresses allow, they move
// as 16-byte vectors, else one at a time.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "reduce.cuh"

// The last of `count` tuples of `width` in `table` whose first field is at
// most x, or -1.
__device__ __forceinline__ int lastAtMost(const i64 *table, int count,
                                          int width, i64 x) {
  int lo = -1, hi = count - 1;
  while (lo < hi) {
    int mid = (lo + hi + 1) / 2;
    if (table[(i64)mid * width] <= x)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

// The unit's tables: windows (begin, length, state), the owned numbering's
// start of each window (and `owned` after the last), segments (begin,
// length[, decay]).
struct OwnedTables {
  const i64 *windows, *windowStarts;
  int windowCount;
  const i64 *segments;
  int segmentCount, segmentWidth;
  const i64 *firstSegments; // sum_squares' first-part-only segments
  int firstSegmentCount;
};

// The segment of `list` (tuples of `width`) holding flat index `flat`, or
// -1.
__device__ __forceinline__ int segmentOf(const i64 *list, int count, int width,
                                         i64 flat) {
  int s = lastAtMost(list, count, width, flat);
  return s >= 0 && flat < list[(i64)s * width] + list[(i64)s * width + 1] ? s
                                                                          : -1;
}

// Owned element u's flat index and state index.
struct Owned {
  i64 flat, state;
  int window;
};
__device__ __forceinline__ Owned ownedAt(const OwnedTables &t, i64 part,
                                         i64 u) {
  int w = lastAtMost(t.windowStarts, t.windowCount, 1, u);
  i64 offset = u - t.windowStarts[w];
  return {t.windows[3 * w] + part * t.windows[3 * w + 1] + offset,
          t.windows[3 * w + 2] + offset, w};
}

// Whether the 8 elements from owned element u (at `at`) lie in one window
// and in segment s of `list`.
__device__ __forceinline__ bool eightTogether(const OwnedTables &t,
                                              const Owned &at, i64 u,
                                              const i64 *list, int width,
                                              int s) {
  return s >= 0 && u + 8 <= t.windowStarts[at.window + 1] &&
         at.flat + 8 <= list[(i64)s * width] + list[(i64)s * width + 1];
}

template <int THREADS>
__device__ __forceinline__ void
sumSquares(const float *grads, float *sum, i64 part, i64 firstPart,
           const OwnedTables &t, i64 owned, GridTotal<double> total) {
  auto counted = [&](i64 flat) {
    return segmentOf(t.segments, t.segmentCount, 2, flat) >= 0 ||
           (firstPart == 0 &&
            segmentOf(t.firstSegments, t.firstSegmentCount, 2, flat) >= 0);
  };
  const bool vectors = aligned16(grads);
  double mine = 0.0;
  for (i64 u = ((i64)blockIdx.x * THREADS + threadIdx.x) * 8; u < owned;
       u += (i64)gridDim.x * THREADS * 8) {
    Owned at = ownedAt(t, part, u);
    int s = segmentOf(t.segments, t.segmentCount, 2, at.flat);
    int f = firstPart == 0
                ? segmentOf(t.firstSegments, t.firstSegmentCount, 2, at.flat)
                : -1;
    bool together = eightTogether(t, at, u, t.segments, 2, s) ||
                    eightTogether(t, at, u, t.firstSegments, 2, f);
    if (vectors && together && at.flat % 4 == 0) {
      float g[8];
      loadN<8>(grads, at.flat, g);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        mine += (double)g[e] * g[e];
      continue;
    }
    for (i64 e = u; e < u + 8 && e < owned; ++e) {
      Owned one = ownedAt(t, part, e);
      if (counted(one.flat)) {
        double g = grads[one.flat];
        mine += g * g;
      }
    }
  }
  addGridTotal<THREADS>(total, blockSum<THREADS>(mine),
                        [&](double all) { sum[0] = (float)all; });
}

// AdamW's hyperparameters for this step, from the hyper buffer (Hyper.h's
// slots, which the stub passes), and one element's update in the CPU
// backend's order.
struct AdamWStep {
  float decay, beta1, oneMinusBeta1, beta2, oneMinusBeta2, stepSize,
      correction2, eps, coefficient;
  bool clipped;
  __device__ __forceinline__ void update(float g, float &param, float &m,
                                         float &v, bool decayed) const {
    if (clipped)
      g *= coefficient;
    param *= decayed ? decay : 1.0f;
    m = m * beta1 + g * oneMinusBeta1;
    v = v * beta2 + g * g * oneMinusBeta2;
    float denom = sqrtf(v) / correction2 + eps;
    param -= stepSize * (m / denom);
  }
};

template <int THREADS, bool MASTER, typename TP>
__device__ __forceinline__ void
adamw(const float *grads, TP *params, float *expAvg, float *expAvgSq,
      float *master, i64 part, const OwnedTables &t, i64 owned,
      const AdamWStep &step) {
  if (!(step.coefficient > 0.0f))
    return; // a gradient norm that is not finite: the step is skipped
  const bool vectors = aligned16(grads) && aligned16(params) &&
                       aligned16(expAvg) && aligned16(expAvgSq) &&
                       (!MASTER || aligned16(master));
  for (i64 u = ((i64)blockIdx.x * THREADS + threadIdx.x) * 8; u < owned;
       u += (i64)gridDim.x * THREADS * 8) {
    Owned at = ownedAt(t, part, u);
    int s = segmentOf(t.segments, t.segmentCount, 3, at.flat);
    if (vectors && eightTogether(t, at, u, t.segments, 3, s) &&
        at.flat % 8 == 0 && at.state % 4 == 0) {
      bool decayed = t.segments[3 * s + 2] != 0;
      float g[8], p[8], m[8], v[8];
      loadN<8>(grads, at.flat, g);
      loadN<8>(expAvg, at.state, m);
      loadN<8>(expAvgSq, at.state, v);
      if constexpr (MASTER)
        loadN<8>(master, at.state, p);
      else
        loadN<8>(params, at.flat, p);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        step.update(g[e], p[e], m[e], v[e], decayed);
      storeN<8>(expAvg, at.state, m);
      storeN<8>(expAvgSq, at.state, v);
      if constexpr (MASTER)
        storeN<8>(master, at.state, p);
      storeN<8>(params, at.flat, p);
      continue;
    }
    for (i64 e = u; e < u + 8 && e < owned; ++e) {
      Owned one = ownedAt(t, part, e);
      int seg = segmentOf(t.segments, t.segmentCount, 3, one.flat);
      if (seg < 0)
        continue;
      float p = MASTER ? master[one.state] : load(params, one.flat);
      float m = expAvg[one.state], v = expAvgSq[one.state];
      step.update(grads[one.flat], p, m, v, t.segments[3 * seg + 2] != 0);
      expAvg[one.state] = m;
      expAvgSq[one.state] = v;
      if constexpr (MASTER)
        master[one.state] = p;
      store(params, one.flat, p);
    }
  }
}
