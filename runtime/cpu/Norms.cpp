//===- Norms.cpp - LayerNorm and RMSNorm over the last dimension ----------===//
//
// LayerNorm: x̂ = (x − μ)·r with r = 1/sqrt(var + ε) (biased variance);
//   y = x̂·w + b.
//   dx = r·(g − mean(g) − x̂·mean(g·x̂)) with g = dy·w;
//   dw = Σ_rows dy·x̂; db = Σ_rows dy.
// RMSNorm: r = 1/sqrt(mean(x²) + ε), x̂ = x·r, y = x̂·w.
//   dx = r·(g − x̂·mean(g·x̂)); dw = Σ_rows dy·x̂.
// Row statistics in double; the weight gradients sum each column over rows
// in order, the same result for any number of threads.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cmath>

namespace strata::runtime::cpu {
namespace {

struct RowStats {
  double mean = 0, rstd = 0;
};

/// Mean (LayerNorm only) and inverse deviation of each row.
std::vector<RowStats> rowStats(const float *x, int64_t rows, int64_t cols,
                               double eps, bool center) {
  std::vector<RowStats> stats(rows);
#pragma omp parallel for if (rows * cols > kCheap)
  for (int64_t r = 0; r < rows; ++r) {
    const float *row = x + r * cols;
    double mean = 0;
    if (center) {
      for (int64_t c = 0; c < cols; ++c)
        mean += row[c];
      mean /= double(cols);
    }
    double var = 0;
    for (int64_t c = 0; c < cols; ++c)
      var += (row[c] - mean) * (row[c] - mean);
    var /= double(cols);
    stats[r] = {mean, 1.0 / std::sqrt(var + eps)};
  }
  return stats;
}

/// Both norms' kernels lead with x and weight, their backward continues
/// dy, dx, dweight alike, and epsilon is the one attribute of each: only
/// LayerNorm's bias, dbias and the forward's y differ.
static_assert(unsigned(kernels::LayerNormFwd::op::weight) ==
                  unsigned(kernels::RmsNormFwd::op::weight) &&
              unsigned(kernels::LayerNormBwd::op::dy) ==
                  unsigned(kernels::RmsNormBwd::op::dy) &&
              unsigned(kernels::LayerNormBwd::op::dx) ==
                  unsigned(kernels::RmsNormBwd::op::dx) &&
              unsigned(kernels::LayerNormBwd::op::dweight) ==
                  unsigned(kernels::RmsNormBwd::op::dweight) &&
              unsigned(kernels::LayerNormFwd::attr::epsilon) ==
                  unsigned(kernels::RmsNormFwd::attr::epsilon) &&
              unsigned(kernels::LayerNormBwd::attr::epsilon) ==
                  unsigned(kernels::RmsNormBwd::attr::epsilon));
void normFwd(const KernelArgs &args, bool layerNorm) {
  using namespace kernels;
  const float *x = args.f(LayerNormFwd::op::x),
              *w = args.f(LayerNormFwd::op::weight);
  const float *b = layerNorm ? args.f(LayerNormFwd::op::bias) : nullptr;
  float *y = args.f(layerNorm ? unsigned(LayerNormFwd::op::y)
                              : unsigned(RmsNormFwd::op::y));
  int64_t cols = args.shape(LayerNormFwd::op::x).back(),
          rows = args.count(LayerNormFwd::op::x) / cols;
  auto stats = rowStats(x, rows, cols, args.real(LayerNormFwd::attr::epsilon),
                        layerNorm);
#pragma omp parallel for if (rows * cols > kCheap)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (x[r * cols + c] - stats[r].mean) * stats[r].rstd;
      y[r * cols + c] =
          static_cast<float>(xhat * w[c] + (layerNorm ? b[c] : 0.0));
    }
}

void normBwd(const KernelArgs &args, bool layerNorm) {
  using namespace kernels;
  const float *x = args.f(LayerNormBwd::op::x),
              *w = args.f(LayerNormBwd::op::weight),
              *dy = args.f(LayerNormBwd::op::dy);
  float *dx = args.f(LayerNormBwd::op::dx),
        *dw = args.f(LayerNormBwd::op::dweight);
  float *db = layerNorm ? args.f(LayerNormBwd::op::dbias) : nullptr;
  int64_t cols = args.shape(LayerNormBwd::op::x).back(),
          rows = args.count(LayerNormBwd::op::x) / cols;
  auto stats = rowStats(x, rows, cols, args.real(LayerNormBwd::attr::epsilon),
                        layerNorm);
#pragma omp parallel for if (rows * cols > kCheap)
  for (int64_t r = 0; r < rows; ++r) {
    const float *xr = x + r * cols, *dyr = dy + r * cols;
    double meanG = 0, meanGX = 0;
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (xr[c] - stats[r].mean) * stats[r].rstd;
      double g = double(dyr[c]) * w[c];
      meanG += g;
      meanGX += g * xhat;
    }
    meanG /= double(cols);
    meanGX /= double(cols);
    for (int64_t c = 0; c < cols; ++c) {
      double xhat = (xr[c] - stats[r].mean) * stats[r].rstd;
      double g = double(dyr[c]) * w[c];
      dx[r * cols + c] = static_cast<float>(
          stats[r].rstd * (g - (layerNorm ? meanG : 0.0) - xhat * meanGX));
    }
  }
#pragma omp parallel for if (rows * cols > kCheap)
  for (int64_t c = 0; c < cols; ++c) {
    double sumW = 0, sumB = 0;
    for (int64_t r = 0; r < rows; ++r) {
      double xhat = (x[r * cols + c] - stats[r].mean) * stats[r].rstd;
      sumW += double(dy[r * cols + c]) * xhat;
      sumB += dy[r * cols + c];
    }
    dw[c] = static_cast<float>(sumW);
    if (layerNorm)
      db[c] = static_cast<float>(sumB);
  }
}

} // namespace

void runLayerNormFwd(const KernelArgs &args) { normFwd(args, true); }
void runLayerNormBwd(const KernelArgs &args) { normBwd(args, true); }
void runRmsNormFwd(const KernelArgs &args) { normFwd(args, false); }
void runRmsNormBwd(const KernelArgs &args) { normBwd(args, false); }

} // namespace strata::runtime::cpu
