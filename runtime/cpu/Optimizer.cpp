//===- Optimizer.cpp - gradient norm, clipping, AdamW ---------------------===//
//
//   sum_squares       s = Σ g²  (double)
//   clip_coefficient  norm = sqrt(s); c = min(1, clip / (norm + 1e-6)),
//                     1 without clipping (Megatron's and torch's rule)
//   adamw             g ← g·c; p ← p·(1 − lr·wd) (decayed tensors only);
//                     m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²;
//                     p ← p − (lr / (1 − β1^t)) · m / (sqrt(v)/sqrt(1 − β2^t) + ε)
// in the order and precision torch.optim.AdamW computes them, on the fp32
// master; a bf16 parameter is then the master rounded.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>

namespace strata::runtime::cpu {

void sumSquares(const KernelArgs &args) {
  const float *g = args.inF(0);
  int64_t n = args.inCount(0);
  double sum = 0;
#pragma omp parallel for reduction(+ : sum) if (n > 65536)
  for (int64_t i = 0; i < n; ++i)
    sum += double(g[i]) * g[i];
  *args.outF(0) = static_cast<float>(sum);
}

void clipCoefficient(const KernelArgs &args) {
  double norm = std::sqrt(double(*args.inF(0)));
  double clip = args.hyper.clipGrad;
  double coefficient = clip > 0 ? std::min(1.0, clip / (norm + 1e-6)) : 1.0;
  *args.outF(0) = static_cast<float>(norm);
  *args.outF(1) = static_cast<float>(coefficient);
}

void adamw(const KernelArgs &args) {
  const Hyper &h = args.hyper;
  const float *grad = args.inF(0);
  float coefficient = *args.inF(1);
  bool master = args.out.size() == 4;
  float *value = args.outF(0), *m = args.outF(1), *v = args.outF(2);
  float *p = master ? args.outF(3) : value;
  int64_t n = args.inCount(0);
  double wd = args.flag("weight_decay") ? h.weightDecay : 0.0;
  float decay = static_cast<float>(1.0 - h.lr * wd);
  float beta1 = static_cast<float>(h.beta1), beta2 = static_cast<float>(h.beta2);
  float oneMinusBeta1 = static_cast<float>(1.0 - h.beta1);
  float oneMinusBeta2 = static_cast<float>(1.0 - h.beta2);
  double correction1 = 1.0 - std::pow(h.beta1, double(h.step));
  double correction2 = 1.0 - std::pow(h.beta2, double(h.step));
  float stepSize = static_cast<float>(h.lr / correction1);
  float correction2Sqrt = static_cast<float>(std::sqrt(correction2));
  float eps = static_cast<float>(h.eps);
  bool clipped = coefficient < 1.0f;
#pragma omp parallel for if (n > 65536)
  for (int64_t i = 0; i < n; ++i) {
    float g = clipped ? grad[i] * coefficient : grad[i];
    float param = p[i] * decay;
    m[i] = m[i] * beta1 + g * oneMinusBeta1;
    v[i] = v[i] * beta2 + g * g * oneMinusBeta2;
    float denom = std::sqrt(v[i]) / correction2Sqrt + eps;
    param -= stepSize * (m[i] / denom);
    p[i] = param;
    if (master)
      value[i] = param; // rounded to bf16 by the backend
  }
}

} // namespace strata::runtime::cpu
