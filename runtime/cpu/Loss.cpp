//===- Loss.cpp - softmax cross-entropy, the mean over tokens -------------===//
//
//   loss   = (1/N) Σ_i (logsumexp(z_i) − z_i[label_i])
//   dz_i   = (softmax(z_i) − onehot(label_i)) · dloss / N
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cmath>

namespace strata::runtime::cpu {

static double logSumExp(const float *row, int64_t vocab) {
  float max = row[0];
  for (int64_t v = 1; v < vocab; ++v)
    max = row[v] > max ? row[v] : max;
  double sum = 0;
  for (int64_t v = 0; v < vocab; ++v)
    sum += std::exp(double(row[v]) - max);
  return max + std::log(sum);
}

void crossEntropyFwd(const KernelArgs &args) {
  const float *logits = args.inF(0);
  const int32_t *labels = args.ids(1);
  int64_t vocab = args.inShape(0).back(), tokens = args.inCount(1);
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (tokens * vocab > 65536)
  for (int64_t i = 0; i < tokens; ++i) {
    const float *row = logits + i * vocab;
    total += logSumExp(row, vocab) - row[labels[i]];
  }
  *args.outF(0) = static_cast<float>(total / double(tokens));
}

void crossEntropyBwd(const KernelArgs &args) {
  const float *logits = args.inF(0);
  const int32_t *labels = args.ids(1);
  double scale = double(*args.inF(2));
  float *grad = args.outF(0);
  int64_t vocab = args.inShape(0).back(), tokens = args.inCount(1);
  double perToken = scale / double(tokens);
#pragma omp parallel for if (tokens * vocab > 65536)
  for (int64_t i = 0; i < tokens; ++i) {
    const float *row = logits + i * vocab;
    double lse = logSumExp(row, vocab);
    for (int64_t v = 0; v < vocab; ++v) {
      double p = std::exp(double(row[v]) - lse);
      grad[i * vocab + v] =
          static_cast<float>((p - (v == labels[i] ? 1.0 : 0.0)) * perToken);
    }
  }
}

} // namespace strata::runtime::cpu
