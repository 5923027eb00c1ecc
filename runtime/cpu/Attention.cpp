//===- Attention.cpp - causal grouped-query attention ---------------------===//
//
// q [b, s, H, d], k and v [b, t, K, d]; query head h reads kv head
// h / (H/K). With S = q·kᵀ/sqrt(d) (masked above the diagonal when causal)
// and P = softmax(S) by rows:
//   forward   O = P·v;  lse_i = log Σ_j exp(S_ij), kept [b, H, s]
//   backward  P = exp(S − lse);  D_i = dO_i·O_i;  dS = P ⊙ (dO·vᵀ − D);
//             dq = dS·k/sqrt(d);  dk = dSᵀ·q/sqrt(d);  dv = Pᵀ·dO
// Each head is three or five OpenBLAS gemms with strided operands; P is
// recomputed in the backward pass from the row log-sum-exp (the
// flash-attention contract), never stored. A kv head's gradient sums over
// the query heads that read it, in head order. With context parallelism
// the queries are the rank's two chunks of the sequence and the keys every
// rank's, gathered, or one rank's (the ring's step); the causal mask
// compares their places in it, and a row that sees none of the keys gets
// o = 0 and lse = −∞, which attention_merge then weighs at nothing.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/ContextPositions.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <cstring>

namespace strata::runtime::cpu {
namespace {

struct Dims {
  int64_t batch, seq, heads, keys, kvHeads, dim;
  bool causal;
  float scale;

  /// Forward and backward keep q, k, v and the attributes at the same
  /// positions (KernelCatalog.cpp checks it).
  explicit Dims(const KernelArgs &args) {
    using namespace kernels::AttentionFwd;
    const auto &q = args.shape(op::q), &k = args.shape(op::k);
    batch = q[0];
    seq = q[1];
    heads = q[2];
    dim = q[3];
    keys = k[1];
    kvHeads = k[2];
    causal = args.flag(attr::causal);
    scale = static_cast<float>(attentionScale(dim));
    groupSize = args.i(attr::group_size);
    firstHead = args.i(attr::query_head_offset);
    context = args.i(attr::context_parallel);
    contextRank = args.i(attr::context_rank);
    ringStep = args.i(attr::ring_step);
  }
  /// Whether query row i sees key row j: all of them, or under the causal
  /// mask those at or before it, by their places in the whole sequence
  /// with context parallelism (the queries the rank's chunks, the keys
  /// every rank's in rank order or the ring step's rank's).
  bool sees(int64_t i, int64_t j) const {
    if (!causal)
      return true;
    if (context < 2)
      return j <= i;
    return keyContextPosition(j, seq, keys, context, contextRank, ringStep) <=
           contextPosition(i, seq, context, contextRank);
  }
  int64_t context = 0, contextRank = 0, ringStep = 0;
  /// The kv head query head h reads: with the query's heads split across
  /// ranks and the kv heads whole, h is the rank's local index.
  int64_t kvHead(int64_t h) const { return (firstHead + h) / groupSize; }
  int64_t groupSize, firstHead;
  /// Head h of a query-shaped tensor: rows i at stride heads·dim.
  int64_t qOffset(int64_t b, int64_t h) const {
    return (b * seq * heads + h) * dim;
  }
  int64_t qStride() const { return heads * dim; }
  int64_t kvOffset(int64_t b, int64_t g) const {
    return (b * keys * kvHeads + g) * dim;
  }
  int64_t kvStride() const { return kvHeads * dim; }
  /// Head h's row log-sum-exps in lse [b, H, s].
  int64_t lseOffset(int64_t b, int64_t h) const {
    return (b * heads + h) * seq;
  }
};

/// S = q·kᵀ·scale for one head, [seq, keys].
void scores(const Dims &d, const float *q, const float *k, float *s) {
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d.seq, d.keys, d.dim,
              d.scale, q, d.qStride(), k, d.kvStride(), 0.0f, s, d.keys);
}

/// P = softmax(S) in place for one head, zero where masked; each row's
/// log-sum-exp into `lse`.
void softmax(const Dims &d, float *p, float *lse) {
  for (int64_t i = 0; i < d.seq; ++i) {
    float *row = p + i * d.keys;
    float max = -INFINITY;
    for (int64_t j = 0; j < d.keys; ++j)
      if (d.sees(i, j))
        max = row[j] > max ? row[j] : max;
    if (max == -INFINITY) { // sees no key (a ring step's)
      std::fill(row, row + d.keys, 0.0f);
      lse[i] = -INFINITY;
      continue;
    }
    float sum = 0;
    for (int64_t j = 0; j < d.keys; ++j) {
      row[j] = d.sees(i, j) ? std::exp(row[j] - max) : 0.0f;
      sum += row[j];
    }
    float inverse = 1.0f / sum;
    for (int64_t j = 0; j < d.keys; ++j)
      row[j] *= inverse;
    lse[i] = max + std::log(sum);
  }
}

/// P = exp(S − lse) in place for one head, from the forward's row
/// log-sum-exps; zero where masked.
void probabilitiesFromLse(const Dims &d, float *p, const float *lse) {
  for (int64_t i = 0; i < d.seq; ++i) {
    float *row = p + i * d.keys;
    for (int64_t j = 0; j < d.keys; ++j)
      row[j] = d.sees(i, j) ? std::exp(row[j] - lse[i]) : 0.0f;
  }
}

} // namespace

