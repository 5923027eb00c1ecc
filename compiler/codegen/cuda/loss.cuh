//===- loss.cuh - softmax cross-entropy, whole and vocabulary-parallel ----===//
//
// Per row r of logits z (columns at or past `valid` are the vocabulary's
// padding, or another rank's):
//   lse_r = log Σ_j exp(z_rj),  loss = mean_r (lse_r - z_r,label_r)
//   dlogits_rj = dloss / rows · (exp(z_rj - lse_r) - [j = label_r])
// and the vocabulary-parallel kernels' row statistics (max, Σ exp(z - max),
// the target's logit), all-reduced between launches.
//
// A block takes a row. Its threads take chunks of V columns in turn (8: one
// 16-byte load of bf16, two of f32), keeping a running max and sum of
// exponentials (rescaled once a chunk, not once an element), which the
// block combines in a fixed order: the row's statistics in one pass over
// it; the gradient is a second pass (the row mostly in L2 by then). f32
// throughout, exponentials by ex2.approx with log2(e) folded in (the CPU
// twin works in double; the float64 tests hold both to 1e-5). The mean over
// rows: each block's row loss added over the grid in a fixed order, in two
// stages of a block's sum each (reduce.cuh's addGridTotal): the same bits
// on every run.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "ptx.cuh"
#include "reduce.cuh"

constexpr float kLossLog2e = 1.44269504088896340736f;

// A running max and Σ exp(z - max), and the two combined.
struct MaxSum {
  float max, sum;
};
__device__ __forceinline__ MaxSum combine(MaxSum a, MaxSum b) {
  float m = fmaxf(a.max, b.max);
  if (m == -__uint_as_float(0x7f800000u))
    return {m, 0.0f};
  return {m, a.sum * exp2Fast((a.max - m) * kLossLog2e) +
                 b.sum * exp2Fast((b.max - m) * kLossLog2e)};
}

