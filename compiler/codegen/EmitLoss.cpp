//===- EmitLoss.cpp - cross-entropy, whole and vocabulary-parallel --------===//
//
// The loss kernels are cuda/loss.cuh's templates: a block per row, the row's
// statistics in one online pass in f32, the gradient in a second, the mean
// over rows added over the grid in a fixed order in two stages. This writes
// a launch's stub and the scratch those sums take. logits_target, a thread
// a row, is written here whole.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr uint32_t kRowThreads = 256;

/// The scratch of a mean over `blocks` blocks (loss.cuh's GridTotal) and
/// the expression that hands it to the template.
std::string totalScratch(int64_t blocks, std::string &globals) {
  int64_t groups = (blocks + kRowThreads - 1) / kRowThreads;
  globals += "\n// The grid's sum of its blocks' losses (loss.cuh).\n"
             "__device__ float lossBlockValues[" +
             num(blocks) + "];\n__device__ float lossGroupValues[" +
             num(groups) + "];\n__device__ unsigned lossGroupDone[" +
             num(groups) + "];\n__device__ unsigned lossGroupsDone[1];\n";
  return "{lossBlockValues, lossGroupValues, lossGroupDone, lossGroupsDone}";
}

/// A block a row: what the row kernels launch with.
void perRow(KernelCode &code, int64_t rows) {
  code.sources = {"loss.cuh"};
  code.block = {kRowThreads, 1, 1};
  code.grid = {uint32_t(rows), 1, 1};
}

/// cross_entropy_fwd, _bwd and _with_grad.
std::string crossEntropyRows(const LaunchDesc &launch, KernelCode &code,
                             int64_t columns, int64_t rows, bool loss,
                             bool grad) {
  perRow(code, rows);
  std::string total = loss ? totalScratch(rows, code.globals) : "{}";
  std::string dtype =
      grad ? ctype(launch.operands[CrossEntropyBwd::op::logits].dtype) : "";
  code.body = "  crossEntropy<" + std::to_string(columns) + ", " +
              std::to_string(kRowThreads) + ", " + (loss ? "true" : "false") +
              ", " + (grad ? "true" : "false") + ">(\n      logits, labels, " +
              (grad ? "dloss" : "(const float *)nullptr") + ", " +
              (loss ? "loss" : "(float *)nullptr") + ", " +
              (grad ? "dlogits" : "(float *)nullptr") + ", " + num(rows) +
              ", vocab_size,\n      aligned16(logits)" +
              (grad ? " && aligned16(dlogits)" : "") + ", " + total + ");\n";
  return "";
}

} // namespace

std::string emitCrossEntropyFwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  return crossEntropyRows(launch, code, v.lastDim(CrossEntropyFwd::op::logits),
                          v.count(CrossEntropyFwd::op::labels), true, false);
}

std::string emitCrossEntropyBwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  return crossEntropyRows(launch, code, v.lastDim(CrossEntropyBwd::op::logits),
                          v.count(CrossEntropyBwd::op::labels), false, true);
}

std::string emitCrossEntropyWithGrad(const LaunchDesc &launch,
                                     KernelCode &code) {
  View v{launch};
  return crossEntropyRows(
      launch, code, v.lastDim(CrossEntropyWithGrad::op::logits),
      v.count(CrossEntropyWithGrad::op::labels), true, true);
}

