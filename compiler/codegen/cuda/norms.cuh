//===- norms.cuh - LayerNorm and RMSNorm, forward and backward ------------===//
//
// Per row of COLS, LayerNorm (CENTER) or RMSNorm (mean taken as 0):
//   x̂ = (x - mean) · rstd,  rstd = 1 / √(mean((x - mean)²) + ε)
//   forward:  y = x̂ · weight (+ bias)
//   backward: g = dy · weight, dx = rstd · (g - mean(g) - x̂ · mean(g · x̂))
//             (RMSNorm: no mean(g)); dweight = Σ_rows dy · x̂,
//             dbias = Σ_rows dy
// in f32 (the CPU twin sums in double; the float64 tests hold both to
// 1e-5).
//
// A warp takes a row: the row's chunks of V elements (8: one 16-byte load
// of bf16, two of f32; 1 where a pointer is not 16-byte aligned or COLS is
// not a multiple of 8) go to its lanes in turn, lane l taking chunks l,
// l + 32, ..., and up to 2048 columns (the backward's x and dy: 1024) stay
// in registers between the row's passes (wider rows are read again, from
// L1). The backward's weight
// and bias gradients: each block takes ROWS consecutive rows, its warps
// compute their dx, then its threads sum each column over the block's rows
// in row order into the block's partial row, and the grid's partial rows
// are added in a fixed order in two stages (reduce.cuh).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "reduce.cuh"

// A norm's input: its buffer's elements. (A fused group's members before
// the norm compute and store them instead: EmitFused.cpp writes that
// functor.)
template <typename T> struct NormInput {
  const T *x;
  template <int V>
  __device__ __forceinline__ void operator()(i64 i, float out[V]) const {
    loadN<V>(x, i, out);
  }
};

// A row of COLS in chunks of V over a warp's lanes, and whether it stays
// in registers (HOLD columns or fewer, in chunks of 8) between the row's
// passes: then the loops over a lane's chunks unroll (registers are
// indexed by constants); a row that does not stay is walked by loops that
// do not (the one-element fallback of any row among them), so a unit's
// code stays small.
template <int COLS, int V, int HOLD> struct RowFit {
  static constexpr int kChunks = COLS / V;
  static constexpr int kPerLane = (kChunks + 31) / 32;
  static constexpr bool kHold = V == 8 && COLS <= HOLD;
  static constexpr int kUnroll = kHold ? kPerLane : 1;
};

// The forward of row `row`, by the calling warp's lanes. `x` is the
// buffer `input` leaves the row in: what a wide row is read back from.
template <int COLS, int V, bool CENTER, class Input, typename TX, typename TW,
          typename TB, typename TY>
__device__ __forceinline__ void normFwdRow(const Input &input, const TX *x,
                                           i64 row, const TW *weight,
                                           const TB *bias, TY *y, float eps) {
  using Fit = RowFit<COLS, V, 2048>; // 64 floats a lane
  constexpr int PL = Fit::kPerLane, CH = Fit::kChunks;
  const int lane = threadIdx.x & 31;
  const i64 base = row * COLS;
  float held[Fit::kHold ? PL : 1][V];
  auto values = [&](int k, float v[V]) {
    if constexpr (Fit::kHold) {
#pragma unroll
      for (int e = 0; e < V; ++e)
        v[e] = held[k][e];
    } else {
      loadN<V>(x, base + (lane + 32 * k) * V, v);
    }
  };
  float sum = 0.0f;
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    if (lane + 32 * k >= CH)
      break;
    float v[V];
    input.template operator()<V>(base + (lane + 32 * k) * V, v);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      sum += v[e];
      if constexpr (Fit::kHold)
        held[k][e] = v[e];
    }
  }
  const float mean = CENTER ? warpSum(sum) / COLS : 0.0f;
  float var = 0.0f;
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    if (lane + 32 * k >= CH)
      break;
    float v[V];
    values(k, v);
