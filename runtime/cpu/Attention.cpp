//===- Attention.cpp - causal grouped-query attention ---------------------===//
//
// q [b, s, H, d], k and v [b, t, K, d]; query head h reads kv head
// h / (H/K). With S = q·kᵀ/sqrt(d) (masked above the diagonal when causal)
// and P = softmax(S) by rows:
//   forward   O = P·v
//   backward  D_i = dO_i·O_i;  dS = P ⊙ (dO·vᵀ − D);
//             dq = dS·k/sqrt(d);  dk = dSᵀ·q/sqrt(d);  dv = Pᵀ·dO
// P is recomputed in the backward pass, never stored. A kv head's gradient
// sums over the query heads that read it, in head order.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cmath>
#include <cstring>

namespace strata::runtime::cpu {
namespace {

struct Dims {
  int64_t batch, seq, heads, keys, kvHeads, dim;
  bool causal;
  double scale;

  explicit Dims(const KernelArgs &args) {
    const auto &q = args.inShape(0), &k = args.inShape(1);
    batch = q[0];
    seq = q[1];
    heads = q[2];
    dim = q[3];
    keys = k[1];
    kvHeads = k[2];
    causal = args.flag("causal");
    scale = 1.0 / std::sqrt(double(dim));
  }
  int64_t group() const { return heads / kvHeads; }
  const float *q(const float *base, int64_t b, int64_t i, int64_t h) const {
    return base + ((b * seq + i) * heads + h) * dim;
  }
  const float *kv(const float *base, int64_t b, int64_t j, int64_t g) const {
    return base + ((b * keys + j) * kvHeads + g) * dim;
  }
  int64_t visible(int64_t i) const { return causal ? i + 1 : keys; }
};

float dot(const float *a, const float *b, int64_t n) {
  float sum = 0;
  for (int64_t x = 0; x < n; ++x)
    sum += a[x] * b[x];
  return sum;
}

/// Row i of P for query head h: softmax of the visible scaled scores.
void probabilities(const Dims &d, const float *q, const float *k, int64_t b,
                   int64_t h, int64_t i, float *p) {
  int64_t g = h / d.group(), n = d.visible(i);
  const float *qi = d.q(q, b, i, h);
  float max = -INFINITY;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = static_cast<float>(dot(qi, d.kv(k, b, j, g), d.dim) * d.scale);
    max = p[j] > max ? p[j] : max;
  }
  double sum = 0;
  for (int64_t j = 0; j < n; ++j) {
    p[j] = std::exp(p[j] - max);
    sum += p[j];
  }
  float inverse = static_cast<float>(1.0 / sum);
  for (int64_t j = 0; j < n; ++j)
    p[j] *= inverse;
}

} // namespace

void attentionFwd(const KernelArgs &args) {
  Dims d(args);
  const float *q = args.inF(0), *k = args.inF(1), *v = args.inF(2);
  float *o = args.outF(0);
#pragma omp parallel
  {
    std::vector<float> p(d.keys);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t h = 0; h < d.heads; ++h) {
        int64_t g = h / d.group();
        for (int64_t i = 0; i < d.seq; ++i) {
          probabilities(d, q, k, b, h, i, p.data());
          float *oi = const_cast<float *>(d.q(o, b, i, h));
          std::memset(oi, 0, d.dim * sizeof(float));
          for (int64_t j = 0; j < d.visible(i); ++j) {
            const float *vj = d.kv(v, b, j, g);
            for (int64_t x = 0; x < d.dim; ++x)
              oi[x] += p[j] * vj[x];
          }
        }
      }
  }
}

void attentionBwd(const KernelArgs &args) {
  Dims d(args);
  const float *q = args.inF(0), *k = args.inF(1), *v = args.inF(2),
              *o = args.inF(3), *dout = args.inF(4);
  float *dq = args.outF(0), *dk = args.outF(1), *dv = args.outF(2);
  std::memset(dk, 0, args.outCount(1) * sizeof(float));
  std::memset(dv, 0, args.outCount(2) * sizeof(float));
  float scale = static_cast<float>(d.scale);
#pragma omp parallel
  {
    std::vector<float> p(d.keys), ds(d.keys);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t g = 0; g < d.kvHeads; ++g)
        for (int64_t h = g * d.group(); h < (g + 1) * d.group(); ++h)
          for (int64_t i = 0; i < d.seq; ++i) {
            probabilities(d, q, k, b, h, i, p.data());
            const float *doi = d.q(dout, b, i, h), *oi = d.q(o, b, i, h);
            const float *qi = d.q(q, b, i, h);
            float *dqi = const_cast<float *>(d.q(dq, b, i, h));
            float D = dot(doi, oi, d.dim);
            int64_t n = d.visible(i);
            for (int64_t j = 0; j < n; ++j)
              ds[j] = p[j] * (dot(doi, d.kv(v, b, j, g), d.dim) - D);
            std::memset(dqi, 0, d.dim * sizeof(float));
            for (int64_t j = 0; j < n; ++j) {
              const float *kj = d.kv(k, b, j, g);
              float *dkj = const_cast<float *>(d.kv(dk, b, j, g));
              float *dvj = const_cast<float *>(d.kv(dv, b, j, g));
              float s = ds[j] * scale;
              for (int64_t x = 0; x < d.dim; ++x) {
                dqi[x] += s * kj[x];
                dkj[x] += s * qi[x];
                dvj[x] += p[j] * doi[x];
              }
            }
          }
  }
}

} // namespace strata::runtime::cpu
