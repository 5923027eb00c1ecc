//===- embedding.cuh - table lookup and its gradient ----------------------===//
//
//   forward:  y[i, :] = table[ids[i] - vocab_offset, :], zero for an id
//             outside the table's rows (a vocabulary split across ranks)
//   backward: dtable[ids[i] - vocab_offset, :] += dy[i, :] for ids inside
//             them, in token order (dtable zeroed first unless accumulate)
//
// The forward: a block a token, 16-byte chunks a thread. The backward
// without atomics and without a thread a column walking every token: a
// block takes ROWS rows of the table; its threads walk the tokens in order,
// keeping those whose rows are the block's in a list in shared memory, in
// token order (a warp's ballot, the warps' counts added in order); then a
// warp takes a row, and adds the dy rows of the list's tokens of that row in
// list order onto what it starts from (0, or the row's value with
// accumulate), as the CPU adds them, 16-byte chunks a lane. A row no token
// reads is written zero (or left alone with accumulate). A block whose
// tokens overflow the list (a skewed batch) walks the ids again for each
// row instead: slower, the same sums.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

template <int HIDDEN, int THREADS, typename TT, typename TY>
__device__ __forceinline__ void embeddingFwd(const TT *table, const int *ids,
                                             TY *y, i64 tokens, i64 rows,
                                             i64 vocabOffset, bool vectors) {
  for (i64 t = blockIdx.x; t < tokens; t += gridDim.x) {
    i64 row = (i64)ids[t] - vocabOffset;
    bool mine = row >= 0 && row < rows;
    if (HIDDEN % 8 == 0 && vectors) {
      constexpr int V = HIDDEN % 8 == 0 ? 8 : 1;
      for (int c = threadIdx.x; c < HIDDEN / V; c += THREADS) {
        float v[V];
        if (mine)
          loadN<V>(table, row * HIDDEN + c * V, v);
        else
#pragma unroll
          for (int e = 0; e < V; ++e)
            v[e] = 0.0f;
        storeN<V>(y, t * HIDDEN + c * V, v);
      }
    } else {
      for (int c = threadIdx.x; c < HIDDEN; c += THREADS)
        store(y, t * HIDDEN + c, mine ? load(table, row * HIDDEN + c) : 0.0f);
    }
  }
}

// A warp's row of the table: `start` (0, or the row as it is), then dy of
// each token of the row in token order: `nextToken(k)` gives the k-th
// (-1 past the last); chunks of V columns a lane, up to 8 chunks a lane at
// a time (a wider row takes several passes over its tokens).
template <int HIDDEN, int V, class Tokens, typename TD>
__device__ __forceinline__ void embeddingRow(float *dtable, const TD *dy,
                                             i64 row, bool accumulate,
                                             Tokens nextToken) {
  constexpr int CH = HIDDEN / V, PASS = 8;
  const int lane = threadIdx.x & 31;
  if (nextToken(0) < 0 && accumulate)
    return; // nothing added to the row
  for (int pass = 0; pass * 32 * PASS < CH; ++pass) {
    float acc[PASS][V];
#pragma unroll
    for (int k = 0; k < PASS; ++k) {
      int c = (pass * PASS + k) * 32 + lane;
      if (c >= CH)
        break;
      if (accumulate)
        loadN<V>(dtable, row * HIDDEN + c * V, acc[k]);
      else
#pragma unroll
        for (int e = 0; e < V; ++e)
          acc[k][e] = 0.0f;
    }
    for (int n = 0;; ++n) {
      i64 token = nextToken(n);
      if (token < 0)
        break;
#pragma unroll
      for (int k = 0; k < PASS; ++k) {
        int c = (pass * PASS + k) * 32 + lane;
        if (c >= CH)
          break;
        float d[V];
        loadN<V>(dy, token * HIDDEN + c * V, d);
#pragma unroll
        for (int e = 0; e < V; ++e)
          acc[k][e] += d[e];
      }
    }
#pragma unroll
    for (int k = 0; k < PASS; ++k) {
      int c = (pass * PASS + k) * 32 + lane;
      if (c >= CH)
        break;
      storeN<V>(dtable, row * HIDDEN + c * V, acc[k]);
    }
  }
}

