//===- softmax.cuh - attention's probabilities, computed apart ------------===//
//
// What --attention-backend unfused runs between its batched gemms, as
// Megatron's fused scale-mask-softmax did, per row of scores x [..., seq,
// keys] (query i the row's index mod seq):
//   forward:  y = exp(x - max) / Σ_j exp(x_j - max) over the keys the row
//             sees (causal: j <= i), 0 past them
//   backward: dx = y ⊙ (dy - Σ_j y_j · dy_j)
// A warp a row, its chunks of V keys over the lanes in turn (8: 16-byte
// loads where the row allows), in f32 (the CPU twin sums in double; the
// float64 tests hold both to 1e-5): the forward's max and sum in one pass
// (rescaled a chunk at a time), the probabilities a second.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

template <int KEYS, int V, typename TX, typename TY>
__device__ __forceinline__ void softmaxFwdRow(const TX *x, TY *y, i64 base,
                                              int valid) {
  const int lane = threadIdx.x & 31;
  float max = -__uint_as_float(0x7f800000u), sum = 0.0f;
  for (int c = lane; c * V < valid; c += 32) {
    float v[V];
    loadN<V>(x, base + c * V, v);
    float chunkMax = max;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (c * V + e < valid)
        chunkMax = fmaxf(chunkMax, v[e]);
    float part = 0.0f;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (c * V + e < valid)
        part += expf(v[e] - chunkMax);
    sum = sum * expf(max - chunkMax) + part;
    max = chunkMax;
  }
  // The warp's max, each lane's sum rescaled to it, then added.
  const float rowMax = warpMax(max);
  sum = max == -__uint_as_float(0x7f800000u) ? 0.0f : sum * expf(max - rowMax);
  const float inverse = 1.0f / warpSum(sum);
  for (int c = lane; c < KEYS / V; c += 32) {
    float v[V], out[V];
    loadN<V>(x, base + c * V, v);
#pragma unroll
    for (int e = 0; e < V; ++e)
      out[e] = c * V + e < valid ? expf(v[e] - rowMax) * inverse : 0.0f;
    storeN<V>(y, base + c * V, out);
  }
}

// The forward over `rows` rows of KEYS, WARPS rows a block.
template <int KEYS, int SEQ, bool CAUSAL, int WARPS, typename TX, typename TY>
__device__ __forceinline__ void softmaxFwd(const TX *x, TY *y, i64 rows,
                                           bool vectors) {
  const i64 row = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  int valid = CAUSAL ? int(row % SEQ) + 1 : KEYS;
  valid = valid > KEYS ? KEYS : valid;
  if (KEYS % 8 == 0 && vectors)
    softmaxFwdRow<KEYS, KEYS % 8 == 0 ? 8 : 1>(x, y, row * KEYS, valid);
  else
    softmaxFwdRow<KEYS, 1>(x, y, row * KEYS, valid);
}

template <int KEYS, int V, typename TY, typename TD, typename TX>
__device__ __forceinline__ void softmaxBwdRow(const TY *y, const TD *dy, TX *dx,
                                              i64 base) {
  const int lane = threadIdx.x & 31;
  float dot = 0.0f;
  for (int c = lane; c < KEYS / V; c += 32) {
    float a[V], b[V];
    loadN<V>(y, base + c * V, a);
    loadN<V>(dy, base + c * V, b);
#pragma unroll
    for (int e = 0; e < V; ++e)
      dot += a[e] * b[e];
  }
  dot = warpSum(dot);
  for (int c = lane; c < KEYS / V; c += 32) {
    float a[V], b[V], out[V];
    loadN<V>(y, base + c * V, a);
    loadN<V>(dy, base + c * V, b);
#pragma unroll
    for (int e = 0; e < V; ++e)
      out[e] = a[e] * (b[e] - dot);
    storeN<V>(dx, base + c * V, out);
  }
}

template <int KEYS, int WARPS, typename TY, typename TD, typename TX>
__device__ __forceinline__ void softmaxBwd(const TY *y, const TD *dy, TX *dx,
                                           i64 rows, bool vectors) {
  const i64 row = (i64)blockIdx.x * WARPS + (threadIdx.x >> 5);
  if (row >= rows)
    return;
  if (KEYS % 8 == 0 && vectors)
    softmaxBwdRow<KEYS, KEYS % 8 == 0 ? 8 : 1>(y, dy, dx, row * KEYS);
  else
    softmaxBwdRow<KEYS, 1>(y, dy, dx, row * KEYS);
}
