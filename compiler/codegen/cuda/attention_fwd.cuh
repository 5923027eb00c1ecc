//===- attention_fwd.cuh - flash attention's forward on tensor cores ------===//
//
// Per batch b and query head h, reading kv head g = (query_head_offset + h)
// / group_size:
//   S = q·kᵀ / √dim (causal: key j > query i masked)
//   lse_i = log Σ_j exp(S_ij),  o = exp(S - lse) · v
// without the s×s matrix in memory: FlashAttention-2's forward on mma.sync
// (bf16 operands, f32 accumulators).
//
// A block takes 16 query rows a warp of one (batch, head) and walks the keys
// its rows see, Tiles::kKeys at a time. Key and value tiles come into shared
// memory by cp.async, kStages of them in flight, behind one barrier a tile;
// the warp's query fragments are read from shared memory once (ldmatrix),
// key fragments by ldmatrix and value fragments by ldmatrix.trans. The
// scores stay in the accumulators, where the online softmax (in base 2:
// log2(e) is folded into the scale) turns them into P, which is the A
// operand of P·V without leaving the registers: the accumulator layout of
// two 16x8 products is the A layout of one 16x16. P is rounded to bf16 for
// that product, as flash attention rounds it; the row sums stay f32. Only
// tiles that cross the diagonal or the keys' end are masked, and a causal
// grid runs its longest blocks (the last queries) first.
//
// With context parallelism (Shape::kContext of 2 or more) the queries are
// the rank's two chunks of the sequence and the keys one rank's (the
// ring's step) or every rank's, gathered; the causal mask compares places
// in the sequence (AttentionPlaces), the block walks each run of keys
// whose places rise as far as its last query's place, and a row that sees
// none of the keys gets o = 0 and lse = −∞ (what the ring's merge weighs
// at nothing).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "attention_mma.cuh"

// The forward's tiles: WARPS warps of 16 query rows, TILE_KEYS keys a
// tile, STAGES tiles in flight.
template <int WARPS, int TILE_KEYS, int STAGES> struct AttentionFwdTiles {
  static constexpr int kWarps = WARPS, kThreads = 32 * WARPS;
  static constexpr int kQueries = 16 * WARPS, kKeys = TILE_KEYS;
  static constexpr int kStages = STAGES;
  static_assert(TILE_KEYS % 16 == 0, "a key tile is whole k-chunks of P·V");
  static_assert(STAGES >= 2, "one tile computed while the next lands");
};