void runAttentionFwd(const KernelArgs &args) {
  using namespace kernels::AttentionFwd;
  Dims d(args);
  const float *q = args.f(op::q), *k = args.f(op::k), *v = args.f(op::v);
  float *o = args.f(op::o), *lse = args.f(op::lse);
#pragma omp parallel
  {
    std::vector<float> p(d.seq * d.keys);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t h = 0; h < d.heads; ++h) {
        int64_t g = d.kvHead(h);
        scores(d, q + d.qOffset(b, h), k + d.kvOffset(b, g), p.data());
        softmax(d, p.data(), lse + d.lseOffset(b, h));
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.seq, d.dim,
                    d.keys, 1.0f, p.data(), d.keys, v + d.kvOffset(b, g),
                    d.kvStride(), 0.0f, o + d.qOffset(b, h), d.qStride());
      }
  }
}

void runAttentionBwd(const KernelArgs &args) {
  using namespace kernels::AttentionBwd;
  Dims d(args);
  const float *q = args.f(op::q), *k = args.f(op::k), *v = args.f(op::v),
              *o = args.f(op::o), *lse = args.f(op::lse),
              *dout = args.f(op::dout);
  float *dq = args.f(op::dq), *dk = args.f(op::dk), *dv = args.f(op::dv);
  std::memset(dk, 0, args.count(op::dk) * sizeof(float));
  std::memset(dv, 0, args.count(op::dv) * sizeof(float));
#pragma omp parallel
  {
    std::vector<float> p(d.seq * d.keys), ds(d.seq * d.keys);
#pragma omp for collapse(2)
    for (int64_t b = 0; b < d.batch; ++b)
      for (int64_t g = 0; g < d.kvHeads; ++g) {
        const float *kg = k + d.kvOffset(b, g), *vg = v + d.kvOffset(b, g);
        float *dkg = dk + d.kvOffset(b, g), *dvg = dv + d.kvOffset(b, g);
        for (int64_t h = 0; h < d.heads; ++h) {
          if (d.kvHead(h) != g)
            continue;
          const float *qh = q + d.qOffset(b, h), *oh = o + d.qOffset(b, h),
                      *doh = dout + d.qOffset(b, h);
          scores(d, qh, kg, p.data());
          probabilitiesFromLse(d, p.data(), lse + d.lseOffset(b, h));
          // dP = dO·vᵀ, then dS = P ⊙ (dP − D) row by row.
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, d.seq, d.keys,
                      d.dim, 1.0f, doh, d.qStride(), vg, d.kvStride(), 0.0f,
                      ds.data(), d.keys);
          for (int64_t i = 0; i < d.seq; ++i) {
            const float *doi = doh + i * d.qStride(),
                        *oi = oh + i * d.qStride();
            float D = 0;
            for (int64_t x = 0; x < d.dim; ++x)
              D += doi[x] * oi[x];
            float *dsi = ds.data() + i * d.keys;
            const float *pi = p.data() + i * d.keys;
            for (int64_t j = 0; j < d.keys; ++j)
              dsi[j] = pi[j] * (dsi[j] - D);
          }
          cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, d.seq, d.dim,
                      d.keys, d.scale, ds.data(), d.keys, kg, d.kvStride(),
                      0.0f, dq + d.qOffset(b, h), d.qStride());
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.keys, d.dim,
                      d.seq, d.scale, ds.data(), d.keys, qh, d.qStride(), 1.0f,
                      dkg, d.kvStride());
          cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, d.keys, d.dim,
                      d.seq, 1.0f, p.data(), d.keys, doh, d.qStride(), 1.0f,
                      dvg, d.kvStride());
        }
      }
  }
}

void runAttentionMerge(const KernelArgs &args) {
  using namespace kernels::AttentionMerge;
  const auto &shape = args.shape(op::o); // [b, s, H, d]
  const int64_t batch = shape[0], seq = shape[1], heads = shape[2],
                dim = shape[3];
  const float *oStep = args.f(op::o_step), *lseStep = args.f(op::lse_step);
  float *o = args.f(op::o), *lse = args.f(op::lse);
#pragma omp parallel for collapse(2)
  for (int64_t b = 0; b < batch; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < seq; ++i) {
        float &rowLse = lse[(b * heads + h) * seq + i];
        float stepLse = lseStep[(b * heads + h) * seq + i];
        float m = std::max(rowLse, stepLse);
        float *row = o + ((b * seq + i) * heads + h) * dim;
        const float *stepRow = oStep + ((b * seq + i) * heads + h) * dim;
        if (m == -INFINITY) { // neither has seen a key
          std::fill(row, row + dim, 0.0f);
          continue;
        }
        float w = std::exp(rowLse - m), wStep = std::exp(stepLse - m);
        float inverse = 1.0f / (w + wStep);
        for (int64_t x = 0; x < dim; ++x)
          row[x] = (w * row[x] + wStep * stepRow[x]) * inverse;
        rowLse = m + std::log(w + wStep);
      }
}

} // namespace strata::runtime::cpu
