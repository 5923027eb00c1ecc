//===- attention_bwd.cuh - flash attention's backward on tensor cores -----===//
//
// With P = exp(q·kᵀ / √dim - lse) recomputed from the forward's log-sum-exp
// (causal: key j > query i masked) and D = rowsum(dout ⊙ o):
//   dv = Pᵀ·dout,  dS = P ⊙ (dout·vᵀ - D),
//   dq = dS·k / √dim,  dk = dSᵀ·q / √dim
// (a kv head's gradients summed over its query group), in FlashAttention-2's
// five products: a block holds 16 keys a warp of one (batch, kv head), their
// dK and dV in registers, and walks the queries that see them, of each query
// head that reads the kv head, Tiles::kQueries at a time. Sᵀ = k·qᵀ and
// dPᵀ = v·doutᵀ are formed transposed so that Pᵀ and dSᵀ are, in the
// accumulators, the A operands of dV += Pᵀ·dout and dK += dSᵀ·q; dSᵀ goes
// through shared memory (bf16) for dQ += dS·k. Query and output-gradient
// tiles come by cp.async, kStages in flight; fragments by ldmatrix (.trans
// where a product reads rows as its B's rows).
//
// What crosses blocks, in scratch the unit declares (its flags and counts
// zero when a launch starts, and again when it ends):
// - D of a query tile is computed once, by the tile's first adder (below),
//   which sets the tile's `ready` flag; the others wait for it.
// - dQ of a query tile is the sum of every key block's part, added in a
//   fixed order so the result is the same bits on every run: causal, from
//   the last key block that sees the tile down to block 0 (the order in
//   which they reach it); else from block 0 up. The first adder stores its
//   part to the f32 `dqAccum`, the others add theirs, each after the
//   tile's `turn` counter says the one before it is done, and the last
//   writes dq. Blocks start in index order (the grid runs a causal launch's
//   key blocks last to first), so a block only ever waits for one that
//   started before it.
//
// With context parallelism (Shape::kContext of 2 or more) the queries are
// the rank's two chunks of the sequence and the keys one rank's (the
// ring's step) or every rank's, gathered; the causal mask compares places
// in the sequence (AttentionPlaces). The gathered keys are runs whose
// places rise, one rank's each: the grid takes each run's key blocks in
// turn (causal, last to first), a block walks the query tiles from the
// first whose last place is at or after its first key's, and a query
// tile's adders are, in the grid's order, each run's blocks that see it.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "attention_mma.cuh"

// The backward's tiles: WARPS warps of 16 keys, TILE_QUERIES queries a
// tile, STAGES tiles in flight.
template <int WARPS, int TILE_QUERIES, int STAGES> struct AttentionBwdTiles {
  static constexpr int kWarps = WARPS, kThreads = 32 * WARPS;
  static constexpr int kKeys = 16 * WARPS, kQueries = TILE_QUERIES;
  static constexpr int kStages = STAGES;
  static_assert(TILE_QUERIES % 16 == 0, "a query tile is whole k-chunks");
  static_assert(WARPS % (TILE_QUERIES / 16) == 0,
                "dQ's product splits the tile's rows evenly over the warps");
  static_assert(STAGES >= 2, "one tile computed while the next lands");
};

// The scratch a backward launch shares between its blocks: dQ's f32 sums
// (q-shaped), D per query row ([batch, heads, seq]), and per query tile of
// each (batch, head) the flag that its D is there and the count of key
// blocks that have added their part of its dQ.
struct AttentionBwdScratch {
  float *dqAccum, *rowD;
  int *ready, *turn;
};

