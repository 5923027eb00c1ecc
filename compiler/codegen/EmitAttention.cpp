//===- EmitAttention.cpp - flash attention, forward and backward ----------===//
//
// The flash-attention contract of runtime/cpu/Attention.cpp: no s×s matrix
// in memory; the forward keeps each query row's log-sum-exp, the backward
// recomputes the probabilities from it. Keys are taken 32 at a time into
// shared memory; a warp owns a row (of queries in the forward and for dq,
// of keys for dk and dv). Scores are computed a lane per key (or query),
// outputs a lane per head dimension, and the probabilities pass between
// the two by shuffles. The softmax is online (running max and sum).
//
// These are the SIMT kernels, exact to f32 and correct for any head
// dimension: what fp32 plans run, to verify against the CPU. bf16 launches
// whose head dimension is a multiple of 8 run on tensor cores instead
// (EmitAttentionMma.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Attention.h"

#include <cmath>

namespace strata::codegen {

using namespace runtime::kernels;

AttentionShape::AttentionShape(const View &v) {
  const std::vector<int64_t> &q = v.shape(AttentionFwd::op::q),
                             &k = v.shape(AttentionFwd::op::k);
  batch = q[0];
  seq = q[1];
  heads = q[2];
  dim = q[3];
  keys = k[1];
  kvHeads = k[2];
  causal = v.flag(AttentionFwd::attr::causal);
}

std::string AttentionShape::apply(std::string_view text) const {
  return fill(text, {{"SEQ", num(seq)},
                     {"HEADS", num(heads)},
                     {"KEYS", num(keys)},
                     {"KVHEADS", num(kvHeads)},
                     {"DIM", num(dim)},
                     {"CAUSAL", causal ? "true" : "false"},
                     {"SCALE", f32(1.0 / std::sqrt(double(dim)))}});
}

const char *const kAttentionIndex = R"(
__device__ __forceinline__ i64 qAt(i64 b, i64 i, i64 h, i64 d) {
  return ((b * $SEQ + i) * $HEADS + h) * $DIM + d;
}
__device__ __forceinline__ i64 kvAt(i64 b, i64 j, i64 g, i64 d) {
  return ((b * $KEYS + j) * $KVHEADS + g) * $DIM + d;
}
__device__ __forceinline__ i64 lseAt(i64 b, i64 h, i64 i) {
  return (b * $HEADS + h) * $SEQ + i;
}
// The backward's statistics of queries [i0, i0 + 32) of head h: D = dO·O
// into rowD and the forward's log-sum-exp into rowLse (0 past SEQ); a warp
// per query, the block's `warps` in turn.
template <typename T, typename U>
__device__ void queryTileStats(float *rowD, float *rowLse, const T *dout,
                               const U *o, const float *lse, i64 b, i64 h,
                               i64 i0, int warps) {
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (i64 ii = warp; ii < 32; ii += warps) {
    i64 i = i0 + ii;
    float dot = 0.0f;
    for (i64 d = lane; d < $DIM; d += 32)
      dot += i < $SEQ ? load(dout, qAt(b, i, h, d)) * load(o, qAt(b, i, h, d)) : 0.0f;
    dot = warpSum(dot);
    if (lane == 0) {
      rowD[ii] = dot;
      rowLse[ii] = i < $SEQ ? lse[lseAt(b, h, i)] : 0.0f;
    }
  }
}
)";

bool attentionOnTensorCores(const LaunchDesc &launch) {
  View v{launch};
  std::vector<unsigned> operands = {AttentionFwd::op::q, AttentionFwd::op::k,
                                    AttentionFwd::op::v};
  if (launch.kernel == runtime::KernelId::AttentionBwd)
    operands.push_back(AttentionBwd::op::dout);
  for (unsigned i : operands)
    if (v.op(i).dtype != runtime::DType::BF16)
      return false;
  // Up to 128: past it the accumulators outgrow the registers (a tiling
  // for 256 is for later). The tiles index a sample's rows in 32 bits, and
  // need a row to tile.
  AttentionShape s(v);
  return s.dim % 8 == 0 && s.dim <= 128 && s.seq > 0 && s.keys > 0 &&
         s.seq * s.heads * s.dim < (int64_t(1) << 31) &&
         s.keys * s.kvHeads * s.dim < (int64_t(1) << 31);
}

