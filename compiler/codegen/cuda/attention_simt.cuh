//===- attention_simt.cuh - flash attention without tensor cores ----------===//
//
// The math of attention_fwd.cuh and attention_bwd.cuh (the flash-attention
// contract: no s×s matrix, the forward keeps each row's log-sum-exp, the
// backward recomputes P from it), exact to f32 and for any head dimension:
// what fp32 plans run, to verify against the CPU. Keys (or queries) come 32
// at a time into shared memory, rows padded to DIM + 1 so that a lane per
// key reads without bank conflicts; a warp owns a row (of queries in the
// forward and for dq, of keys for dk and dv). Scores are a lane per key (or
// query), outputs a lane per head dimension, and the probabilities pass
// between the two by shuffles; the softmax is online (running max and sum).
// The backward's blocks [0, QBLOCKS) compute dq, the others dk and dv: a
// launch's blocks never write what another reads. With context parallelism
// (S::kContext of 2 or more) the queries are the rank's two chunks of the
// sequence and the keys every rank's, gathered in rank order, or one
// rank's (the ring's step), and the causal mask compares their places in
// the sequence (context.cuh); no tile is skipped then, and a row that sees
// none of the keys gets o = 0 and lse = −∞ (attentionMergeSimt weighs it
// at nothing).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "attention_layout.cuh"
#include "common.cuh"
#include "context.cuh"

// Indices of q-shaped, kv-shaped and lse-shaped operands.
template <class S> struct AttentionIndex {
  __device__ __forceinline__ static i64 q(i64 b, i64 i, i64 h, i64 d) {
    return ((b * S::kSeq + i) * S::kHeads + h) * S::kDim + d;
  }
  __device__ __forceinline__ static i64 kv(i64 b, i64 j, i64 g, i64 d) {
    return ((b * S::kKeys + j) * S::kKvHeads + g) * S::kDim + d;
  }
  __device__ __forceinline__ static i64 lse(i64 b, i64 h, i64 i) {
    return (b * S::kHeads + h) * S::kSeq + i;
  }
};

// Whether query row i sees key row j under the launch's mask.
template <class S>
__device__ __forceinline__ bool attentionSees(i64 i, i64 j, ContextPlace at) {
  if (!S::kCausal)
    return true;
  if (S::kContext < 2)
    return j <= i;
  return keyContextPosition(j, S::kSeq, S::kKeys, S::kContext, at.rank,
                            at.ringStep) <=
         contextPosition(i, S::kSeq, S::kContext, at.rank);
}

// Whether rows are in the sequence's order, so that causal tiles past a
// row can be skipped.
template <class S> __device__ constexpr bool attentionSkipsTiles() {
  return S::kCausal && S::kContext < 2;
}

// A query row's walk over the keys it sees (the forward's and dq's): tiles
// of 32 keys of kv head g go into kTile and vTile (zero past KEYS), by the
// whole block, and for each tile row i sees, `tile(visible)` is called
// with whether the lane's key is one row i sees. Every warp takes part in
// the loads whether or not its row is active.
template <class S, typename TK, typename TV, class Tile>
__device__ __forceinline__ void
walkKeys(float *kTile, float *vTile, const TK *k, const TV *v, i64 b, i64 g,
         i64 i, bool active, ContextPlace at, Tile tile) {
  using I = AttentionIndex<S>;
  constexpr int PAD = S::kDim + 1, ROWS = kAttentionSimtRows;
  const int lane = threadIdx.x & 31;
  i64 lastKey = S::kKeys - 1;
  if (attentionSkipsTiles<S>()) {
    i64 lastRow = blockIdx.x * (i64)ROWS + ROWS - 1;
    lastKey = lastRow < lastKey ? lastRow : lastKey;
  }
  for (i64 j0 = 0; j0 <= lastKey; j0 += 32) {
    __syncthreads();
    for (i64 e = threadIdx.x; e < 32 * S::kDim; e += blockDim.x) {
      i64 jj = e / S::kDim, d = e % S::kDim, j = j0 + jj;
      kTile[jj * PAD + d] = j < S::kKeys ? load(k, I::kv(b, j, g, d)) : 0.0f;
      vTile[jj * PAD + d] = j < S::kKeys ? load(v, I::kv(b, j, g, d)) : 0.0f;
    }
    __syncthreads();
    if (!active || (attentionSkipsTiles<S>() && j0 > i))
      continue;
    const i64 j = j0 + lane;
    tile(j < S::kKeys && attentionSees<S>(i, j, at));
  }
}