// Σ a·b over 8 elements: a 16-byte chunk of a bf16 row in shared memory,
// and the same elements of a row of o in global memory (16-byte loads).
__device__ __forceinline__ float dot8(const bf16 *a, const bf16 *b) {
  Bytes16 x = *(const Bytes16 *)a, y = *(const Bytes16 *)b;
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < 4; ++w)
    sum += __uint_as_float(x.w[w] << 16) * __uint_as_float(y.w[w] << 16) +
           __uint_as_float(x.w[w] & 0xFFFF0000u) *
               __uint_as_float(y.w[w] & 0xFFFF0000u);
  return sum;
}
__device__ __forceinline__ float dot8(const bf16 *a, const float *b) {
  Bytes16 x = *(const Bytes16 *)a;
  Bytes16 y[2] = {*(const Bytes16 *)b, *(const Bytes16 *)(b + 4)};
  float sum = 0.0f;
#pragma unroll
  for (int w = 0; w < 4; ++w)
    sum +=
        __uint_as_float(x.w[w] << 16) * __uint_as_float(y[w / 2].w[w % 2 * 2]) +
        __uint_as_float(x.w[w] & 0xFFFF0000u) *
            __uint_as_float(y[w / 2].w[w % 2 * 2 + 1]);
  return sum;
}

// Shape: the launch's constants (as attentionFwdMma's). Grid: (key blocks,
// kv heads, batch), Tiles::kThreads threads, attentionBwdSharedBytes of
// dynamic shared memory.
template <class Shape, class Tiles, typename TO, typename TDQ, typename TDK,
          typename TDV>