#pragma unroll
    for (int e = 0; e < V; ++e)
      var += (v[e] - mean) * (v[e] - mean);
  }
  const float rstd = 1.0f / sqrtf(warpSum(var) / COLS + eps);
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    const int c = lane + 32 * k;
    if (c >= CH)
      break;
    float v[V], w[V], b[V], out[V];
    values(k, v);
    loadN<V>(weight, c * V, w);
    if constexpr (CENTER)
      loadN<V>(bias, c * V, b);
#pragma unroll
    for (int e = 0; e < V; ++e)
      out[e] = (v[e] - mean) * rstd * w[e] + (CENTER ? b[e] : 0.0f);
    storeN<V>(y, base + c * V, out);
  }
}

// The forward over `rows` rows, WARPS rows a block. `vectors`: every
// pointer the row touches is 16-byte aligned (and a fused group's
// broadcast widths are multiples of 8), so chunks of 8 may move as one.
template <int COLS, bool CENTER, int WARPS, class Input, typename TX,
          typename TW, typename TB, typename TY>
__device__ __forceinline__ void normFwd(const Input &input, const TX *x,
                                        const TW *weight, const TB *bias, TY *y,
                                        i64 rows, float eps, bool vectors) {
  const i64 row = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  if constexpr (COLS % 8 == 0) {
    if (vectors) {
      normFwdRow<COLS, 8, CENTER>(input, x, row, weight, bias, y, eps);
      return;
    }
  }
  normFwdRow<COLS, 1, CENTER>(input, x, row, weight, bias, y, eps);
}

// The backward's dx of row `row`, by the calling warp; its mean and rstd
// for the column sums after.
template <int COLS, int V, bool CENTER, typename TX, typename TW, typename TDY,
          typename TDX>
__device__ __forceinline__ void
normBwdRow(const TX *x, const TW *weight, const TDY *dy, TDX *dx, i64 row,
           float eps, float &meanOut, float &rstdOut) {
  using Fit = RowFit<COLS, V, 1024>; // x and g: 64 floats a lane
  constexpr int PL = Fit::kPerLane, CH = Fit::kChunks;
  const int lane = threadIdx.x & 31;
  const i64 base = row * COLS;
  float heldX[Fit::kHold ? PL : 1][V], heldG[Fit::kHold ? PL : 1][V];
  auto xs = [&](int k, float v[V]) {
    if constexpr (Fit::kHold) {
#pragma unroll
      for (int e = 0; e < V; ++e)
        v[e] = heldX[k][e];
    } else {
      loadN<V>(x, base + (lane + 32 * k) * V, v);
    }
  };
  // g = dy · weight.
  auto gs = [&](int k, float g[V]) {
    if constexpr (Fit::kHold) {
#pragma unroll
      for (int e = 0; e < V; ++e)
        g[e] = heldG[k][e];
    } else {
      float w[V];
      loadN<V>(dy, base + (lane + 32 * k) * V, g);
      loadN<V>(weight, (lane + 32 * k) * V, w);
#pragma unroll
      for (int e = 0; e < V; ++e)
        g[e] *= w[e];
    }
  };
  float sum = 0.0f;
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    if (lane + 32 * k >= CH)
      break;
    float v[V];
    loadN<V>(x, base + (lane + 32 * k) * V, v);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      sum += v[e];
      if constexpr (Fit::kHold)
        heldX[k][e] = v[e];
    }
    if constexpr (Fit::kHold) {
      float w[V];
      loadN<V>(dy, base + (lane + 32 * k) * V, heldG[k]);
      loadN<V>(weight, (lane + 32 * k) * V, w);
#pragma unroll
      for (int e = 0; e < V; ++e)
        heldG[k][e] *= w[e];
    }
  }
  const float mean = CENTER ? warpSum(sum) / COLS : 0.0f;
  float var = 0.0f;
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    if (lane + 32 * k >= CH)
      break;
    float v[V];
    xs(k, v);