// acc[t] (head dimension lane + 32 t) += Σ over the tile's 32 rows jj of
// lane jj's `weight` times the tile's row jj.
template <class S>
__device__ __forceinline__ void accumulateRows(float *acc, float weight,
                                               const float *tile, int lane) {
  constexpr int PAD = S::kDim + 1, PER_LANE = (S::kDim + 31) / 32;
  for (int jj = 0; jj < 32; ++jj) {
    float w = __shfl_sync(0xffffffffu, weight, jj);
    for (int t = 0; t < PER_LANE; ++t) {
      int d = lane + 32 * t;
      if (d < S::kDim)
        acc[t] += w * tile[jj * PAD + d];
    }
  }
}

// Grid: (query blocks of 4, heads, batch); 4 warps.
template <class S, typename TQ, typename TK, typename TV, typename TO>
__device__ __forceinline__ void
attentionFwdSimt(const TQ *q, const TK *k, const TV *v, TO *o, float *lse,
                 i64 groupSize, i64 queryHeadOffset, ContextPlace at) {
  using I = AttentionIndex<S>;
  constexpr int PAD = S::kDim + 1, ROWS = kAttentionSimtRows;
  constexpr int PER_LANE = (S::kDim + 31) / 32;
  extern __shared__ float attentionTiles[];
  float *kTile = attentionTiles, *vTile = kTile + 32 * PAD;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 b = blockIdx.z, h = blockIdx.y;
  const i64 i = blockIdx.x * (i64)ROWS + warp;
  const bool active = i < S::kSeq;
  const i64 g = (queryHeadOffset + h) / groupSize;
  float *qRow = vTile + 32 * PAD + warp * S::kDim;
  for (i64 d = lane; d < S::kDim; d += 32)
    qRow[d] = active ? load(q, I::q(b, i, h, d)) : 0.0f;
  float rowMax = -__uint_as_float(0x7f800000u), rowSum = 0.0f;
  float acc[PER_LANE];
  for (int t = 0; t < PER_LANE; ++t)
    acc[t] = 0.0f;
  walkKeys<S>(kTile, vTile, k, v, b, g, i, active, at, [&](bool visible) {
    float score = -__uint_as_float(0x7f800000u);
    if (visible) {
      float dot = 0.0f;
      for (int d = 0; d < S::kDim; ++d)
        dot += qRow[d] * kTile[lane * PAD + d];
      score = dot * S::kScale;
    }
    float newMax = fmaxf(rowMax, warpMax(score));
    float p = visible ? expf(score - newMax) : 0.0f;
    // Nothing seen yet (a ring step's rows may see no key):
    // nothing to rescale, and −∞ − −∞ is no number.
    float correction = newMax == rowMax ? 1.0f : expf(rowMax - newMax);
    rowSum = rowSum * correction + warpSum(p);
    for (int t = 0; t < PER_LANE; ++t)
      acc[t] *= correction;
    accumulateRows<S>(acc, p, vTile, lane);
    rowMax = newMax;
  });
  if (!active)
    return;
  const bool seen = rowSum > 0.0f;
  for (int t = 0; t < PER_LANE; ++t) {
    int d = lane + 32 * t;
    if (d < S::kDim)
      store(o, I::q(b, i, h, d), seen ? acc[t] / rowSum : 0.0f);
  }
  if (lane == 0)
    lse[I::lse(b, h, i)] = seen ? rowMax + logf(rowSum) : rowMax;
}

// Grid: (query blocks + key blocks of 4, max(heads, kv heads), batch).
template <class S, typename TQ, typename TK, typename TV, typename TO,
          typename TD, typename TDQ, typename TDK, typename TDV>