__device__ __forceinline__ void
attentionBwdMma(const bf16 *q, const bf16 *k, const bf16 *v, const TO *o,
                const float *lse, const bf16 *dout, TDQ *dq, TDK *dk, TDV *dv,
                i64 groupSize, i64 queryHeadOffset, ContextPlace contextPlace,
                AttentionBwdScratch scratch) {
  using Places = AttentionPlaces<Shape>;
  constexpr int SEGMENTS = Places::kSegments, SK = Places::kSegmentKeys;
  constexpr int D = Shape::kDim, P = attentionPitch(D);
  constexpr int W = Tiles::kWarps, BK = Tiles::kKeys, BQ = Tiles::kQueries;
  constexpr int ST = Tiles::kStages, T = Tiles::kThreads;
  constexpr int KC = attentionPaddedDim(D) / 16; // k-chunks over dim
  constexpr int NC = attentionPaddedDim(D) / 8;  // 8-column groups of dim
  constexpr int QT = (Shape::kSeq + BQ - 1) / BQ;
  constexpr int NKB = (SK + BK - 1) / BK; // key blocks a segment
  constexpr int SP = BQ + 8; // bf16 a row of dSᵀ in shared memory
  constexpr int qStride = Shape::kHeads * D, kvStride = Shape::kKvHeads * D;
  static_assert(D % 8 == 0, "rows move in 16-byte chunks");
  static_assert((i64)Shape::kSeq * qStride < (1LL << 31) &&
                    (i64)Shape::kKeys * kvStride < (1LL << 31),
                "a sample's rows are indexed in 32 bits");
  constexpr float kLog2e = 1.44269504088896340736f;
  constexpr float kLog2Scale = Shape::kScale * kLog2e;

  extern __shared__ Bytes16 attentionShared[];
  bf16 *kTile = (bf16 *)attentionShared, *vTile = kTile + BK * P;
  bf16 *qTiles = vTile + BK * P, *dOTiles = qTiles + ST * BQ * P;
  bf16 *dsT = dOTiles + ST * BQ * P;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int segment = (int)blockIdx.x / NKB, inSegment = blockIdx.x % NKB;
  const int n = Shape::kCausal ? NKB - 1 - inSegment : inSegment;
  const int g = blockIdx.y, b = blockIdx.z;
  const int keyFirst = n * BK, warpKey = keyFirst + 16 * warp;
  const Places places(contextPlace);

  // The query heads that read kv head g, and the query tiles that see the
  // block's keys (causal: from the tile of the first query at or after its
  // first key's place).
  int headBegin = (int)(g * groupSize - queryHeadOffset);
  int headEnd = (int)((g + 1) * groupSize - queryHeadOffset);
  headBegin = headBegin < 0 ? 0 : headBegin;
  headEnd = headEnd > Shape::kHeads ? Shape::kHeads : headEnd;
  const int queriesBefore =
      Shape::kCausal ? places.queriesBefore(places.key(segment, keyFirst)) : 0;
  const int tileFirst = queriesBefore / BQ;
  const int tilesPerHead = queriesBefore >= Shape::kSeq ? 0 : QT - tileFirst;
  const int steps =
      headEnd > headBegin ? (headEnd - headBegin) * tilesPerHead : 0;

  // The segment's keys: rows [0, SK) from kvHead on.
  const i64 kvHead = ((i64)b * Shape::kKeys * Shape::kKvHeads + g) * D +
                     (i64)segment * SK * kvStride;
  const bf16 *kHead = k + kvHead, *vHead = v + kvHead;
  auto queryHead = [&](int head) {
    return ((i64)b * Shape::kSeq * Shape::kHeads + head) * D;
  };
  auto loadStep = [&](int step) {
    int head = headBegin + step / tilesPerHead;
    int t = tileFirst + step % tilesPerHead, stage = step % ST;
    loadRowsAsync<D, BQ, T>(qTiles + stage * BQ * P, q + queryHead(head),
                            qStride, t * BQ, Shape::kSeq);
    loadRowsAsync<D, BQ, T>(dOTiles + stage * BQ * P, dout + queryHead(head),
                            qStride, t * BQ, Shape::kSeq);
  };
  // The place of query tile t's last query.
  auto tileLastPlace = [&](int t) {
    return places.query((t + 1) * BQ < Shape::kSeq ? (t + 1) * BQ - 1
                                                   : Shape::kSeq - 1);
  };
  // The adders of the dQ of the query tile whose last place is
  // `lastPlace`, in the grid's order, and this block's turn among them:
  // each segment's blocks that see the tile (causal: those whose first
  // key's place is at or before lastPlace).
  auto addersOf = [&](int lastPlace, int &turn) {
    int adders = 0;
    turn = 0;
    for (int s = 0; s < SEGMENTS; ++s) {
      int count = Shape::kCausal
                      ? (places.keysThrough(s, lastPlace) + BK - 1) / BK
                      : NKB;
      if (s < segment)
        turn += count;
      else if (s == segment)
        turn += Shape::kCausal ? count - 1 - n : n;
      adders += count;
    }
    return adders;
  };
  // Group 0: the block's keys and values, and step 0; group s: step s.
  loadRowsAsync<D, BK, T>(kTile, kHead, kvStride, keyFirst, SK);
  loadRowsAsync<D, BK, T>(vTile, vHead, kvStride, keyFirst, SK);
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < steps)
      loadStep(s);
    cpAsyncCommit();
  }

  // The places of the lane's two keys and of the warp's last.
  int keyPlace[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    int j = warpKey + g8 + 8 * x;
    keyPlace[x] = places.key(segment, j < SK ? j : SK - 1);
  }
  const int warpLastPlace =
      places.key(segment, warpKey + 15 < SK ? warpKey + 15 : SK - 1);

  float dkAcc[NC][4], dvAcc[NC][4];
