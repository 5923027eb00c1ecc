//===- EmitAttentionMma.cpp - flash attention on tensor cores -------------===//
//
// The bf16 attention kernels, forward and backward, on the warp-level
// tensor-core product of sm_80 and later (mma.sync m16n8k16, bf16 operands,
// f32 accumulators), in the flash-attention-2 arrangement: a block of four
// warps, each warp owning 16 rows; the other side's rows come 32 at a time
// into shared memory. The forward's scores S = Q·Kᵀ stay in the
// accumulators, where the online softmax (running max and sum per row,
// reduced over the four lanes that share a row) turns them into P, which
// is then the A operand of P·V without leaving registers: the accumulator
// layout of two 16x8 products is the A layout of one 16x16. P is rounded
// to bf16 for that product, as flash attention does; the row sums are f32.
//
// The backward keeps the SIMT kernels' split, so that nothing is added
// atomically: blocks [0, QBLOCKS) own query rows and compute
// dQ = scale · dS·K walking the keys; the others own key rows and compute
// dV = Pᵀ·dO and dK = scale · dSᵀ·Q walking the queries of every head that
// reads their kv head, with Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ formed directly
// transposed so that Pᵀ and dSᵀ are A operands in registers too (the
// block's value rows are read from shared memory for dPᵀ, since the two
// accumulators take the registers). Both recompute P from the forward's
// log-sum-exp; dS = P ⊙ (dP − D), D = rowsum(dO ⊙ O).
//
// Shared tiles hold rows of bf16 pairs along the head dimension, padded to
// $WORDS words a row so that a B fragment's eight rows by four words fall
// in distinct banks. The head dimension is padded to a multiple of 16
// with zeros for the products that sum over it.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Attention.h"

#include <algorithm>