// The backward: a block of THREADS takes rows [blockIdx.x · ROWS, + ROWS)
// of the table; its list holds up to LIST tokens.
template <int HIDDEN, int THREADS, int ROWS, int LIST, typename TD>
__device__ __forceinline__ void
embeddingBwd(const TD *dy, const int *ids, float *dtable, i64 tokens, i64 rows,
             i64 vocabOffset, bool accumulate, bool vectors) {
  constexpr int WARPS = THREADS / 32;
  // A list entry: the token · ROWS + its row in the block.
  __shared__ int list[LIST];
  __shared__ int warpCounts[WARPS];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 first = (i64)blockIdx.x * ROWS;
  int listed = 0; // the same in every thread
  for (i64 t0 = 0; t0 < tokens; t0 += THREADS) {
    i64 t = t0 + threadIdx.x;
    i64 row = t < tokens ? (i64)ids[t] - vocabOffset - first : -1;
    bool in = row >= 0 && row < ROWS && first + row < rows;
    unsigned ballot = __ballot_sync(0xffffffffu, in);
    if (lane == 0)
      warpCounts[warp] = __popc(ballot);
    __syncthreads();
    int before = listed, chunk = 0;
    for (int w = 0; w < WARPS; ++w) {
      before += w < warp ? warpCounts[w] : 0;
      chunk += warpCounts[w];
    }
    int at = before + __popc(ballot & ((1u << lane) - 1u));
    if (in && at < LIST)
      list[at] = int(t * ROWS + row);
    listed += chunk;
    __syncthreads();
  }
  const bool overflow = listed > LIST;
  for (int r = warp; r < ROWS && first + r < rows; r += WARPS) {
    // The list's tokens of row r in list order: the k-th is found by a
    // ballot over the list 32 entries at a time (the warp's lanes agree),
    // going on from where the (k - 1)-th was; k = 0 starts again.
    int seen = 0, from = 0;
    auto fromList = [&](int k) -> i64 {
      if (k == 0)
        seen = from = 0;
      for (; from < listed; from += 32) {
        int entry = from + lane < listed ? list[from + lane] : -1;
        unsigned hits =
            __ballot_sync(0xffffffffu, entry >= 0 && entry % ROWS == r);
        int here = __popc(hits);
        if (k < seen + here) {
          // The (k - seen)-th set bit of hits.
          for (int skip = k - seen; skip > 0; --skip)
            hits &= hits - 1u;
          int source = __ffs(hits) - 1;
          return (i64)(__shfl_sync(0xffffffffu, entry, source) / ROWS);
        }
        seen += here;
      }
      return -1;
    };
    // Overflowed: the ids again, every token, in order.
    i64 scan = 0, scanSeen = 0;
    auto fromIds = [&](int k) -> i64 {
      if (k == 0)
        scan = scanSeen = 0;
      for (; scan < tokens; scan += 32) {
        i64 t = scan + lane;
        bool hit = t < tokens && (i64)ids[t] - vocabOffset == first + r;
        unsigned hits = __ballot_sync(0xffffffffu, hit);
        int here = __popc(hits);
        if (k < scanSeen + here) {
          for (int skip = k - (int)scanSeen; skip > 0; --skip)
            hits &= hits - 1u;
          return scan + __ffs(hits) - 1;
        }
        scanSeen += here;
      }
      return -1;
    };
    auto next = [&](int k) { return overflow ? fromIds(k) : fromList(k); };
    if (HIDDEN % 8 == 0 && vectors)
      embeddingRow<HIDDEN, HIDDEN % 8 == 0 ? 8 : 1>(dtable, dy, first + r,
                                                    accumulate, next);
    else
      embeddingRow<HIDDEN, 1>(dtable, dy, first + r, accumulate, next);
  }
}
