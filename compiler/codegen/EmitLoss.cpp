//===- EmitLoss.cpp - softmax cross-entropy, whole and vocabulary-parallel
//-===//
//
// The math of runtime/cpu/Loss.cpp (exponentials and sums in double, as
// there), a block per row of logits; the gradient kernels recompute the
// softmax from the row statistics and never store it, and the fused ones
// (cross_entropy_with_grad*) compute loss and gradient in one launch, the
// statistics once. The mean over tokens adds the rows' losses in row order
// in one thread, so the loss is the same on every run.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr uint32_t kRowThreads = 256;

/// A kernel with a block per row of `rows` (a grid-stride loop over them).
void perRow(KernelCode &code, int64_t rows, std::string_view body) {
  code.block = {kRowThreads, 1, 1};
  code.grid = {blocksFor(rows, 1, 1u << 20), 1, 1};
  code.body = fill(R"(  for (i64 r = blockIdx.x; r < $ROWS; r += gridDim.x) {
    i64 base = r * $COLUMNS;
$BODY  }
)",
                   {{"ROWS", num(rows)}, {"BODY", std::string(body)}});
}

/// The row's max and sum of exp(z − max) over its first `valid` columns,
/// in every thread.
constexpr const char *kRowSoftmax =
    R"(    float rowMax = -__uint_as_float(0x7f800000u);
    for (i64 c = threadIdx.x; c < valid; c += blockDim.x)
      rowMax = fmaxf(rowMax, load(logits, base + c));
    rowMax = blockMax<$THREADS>(rowMax);
    double rowSum = 0.0;
    for (i64 c = threadIdx.x; c < valid; c += blockDim.x)
      rowSum += exp((double)load(logits, base + c) - rowMax);
    rowSum = blockSum<$THREADS>(rowSum);
)";

/// The row's gradient, (softmax − onehot) · dloss / ROWS, from its
/// log-sum-exp `lse`.
constexpr const char *kGradFromLse =
    R"(    double scale = (double)dloss[0] / $ROWS;
    for (i64 c = threadIdx.x; c < $COLUMNS; c += blockDim.x) {
      double p = c < valid ? exp(load(logits, base + c) - lse) : 0.0;
      store(dlogits, base + c, (float)((p - (c == labels[r] ? 1.0 : 0.0)) * scale));
    }
)";

/// The row's gradient from the all-reduced statistics max[r] and sum[r],
/// over this rank's columns.
constexpr const char *kGradFromStats =
    R"(    i64 own = (i64)labels[r] - vocab_offset;
    double scale = (double)dloss[0] / $ROWS;
    for (i64 c = threadIdx.x; c < $COLUMNS; c += blockDim.x) {
      double p = c < valid ? exp((double)load(logits, base + c) - max[r]) / sum[r] : 0.0;
      store(dlogits, base + c, (float)((p - (c == own ? 1.0 : 0.0)) * scale));
    }
)";

/// After the rows: the mean of rowLoss (a __device__ array the rows
/// filled) into loss[0], added in row order by the grid's last block.
constexpr const char *kMeanOfRows = R"(  if (!lastBlock() || threadIdx.x != 0)
    return;
  double total = 0.0;
  for (i64 r = 0; r < $ROWS; ++r)
    total += __ldcg(&rowLoss[r]);
  loss[0] = (float)(total / $ROWS);
)";

/// The scratch kMeanOfRows reads.
std::string rowLossScratch(int64_t rows) {
  return "__device__ double rowLoss[" + num(rows) + "];\n";
}

/// `valid`: the columns that are vocabulary, not padding, of logits whose
/// first column is vocabulary entry `offset` (0, or a shard's vocab_offset).
std::string validColumns(const char *offset) {
  return fill(
      "  i64 valid = vocab_size - $OFFSET;\n"
      "  valid = valid < 0 ? 0 : valid > $COLUMNS ? $COLUMNS : valid;\n",
      {{"OFFSET", offset}});
}

std::string withShape(std::string text, int64_t columns) {
  return fill(text, {{"COLUMNS", num(columns)},
                     {"THREADS", std::to_string(kRowThreads)}});
}

} // namespace

/// The whole-vocabulary loss kernels, a row a block: the row's softmax
/// statistics, then its loss (into rowLoss, their mean after) and/or the
/// logits' gradient, in one pass over the row for each.
static void crossEntropyRows(KernelCode &code, int64_t columns, int64_t rows,
                             bool loss, bool grad) {
  std::string row =
      std::string(kRowSoftmax) + "    double lse = rowMax + log(rowSum);\n";
  if (loss) {
    code.globals = rowLossScratch(rows);
    row += R"(    if (threadIdx.x == 0) {
      i64 label = labels[r];
      float target = label >= 0 && label < $COLUMNS ? load(logits, base + label) : 0.0f;
      rowLoss[r] = lse - target;
    }
)";
  }
  if (grad)
    row += kGradFromLse;
  perRow(code, rows, row);
  code.body = validColumns("0") + code.body + (loss ? kMeanOfRows : "");
  code.body = withShape(fill(code.body, {{"ROWS", num(rows)}}), columns);
}