namespace strata::codegen {

namespace {

constexpr int64_t kWarps = 4; // warps per block, 16 rows each
constexpr int64_t kBlockRows = 16 * kWarps;
constexpr int64_t kTileRows = 32; // rows of a shared tile
static_assert(kTileRows == 32,
              "queryTileStats (EmitAttention.cpp) covers a tile of 32 queries");

/// The tensor-core kernels' shape: the head dimension padded to 16 and in
/// chunks (16 for the products over it, 8 for those that produce it).
struct MmaShape : AttentionShape {
  int64_t padded, words;
  explicit MmaShape(const View &v)
      : AttentionShape(v), padded((dim + 15) / 16 * 16), words(padded / 2 + 4) {
  }
  std::string apply(std::string_view text) const {
    return AttentionShape::apply(
        fill(text, {{"KCHUNKS", std::to_string(padded / 16)},
                    {"NCHUNKS", std::to_string(dim / 8)},
                    {"PADDED", num(padded)},
                    {"WORDS", num(words)},
                    {"TILE", num(kTileRows)},
                    {"BLOCKROWS", num(kBlockRows)}}));
  }
  /// Bytes of one shared tile.
  uint32_t tileBytes() const { return uint32_t(kTileRows * words * 4); }
};

/// The tensor-core product and the fragment helpers every unit here has.
/// Lane l's fragments, with g = l / 4 and t = l % 4 (the PTX ISA's
/// mma.m16n8k16 layout): a[r] holds row g + 8 (r % 2), columns
/// 2t + 8 (r / 2) and the next; b[r] column g, rows 2t + 8 r and the
/// next; d[r] row g + 8 (r / 2), column 2t + r % 2.
constexpr const char *kHelpers = R"(
// d += a·b, one warp's 16x16 by 16x8 bf16 product with f32 accumulators.
// The simt model (runtime/simt) brings its own, with the same fragments.
#ifndef STRATA_SIMT
__device__ __forceinline__ void mmaBf16(float d[4], const unsigned a[4],
                                        const unsigned b[2]) {
  asm("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
#endif

// Two bf16 as one word, the first in the low half.
__device__ __forceinline__ unsigned packBf16(float lo, float hi) {
  return (unsigned)toBf16(lo) | ((unsigned)toBf16(hi) << 16);
}
__device__ __forceinline__ unsigned pairAt(const bf16 *p, i64 i) {
  return (unsigned)p[i] | ((unsigned)p[i + 1] << 16);
}
// Element d of a tile's row, as the 16 bits of a bf16.
__device__ __forceinline__ unsigned halfAt(const unsigned *tile, i64 row,
                                           i64 d) {
  return (tile[row * $WORDS + d / 2] >> (16 * (d & 1))) & 0xFFFFu;
}

// A warp's 16 rows (for a fragment of row-halves `rows`) of a q- or
// kv-shaped operand as A fragments over the head dimension, zero past
// `count` rows and past DIM.
__device__ __forceinline__ void loadRows(unsigned a[$KCHUNKS][4],
                                         const bf16 *p, bool kvShaped, i64 b,
                                         i64 first, i64 head, i64 count,
                                         int g8, int t4) {
#pragma unroll
  for (int c = 0; c < $KCHUNKS; ++c)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      i64 row = first + g8 + 8 * (r & 1), d = c * 16 + 2 * t4 + 8 * (r >> 1);
      bool in = row < count && d < $DIM;
      a[c][r] = in ? pairAt(p, kvShaped ? kvAt(b, row, head, d)
                                        : qAt(b, row, head, d))
                   : 0u;
    }
}

// Rows [first, first + rows) of a q- or kv-shaped operand into a shared
// tile, zero past `count` rows and past DIM; by the whole block.
__device__ __forceinline__ void loadTile(unsigned *tile, const bf16 *p,
                                         bool kvShaped, i64 b, i64 first,
                                         i64 head, i64 count, i64 rows) {
  for (i64 e = threadIdx.x; e < rows * ($PADDED / 2); e += blockDim.x) {
    i64 row = e / ($PADDED / 2), d = 2 * (e % ($PADDED / 2));
    i64 at = first + row;
    bool in = at < count && d < $DIM;
    tile[row * $WORDS + d / 2] =
        in ? pairAt(p, kvShaped ? kvAt(b, at, head, d) : qAt(b, at, head, d))
           : 0u;
  }
}

// s[n] += chunk c of the warp's 16 rows (`aFrag`) · chunk c of the tile's
// 32 rows (the tile's rows are B's columns).
__device__ __forceinline__ void chunkTimesTileRows(float s[4][4],
                                                   const unsigned aFrag[4],
                                                   const unsigned *tile, int c,
                                                   int g8, int t4) {
#pragma unroll
  for (int n = 0; n < 4; ++n) {
    const unsigned *row = tile + (n * 8 + g8) * $WORDS + c * 8 + t4;
    unsigned bFrag[2] = {row[0], row[4]};
    mmaBf16(s[n], aFrag, bFrag);
  }
}

// s[n] = a · tileᵀ: the warp's 16 rows against the tile's 32 rows, summed
// over the head dimension.
__device__ __forceinline__ void timesTileRows(float s[4][4],
                                              const unsigned a[$KCHUNKS][4],
                                              const unsigned *tile, int g8,
                                              int t4) {
#pragma unroll
  for (int n = 0; n < 4; ++n)
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int c = 0; c < $KCHUNKS; ++c)
    chunkTimesTileRows(s, a[c], tile, c, g8, t4);
}

// The same with the warp's 16 rows read from a shared tile (`rows`) a
// chunk at a time instead of held in registers: for the backward's key
// rows, whose two accumulators take the registers.
__device__ __forceinline__ void tileTimesTileRows(float s[4][4],
                                                  const unsigned *rows,
                                                  const unsigned *tile,
                                                  int g8, int t4) {
#pragma unroll
  for (int n = 0; n < 4; ++n)
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
  for (int c = 0; c < $KCHUNKS; ++c) {
    const unsigned *mine = rows + g8 * $WORDS + c * 8 + t4;
    unsigned aFrag[4] = {mine[0], mine[8 * $WORDS], mine[4],
                         mine[8 * $WORDS + 4]};
    chunkTimesTileRows(s, aFrag, tile, c, g8, t4);
  }
}

// acc += p · tile: the warp's 16 rows of weights over the tile's 32 rows
// (p in the accumulator layout of timesTileRows, rounded to bf16 here)
// times the tile's rows, for each head dimension.
__device__ __forceinline__ void timesTile(float acc[$NCHUNKS][4],
                                          const float p[4][4],
                                          const unsigned *tile, int g8,
                                          int t4) {
#pragma unroll
  for (int c = 0; c < 2; ++c) {
    unsigned aFrag[4] = {packBf16(p[2 * c][0], p[2 * c][1]),
                         packBf16(p[2 * c][2], p[2 * c][3]),
                         packBf16(p[2 * c + 1][0], p[2 * c + 1][1]),
                         packBf16(p[2 * c + 1][2], p[2 * c + 1][3])};
    i64 row = c * 16 + 2 * t4;
#pragma unroll
    for (int n = 0; n < $NCHUNKS; ++n) {
      i64 d = n * 8 + g8;
      unsigned bFrag[2] = {
          halfAt(tile, row, d) | (halfAt(tile, row + 1, d) << 16),
          halfAt(tile, row + 8, d) | (halfAt(tile, row + 9, d) << 16)};
      mmaBf16(acc[n], aFrag, bFrag);
    }
  }
}

// The sum (or max) of a row's values over the four lanes that hold it.
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// The warp's 16 rows of a q- or kv-shaped output from the accumulators,
// times `scale` per row-half; rows past `count` left alone.
template <typename T>
__device__ __forceinline__ void storeRows(float acc[$NCHUNKS][4], T *out,
                                          bool kvShaped, i64 b, i64 first,
                                          i64 head, i64 count,
                                          const float scale[2], int g8,
                                          int t4) {
#pragma unroll
  for (int n = 0; n < $NCHUNKS; ++n)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      i64 row = first + g8 + 8 * (r >> 1), d = n * 8 + 2 * t4 + (r & 1);
      if (row < count)
        store(out, kvShaped ? kvAt(b, row, head, d) : qAt(b, row, head, d),
              acc[n][r] * scale[r >> 1]);
    }
}
)";

