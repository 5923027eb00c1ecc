//===- Softmax.cpp - attention's probabilities, computed apart ------------===//
//
// x [..., seq, keys], a row per query (query i = the row's index mod seq):
//   forward   y = exp(x − max) / Σ_j exp(x_j − max); causal: keys j > i
//             masked, y = 0 there
//   backward  dx = y ⊙ (dy − Σ_j y_j·dy_j)
// The scores come scaled from the gemm before (--attention-backend
// unfused). Row sums in double; the exponentials in float, as the fused
// attention kernel's (a double one costs a GPU far more: FP64 is a small
// part of it).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>

namespace strata::runtime::cpu {

void runSoftmaxFwd(const KernelArgs &args) {
  using namespace kernels::SoftmaxFwd;
  const float *x = args.f(op::x);
  float *y = args.f(op::y);
  const auto &shape = args.shape(op::x);
  int64_t keys = shape.back(), seq = shape[shape.size() - 2];
  int64_t rows = args.count(op::x) / keys;
  bool causal = args.flag(attr::causal);
#pragma omp parallel for if (rows * keys > kCostly)
  for (int64_t r = 0; r < rows; ++r) {
    const float *in = x + r * keys;
    float *out = y + r * keys;
    int64_t valid = causal ? std::min(keys, r % seq + 1) : keys;
    float max = -INFINITY;
    for (int64_t j = 0; j < valid; ++j)
      max = std::max(max, in[j]);
    double sum = 0;
    for (int64_t j = 0; j < valid; ++j)
      sum += std::exp(in[j] - max);
    for (int64_t j = 0; j < keys; ++j)
      out[j] = j < valid ? float(std::exp(in[j] - max) / sum) : 0.0f;
  }
}

void runSoftmaxBwd(const KernelArgs &args) {
  using namespace kernels::SoftmaxBwd;
  const float *y = args.f(op::y), *dy = args.f(op::dy);
  float *dx = args.f(op::dx);
  int64_t keys = args.shape(op::y).back();
  int64_t rows = args.count(op::y) / keys;
#pragma omp parallel for if (rows * keys > kCheap)
  for (int64_t r = 0; r < rows; ++r) {
    const float *p = y + r * keys, *g = dy + r * keys;
    double dot = 0;
    for (int64_t j = 0; j < keys; ++j)
      dot += double(p[j]) * g[j];
    for (int64_t j = 0; j < keys; ++j)
      dx[r * keys + j] = float(p[j] * (g[j] - dot));
  }
}

} // namespace strata::runtime::cpu