__device__ __forceinline__ void
attentionBwdSimt(const TQ *q, const TK *k, const TV *v, const TO *o,
                 const float *lse, const TD *dout, TDQ *dq, TDK *dk, TDV *dv,
                 i64 groupSize, i64 queryHeadOffset, ContextPlace at) {
  using I = AttentionIndex<S>;
  constexpr int PAD = S::kDim + 1, ROWS = kAttentionSimtRows;
  constexpr int PER_LANE = (S::kDim + 31) / 32;
  constexpr i64 QBLOCKS = (S::kSeq + ROWS - 1) / ROWS;
  extern __shared__ float attentionTiles[];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 b = blockIdx.z;
  if (blockIdx.x < QBLOCKS) {
    // dq_i = scale · Σ_j dS_ij k_j, dS = P ⊙ (dO·vᵀ − D), D_i = dO_i·O_i:
    // a warp a query row, walking the keys it sees.
    const i64 h = blockIdx.y;
    if (h >= S::kHeads)
      return;
    float *kTile = attentionTiles, *vTile = kTile + 32 * PAD;
    float *qRow = vTile + 32 * PAD + warp * S::kDim;
    float *dORow = vTile + 32 * PAD + ROWS * S::kDim + warp * S::kDim;
    const i64 i = blockIdx.x * (i64)ROWS + warp;
    const bool active = i < S::kSeq;
    const i64 g = (queryHeadOffset + h) / groupSize;
    float dotOut = 0.0f;
    for (i64 d = lane; d < S::kDim; d += 32) {
      qRow[d] = active ? load(q, I::q(b, i, h, d)) : 0.0f;
      dORow[d] = active ? load(dout, I::q(b, i, h, d)) : 0.0f;
      dotOut += active ? dORow[d] * load(o, I::q(b, i, h, d)) : 0.0f;
    }
    const float rowD = warpSum(dotOut);
    const float rowLse = active ? lse[I::lse(b, h, i)] : 0.0f;
    float acc[PER_LANE];
    for (int t = 0; t < PER_LANE; ++t)
      acc[t] = 0.0f;
    walkKeys<S>(kTile, vTile, k, v, b, g, i, active, at, [&](bool visible) {
      float dS = 0.0f;
      if (visible) {
        float score = 0.0f, dP = 0.0f;
        for (int d = 0; d < S::kDim; ++d) {
          score += qRow[d] * kTile[lane * PAD + d];
          dP += dORow[d] * vTile[lane * PAD + d];
        }
        float p = expf(score * S::kScale - rowLse);
        dS = p * (dP - rowD);
      }
      accumulateRows<S>(acc, dS, kTile, lane);
    });
    if (!active)
      return;
    for (int t = 0; t < PER_LANE; ++t) {
      int d = lane + 32 * t;
      if (d < S::kDim)
        store(dq, I::q(b, i, h, d), acc[t] * S::kScale);
    }
    return;
  }
  // dk_j = scale · Σ_i dS_ij q_i and dv_j = Σ_i P_ij dO_i over the query
  // heads that read kv head g, in head order: a warp a key row.
  const i64 g = blockIdx.y;
  if (g >= S::kKvHeads)
    return;
  float *qTile = attentionTiles, *dOTile = qTile + 32 * PAD;
  float *kRow = dOTile + 32 * PAD + warp * S::kDim;
  float *vRow = dOTile + 32 * PAD + ROWS * S::kDim + warp * S::kDim;
  float *rowD = dOTile + 32 * PAD + 2 * ROWS * S::kDim, *rowLse = rowD + 32;
  const i64 firstKey = (blockIdx.x - QBLOCKS) * (i64)ROWS;
  const i64 j = firstKey + warp;
  const bool active = j < S::kKeys;
  for (i64 d = lane; d < S::kDim; d += 32) {
    kRow[d] = active ? load(k, I::kv(b, j, g, d)) : 0.0f;
    vRow[d] = active ? load(v, I::kv(b, j, g, d)) : 0.0f;
  }
  float dkAcc[PER_LANE], dvAcc[PER_LANE];
  for (int t = 0; t < PER_LANE; ++t)
    dkAcc[t] = dvAcc[t] = 0.0f;
  const i64 firstQuery = attentionSkipsTiles<S>() ? firstKey / 32 * 32 : 0;
  for (i64 h = 0; h < S::kHeads; ++h) {
    if ((queryHeadOffset + h) / groupSize != g)
      continue;
    for (i64 i0 = firstQuery; i0 < S::kSeq; i0 += 32) {
      __syncthreads();
      for (i64 e = threadIdx.x; e < 32 * S::kDim; e += blockDim.x) {
        i64 ii = e / S::kDim, d = e % S::kDim, i = i0 + ii;
        qTile[ii * PAD + d] = i < S::kSeq ? load(q, I::q(b, i, h, d)) : 0.0f;
        dOTile[ii * PAD + d] =
            i < S::kSeq ? load(dout, I::q(b, i, h, d)) : 0.0f;
      }
      // D and the log-sum-exp of the tile's queries, a warp a query.
      for (i64 ii = warp; ii < 32; ii += ROWS) {
        i64 i = i0 + ii;
        float dot = 0.0f;
        for (i64 d = lane; d < S::kDim; d += 32)
          dot += i < S::kSeq
                     ? load(dout, I::q(b, i, h, d)) * load(o, I::q(b, i, h, d))
                     : 0.0f;
        dot = warpSum(dot);
        if (lane == 0) {
          rowD[ii] = dot;
          rowLse[ii] = i < S::kSeq ? lse[I::lse(b, h, i)] : 0.0f;
        }
      }
      __syncthreads();
      if (!active || (attentionSkipsTiles<S>() && i0 + 31 < j))
        continue;
      const i64 i = i0 + lane;
      const bool visible = i < S::kSeq && attentionSees<S>(i, j, at);
      float p = 0.0f, dS = 0.0f;
      if (visible) {
        float score = 0.0f, dP = 0.0f;
        for (int d = 0; d < S::kDim; ++d) {
          score += qTile[lane * PAD + d] * kRow[d];
          dP += dOTile[lane * PAD + d] * vRow[d];
        }
        p = expf(score * S::kScale - rowLse[lane]);
        dS = p * (dP - rowD[lane]);
      }
      for (int ii = 0; ii < 32; ++ii) {
        float pi = __shfl_sync(0xffffffffu, p, ii);
        float dSi = __shfl_sync(0xffffffffu, dS, ii);
        for (int t = 0; t < PER_LANE; ++t) {
          int d = lane + 32 * t;
          if (d < S::kDim) {
            dvAcc[t] += pi * dOTile[ii * PAD + d];
            dkAcc[t] += dSi * qTile[ii * PAD + d];
          }
        }
      }
    }
  }
  if (!active)
    return;
  for (int t = 0; t < PER_LANE; ++t) {
    int d = lane + 32 * t;
    if (d < S::kDim) {
      store(dk, I::kv(b, j, g, d), dkAcc[t] * S::kScale);
      store(dv, I::kv(b, j, g, d), dvAcc[t]);
    }
  }
}