/// The walk of a warp's 16 query rows (from `first`) over the key tiles
/// they see, the forward's and dQ's: a tile's keys into kTile and values
/// into vTile, by the whole block; a warp whose rows see none of the
/// tile's keys skips it. Opens the loop over tiles (j0).
constexpr const char *kKeyWalk = R"(  i64 lastKey = $KEYS - 1;
  if ($CAUSAL && blockIdx.x * $BLOCKROWS + $BLOCKROWS - 1 < lastKey)
    lastKey = blockIdx.x * $BLOCKROWS + $BLOCKROWS - 1;
  for (i64 j0 = 0; j0 <= lastKey; j0 += $TILE) {
    __syncthreads();
    loadTile(kTile, k, true, b, j0, g, $KEYS, $TILE);
    loadTile(vTile, v, true, b, j0, g, $KEYS, $TILE);
    __syncthreads();
    if ($CAUSAL && j0 > first + 15)
      continue;
)";

/// The launch bounds' blocks per SM: two blocks of 128 threads leave a
/// thread the registers the accumulators need.
constexpr uint32_t kBlocksPerSm = 2;

} // namespace

std::string emitAttentionFwdMma(const LaunchDesc &launch, KernelCode &code) {
  using namespace runtime::kernels::AttentionFwd;
  View v{launch};
  MmaShape s(v);
  code.block = {uint32_t(32 * kWarps), 1, 1};
  code.grid = {blocksFor(s.seq, kBlockRows, 1u << 30), uint32_t(s.heads),
               uint32_t(s.batch)};
  code.blocksPerSm = kBlocksPerSm;
  code.sharedBytes = 2 * s.tileBytes();
  code.globals = s.apply(std::string(kAttentionIndex) + kHelpers);
  code.body = s.apply(std::string(R"(  extern __shared__ unsigned tiles[];
  unsigned *kTile = tiles, *vTile = tiles + $TILE * $WORDS;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int g8 = lane >> 2, t4 = lane & 3;
  i64 b = blockIdx.z, h = blockIdx.y;
  i64 g = (query_head_offset + h) / group_size;
  i64 first = blockIdx.x * $BLOCKROWS + warp * 16;
  unsigned qa[$KCHUNKS][4];
  loadRows(qa, q, false, b, first, h, $SEQ, g8, t4);
  float acc[$NCHUNKS][4];
#pragma unroll
  for (int n = 0; n < $NCHUNKS; ++n)
    acc[n][0] = acc[n][1] = acc[n][2] = acc[n][3] = 0.0f;
  const float none = -__uint_as_float(0x7f800000u);
  float rowMax[2] = {none, none}, rowSum[2] = {0.0f, 0.0f};
)" + std::string(kKeyWalk) + R"(    float p[4][4];
    timesTileRows(p, qa, kTile, g8, t4);
    float tileMax[2] = {none, none};
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        i64 i = first + g8 + 8 * (r >> 1), j = j0 + n * 8 + 2 * t4 + (r & 1);
        bool visible = j < $KEYS && (!$CAUSAL || j <= i);
        p[n][r] = visible ? p[n][r] * $SCALE : none;
        tileMax[r >> 1] = fmaxf(tileMax[r >> 1], p[n][r]);
      }
    float base[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      float newMax = fmaxf(rowMax[x], quadMax(tileMax[x]));
      // A row that has seen no key yet subtracts 0, not -inf.
      base[x] = newMax == none ? 0.0f : newMax;
      float correction = expf(rowMax[x] - base[x]);
      rowMax[x] = newMax;
      rowSum[x] *= correction;
#pragma unroll
      for (int n = 0; n < $NCHUNKS; ++n) {
        acc[n][2 * x] *= correction;
        acc[n][2 * x + 1] *= correction;
      }
    }
#pragma unroll
    for (int n = 0; n < 4; ++n)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        p[n][r] = expf(p[n][r] - base[r >> 1]);
        rowSum[r >> 1] += p[n][r];
      }
    timesTile(acc, p, vTile, g8, t4);
  }
  float inverse[2];
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    rowSum[x] = quadSum(rowSum[x]);
    inverse[x] = 1.0f / rowSum[x];
  }
  storeRows(acc, o, false, b, first, h, $SEQ, inverse, g8, t4);