namespace {

constexpr int64_t kRows = 4; // warps per block: rows in flight

/// The SIMT kernels' shape: a head dimension's elements per lane too.
struct Shape : AttentionShape {
  int64_t perLane;
  explicit Shape(const View &v) : AttentionShape(v), perLane((dim + 31) / 32) {}
  std::string apply(std::string_view text) const {
    return AttentionShape::apply(
        fill(text, {{"PAD", num(dim + 1)},
                    {"PERLANE", std::to_string(perLane)},
                    {"ROWS", num(kRows)}}));
  }
};

/// A query row's walk over the keys it sees (the forward's and dq's): the
/// row's accumulator `acc`, then per tile of 32 keys, loaded into `kTile`
/// (rows padded to PAD, so that a lane per key reads without bank
/// conflicts) and `vTile`, the lane's key `j` and whether row i sees it.
constexpr const char *kQueryWalk = R"(  float acc[$PERLANE];
  for (int t = 0; t < $PERLANE; ++t)
    acc[t] = 0.0f;
  i64 lastKey = $KEYS - 1;
  if ($CAUSAL) {
    i64 lastRow = blockIdx.x * $ROWS + $ROWS - 1;
    lastKey = lastRow < lastKey ? lastRow : lastKey;
  }
  for (i64 j0 = 0; j0 <= lastKey; j0 += 32) {
    __syncthreads();
    for (i64 e = threadIdx.x; e < 32 * $DIM; e += blockDim.x) {
      i64 jj = e / $DIM, d = e % $DIM, j = j0 + jj;
      kTile[jj * $PAD + d] = j < $KEYS ? load(k, kvAt(b, j, g, d)) : 0.0f;
      vTile[jj * $PAD + d] = j < $KEYS ? load(v, kvAt(b, j, g, d)) : 0.0f;
    }
    __syncthreads();
    if (!active || ($CAUSAL && j0 > i))
      continue;
    i64 j = j0 + lane;
    bool visible = j < $KEYS && (!$CAUSAL || j <= i);
)";

/// acc[d] += Σ over the tile's keys jj of $WEIGHT (lane jj's) · $TILE[jj][d],
/// a lane per head dimension; then the walk's loop closes.
constexpr const char *kAccumulate = R"(    for (int jj = 0; jj < 32; ++jj) {
      float w = __shfl_sync(0xffffffffu, $WEIGHT, jj);
      for (int t = 0; t < $PERLANE; ++t) {
        int d = lane + 32 * t;
        if (d < $DIM)
          acc[t] += w * $TILE[jj * $PAD + d];
      }
    }
)";

/// Row i of q-shaped `$OUT` = acc $SCALED.
constexpr const char *kStoreRow = R"(  if (!active)
    return;
  for (int t = 0; t < $PERLANE; ++t) {
    int d = lane + 32 * t;
    if (d < $DIM)
      store($OUT, qAt(b, i, h, d), acc[t]$SCALED);
  }
)";

} // namespace

std::string indented(const std::string &text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if ((i == 0 || text[i - 1] == '\n') && text[i] != '\n')
      out += "  ";
    out += text[i];
  }
  return out;
}