// The ring's merge of a step's attention into the merge so far (o, lse),
// by the rows' log-sum-exps: a warp a query row, which reads the row's
// lse before one lane writes it. Grid: (query blocks of 4, heads, batch);
// 4 warps.
template <class S, typename TS, typename TO>
__device__ __forceinline__ void
attentionMergeSimt(const TS *oStep, const float *lseStep, TO *o, float *lse) {
  using I = AttentionIndex<S>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const i64 b = blockIdx.z, h = blockIdx.y;
  const i64 i = blockIdx.x * (i64)kAttentionSimtRows + warp;
  if (i >= S::kSeq)
    return;
  const float rowLse = lse[I::lse(b, h, i)], stepLse = lseStep[I::lse(b, h, i)];
  const float m = fmaxf(rowLse, stepLse);
  // Neither has seen a key: o = 0, lse stays −∞.
  const bool seen = m != -__uint_as_float(0x7f800000u);
  const float w = seen ? expf(rowLse - m) : 0.0f;
  const float wStep = seen ? expf(stepLse - m) : 0.0f;
  const float inverse = seen ? 1.0f / (w + wStep) : 0.0f;
  for (i64 d = lane; d < S::kDim; d += 32) {
    const i64 at = I::q(b, i, h, d);
    store(o, at,
          seen ? (w * load(o, at) + wStep * load(oStep, at)) * inverse : 0.0f);
  }
  __syncwarp();
  if (lane == 0 && seen)
    lse[I::lse(b, h, i)] = m + logf(w + wStep);
}
