//===- Loss.cpp - softmax cross-entropy, the mean over tokens -------------===//
//
//   loss   = (1/N) Σ_i (logsumexp(z_i) − z_i[label_i])
//   dz_i   = (softmax(z_i) − onehot(label_i)) · dloss / N
//
// Columns at or past `vocab_size` are vocabulary padding: out of the
// softmax, zero gradient. The vocabulary-parallel form computes the same
// from three row statistics that the ranks all-reduce between steps (row
// max, target logit, sum of exp(z − max)), each rank over its columns
// [vocab_offset, vocab_offset + columns).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cmath>

namespace strata::runtime::cpu {

/// The columns that are real vocabulary (not padding).
static int64_t validColumns(const KernelArgs &args, int64_t columns,
                            int64_t offset = 0) {
  const AttrValue *size = args.instruction.attr("vocab_size");
  if (!size)
    return columns;
  return std::max<int64_t>(0, std::min(columns, size->i - offset));
}

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
  int64_t valid = validColumns(args, vocab);
  double total = 0;
#pragma omp parallel for reduction(+ : total) if (tokens * vocab > 65536)
  for (int64_t i = 0; i < tokens; ++i) {
    const float *row = logits + i * vocab;
    total += logSumExp(row, valid) - row[labels[i]];
  }
  *args.outF(0) = static_cast<float>(total / double(tokens));
}

void crossEntropyBwd(const KernelArgs &args) {
  const float *logits = args.inF(0);
  const int32_t *labels = args.ids(1);
  double scale = double(*args.inF(2));
  float *grad = args.outF(0);
  int64_t vocab = args.inShape(0).back(), tokens = args.inCount(1);
  int64_t valid = validColumns(args, vocab);
  double perToken = scale / double(tokens);
#pragma omp parallel for if (tokens * vocab > 65536)
  for (int64_t i = 0; i < tokens; ++i) {
    const float *row = logits + i * vocab;
    double lse = logSumExp(row, valid);
    for (int64_t v = 0; v < vocab; ++v) {
      double p = v < valid ? std::exp(double(row[v]) - lse) : 0.0;
      grad[i * vocab + v] =
          static_cast<float>((p - (v == labels[i] ? 1.0 : 0.0)) * perToken);
    }
  }
}

namespace {

/// A vocabulary-parallel rank's view of its logits.
struct VocabShard {
  int64_t columns, rows, offset, valid;
  explicit VocabShard(const KernelArgs &args) {
    columns = args.inShape(0).back();
    rows = args.inCount(0) / columns;
    offset = args.instruction.intAttr("vocab_offset");
    valid = validColumns(args, columns, offset);
  }
};

} // namespace

void logitsMax(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.inF(0);
  float *out = args.outF(0);
#pragma omp parallel for if (v.rows * v.columns > 65536)
  for (int64_t i = 0; i < v.rows; ++i) {
    float max = -INFINITY;
    for (int64_t c = 0; c < v.valid; ++c)
      max = std::max(max, logits[i * v.columns + c]);
    out[i] = max;
  }
}

void logitsTarget(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.inF(0);
  const int32_t *labels = args.ids(1);
  float *out = args.outF(0);
  for (int64_t i = 0; i < v.rows; ++i) {
    int64_t c = int64_t(labels[i]) - v.offset;
    out[i] = c >= 0 && c < v.valid ? logits[i * v.columns + c] : 0.0f;
  }
}

void logitsSumExp(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.inF(0), *max = args.inF(1);
  float *out = args.outF(0);
#pragma omp parallel for if (v.rows * v.columns > 65536)
  for (int64_t i = 0; i < v.rows; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < v.valid; ++c)
      sum += std::exp(double(logits[i * v.columns + c]) - max[i]);
    out[i] = static_cast<float>(sum);
  }
}

void crossEntropyFromStats(const KernelArgs &args) {
  const float *max = args.inF(0), *sum = args.inF(1), *target = args.inF(2);
  int64_t rows = args.inCount(0);
  double total = 0;
  for (int64_t i = 0; i < rows; ++i)
    total += std::log(double(sum[i])) + max[i] - target[i];
  *args.outF(0) = static_cast<float>(total / double(rows));
}

void crossEntropyGradFromStats(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.inF(0), *max = args.inF(2), *sum = args.inF(3);
  const int32_t *labels = args.ids(1);
  double perToken = double(*args.inF(4)) / double(v.rows);
  float *grad = args.outF(0);
#pragma omp parallel for if (v.rows * v.columns > 65536)
  for (int64_t i = 0; i < v.rows; ++i) {
    int64_t target = int64_t(labels[i]) - v.offset;
    for (int64_t c = 0; c < v.columns; ++c) {
      double p = c < v.valid
                     ? std::exp(double(logits[i * v.columns + c]) - max[i]) /
                           sum[i]
                     : 0.0;
      grad[i * v.columns + c] =
          static_cast<float>((p - (c == target ? 1.0 : 0.0)) * perToken);
    }
  }
}

} // namespace strata::runtime::cpu