#pragma unroll
  for (int c = 0; c < NC; ++c)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      dkAcc[c][r] = dvAcc[c][r] = 0.0f;

  for (int step = 0; step < steps; ++step) {
    const int head = headBegin + step / tilesPerHead;
    const int t = tileFirst + step % tilesPerHead, i0 = t * BQ;
    cpAsyncWait<ST - 2>(); // this thread's copies of the step have landed
    __syncthreads();       // everyone's; and everyone is done with step - 1
    if (step + ST - 1 < steps)
      loadStep(step + ST - 1);
    cpAsyncCommit();
    const bf16 *qt = qTiles + (step % ST) * BQ * P;
    const bf16 *dot = dOTiles + (step % ST) * BQ * P;

    const int lastPlace = tileLastPlace(t);
    int myTurn;
    const int adders = addersOf(lastPlace, myTurn);
    const int slot = ((b * Shape::kHeads + head) * QT + t);
    float *rowD = scratch.rowD + ((i64)b * Shape::kHeads + head) * Shape::kSeq;

    // D of the tile's queries: the first adder computes it (and says so),
    // the others wait for it below, behind their products. A row's 16-byte
    // chunks go to L lanes (a power of two), 32 / L rows a warp at a time.
    if (myTurn == 0) {
      constexpr int kChunks = D / 8;
      constexpr int L = kChunks >= 32   ? 32
                        : kChunks >= 16 ? 16
                        : kChunks >= 8  ? 8
                        : kChunks >= 4  ? 4
                        : kChunks >= 2  ? 2
                                        : 1;
      const TO *oHead = o + queryHead(head);
      for (int r0 = warp * (32 / L); r0 < BQ; r0 += W * (32 / L)) {
        int r = r0 + lane / L, i = i0 + r;
        float sum = 0.0f;
        if (r < BQ && i < Shape::kSeq)
          for (int c = lane % L; c < kChunks; c += L)
            sum += dot8(dot + r * P + c * 8, oHead + i * qStride + c * 8);
#pragma unroll
        for (int m = L / 2; m > 0; m >>= 1)
          sum += __shfl_xor_sync(0xffffffffu, sum, m);
        if (lane % L == 0 && r < BQ && i < Shape::kSeq)
          rowD[i] = sum;
      }
      __syncthreads();
      if (threadIdx.x == 0) {
        __threadfence();
        releaseFlag(scratch.ready + slot, 1);
      }
    }

    // The lane's queries (columns of Sᵀ): their log-sum-exp, in base 2.
    float lseLog2[BQ / 8][2];
    const float *lseHead = lse + ((i64)b * Shape::kHeads + head) * Shape::kSeq;
#pragma unroll
    for (int c = 0; c < BQ / 8; ++c)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        int i = i0 + c * 8 + 2 * t4 + e;
        lseLog2[c][e] = i < Shape::kSeq ? lseHead[i] * kLog2e : 0.0f;
      }

    // Sᵀ = k·qᵀ and dPᵀ = v·doutᵀ for the warp's 16 keys and the tile's
    // queries; then Pᵀ and dSᵀ in their place. A warp whose keys are all
    // past the keys' end, or (causal) after every query of the tile, has
    // nothing there.
    const bool sees =
        warpKey < SK &&
        (!Shape::kCausal || places.key(segment, warpKey) <= lastPlace);
    float st[BQ / 8][4], dpt[BQ / 8][4];
#pragma unroll
    for (int c = 0; c < BQ / 8; ++c)
#pragma unroll
      for (int r = 0; r < 4; ++r)
        st[c][r] = dpt[c][r] = 0.0f;
    if (sees) {
#pragma unroll
      for (int c = 0; c < KC; ++c) {
        unsigned ka[4], va[4];
        int at = (16 * warp + (lane & 15)) * P + c * 16 + (lane >> 4) * 8;
        ldmatrixX4(ka, kTile + at);
        ldmatrixX4(va, vTile + at);
#pragma unroll
        for (int n2 = 0; n2 < BQ / 16; ++n2) {
          unsigned qb[4], ob[4];
          int row = (n2 * 16 + (lane & 7) + (lane >> 4) * 8) * P + c * 16 +
                    ((lane >> 3) & 1) * 8;
          ldmatrixX4(qb, qt + row);
          ldmatrixX4(ob, dot + row);
          mmaBf16(st[2 * n2], ka, qb);
          mmaBf16(st[2 * n2 + 1], ka, qb + 2);
          mmaBf16(dpt[2 * n2], va, ob);
          mmaBf16(dpt[2 * n2 + 1], va, ob + 2);
        }
      }
    }
    // D, from the first adder: waited for here, behind the products.
    if (myTurn != 0) {
      if (threadIdx.x == 0)
        waitAtLeast(scratch.ready + slot, 1);
      __syncthreads();
    }
    float dRow[BQ / 8][2];
