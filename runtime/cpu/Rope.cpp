//===- Rope.cpp - rotary position embedding -------------------------------===//
//
// x is [batch, seq, heads, d]; for position p and pair i < d/2 the angle is
// θ = p · base^(−2i/d), and
//   y[i]       = x[i]·cos θ − x[i + d/2]·sin θ
//   y[i + d/2] = x[i + d/2]·cos θ + x[i]·sin θ
// (the "rotate half" form). `inverse` rotates by −θ: the transpose of the
// rotation, which is also its gradient. With context parallelism p is the
// row's place in the whole sequence (runtime/plan/ContextPositions.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/ContextPositions.h"

#include <cmath>

namespace strata::runtime::cpu {

void runRope(const KernelArgs &args) {
  using namespace kernels::Rope;
  const std::vector<int64_t> &shape = args.shape(op::x);
  int64_t batch = shape[0], seq = shape[1], heads = shape[2], dim = shape[3];
  int64_t half = dim / 2;
  double base = args.real(attr::base);
  double sign = args.flag(attr::inverse) ? -1.0 : 1.0;
  // Row p's place in the whole sequence: p, or with context parallelism
  // where the rank's chunk puts it.
  int64_t context = args.i(attr::context_parallel),
          rank = args.i(attr::context_rank);
  std::vector<double> cosines(seq * half), sines(seq * half);
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      double place = double(contextPosition(p, seq, context, rank));
      double theta = place * std::pow(base, -2.0 * double(i) / double(dim));
      cosines[p * half + i] = std::cos(theta);
      sines[p * half + i] = sign * std::sin(theta);
    }
  const float *x = args.f(op::x);
  float *y = args.f(op::y);
#pragma omp parallel for collapse(2) if (batch * seq * heads * dim > kCheap)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t p = 0; p < seq; ++p)
      for (int64_t h = 0; h < heads; ++h) {
        int64_t row = ((b * seq + p) * heads + h) * dim;
        for (int64_t i = 0; i < half; ++i) {
          double c = cosines[p * half + i], s = sines[p * half + i];
          double x1 = x[row + i], x2 = x[row + i + half];
          y[row + i] = static_cast<float>(x1 * c - x2 * s);
          y[row + i + half] = static_cast<float>(x2 * c + x1 * s);
        }
      }
}

} // namespace strata::runtime::cpu