std::string emitAttentionFwd(const LaunchDesc &launch, KernelCode &code) {
  if (attentionOnTensorCores(launch))
    return emitAttentionFwdMma(launch, code);
  View v{launch};
  Shape s(v);
  code.block = {uint32_t(32 * kRows), 1, 1};
  code.grid = {blocksFor(s.seq, kRows, 1u << 30), uint32_t(s.heads),
               uint32_t(s.batch)};
  code.sharedBytes = uint32_t((2 * 32 * (s.dim + 1) + kRows * s.dim) * 4);
  code.globals = s.apply(kAttentionIndex);
  code.body = s.apply(std::string(R"(  extern __shared__ float tiles[];
  float *kTile = tiles, *vTile = kTile + 32 * $PAD, *qRow = vTile + 32 * $PAD;
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  i64 b = blockIdx.z, h = blockIdx.y;
  i64 i = blockIdx.x * $ROWS + warp;
  bool active = i < $SEQ;
  i64 g = (query_head_offset + h) / group_size;
  qRow += warp * $DIM;
  for (i64 d = lane; d < $DIM; d += 32)
    qRow[d] = active ? load(q, qAt(b, i, h, d)) : 0.0f;
  float rowMax = -__uint_as_float(0x7f800000u), rowSum = 0.0f;
)") + kQueryWalk + R"(    float score = -__uint_as_float(0x7f800000u);
    if (visible) {
      float dot = 0.0f;
      for (int d = 0; d < $DIM; ++d)
        dot += qRow[d] * kTile[lane * $PAD + d];
      score = dot * $SCALE;
    }
    float newMax = fmaxf(rowMax, warpMax(score));
    float p = visible ? expf(score - newMax) : 0.0f;
    float correction = expf(rowMax - newMax);
    rowSum = rowSum * correction + warpSum(p);
    for (int t = 0; t < $PERLANE; ++t)
      acc[t] *= correction;
)" + fill(kAccumulate, {{"WEIGHT", "p"}, {"TILE", "vTile"}}) +
                      R"(    rowMax = newMax;
  }
)" + fill(kStoreRow, {{"OUT", "o"}, {"SCALED", " / rowSum"}}) +
                      R"(  if (lane == 0)
    lse[lseAt(b, h, i)] = rowMax + logf(rowSum);
)");
  return "";
}