#pragma unroll
    for (int c = 0; c < BQ / 8; ++c)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        int i = i0 + c * 8 + 2 * t4 + e;
        dRow[c][e] = i < Shape::kSeq ? __ldcg(rowD + i) : 0.0f;
      }
    if (sees) {
      const bool masked =
          (Shape::kCausal && places.query(i0) < warpLastPlace) ||
          (Shape::kSeq % BQ != 0 && i0 + BQ > Shape::kSeq) ||
          (SK % BK != 0 && warpKey + 15 >= SK);
#pragma unroll
      for (int c = 0; c < BQ / 8; ++c)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          float p = exp2Fast(st[c][r] * kLog2Scale - lseLog2[c][r & 1]);
          if (masked) {
            int i = i0 + c * 8 + 2 * t4 + (r & 1);
            int j = warpKey + g8 + 8 * (r >> 1);
            if (i >= Shape::kSeq || j >= SK ||
                (Shape::kCausal && places.query(i) < keyPlace[r >> 1]))
              p = 0.0f;
          }
          st[c][r] = p;
          dpt[c][r] = p * (dpt[c][r] - dRow[c][r & 1]);
        }

        // dV += Pᵀ·dout and dK += dSᵀ·q: A from the accumulators (rounded to
        // bf16), B the tile's rows read transposed.
#pragma unroll
      for (int c = 0; c < BQ / 16; ++c) {
        unsigned pa[4] = {packBf16(st[2 * c][0], st[2 * c][1]),
                          packBf16(st[2 * c][2], st[2 * c][3]),
                          packBf16(st[2 * c + 1][0], st[2 * c + 1][1]),
                          packBf16(st[2 * c + 1][2], st[2 * c + 1][3])};
        unsigned sa[4] = {packBf16(dpt[2 * c][0], dpt[2 * c][1]),
                          packBf16(dpt[2 * c][2], dpt[2 * c][3]),
                          packBf16(dpt[2 * c + 1][0], dpt[2 * c + 1][1]),
                          packBf16(dpt[2 * c + 1][2], dpt[2 * c + 1][3])};
#pragma unroll
        for (int n2 = 0; n2 < NC / 2; ++n2) {
          unsigned ob[4], qb[4];
          int row = (c * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                    n2 * 16 + (lane >> 4) * 8;
          ldmatrixX4Trans(ob, dot + row);
          ldmatrixX4Trans(qb, qt + row);
          mmaBf16(dvAcc[2 * n2], pa, ob);
          mmaBf16(dvAcc[2 * n2 + 1], pa, ob + 2);
          mmaBf16(dkAcc[2 * n2], sa, qb);
          mmaBf16(dkAcc[2 * n2 + 1], sa, qb + 2);
        }
      }
    }
    // dSᵀ (bf16, zero where the warp has nothing) into shared memory.
#pragma unroll
    for (int c = 0; c < BQ / 8; ++c)
#pragma unroll
      for (int x = 0; x < 2; ++x)
        *(unsigned *)(dsT + (16 * warp + g8 + 8 * x) * SP + c * 8 + 2 * t4) =
            packBf16(dpt[c][2 * x], dpt[c][2 * x + 1]);
    __syncthreads();

    // This block's part of the tile's dQ, dS·k: warp w takes 16 query rows
    // (w % RG) and column chunks of 16 of the head dimension (w / RG).
    constexpr int RG = BQ / 16, CS = W / RG, CH = KC;
    constexpr int CPW = (CH + CS - 1) / CS; // chunks a warp
    const int rowGroup = warp % RG, firstChunk = (warp / RG) * CPW;
    float dqAcc[2 * CPW][4];