namespace {

/// logits_max and logits_sum_exp: a row's statistic over this rank's
/// columns.
std::string rowStat(const LaunchDesc &launch, KernelCode &code, bool sum) {
  View v{launch};
  int64_t columns = v.lastDim(LogitsMax::op::logits);
  int64_t rows = v.count(LogitsMax::op::logits) / columns;
  perRow(code, rows);
  code.body = "  logitsRowStat<" + std::to_string(columns) + ", " +
              std::to_string(kRowThreads) + ", " + (sum ? "true" : "false") +
              ">(\n      logits, " + (sum ? "max, sum" : "nullptr, max") +
              ", vocab_size, vocab_offset, aligned16(logits));\n";
  return "";
}

/// cross_entropy_grad_from_stats and _with_grad_from_stats.
std::string gradFromStats(const LaunchDesc &launch, KernelCode &code,
                          bool loss) {
  View v{launch};
  int64_t columns = v.lastDim(CrossEntropyGradFromStats::op::logits);
  int64_t rows = v.count(CrossEntropyGradFromStats::op::logits) / columns;
  perRow(code, rows);
  std::string total = loss ? totalScratch(rows, code.globals) : "{}";
  code.body = "  crossEntropyFromStats<" + std::to_string(columns) + ", " +
              std::to_string(kRowThreads) + ", " + (loss ? "true" : "false") +
              ">(\n      logits, labels, max, sum, " +
              (loss ? "target" : "(const float *)nullptr") + ", dloss, " +
              (loss ? "loss" : "(float *)nullptr") + ", dlogits, " + num(rows) +
              ", vocab_size, vocab_offset,\n      aligned16(logits) && "
              "aligned16(dlogits), " +
              total + ");\n";
  return "";
}

} // namespace

std::string emitLogitsMax(const LaunchDesc &launch, KernelCode &code) {
  return rowStat(launch, code, false);
}

std::string emitLogitsTarget(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t columns = v.lastDim(LogitsTarget::op::logits);
  int64_t rows = v.count(LogitsTarget::op::logits) / columns;
  code.sources = {"loss.cuh"};
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(rows, kThreads), 1, 1};
  code.body = fill("  const int valid = validColumns<$COLUMNS>(vocab_size, "
                   "vocab_offset);\n",
                   {{"COLUMNS", std::to_string(columns)}}) +
              forEach(rows, fill(R"(    i64 c = (i64)labels[i] - vocab_offset;
    target[i] = c >= 0 && c < valid ? load(logits, i * $COLUMNS + c) : 0.0f;)",
                                 {{"COLUMNS", num(columns)}}));
  return "";
}

std::string emitLogitsSumExp(const LaunchDesc &launch, KernelCode &code) {
  return rowStat(launch, code, true);
}

std::string emitLogitsMaxSum(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t columns = v.lastDim(LogitsMaxSum::op::logits);
  int64_t rows = v.count(LogitsMaxSum::op::logits) / columns;
  perRow(code, rows);
  code.body = "  logitsMaxSum<" + std::to_string(columns) + ", " +
              std::to_string(kRowThreads) + ", " +
              (v.flag(LogitsMaxSum::attr::accumulate) ? "true" : "false") +
              ">(\n      logits, max, sum, vocab_size, vocab_offset, "
              "aligned16(logits));\n";
  return "";
}

std::string emitSumExpRescale(const LaunchDesc &launch, KernelCode &code) {
  int64_t rows = View{launch}.count(SumExpRescale::op::sum);
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(rows, kThreads), 1, 1};
  code.body = forEach(rows, "    sum[i] = local_sum[i] == 0.0f ? 0.0f : "
                            "local_sum[i] * expf(local_max[i] - max[i]);");
  return "";
}

std::string emitCrossEntropyFromStats(const LaunchDesc &launch,
                                      KernelCode &code) {
  int64_t rows = View{launch}.count(CrossEntropyFromStats::op::max);
  int64_t blocks = (rows + kRowThreads - 1) / kRowThreads;
  code.sources = {"loss.cuh"};
  code.block = {kRowThreads, 1, 1};
  code.grid = {uint32_t(blocks), 1, 1};
  code.body = "  lossFromStats<" + std::to_string(kRowThreads) +
              ">(max, sum, target, loss, " + num(rows) + ", " +
              totalScratch(blocks, code.globals) + ");\n";
  return "";
}

std::string emitCrossEntropyGradFromStats(const LaunchDesc &launch,
                                          KernelCode &code) {
  return gradFromStats(launch, code, false);
}

std::string emitCrossEntropyWithGradFromStats(const LaunchDesc &launch,
                                              KernelCode &code) {
  return gradFromStats(launch, code, true);
}

} // namespace strata::codegen
