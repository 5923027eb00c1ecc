//===- Optimizer.cpp - gradient norm, clipping, multi-tensor AdamW --------===//
//
//   sum_squares       s = Σ g² over the segments counted (double)
//   clip_coefficient  norm = sqrt(s); c = min(1, clip / (norm + 1e-6)),
//                     1 without clipping (Megatron's and torch's rule);
//                     c = 0 when the norm is not finite: the step is
//                     skipped (every rank reads the same global norm, so
//                     every rank skips it alike)
//   adamw             per segment of the flat regions the rank owns:
//                     g ← g·c; p ← p·(1 − lr·wd) (decayed segments only);
//                     m ← β1·m + (1 − β1)·g; v ← β2·v + (1 − β2)·g²;
//                     p ← p − (lr / (1 − β1^t)) · m /
//                             (sqrt(v) / sqrt(1 − β2^t) + ε)
// in the order and precision torch.optim.AdamW computes them, on the fp32
// master; a bf16 parameter is then the master rounded. The step's scalars
// come from the hyper operand, computed by the runtime (Hyper.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Ownership.h"

#include <algorithm>
#include <cmath>

namespace strata::runtime::cpu {

using namespace kernels;

void runSumSquares(const KernelArgs &args) {
  using namespace SumSquares;
  const float *g = args.f(op::grads);
  const std::vector<int64_t> &windows = args.list(attr::windows);
  int64_t part = args.i(attr::part);
  // Fixed blocks summed in order: the same result for any thread count.
  constexpr int64_t kBlock = 1 << 15;
  std::vector<std::pair<int64_t, int64_t>> blocks;
  auto add = [&](int64_t begin, int64_t length, int64_t, size_t) {
    for (int64_t b = 0; b < length; b += kBlock)
      blocks.push_back({begin + b, std::min(kBlock, length - b)});
  };
  forEachOwned(args.list(attr::segments), 2, windows, part, add);
  if (args.i(attr::first_part) == 0)
    forEachOwned(args.list(attr::first_segments), 2, windows, part, add);
  std::vector<double> sums(blocks.size());
#pragma omp parallel for if (blocks.size() > 2)
  for (size_t b = 0; b < blocks.size(); ++b) {
    double sum = 0;
    for (int64_t i = blocks[b].first; i < blocks[b].first + blocks[b].second;
         ++i)
      sum += double(g[i]) * g[i];
    sums[b] = sum;
  }
  double total = 0;
  for (double sum : sums)
    total += sum;
  *args.f(op::sum) = static_cast<float>(total);
}

void runClipCoefficient(const KernelArgs &args) {
  using namespace ClipCoefficient;
  double norm = std::sqrt(double(*args.f(op::sum)));
  double clip = args.hyper(op::hyper, kHyperClip);
  double coefficient = !std::isfinite(norm) ? 0.0
                       : clip > 0           ? std::min(1.0, clip / (norm + 1e-6))
                                            : 1.0;
  *args.f(op::norm) = static_cast<float>(norm);
  *args.f(op::coefficient) = static_cast<float>(coefficient);
}

void runAdamW(const KernelArgs &args) {
  using namespace AdamW;
  const float *grad = args.f(op::grads);
  float coefficient = *args.f(op::coefficient);
  bool master = args.has(op::master);
  float *value = args.f(op::params), *m = args.f(op::exp_avg),
        *v = args.f(op::exp_avg_sq);
  float *p = master ? args.f(op::master) : nullptr;
  float beta1 = args.hyper(op::hyper, kHyperBeta1);
  float beta2 = args.hyper(op::hyper, kHyperBeta2);
  float oneMinusBeta1 = args.hyper(op::hyper, kHyperOneMinusBeta1);
  float oneMinusBeta2 = args.hyper(op::hyper, kHyperOneMinusBeta2);
  float stepSize = args.hyper(op::hyper, kHyperStepSize);
  float correction2Sqrt = args.hyper(op::hyper, kHyperCorrection2);
  float eps = args.hyper(op::hyper, kHyperEps);
  // A gradient norm that is not finite: no update, no state changed.
  if (!(coefficient > 0.0f))
    return;
  bool clipped = coefficient < 1.0f;
  const std::vector<int64_t> &segments = args.list(attr::segments);
  float decayFactor = args.hyper(op::hyper, kHyperDecay);
  auto update = [&](int64_t begin, int64_t n, int64_t state, size_t s) {
    float decay = segments[3 * s + 2] ? decayFactor : 1.0f;
    const float *gs = grad + begin;
    float *vs = value + begin, *ms = m + state, *vv = v + state;
    // The fp32 truth: the master, or the (f32) parameter itself.
    float *ps = master ? p + state : vs;
#pragma omp parallel for if (n > kCheap)
    for (int64_t i = 0; i < n; ++i) {
      float g = clipped ? gs[i] * coefficient : gs[i];
      float param = ps[i] * decay;
      ms[i] = ms[i] * beta1 + g * oneMinusBeta1;
      vv[i] = vv[i] * beta2 + g * g * oneMinusBeta2;
      float denom = std::sqrt(vv[i]) / correction2Sqrt + eps;
      param -= stepSize * (ms[i] / denom);
      ps[i] = param;
      if (master)
        vs[i] = param; // rounded to bf16 by the backend
    }
  };
  forEachOwned(segments, 3, args.list(attr::windows), args.i(attr::part),
               update);
}

} // namespace strata::runtime::cpu