#pragma unroll
    for (int c = 0; c < 2 * CPW; ++c)
      dqAcc[c][0] = dqAcc[c][1] = dqAcc[c][2] = dqAcc[c][3] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      unsigned sa[4];
      ldmatrixX4Trans(sa, dsT + (kk * 16 + (lane & 7) + (lane >> 4) * 8) * SP +
                              rowGroup * 16 + ((lane >> 3) & 1) * 8);
#pragma unroll
      for (int cc = 0; cc < CPW; ++cc) {
        if (CH % CS != 0 && firstChunk + cc >= CH)
          break;
        unsigned kb[4];
        ldmatrixX4Trans(
            kb, kTile + (kk * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                    (firstChunk + cc) * 16 + (lane >> 4) * 8);
        mmaBf16(dqAcc[2 * cc], sa, kb);
        mmaBf16(dqAcc[2 * cc + 1], sa, kb + 2);
      }
    }

    // Added in the tile's order: after the adder before this block.
    if (myTurn > 0 && threadIdx.x == 0)
      waitAtLeast(scratch.turn + slot, myTurn);
    __syncthreads();
    const bool last = myTurn == adders - 1;
    float *accHead = scratch.dqAccum + queryHead(head);
    TDQ *dqHead = dq + queryHead(head);
#pragma unroll
    for (int cc = 0; cc < CPW; ++cc)
#pragma unroll
      for (int half = 0; half < 2; ++half)
#pragma unroll
        for (int x = 0; x < 2; ++x) {
          int i = i0 + rowGroup * 16 + g8 + 8 * x;
          int d = (firstChunk + cc) * 16 + half * 8 + 2 * t4;
          if (firstChunk + cc >= CH || i >= Shape::kSeq || d >= D)
            continue;
          int at = i * qStride + d;
          float a = dqAcc[2 * cc + half][2 * x];
          float c = dqAcc[2 * cc + half][2 * x + 1];
          if (myTurn > 0) {
            a += __ldcg(accHead + at);
            c += __ldcg(accHead + at + 1);
          }
          if (last)
            storePair(dqHead, at, a * Shape::kScale, c * Shape::kScale);
          else
            storePair(accHead, at, a, c);
        }
    __syncthreads();
    if (threadIdx.x == 0) {
      if (last) { // the tile is done: its flags ready for the next launch
        scratch.turn[slot] = 0;
        scratch.ready[slot] = 0;
      } else {
        __threadfence();
        releaseFlag(scratch.turn + slot, myTurn + 1);
      }
    }
  }
  cpAsyncWait<0>(); // the tail's empty groups

  // Query tiles that no key block sees (context parallelism: a ring step's
  // keys all after them) have no adders: the grid's first block writes
  // their dQ, zero. Causal, they are the first tiles.
  if (Places::kByPlace && blockIdx.x == 0) {
    int turn;
    for (int t = 0; t < QT && addersOf(tileLastPlace(t), turn) == 0; ++t)
      for (int head = headBegin; head < headEnd; ++head)
        for (int e = threadIdx.x; e < BQ * (D / 2); e += T) {
          int i = t * BQ + e / (D / 2), d = 2 * (e % (D / 2));
          if (i < Shape::kSeq)
            storePair(dq + queryHead(head), i * qStride + d, 0.0f, 0.0f);
        }
  }

  // dK = scale · Σ dSᵀ·q and dV = Σ Pᵀ·dout for the warp's 16 keys.
  TDK *dkHead = dk + kvHead;
  TDV *dvHead = dv + kvHead;
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    int j = warpKey + g8 + 8 * x;
    if (j >= SK)
      continue;
#pragma unroll
    for (int c = 0; c < NC; ++c) {
      int d = c * 8 + 2 * t4;
      if (d >= D)
        continue;
      storePair(dkHead, j * kvStride + d, dkAcc[c][2 * x] * Shape::kScale,
                dkAcc[c][2 * x + 1] * Shape::kScale);
      storePair(dvHead, j * kvStride + d, dvAcc[c][2 * x], dvAcc[c][2 * x + 1]);
    }
  }
}
