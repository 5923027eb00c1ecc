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

using namespace kernels;

/// The columns from `offset` that are real vocabulary (not padding).
static int64_t validColumns(int64_t vocab, int64_t columns,
                            int64_t offset = 0) {
  return std::max<int64_t>(0, std::min(columns, vocab - offset));
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

/// Over `tokens` rows of `vocab` logits, `valid` of them real, each row's
/// log-sum-exp once: the mean loss into `*loss` and the gradient for a
/// loss gradient `dloss` into `grad`, where given.
static void crossEntropy(const float *logits, const int32_t *labels,
                         int64_t tokens, int64_t vocab, int64_t valid,
                         float *loss, const float *dloss, float *grad) {
  double total = 0;
  double perToken = grad ? double(*dloss) / double(tokens) : 0.0;
#pragma omp parallel for reduction(+ : total) if (tokens * vocab > kCheap)
  for (int64_t i = 0; i < tokens; ++i) {
    const float *row = logits + i * vocab;
    double lse = logSumExp(row, valid);
    if (loss) {
      // A label is a token of the plan's vocabulary (the loader checks the
      // loss covers it); one outside the row reads nothing.
      int64_t label = labels[i];
      total += lse - (label >= 0 && label < vocab ? row[label] : 0.0f);
    }
    for (int64_t v = 0; grad && v < vocab; ++v) {
      double p = v < valid ? std::exp(double(row[v]) - lse) : 0.0;
      grad[i * vocab + v] =
          static_cast<float>((p - (v == labels[i] ? 1.0 : 0.0)) * perToken);
    }
  }
  if (loss)
    *loss = static_cast<float>(total / double(tokens));
}

void runCrossEntropyFwd(const KernelArgs &args) {
  using namespace CrossEntropyFwd;
  int64_t vocab = args.shape(op::logits).back();
  crossEntropy(args.f(op::logits), args.ids(op::labels), args.count(op::labels),
               vocab, validColumns(args.i(attr::vocab_size), vocab),
               args.f(op::loss), nullptr, nullptr);
}

void runCrossEntropyBwd(const KernelArgs &args) {
  using namespace CrossEntropyBwd;
  int64_t vocab = args.shape(op::logits).back();
  crossEntropy(args.f(op::logits), args.ids(op::labels), args.count(op::labels),
               vocab, validColumns(args.i(attr::vocab_size), vocab), nullptr,
               args.f(op::dloss), args.f(op::dlogits));
}

void runCrossEntropyWithGrad(const KernelArgs &args) {
  using namespace CrossEntropyWithGrad;
  int64_t vocab = args.shape(op::logits).back();
  crossEntropy(args.f(op::logits), args.ids(op::labels), args.count(op::labels),
               vocab, validColumns(args.i(attr::vocab_size), vocab),
               args.f(op::loss), args.f(op::dloss), args.f(op::dlogits));
}

namespace {

/// A vocabulary-parallel rank's view of its logits: the logits come first
/// and the vocabulary attributes at the same positions in each of these
/// kernels (KernelCatalog.cpp checks it).
struct VocabShard {
  int64_t columns, rows, offset, valid;
  explicit VocabShard(const KernelArgs &args) {
    columns = args.shape(LogitsMax::op::logits).back();
    rows = args.count(LogitsMax::op::logits) / columns;
    offset = args.i(LogitsMax::attr::vocab_offset);
    valid = validColumns(args.i(LogitsMax::attr::vocab_size), columns, offset);
  }
};

} // namespace

void runLogitsMax(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.f(LogitsMax::op::logits);
  float *out = args.f(LogitsMax::op::max);
#pragma omp parallel for if (v.rows * v.columns > kCheap)
  for (int64_t i = 0; i < v.rows; ++i) {
    float max = -INFINITY;
    for (int64_t c = 0; c < v.valid; ++c)
      max = std::max(max, logits[i * v.columns + c]);
    out[i] = max;
  }
}

void runLogitsTarget(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.f(LogitsTarget::op::logits);
  const int32_t *labels = args.ids(LogitsTarget::op::labels);
  float *out = args.f(LogitsTarget::op::target);
  for (int64_t i = 0; i < v.rows; ++i) {
    int64_t c = int64_t(labels[i]) - v.offset;
    out[i] = c >= 0 && c < v.valid ? logits[i * v.columns + c] : 0.0f;
  }
}

void runLogitsSumExp(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.f(LogitsSumExp::op::logits),
              *max = args.f(LogitsSumExp::op::max);
  float *out = args.f(LogitsSumExp::op::sum);
#pragma omp parallel for if (v.rows * v.columns > kCheap)
  for (int64_t i = 0; i < v.rows; ++i) {
    double sum = 0;
    for (int64_t c = 0; c < v.valid; ++c)
      sum += std::exp(double(logits[i * v.columns + c]) - max[i]);
    out[i] = static_cast<float>(sum);
  }
}

void runLogitsMaxSum(const KernelArgs &args) {
  VocabShard v(args);
  const float *logits = args.f(LogitsMaxSum::op::logits);
  float *maxOut = args.f(LogitsMaxSum::op::max);
  float *sumOut = args.f(LogitsMaxSum::op::sum);
  bool combine = args.flag(LogitsMaxSum::attr::accumulate);
#pragma omp parallel for if (v.rows * v.columns > kCheap)
  for (int64_t i = 0; i < v.rows; ++i) {
    const float *row = logits + i * v.columns;
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < v.valid; ++c)
      max = std::max(max, double(row[c]));
    for (int64_t c = 0; c < v.valid; ++c)
      sum += std::exp(double(row[c]) - max);
    if (combine) {
      double before = maxOut[i], most = std::max(before, max);
      sum = most == -INFINITY ? 0.0
                              : double(sumOut[i]) * std::exp(before - most) +
                                    sum * std::exp(max - most);
      max = most;
    }
    maxOut[i] = static_cast<float>(max);
    sumOut[i] = static_cast<float>(sum);
  }
}