std::string emitCrossEntropyFwd(const LaunchDesc &launch, KernelCode &code) {
  using namespace CrossEntropyFwd;
  View v{launch};
  crossEntropyRows(code, v.lastDim(op::logits), v.count(op::labels), true,
                   false);
  return "";
}

std::string emitCrossEntropyBwd(const LaunchDesc &launch, KernelCode &code) {
  using namespace CrossEntropyBwd;
  View v{launch};
  crossEntropyRows(code, v.lastDim(op::logits), v.count(op::labels), false,
                   true);
  return "";
}

std::string emitCrossEntropyWithGrad(const LaunchDesc &launch,
                                     KernelCode &code) {
  using namespace CrossEntropyWithGrad;
  View v{launch};
  crossEntropyRows(code, v.lastDim(op::logits), v.count(op::labels), true,
                   true);
  return "";
}

std::string emitLogitsMax(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t columns = v.lastDim(LogitsMax::op::logits);
  int64_t rows = v.count(LogitsMax::op::logits) / columns;
  perRow(code, rows, R"(    float m = -__uint_as_float(0x7f800000u);
    for (i64 c = threadIdx.x; c < valid; c += blockDim.x)
      m = fmaxf(m, load(logits, base + c));
    m = blockMax<$THREADS>(m);
    if (threadIdx.x == 0)
      max[r] = m;
)");
  code.body = withShape(validColumns("vocab_offset") + code.body, columns);
  return "";
}

std::string emitLogitsTarget(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t columns = v.lastDim(LogitsTarget::op::logits);
  int64_t rows = v.count(LogitsTarget::op::logits) / columns;
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(rows, kThreads), 1, 1};
  code.body =
      withShape(validColumns("vocab_offset") +
                    forEach(rows, R"(    i64 c = (i64)labels[i] - vocab_offset;
    target[i] = c >= 0 && c < valid ? load(logits, i * $COLUMNS + c) : 0.0f;)"),
                columns);
  return "";
}

std::string emitLogitsSumExp(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t columns = v.lastDim(LogitsSumExp::op::logits);
  int64_t rows = v.count(LogitsSumExp::op::logits) / columns;
  perRow(code, rows, R"(    double s = 0.0;
    for (i64 c = threadIdx.x; c < valid; c += blockDim.x)
      s += exp((double)load(logits, base + c) - max[r]);
    s = blockSum<$THREADS>(s);
    if (threadIdx.x == 0)
      sum[r] = (float)s;
)");
  code.body = withShape(validColumns("vocab_offset") + code.body, columns);
  return "";
}

std::string emitCrossEntropyFromStats(const LaunchDesc &launch,
                                      KernelCode &code) {
  int64_t rows = View{launch}.count(CrossEntropyFromStats::op::max);
  // One block: each thread's rows, then the block's sum, in fixed order.
  code.block = {kRowThreads, 1, 1};
  code.body =
      fill(R"(  double total = 0.0;
  for (i64 r = threadIdx.x; r < $ROWS; r += blockDim.x)
    total += log((double)sum[r]) + max[r] - target[r];
  total = blockSum<$THREADS>(total);
  if (threadIdx.x == 0)
    loss[0] = (float)(total / $ROWS);
)",
           {{"ROWS", num(rows)}, {"THREADS", std::to_string(kRowThreads)}});
  return "";
}

/// A vocabulary-parallel shard's gradient from the rows' statistics, a row
/// a block, with the row's loss (into rowLoss, their mean after) if asked.
static void gradFromStatsRows(KernelCode &code, int64_t columns, int64_t rows,
                              bool loss) {
  std::string row;
  if (loss) {
    code.globals = rowLossScratch(rows);
    row = R"(    if (threadIdx.x == 0)
      rowLoss[r] = log((double)sum[r]) + max[r] - target[r];
)";
  }
  perRow(code, rows, row + kGradFromStats);
  code.body = withShape(
      validColumns("vocab_offset") +
          fill(code.body + (loss ? kMeanOfRows : ""), {{"ROWS", num(rows)}}),
      columns);
}

std::string emitCrossEntropyGradFromStats(const LaunchDesc &launch,
                                          KernelCode &code) {
  using namespace CrossEntropyGradFromStats;
  View v{launch};
  int64_t columns = v.lastDim(op::logits);
  gradFromStatsRows(code, columns, v.count(op::logits) / columns, false);
  return "";
}

std::string emitCrossEntropyWithGradFromStats(const LaunchDesc &launch,
                                              KernelCode &code) {
  using namespace CrossEntropyWithGradFromStats;
  View v{launch};
  int64_t columns = v.lastDim(op::logits);
  gradFromStatsRows(code, columns, v.count(op::logits) / columns, true);
  return "";
}

} // namespace strata::codegen