#pragma unroll
  for (int x = 0; x < 2; ++x) {
    i64 i = first + g8 + 8 * x;
    if (t4 == 0 && i < $SEQ)
      lse[lseAt(b, h, i)] = rowMax[x] + logf(rowSum[x]);
  }
)"));
  return "";
}

std::string emitAttentionBwdMma(const LaunchDesc &launch, KernelCode &code) {
  using namespace runtime::kernels::AttentionBwd;
  View v{launch};
  MmaShape s(v);
  int64_t queryBlocks = (s.seq + kBlockRows - 1) / kBlockRows;
  int64_t keyBlocks = (s.keys + kBlockRows - 1) / kBlockRows;
  code.block = {uint32_t(32 * kWarps), 1, 1};
  code.grid = {uint32_t(queryBlocks + keyBlocks),
               uint32_t(std::max(s.heads, s.kvHeads)), uint32_t(s.batch)};
  code.blocksPerSm = kBlocksPerSm;
  code.sharedBytes = 2 * s.tileBytes() + 2 * kTileRows * 4 +
                     uint32_t(kBlockRows * s.words * 4);
  code.globals = s.apply(std::string(kAttentionIndex) + kHelpers);
  code.body = s.apply(fill(R"(  extern __shared__ unsigned tiles[];
  unsigned *tileA = tiles, *tileB = tiles + $TILE * $WORDS;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  int g8 = lane >> 2, t4 = lane & 3;
  i64 b = blockIdx.z;
  float acc[$NCHUNKS][4], acc2[$NCHUNKS][4];
#pragma unroll
  for (int n = 0; n < $NCHUNKS; ++n)
#pragma unroll
    for (int r = 0; r < 4; ++r)
      acc[n][r] = acc2[n][r] = 0.0f;
  if (blockIdx.x < $QBLOCKS) {
    // dQ: the warp's 16 query rows against the keys they see.
    unsigned *kTile = tileA, *vTile = tileB;
    i64 h = blockIdx.y;
    if (h >= $HEADS)
      return;
    i64 g = (query_head_offset + h) / group_size;
    i64 first = blockIdx.x * $BLOCKROWS + warp * 16;
    unsigned qa[$KCHUNKS][4], da[$KCHUNKS][4];
    loadRows(qa, q, false, b, first, h, $SEQ, g8, t4);
    loadRows(da, dout, false, b, first, h, $SEQ, g8, t4);
    float rowD[2], rowLse[2];
#pragma unroll
    for (int x = 0; x < 2; ++x) {
      i64 i = first + g8 + 8 * x;
      float dot = 0.0f;
      for (int c = 0; c < $KCHUNKS; ++c)
        for (int e = 0; e < 4; ++e) {
          i64 d = c * 16 + 2 * t4 + 8 * (e >> 1) + (e & 1);
          if (i < $SEQ && d < $DIM)
            dot += load(dout, qAt(b, i, h, d)) * load(o, qAt(b, i, h, d));
        }
      rowD[x] = quadSum(dot);
      rowLse[x] = i < $SEQ ? lse[lseAt(b, h, i)] : 0.0f;
    }
)" + indented(kKeyWalk) + R"(      float ds[4][4], dp[4][4];
      timesTileRows(ds, qa, kTile, g8, t4);
      timesTileRows(dp, da, vTile, g8, t4);
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          i64 i = first + g8 + 8 * (r >> 1), j = j0 + n * 8 + 2 * t4 + (r & 1);
          bool visible = j < $KEYS && (!$CAUSAL || j <= i);
          float p = visible ? expf(ds[n][r] * $SCALE - rowLse[r >> 1]) : 0.0f;
          ds[n][r] = p * (dp[n][r] - rowD[r >> 1]);
        }
      timesTile(acc, ds, kTile, g8, t4);
    }
    const float scale[2] = {$SCALE, $SCALE};
    storeRows(acc, dq, false, b, first, h, $SEQ, scale, g8, t4);
    return;
  }
  // dK and dV: the warp's 16 key rows against the queries that see them,
  // of every query head that reads kv head g; tileA holds queries, tileB
  // their output gradients, then each query's D and log-sum-exp, then the
  // block's value rows (read from there: dK's and dV's accumulators take
  // the registers).
  i64 g = blockIdx.y;
  if (g >= $KVHEADS)
    return;
  float *tileD = (float *)(tileB + $TILE * $WORDS), *tileLse = tileD + $TILE;
  unsigned *valueRows = (unsigned *)(tileLse + $TILE);
  i64 blockFirst = (blockIdx.x - $QBLOCKS) * $BLOCKROWS;
  i64 first = blockFirst + warp * 16;
  unsigned ka[$KCHUNKS][4];
  loadRows(ka, k, true, b, first, g, $KEYS, g8, t4);
  loadTile(valueRows, v, true, b, blockFirst, g, $KEYS, $BLOCKROWS);
  const unsigned *va = valueRows + warp * 16 * $WORDS;
  // Queries before the block's first key see none of its keys.
  i64 firstQuery = $CAUSAL ? blockFirst / $TILE * $TILE : 0;
  for (i64 h = 0; h < $HEADS; ++h) {
    if ((query_head_offset + h) / group_size != g)
      continue;
    for (i64 i0 = firstQuery; i0 < $SEQ; i0 += $TILE) {
      __syncthreads();
      loadTile(tileA, q, false, b, i0, h, $SEQ, $TILE);
      loadTile(tileB, dout, false, b, i0, h, $SEQ, $TILE);
      queryTileStats(tileD, tileLse, dout, o, lse, b, h, i0, $WARPS);
      __syncthreads();
      if ($CAUSAL && i0 + $TILE - 1 < first)
        continue;
      float pt[4][4], dst[4][4];
      timesTileRows(pt, ka, tileA, g8, t4);
      tileTimesTileRows(dst, va, tileB, g8, t4);
#pragma unroll
      for (int n = 0; n < 4; ++n)
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          i64 ii = n * 8 + 2 * t4 + (r & 1), i = i0 + ii;
          i64 j = first + g8 + 8 * (r >> 1);
          bool visible = i < $SEQ && (!$CAUSAL || i >= j);
          float p = visible ? expf(pt[n][r] * $SCALE - tileLse[ii]) : 0.0f;
          pt[n][r] = p;
          dst[n][r] = p * (dst[n][r] - tileD[ii]);
        }
      timesTile(acc2, pt, tileB, g8, t4);
      timesTile(acc, dst, tileA, g8, t4);
    }
  }
  const float scale[2] = {$SCALE, $SCALE}, one[2] = {1.0f, 1.0f};
  storeRows(acc, dk, true, b, first, g, $KEYS, scale, g8, t4);
  storeRows(acc2, dv, true, b, first, g, $KEYS, one, g8, t4);
)",
                           {{"QBLOCKS", num(queryBlocks)},
                            {"WARPS", num(kWarps)}}));
  return "";
}

} // namespace strata::codegen