// The block's combination of every thread's `v`, in a fixed order, in
// every thread.
template <int THREADS> __device__ __forceinline__ MaxSum blockMaxSum(MaxSum v) {
  __shared__ MaxSum partial[THREADS / 32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
    v = combine(v, MaxSum{__shfl_xor_sync(0xffffffffu, v.max, o),
                          __shfl_xor_sync(0xffffffffu, v.sum, o)});
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = v;
  __syncthreads();
  MaxSum total = partial[0];
  for (int w = 1; w < THREADS / 32; ++w)
    total = combine(total, partial[w]);
  __syncthreads();
  return total;
}

// The row's max and Σ exp(z - max) over its columns [0, valid), by the
// block's threads in chunks of V.
template <int COLUMNS, int THREADS, int V, typename T>
__device__ __forceinline__ MaxSum rowMaxSum(const T *row, int valid) {
  MaxSum mine = {-__uint_as_float(0x7f800000u), 0.0f};
  for (int c = threadIdx.x; c * V < valid; c += THREADS) {
    float z[V];
    loadN<V>(row, c * V, z);
    float chunkMax = -__uint_as_float(0x7f800000u);
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (c * V + e < valid)
        chunkMax = fmaxf(chunkMax, z[e]);
    float m = fmaxf(mine.max, chunkMax), sum = 0.0f;
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (c * V + e < valid)
        sum += exp2Fast((z[e] - m) * kLossLog2e);
    mine = {m, mine.sum * exp2Fast((mine.max - m) * kLossLog2e) + sum};
  }
  return blockMaxSum<THREADS>(mine);
}

// rowMaxSum in chunks of 8 where the row is 16-byte aligned (`vectors`)
// and its columns come in eights, else one at a time.
template <int COLUMNS, int THREADS, typename T>
__device__ __forceinline__ MaxSum rowStats(const T *row, int valid,
                                           bool vectors) {
  if constexpr (COLUMNS % 8 == 0)
    if (vectors)
      return rowMaxSum<COLUMNS, THREADS, 8>(row, valid);
  return rowMaxSum<COLUMNS, THREADS, 1>(row, valid);
}

// dlogits of the row: scale · (exp(z - lse) - [column = label]) for the
// columns [0, valid), 0 past them.
template <int COLUMNS, int THREADS, int V, typename T, typename TD>
__device__ __forceinline__ void rowGradient(const T *row, TD *drow, int valid,
                                            float lse, i64 label, float scale) {
  for (int c = threadIdx.x; c < COLUMNS / V; c += THREADS) {
    float z[V], g[V];
    loadN<V>(row, c * V, z);
#pragma unroll
    for (int e = 0; e < V; ++e) {
      int j = c * V + e;
      float p = j < valid ? exp2Fast((z[e] - lse) * kLossLog2e) : 0.0f;
      g[e] = (p - (j == label ? 1.0f : 0.0f)) * scale;
    }
    storeN<V>(drow, c * V, g);
  }
}

// cross_entropy_fwd, _bwd and _with_grad: a block per row; LOSS and GRAD
// say which outputs. `vectors`: the logits (and dlogits) 16-byte aligned.
template <int COLUMNS, int THREADS, bool LOSS, bool GRAD, typename T,
          typename TD>
__device__ __forceinline__ void
crossEntropy(const T *logits, const int *labels, const float *dloss,
             float *loss, TD *dlogits, i64 rows, i64 vocabSize, bool vectors,
             GridTotal<float> total) {
  const i64 r = blockIdx.x;
  const int valid = vocabSize < 0         ? 0
                    : vocabSize > COLUMNS ? COLUMNS
                                          : (int)vocabSize;
  const T *row = logits + r * COLUMNS;
  const i64 label = labels[r];
  MaxSum stats = rowStats<COLUMNS, THREADS>(row, valid, vectors);
  const float lse = stats.max + logf(stats.sum);
  const bool wide = COLUMNS % 8 == 0 && vectors;
  if constexpr (GRAD) {
    const float scale = dloss[0] / rows;
    if (wide)
      rowGradient<COLUMNS, THREADS, 8>(row, dlogits + r * COLUMNS, valid, lse,
                                       label, scale);
    else
      rowGradient<COLUMNS, THREADS, 1>(row, dlogits + r * COLUMNS, valid, lse,
                                       label, scale);
  }
  if constexpr (LOSS) {
    float rowLoss = 0.0f;
    if (threadIdx.x == 0)
      rowLoss = lse - (label >= 0 && label < COLUMNS ? load(row, label) : 0.0f);
    addGridTotal<THREADS>(total, rowLoss,
                          [&](float sum) { loss[0] = sum / rows; });
  }
}

// The columns of this rank that are vocabulary: [0, valid).
template <int COLUMNS>
__device__ __forceinline__ int validColumns(i64 vocabSize, i64 vocabOffset) {
  i64 valid = vocabSize - vocabOffset;
  return valid < 0 ? 0 : valid > COLUMNS ? COLUMNS : (int)valid;
}

// This thread's part of a row's max over [0, valid), or (SUM) of
// Σ exp(z - rowMax), in chunks of V.
template <int THREADS, int V, bool SUM, typename T>
__device__ __forceinline__ float rowStatPart(const T *row, int valid,
                                             float rowMax) {
  float mine = SUM ? 0.0f : -__uint_as_float(0x7f800000u);
  for (int c = threadIdx.x; c * V < valid; c += THREADS) {
    float z[V];
    loadN<V>(row, c * V, z);
#pragma unroll
    for (int e = 0; e < V; ++e)
      if (c * V + e < valid)
        mine = SUM ? mine + exp2Fast((z[e] - rowMax) * kLossLog2e)
                   : fmaxf(mine, z[e]);
  }
  return mine;
}

// logits_max and logits_sum_exp: a block per row, the row's max over this
// rank's columns, or Σ exp(z - max[r]).
template <int COLUMNS, int THREADS, bool SUM, typename T>
__device__ __forceinline__ void logitsRowStat(const T *logits, const float *max,
                                              float *out, i64 vocabSize,
                                              i64 vocabOffset, bool vectors) {
  const i64 r = blockIdx.x;
  const int valid = validColumns<COLUMNS>(vocabSize, vocabOffset);
  const T *row = logits + r * COLUMNS;
  const float rowMax = SUM ? max[r] : 0.0f;
  constexpr int V = COLUMNS % 8 == 0 ? 8 : 1;
  float mine = V == 8 && vectors
                   ? rowStatPart<THREADS, V, SUM>(row, valid, rowMax)
                   : rowStatPart<THREADS, 1, SUM>(row, valid, rowMax);
  float stat = SUM ? blockSum<THREADS>(mine) : blockMax<THREADS>(mine);
  if (threadIdx.x == 0)
    out[r] = stat;
}

// logits_max_sum: a block per row, the row's max and Σ exp(z - max) over
// this block of columns in one pass, combined with the blocks' before it
// (ACCUMULATE).
template <int COLUMNS, int THREADS, bool ACCUMULATE, typename T>
__device__ __forceinline__ void logitsMaxSum(const T *logits, float *max,
                                             float *sum, i64 vocabSize,
                                             i64 vocabOffset, bool vectors) {
  const i64 r = blockIdx.x;
  const int valid = validColumns<COLUMNS>(vocabSize, vocabOffset);
  const T *row = logits + r * COLUMNS;
  MaxSum stats = rowStats<COLUMNS, THREADS>(row, valid, vectors);
  if (threadIdx.x == 0) {
    if constexpr (ACCUMULATE)
      stats = combine(MaxSum{max[r], sum[r]}, stats);
    max[r] = stats.max;
    sum[r] = stats.sum;
  }
}

// cross_entropy_grad_from_stats and _with_grad_from_stats: a block per
// row; the row's log-sum-exp from the all-reduced max and sum, this rank's
// columns of the gradient, and (LOSS) the mean over rows of max + log sum
// - target.
template <int COLUMNS, int THREADS, bool LOSS, typename T, typename TD>
__device__ __forceinline__ void
crossEntropyFromStats(const T *logits, const int *labels, const float *max,
                      const float *sum, const float *target, const float *dloss,
                      float *loss, TD *dlogits, i64 rows, i64 vocabSize,
                      i64 vocabOffset, bool vectors, GridTotal<float> total) {
  const i64 r = blockIdx.x;
  const int valid = validColumns<COLUMNS>(vocabSize, vocabOffset);
  const float lse = max[r] + logf(sum[r]);
  const float scale = dloss[0] / rows;
  const i64 label = labels[r] - vocabOffset;
  constexpr int V = COLUMNS % 8 == 0 ? 8 : 1;
  if (V == 8 && vectors)
    rowGradient<COLUMNS, THREADS, V>(
        logits + r * COLUMNS, dlogits + r * COLUMNS, valid, lse, label, scale);
  else
    rowGradient<COLUMNS, THREADS, 1>(
        logits + r * COLUMNS, dlogits + r * COLUMNS, valid, lse, label, scale);
  if constexpr (LOSS)
    addGridTotal<THREADS>(total, threadIdx.x == 0 ? lse - target[r] : 0.0f,
                          [&](float s) { loss[0] = s / rows; });
}

// cross_entropy_from_stats: a thread a row, THREADS rows a block, the
// rows' max + log sum - target added over the grid.
template <int THREADS>
__device__ __forceinline__ void
lossFromStats(const float *max, const float *sum, const float *target,
              float *loss, i64 rows, GridTotal<float> total) {
  const i64 r = (i64)blockIdx.x * THREADS + threadIdx.x;
  float mine = r < rows ? max[r] + logf(sum[r]) - target[r] : 0.0f;
  addGridTotal<THREADS>(total, blockSum<THREADS>(mine),
                        [&](float s) { loss[0] = s / rows; });
}
