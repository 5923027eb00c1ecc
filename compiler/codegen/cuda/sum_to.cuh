//===- sum_to.cuh - sums over the rows: a bias's gradient -----------------===//
//
// y[j] = Σ_r x[r, j] (y += that, with accumulate), x [rows, WIDTH], in f32.
// A grid of row ranges (x) by column tiles of TILE (y): a block takes ROWS
// rows of its tile; its threads take a chunk of V columns each (8: one
// 16-byte load of bf16, two of f32), and where the tile has fewer chunks
// than threads, several threads a chunk, each every so-many-th row, their
// sums added in a fixed order in shared memory into the block's partial
// row; then the row ranges' partial rows are added in a fixed order in two
// stages (reduce.cuh). The same bits on every run, no atomics on y.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "reduce.cuh"

// A block's partial row: its tile's chunks of V columns summed over its
// rows.
template <int V, int WIDTH, int TILE, int THREADS, typename TX>
__device__ __forceinline__ void sumToBlock(const TX *x, i64 first, int count,
                                           int tileFirst, int tileWidth,
                                           float *partial) {
  __shared__ float splitSums[THREADS * 8];
  const int chunks = tileWidth / V;
  // `step` threads a chunk, thread s of them rows s, s + step, ...
  const int step = chunks >= THREADS ? 1 : THREADS / chunks;
  const int s = threadIdx.x / (chunks < THREADS ? chunks : THREADS);
  for (int c = threadIdx.x % (chunks < THREADS ? chunks : THREADS);
       c < chunks && s < step; c += THREADS) {
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e)
      acc[e] = 0.0f;
    for (int r = s; r < count; r += step) {
      float v[V];
      loadN<V>(x, (first + r) * WIDTH + tileFirst + c * V, v);
#pragma unroll
      for (int e = 0; e < V; ++e)
        acc[e] += v[e];
    }
    if (step == 1) {
      storeN<V>(partial, c * V, acc);
      continue;
    }
#pragma unroll
    for (int e = 0; e < V; ++e)
      splitSums[(s * chunks + c) * V + e] = acc[e];
  }
  if (step == 1)
    return;
  __syncthreads();
  if (threadIdx.x < chunks) {
    const int c = threadIdx.x;
    float acc[V];
#pragma unroll
    for (int e = 0; e < V; ++e)
      acc[e] = 0.0f;
    for (int k = 0; k < step; ++k)
#pragma unroll
      for (int e = 0; e < V; ++e)
        acc[e] += splitSums[(k * chunks + c) * V + e];
    storeN<V>(partial, c * V, acc);
  }
}

template <int WIDTH, int TILE, int THREADS, int ROWS, bool ACCUMULATE,
          typename TX, typename TY>
__device__ __forceinline__ void sumTo(const TX *x, TY *y, i64 rows,
                                      bool vectors, GridSums sums) {
  const int tileFirst = blockIdx.y * TILE;
  const int tileWidth = WIDTH - tileFirst < TILE ? WIDTH - tileFirst : TILE;
  const i64 first = (i64)blockIdx.x * ROWS;
  const int count = rows - first < ROWS ? int(rows - first) : ROWS;
  float *partial = partialRow(sums, TILE);
  bool done = false;
  if constexpr (WIDTH % 8 == 0 && TILE % 8 == 0) {
    if (vectors) {
      sumToBlock<8, WIDTH, TILE, THREADS>(x, first, count, tileFirst, tileWidth,
                                          partial);
      done = true;
    }
  }
  if (!done)
    sumToBlock<1, WIDTH, TILE, THREADS>(x, first, count, tileFirst, tileWidth,
                                        partial);
  addGridSums<THREADS, 16>(sums, TILE, [&](int c, float sum) {
    if (c < tileWidth) {
      i64 j = tileFirst + c;
      store(y, j, ACCUMULATE ? load(y, j) + sum : sum);
    }
  });
}