std::string emitAttentionBwd(const LaunchDesc &launch, KernelCode &code) {
  if (attentionOnTensorCores(launch))
    return emitAttentionBwdMma(launch, code);
  View v{launch};
  Shape s(v);
  int64_t queryBlocks = (s.seq + kRows - 1) / kRows;
  int64_t keyBlocks = (s.keys + kRows - 1) / kRows;
  code.block = {uint32_t(32 * kRows), 1, 1};
  // Blocks [0, queryBlocks) compute dq, a warp per query row; the others
  // dk and dv, a warp per key row. Neither writes what the other reads.
  code.grid = {uint32_t(queryBlocks + keyBlocks),
               uint32_t(std::max(s.heads, s.kvHeads)), uint32_t(s.batch)};
  code.sharedBytes =
      uint32_t((2 * 32 * (s.dim + 1) + 2 * kRows * s.dim + 64) * 4);
  code.globals = s.apply(kAttentionIndex);
  // dq_i = scale · Σ_j dS_ij k_j, dS = P ⊙ (dO·vᵀ − D), D_i = dO_i·O_i.
  std::string queryRows = std::string(R"(i64 h = blockIdx.y;
if (h >= $HEADS)
  return;
float *kTile = tiles, *vTile = kTile + 32 * $PAD;
float *qRow = vTile + 32 * $PAD + warp * $DIM;
float *dORow = vTile + 32 * $PAD + $ROWS * $DIM + warp * $DIM;
i64 i = blockIdx.x * $ROWS + warp;
bool active = i < $SEQ;
i64 g = (query_head_offset + h) / group_size;
float dotOut = 0.0f;
for (i64 d = lane; d < $DIM; d += 32) {
  qRow[d] = active ? load(q, qAt(b, i, h, d)) : 0.0f;
  dORow[d] = active ? load(dout, qAt(b, i, h, d)) : 0.0f;
  dotOut += active ? dORow[d] * load(o, qAt(b, i, h, d)) : 0.0f;
}
float rowD = warpSum(dotOut);
float rowLse = active ? lse[lseAt(b, h, i)] : 0.0f;
)");
  queryRows = indented(queryRows) + kQueryWalk + R"(    float dS = 0.0f;
    if (visible) {
      float score = 0.0f, dP = 0.0f;
      for (int d = 0; d < $DIM; ++d) {
        score += qRow[d] * kTile[lane * $PAD + d];
        dP += dORow[d] * vTile[lane * $PAD + d];
      }
      float p = expf(score * $SCALE - rowLse);
      dS = p * (dP - rowD);
    }
)" + fill(kAccumulate, {{"WEIGHT", "dS"}, {"TILE", "kTile"}}) +
              "  }\n" +
              fill(kStoreRow, {{"OUT", "dq"}, {"SCALED", " * $SCALE"}});
  code.body = fill(s.apply(R"(  extern __shared__ float tiles[];
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  i64 b = blockIdx.z;
  if (blockIdx.x < $QBLOCKS) {
)" + indented(queryRows) + R"(    return;
  }
  // dk_j = scale · Σ_i dS_ij q_i and dv_j = Σ_i P_ij dO_i over the query
  // heads that read kv head g, in head order.
  i64 g = blockIdx.y;
  if (g >= $KVHEADS)
    return;
  float *qTile = tiles, *dOTile = qTile + 32 * $PAD;
  float *kRow = dOTile + 32 * $PAD + warp * $DIM;
  float *vRow = dOTile + 32 * $PAD + $ROWS * $DIM + warp * $DIM;
  float *rowD = dOTile + 32 * $PAD + 2 * $ROWS * $DIM, *rowLse = rowD + 32;
  i64 firstKey = (blockIdx.x - $QBLOCKS) * $ROWS;
  i64 j = firstKey + warp;
  bool active = j < $KEYS;
  for (i64 d = lane; d < $DIM; d += 32) {
    kRow[d] = active ? load(k, kvAt(b, j, g, d)) : 0.0f;
    vRow[d] = active ? load(v, kvAt(b, j, g, d)) : 0.0f;
  }
  float dkAcc[$PERLANE], dvAcc[$PERLANE];
  for (int t = 0; t < $PERLANE; ++t)
    dkAcc[t] = dvAcc[t] = 0.0f;
  i64 firstQuery = $CAUSAL ? firstKey / 32 * 32 : 0;
  for (i64 h = 0; h < $HEADS; ++h) {
    if ((query_head_offset + h) / group_size != g)
      continue;
    for (i64 i0 = firstQuery; i0 < $SEQ; i0 += 32) {
      __syncthreads();
      for (i64 e = threadIdx.x; e < 32 * $DIM; e += blockDim.x) {
        i64 ii = e / $DIM, d = e % $DIM, i = i0 + ii;
        qTile[ii * $PAD + d] = i < $SEQ ? load(q, qAt(b, i, h, d)) : 0.0f;
        dOTile[ii * $PAD + d] = i < $SEQ ? load(dout, qAt(b, i, h, d)) : 0.0f;
      }
      queryTileStats(rowD, rowLse, dout, o, lse, b, h, i0, $ROWS);
      __syncthreads();
      if (!active || ($CAUSAL && i0 + 31 < j))
        continue;
      i64 i = i0 + lane;
      bool visible = i < $SEQ && (!$CAUSAL || i >= j);
      float p = 0.0f, dS = 0.0f;
      if (visible) {
        float score = 0.0f, dP = 0.0f;
        for (int d = 0; d < $DIM; ++d) {
          score += qTile[lane * $PAD + d] * kRow[d];
          dP += dOTile[lane * $PAD + d] * vRow[d];
        }
        p = expf(score * $SCALE - rowLse[lane]);
        dS = p * (dP - rowD[lane]);
      }
      for (int ii = 0; ii < 32; ++ii) {
        float pi = __shfl_sync(0xffffffffu, p, ii);
        float dSi = __shfl_sync(0xffffffffu, dS, ii);
        for (int t = 0; t < $PERLANE; ++t) {
          int d = lane + 32 * t;
          if (d < $DIM) {
            dvAcc[t] += pi * dOTile[ii * $PAD + d];
            dkAcc[t] += dSi * qTile[ii * $PAD + d];
          }
        }
      }
    }
  }
  if (!active)
    return;
  for (int t = 0; t < $PERLANE; ++t) {
    int d = lane + 32 * t;
    if (d < $DIM) {
      store(dk, kvAt(b, j, g, d), dkAcc[t] * $SCALE);
      store(dv, kvAt(b, j, g, d), dvAcc[t]);
    }
  }
)"),
                   {{"QBLOCKS", num(queryBlocks)}});
  return "";
}

} // namespace strata::codegen
