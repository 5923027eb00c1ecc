//===- EmitNorms.cpp - LayerNorm and RMSNorm, forward and backward --------===//
//
// The math of runtime/cpu/Norms.cpp (statistics and sums in double), one
// warp per row. The backward's
// weight (and bias) gradients sum each column over all rows: each block
// sums its tile of rows in order into a scratch row of its own, and the
// block that finishes last adds the scratch rows in block order, so the
// result is the same on every run without atomics on the gradients.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr int64_t kWarps = 4;     // rows in flight per block
constexpr int64_t kTileRows = 32; // rows per block in the backward

/// The row statistics every norm kernel starts with: `mean` (zero for
/// RMSNorm) and `rstd` of row `row` at `base`, in each lane of its warp.
constexpr const char *kRowStats = R"(    double mean = 0.0;
    if ($CENTER) {
      double s = 0.0;
      for (i64 c = lane; c < $COLS; c += 32)
        s += load(x, base + c);
      mean = warpSum(s) / (double)$COLS;
    }
    double var = 0.0;
    for (i64 c = lane; c < $COLS; c += 32) {
      double d = load(x, base + c) - mean;
      var += d * d;
    }
    double rstd = 1.0 / sqrt(warpSum(var) / (double)$COLS + $EPS);
)";

} // namespace

// `prologue`: what runs on each element `i` of a row before its norm (a
// fused group's pointwise members); each lane then reads back the elements
// it wrote itself.
std::string emitNormFwdAfter(const LaunchDesc &launch,
                             const std::string &prologue, KernelCode &code) {
  bool layerNorm = launch.kernel == runtime::KernelId::LayerNormFwd;
  View v{launch};
  int64_t cols = v.lastDim(LayerNormFwd::op::x);
  int64_t rows = v.count(LayerNormFwd::op::x) / cols;
  code.block = {uint32_t(32 * kWarps), 1, 1};
  code.grid = {blocksFor(rows, kWarps, 1u << 30), 1, 1};
  std::string stats =
      fill(kRowStats, {{"CENTER", layerNorm ? "true" : "false"},
                       {"COLS", num(cols)},
                       {"EPS", f64(v.attr(LayerNormFwd::attr::epsilon).f)}});
  code.body =
      fill(R"(  int lane = threadIdx.x & 31;
  i64 row = blockIdx.x * $WARPS + (threadIdx.x >> 5);
  if (row >= $ROWS)
    return;
  i64 base = row * $COLS;
$PROLOGUE$STATS    for (i64 c = lane; c < $COLS; c += 32) {
      double xhat = (load(x, base + c) - mean) * rstd;
      store(y, base + c, (float)(xhat * load(weight, c)$BIAS));
    }
)",
           {{"WARPS", num(kWarps)},
            {"ROWS", num(rows)},
            {"COLS", num(cols)},
            {"STATS", stats},
            {"PROLOGUE", prologue.empty()
                             ? ""
                             : "    for (i64 c = lane; c < " + num(cols) +
                                   "; c += 32) {\n      i64 i = base + c;\n" +
                                   prologue + "    }\n"},
            {"BIAS", layerNorm ? " + load(bias, c)" : ""}});
  return "";
}

namespace {

std::string normBwd(const LaunchDesc &launch, KernelCode &code,
                    bool layerNorm) {
  View v{launch};
  int64_t cols = v.lastDim(LayerNormBwd::op::x);
  int64_t rows = v.count(LayerNormBwd::op::x) / cols;
  uint32_t blocks = blocksFor(rows, kTileRows, 1u << 30);
  int64_t sums = layerNorm ? 2 : 1; // dweight, and dbias
  code.block = {uint32_t(32 * kWarps), 1, 1};
  code.grid = {blocks, 1, 1};
  code.globals = fill("__device__ double scratch[$SIZE];\n",
                      {{"SIZE", num(int64_t(blocks) * cols * sums)}});
  std::string stats =
      fill(kRowStats, {{"CENTER", layerNorm ? "true" : "false"},
                       {"COLS", num(cols)},
                       {"EPS", f64(v.attr(LayerNormBwd::attr::epsilon).f)}});
  code.body =
      fill(R"(  __shared__ double rowMean[$TILE], rowRstd[$TILE];
  int lane = threadIdx.x & 31;
  i64 first = blockIdx.x * $TILE;
  // dx, a warp per row.
  for (i64 t = threadIdx.x >> 5; t < $TILE; t += $WARPS) {
    i64 row = first + t;
    if (row >= $ROWS)
      break;
    i64 base = row * $COLS;
$STATS    double sumG = 0.0, sumGX = 0.0;
    for (i64 c = lane; c < $COLS; c += 32) {
      double xhat = (load(x, base + c) - mean) * rstd;
      double g = (double)load(dy, base + c) * load(weight, c);
      sumG += g;
      sumGX += g * xhat;
    }
    double meanG = $CENTER ? warpSum(sumG) / (double)$COLS : 0.0;
    double meanGX = warpSum(sumGX) / (double)$COLS;
    for (i64 c = lane; c < $COLS; c += 32) {
      double xhat = (load(x, base + c) - mean) * rstd;
      double g = (double)load(dy, base + c) * load(weight, c);
      store(dx, base + c, (float)(rstd * (g - meanG - xhat * meanGX)));
    }
    if (lane == 0) {
      rowMean[t] = mean;
      rowRstd[t] = rstd;
    }
  }
  __syncthreads();
  // This tile's column sums, rows in order.
  i64 last = $ROWS - first < $TILE ? $ROWS - first : $TILE;
  for (i64 c = threadIdx.x; c < $COLS; c += blockDim.x) {
    double w = 0.0, b = 0.0;
    for (i64 t = 0; t < last; ++t) {
      i64 at = (first + t) * $COLS + c;
      double g = load(dy, at);
      w += g * ((load(x, at) - rowMean[t]) * rowRstd[t]);
      b += g;
    }
    scratch[blockIdx.x * $COLS + c] = w;
    if ($CENTER)
      scratch[($BLOCKS + blockIdx.x) * $COLS + c] = b;
  }
  if (!lastBlock())
    return;
  for (i64 c = threadIdx.x; c < $COLS; c += blockDim.x) {
    double w = 0.0, b = 0.0;
    for (i64 k = 0; k < $BLOCKS; ++k) {
      w += __ldcg(&scratch[k * $COLS + c]);
      if ($CENTER)
        b += __ldcg(&scratch[($BLOCKS + k) * $COLS + c]);
    }
    store(dweight, c, (float)w);$DBIAS
  }
)",
           {{"TILE", num(kTileRows)},
            {"WARPS", num(kWarps)},
            {"ROWS", num(rows)},
            {"COLS", num(cols)},
            {"BLOCKS", num(blocks)},
            {"STATS", stats},
            {"CENTER", layerNorm ? "true" : "false"},
            {"DBIAS", layerNorm ? "\n    store(dbias, c, (float)b);" : ""}});
  return "";
}

} // namespace

std::string emitLayerNormFwd(const LaunchDesc &launch, KernelCode &code) {
  return emitNormFwdAfter(launch, "", code);
}
std::string emitRmsNormFwd(const LaunchDesc &launch, KernelCode &code) {
  return emitNormFwdAfter(launch, "", code);
}
std::string emitLayerNormBwd(const LaunchDesc &launch, KernelCode &code) {
  return normBwd(launch, code, true);
}
std::string emitRmsNormBwd(const LaunchDesc &launch, KernelCode &code) {
  return normBwd(launch, code, false);
}

} // namespace strata::codegen