// Shape: the launch's constants (kBatch, kSeq, kKeys, kHeads, kKvHeads,
// kDim, kCausal, kContext, kScale = 1/√dim). Grid: (query blocks, heads,
// batch), Tiles::kThreads threads, attentionFwdSharedBytes of dynamic
// shared memory.
template <class Shape, class Tiles, typename TO>
__device__ __forceinline__ void
attentionFwdMma(const bf16 *q, const bf16 *k, const bf16 *v, TO *o, float *lse,
                i64 groupSize, i64 queryHeadOffset, ContextPlace contextPlace) {
  using Places = AttentionPlaces<Shape>;
  constexpr int SEGMENTS = Places::kSegments, SK = Places::kSegmentKeys;
  constexpr int D = Shape::kDim, P = attentionPitch(D);
  constexpr int BQ = Tiles::kQueries, BK = Tiles::kKeys, ST = Tiles::kStages;
  constexpr int KC = attentionPaddedDim(D) / 16; // k-chunks of q·kᵀ
  constexpr int NC = attentionPaddedDim(D) / 8;  // 8-column groups of o
  constexpr int QBLOCKS = (Shape::kSeq + BQ - 1) / BQ;
  constexpr int qStride = Shape::kHeads * D, kvStride = Shape::kKvHeads * D;
  static_assert(D % 8 == 0, "rows move in 16-byte chunks");
  static_assert((i64)Shape::kSeq * qStride < (1LL << 31) &&
                    (i64)Shape::kKeys * kvStride < (1LL << 31),
                "a sample's rows are indexed in 32 bits");
  constexpr float kLog2Scale = Shape::kScale * 1.44269504088896340736f;

  extern __shared__ Bytes16 attentionShared[];
  bf16 *qTile = (bf16 *)attentionShared;
  bf16 *kTiles = qTile + BQ * P, *vTiles = kTiles + ST * BK * P;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g8 = lane >> 2, t4 = lane & 3;
  const int block =
      Shape::kCausal ? QBLOCKS - 1 - (int)blockIdx.x : (int)blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z;
  const int g = (int)((queryHeadOffset + h) / groupSize);
  const int firstQuery = block * BQ, warpFirst = firstQuery + 16 * warp;
  const bf16 *qHead = q + ((i64)b * Shape::kSeq * Shape::kHeads + h) * D;
  const bf16 *kHead = k + ((i64)b * Shape::kKeys * Shape::kKvHeads + g) * D;
  const bf16 *vHead = v + ((i64)b * Shape::kKeys * Shape::kKvHeads + g) * D;

  // The key tiles the block's rows see, a segment's after another's:
  // causal, those of a segment's keys up to the block's last place.
  const Places places(contextPlace);
  const int rowEnd =
      firstQuery + BQ < Shape::kSeq ? firstQuery + BQ : Shape::kSeq;
  const int blockLastPlace = places.query(rowEnd - 1);
  auto tilesIn = [&](int segment) {
    int keys =
        Shape::kCausal ? places.keysThrough(segment, blockLastPlace) : SK;
    return (keys + BK - 1) / BK;
  };
  int tiles = 0;
  for (int segment = 0; segment < SEGMENTS; ++segment)
    tiles += tilesIn(segment);
  // A walk over them: the tile `tile` of segment `segment`.
  struct Walk {
    int segment = 0, tile = -1;
  };
  auto advance = [&](Walk &w) {
    ++w.tile;
    while (w.segment < SEGMENTS && w.tile >= tilesIn(w.segment)) {
      ++w.segment;
      w.tile = 0;
    }
  };
  Walk loading, computing;
  auto loadKeys = [&](int step) { // the next tile, into stage step % ST
    advance(loading);
    int stage = step % ST;
    i64 first = (i64)loading.segment * SK * kvStride;
    loadRowsAsync<D, BK, Tiles::kThreads>(kTiles + stage * BK * P,
                                          kHead + first, kvStride,
                                          loading.tile * BK, SK);
    loadRowsAsync<D, BK, Tiles::kThreads>(vTiles + stage * BK * P,
                                          vHead + first, kvStride,
                                          loading.tile * BK, SK);
  };
  // Group 0: the queries and tile 0; group s: tile s.
  loadRowsAsync<D, BQ, Tiles::kThreads>(qTile, qHead, qStride, firstQuery,
                                        Shape::kSeq);
#pragma unroll
  for (int s = 0; s < ST - 1; ++s) {
    if (s < tiles)
      loadKeys(s);
    cpAsyncCommit();
  }
  // The places of the warp's first and last rows, and of the lane's two.
  const int warpLast =
      warpFirst + 15 < Shape::kSeq ? warpFirst + 15 : Shape::kSeq - 1;
  const int warpFirstPlace =
      places.query(warpFirst < warpLast ? warpFirst : warpLast);
  const int warpLastPlace = places.query(warpLast);
  int rowPlace[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    int i = warpFirst + g8 + 8 * x;
    rowPlace[x] = places.query(i < warpLast ? i : warpLast);
  }

  unsigned qa[KC][4];
  float acc[NC][4];
#pragma unroll
  for (int n = 0; n < NC; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  // Per row-half x (rows g8 and g8 + 8): the running max of the scaled
  // scores (base 2) and this lane's part of the row's sum.
  float rowMax[2] = {minusInfinity(), minusInfinity()}, rowSum[2] = {0, 0};

  for (int step = 0; step < tiles; ++step) {
    cpAsyncWait<ST - 2>(); // this thread's copies of the tile have landed
    __syncthreads();       // everyone's; and everyone is done with step - 1
    if (step == 0) {
#pragma unroll
      for (int c = 0; c < KC; ++c)
        ldmatrixX4(qa[c], qTile + (16 * warp + (lane & 15)) * P + c * 16 +
                              (lane >> 4) * 8);
    }
    // The tile ST - 1 ahead, into the stage step - 1 left.
    if (step + ST - 1 < tiles)
      loadKeys(step + ST - 1);
    cpAsyncCommit();

    advance(computing);
    const int segment = computing.segment, j0 = computing.tile * BK;
    const int tileLast = j0 + BK < SK ? j0 + BK - 1 : SK - 1;
    // A warp whose rows see none of the tile's keys, or that has no rows,
    // skips it.
    if ((Shape::kCausal && places.key(segment, j0) > warpLastPlace) ||
        warpFirst >= Shape::kSeq)
      continue;
    const bf16 *kt = kTiles + (step % ST) * BK * P;
    const bf16 *vt = vTiles + (step % ST) * BK * P;

    // S = q·kᵀ for the warp's 16 rows and the tile's keys: B's columns are
    // key rows, two 8-key groups an ldmatrix.
    float s[BK / 8][4];
#pragma unroll
    for (int n = 0; n < BK / 8; ++n)
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
    for (int c = 0; c < KC; ++c)
#pragma unroll
      for (int n2 = 0; n2 < BK / 16; ++n2) {
        unsigned kb[4];
        ldmatrixX4(kb, kt + (n2 * 16 + (lane & 7) + (lane >> 4) * 8) * P +
                           c * 16 + ((lane >> 3) & 1) * 8);
        mmaBf16(s[2 * n2], qa[c], kb);
        mmaBf16(s[2 * n2 + 1], qa[c], kb + 2);
      }

    // Masks, where the tile crosses the diagonal or the segment's end.
    if ((Shape::kCausal && places.key(segment, tileLast) > warpFirstPlace) ||
        (SK % BK != 0 && j0 + BK > SK)) {
#pragma unroll
      for (int n = 0; n < BK / 8; ++n)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          int j = j0 + n * 8 + 2 * t4 + (r & 1);
          if (j >= SK ||
              (Shape::kCausal && places.key(segment, j) > rowPlace[r >> 1]))
            s[n][r] = minusInfinity();
        }
    }

    // The online softmax: the new max, the old terms scaled down to it.
    float base[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      float tileMax = minusInfinity();
#pragma unroll
      for (int n = 0; n < BK / 8; ++n)
        tileMax = fmaxf(tileMax, fmaxf(s[n][2 * x], s[n][2 * x + 1]));
      float newMax = fmaxf(rowMax[x], quadMax(tileMax) * kLog2Scale);
      // A row that has seen no key yet subtracts 0, not -inf.
      base[x] = newMax == minusInfinity() ? 0.0f : newMax;
      float correction = exp2Fast(rowMax[x] - base[x]);
      rowMax[x] = newMax;
      rowSum[x] *= correction;
#pragma unroll
      for (int n = 0; n < NC; ++n) {
        acc[n][2 * x] *= correction;
        acc[n][2 * x + 1] *= correction;
      }
    }
#pragma unroll
    for (int n = 0; n < BK / 8; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        s[n][r] = exp2Fast(s[n][r] * kLog2Scale - base[r >> 1]);
        rowSum[r >> 1] += s[n][r];
      }

      // o += P·v, 16 keys a k-chunk: B's rows are keys, read transposed.
#pragma unroll
    for (int c = 0; c < BK / 16; ++c) {
      unsigned pa[4] = {packBf16(s[2 * c][0], s[2 * c][1]),
                        packBf16(s[2 * c][2], s[2 * c][3]),
                        packBf16(s[2 * c + 1][0], s[2 * c + 1][1]),
                        packBf16(s[2 * c + 1][2], s[2 * c + 1][3])};
#pragma unroll
      for (int n2 = 0; n2 < NC / 2; ++n2) {
        unsigned vb[4];
        ldmatrixX4Trans(vb,
                        vt + (c * 16 + (lane & 7) + ((lane >> 3) & 1) * 8) * P +
                            n2 * 16 + (lane >> 4) * 8);
        mmaBf16(acc[2 * n2], pa, vb);
        mmaBf16(acc[2 * n2 + 1], pa, vb + 2);
      }
    }
  }
  cpAsyncWait<0>(); // the tail's empty groups

  // o = acc / Σ, and lse = (max + log2 Σ) · ln 2 per row.
  float inverse[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    rowSum[x] = quadSum(rowSum[x]);
    inverse[x] = rowSum[x] > 0.0f ? 1.0f / rowSum[x] : 0.0f;
  }
  TO *oHead = o + ((i64)b * Shape::kSeq * Shape::kHeads + h) * D;
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    int i = warpFirst + g8 + 8 * x;
    if (i >= Shape::kSeq)
      continue;
#pragma unroll
    for (int n = 0; n < NC; ++n) {
      int d = n * 8 + 2 * t4;
      if (d < D)
        storePair(oHead, i * qStride + d, acc[n][2 * x] * inverse[x],
                  acc[n][2 * x + 1] * inverse[x]);
    }
    if (t4 == 0)
      lse[((i64)b * Shape::kHeads + h) * Shape::kSeq + i] =
          (rowMax[x] + log2f(rowSum[x])) * 0.69314718055994530942f;
  }
}