#pragma unroll
    for (int e = 0; e < V; ++e)
      var += (v[e] - mean) * (v[e] - mean);
  }
  const float rstd = 1.0f / sqrtf(warpSum(var) / COLS + eps);
  float sumG = 0.0f, sumGX = 0.0f;
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    if (lane + 32 * k >= CH)
      break;
    float v[V], g[V];
    xs(k, v);
    gs(k, g);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      sumG += g[e];
      sumGX += g[e] * ((v[e] - mean) * rstd);
    }
  }
  const float meanG = CENTER ? warpSum(sumG) / COLS : 0.0f;
  const float meanGX = warpSum(sumGX) / COLS;
#pragma unroll Fit::kUnroll
  for (int k = 0; k < PL; ++k) {
    const int c = lane + 32 * k;
    if (c >= CH)
      break;
    float v[V], g[V], out[V];
    xs(k, v);
    gs(k, g);
#pragma unroll
    for (int e = 0; e < V; ++e)
      out[e] = rstd * (g[e] - meanG - (v[e] - mean) * rstd * meanGX);
    storeN<V>(dx, base + c * V, out);
  }
  meanOut = mean;
  rstdOut = rstd;
}

// The backward's rows of a block (its warps a row at a time), then its
// partial row: the weight's column sums over the block's rows in row
// order, then the bias's.
template <int COLS, int V, bool CENTER, int WARPS, int ROWS, typename TX,
          typename TW, typename TDY, typename TDX>
__device__ __forceinline__ void
normBwdBlock(const TX *x, const TW *weight, const TDY *dy, TDX *dx, i64 first,
             int count, float eps, float *partial) {
  __shared__ float rowMean[ROWS], rowRstd[ROWS];
  for (int t = threadIdx.x >> 5; t < count; t += WARPS)
    normBwdRow<COLS, V, CENTER>(x, weight, dy, dx, first + t, eps, rowMean[t],
                                rowRstd[t]);
  __syncthreads();
  for (int c = threadIdx.x; c < COLS / V; c += 32 * WARPS) {
    float w[V], b[V];
#pragma unroll
    for (int e = 0; e < V; ++e)
      w[e] = b[e] = 0.0f;
    for (int t = 0; t < count; ++t) {
      float v[V], d[V];
      loadN<V>(x, (first + t) * COLS + c * V, v);
      loadN<V>(dy, (first + t) * COLS + c * V, d);
#pragma unroll
      for (int e = 0; e < V; ++e) {
        w[e] += d[e] * ((v[e] - rowMean[t]) * rowRstd[t]);
        b[e] += d[e];
      }
    }
    storeN<V>(partial, c * V, w);
    if constexpr (CENTER)
      storeN<V>(partial, COLS + c * V, b);
  }
}

// The backward over `rows` rows, ROWS a block, then the weight's (and
// bias's) gradient: the blocks' partial rows added over the grid by
// reduce.cuh.
template <int COLS, bool CENTER, int WARPS, int ROWS, typename TX, typename TW,
          typename TDY, typename TDX, typename TDW, typename TDB>
__device__ __forceinline__ void
normBwd(const TX *x, const TW *weight, const TDY *dy, TDX *dx, TDW *dweight,
        TDB *dbias, i64 rows, float eps, bool vectors, GridSums sums) {
  constexpr int WIDTH = CENTER ? 2 * COLS : COLS; // the partial row
  const i64 first = (i64)blockIdx.x * ROWS;
  const int count = rows - first < ROWS ? int(rows - first) : ROWS;
  float *partial = partialRow(sums, WIDTH);
  bool done = false;
  if constexpr (COLS % 8 == 0) {
    if (vectors) {
      normBwdBlock<COLS, 8, CENTER, WARPS, ROWS>(x, weight, dy, dx, first,
                                                 count, eps, partial);
      done = true;
    }
  }
  if (!done)
    normBwdBlock<COLS, 1, CENTER, WARPS, ROWS>(x, weight, dy, dx, first, count,
                                               eps, partial);
  addGridSums<32 * WARPS, 16>(sums, WIDTH, [&](int c, float sum) {
    if (c < COLS)
      store(dweight, c, sum);
    else if constexpr (CENTER)
      store(dbias, c - COLS, sum);
  });
}