void runSumExpRescale(const KernelArgs &args) {
  const float *localMax = args.f(SumExpRescale::op::local_max),
              *localSum = args.f(SumExpRescale::op::local_sum),
              *max = args.f(SumExpRescale::op::max);
  float *sum = args.f(SumExpRescale::op::sum);
  for (int64_t i = 0, rows = args.count(SumExpRescale::op::sum); i < rows; ++i)
    sum[i] = localSum[i] == 0.0f
                 ? 0.0f
                 : static_cast<float>(double(localSum[i]) *
                                      std::exp(double(localMax[i]) - max[i]));
}

/// The loss from each row's statistics.
static float crossEntropyFromStats(const float *max, const float *sum,
                                   const float *target, int64_t rows) {
  double total = 0;
  for (int64_t i = 0; i < rows; ++i)
    total += std::log(double(sum[i])) + max[i] - target[i];
  return static_cast<float>(total / double(rows));
}

/// The gradient of this rank's columns from the row statistics.
static void crossEntropyGradFromStats(const VocabShard &v, const float *logits,
                                      const int32_t *labels, const float *max,
                                      const float *sum, float dloss,
                                      float *grad) {
  double perToken = double(dloss) / double(v.rows);
#pragma omp parallel for if (v.rows * v.columns > kCheap)
  for (int64_t i = 0; i < v.rows; ++i) {
    int64_t target = int64_t(labels[i]) - v.offset;
    for (int64_t c = 0; c < v.columns; ++c) {
      double p =
          c < v.valid
              ? std::exp(double(logits[i * v.columns + c]) - max[i]) / sum[i]
              : 0.0;
      grad[i * v.columns + c] =
          static_cast<float>((p - (c == target ? 1.0 : 0.0)) * perToken);
    }
  }
}

void runCrossEntropyFromStats(const KernelArgs &args) {
  using namespace CrossEntropyFromStats;
  *args.f(op::loss) =
      crossEntropyFromStats(args.f(op::max), args.f(op::sum),
                            args.f(op::target), args.count(op::max));
}

void runCrossEntropyGradFromStats(const KernelArgs &args) {
  using namespace CrossEntropyGradFromStats;
  crossEntropyGradFromStats(VocabShard(args), args.f(op::logits),
                            args.ids(op::labels), args.f(op::max),
                            args.f(op::sum), *args.f(op::dloss),
                            args.f(op::dlogits));
}

void runCrossEntropyWithGradFromStats(const KernelArgs &args) {
  using namespace CrossEntropyWithGradFromStats;
  VocabShard v(args);
  *args.f(op::loss) = crossEntropyFromStats(args.f(op::max), args.f(op::sum),
                                            args.f(op::target), v.rows);
  crossEntropyGradFromStats(v, args.f(op::logits), args.ids(op::labels),
                            args.f(op::max), args.f(op::sum),
                            *args.f(op::dloss), args.f(op::dlogits));
}

} // namespace strata::runtime::cpu
