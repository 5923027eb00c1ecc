//===- EmitSoftmax.cpp - attention's probabilities, computed apart --------===//
//
// The math of runtime/cpu/Softmax.cpp (row sums in double, exponentials
// in float: FP64 is a small part of a GPU), one warp per
// row of scores: what --attention-backend unfused runs between its
// batched gemms, as Megatron's fused scale-mask-softmax did.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr int64_t kWarps = 4; // rows per block

/// A warp per row: `body` with `base` the row's first element and `lane`.
void warpPerRow(KernelCode &code, int64_t rows, int64_t keys,
                std::string_view body) {
  code.block = {uint32_t(32 * kWarps), 1, 1};
  code.grid = {blocksFor(rows, kWarps, 1u << 30), 1, 1};
  code.body = fill(R"(  int lane = threadIdx.x & 31;
  i64 row = (i64)blockIdx.x * $WARPS + (threadIdx.x >> 5);
  if (row >= $ROWS)
    return;
  i64 base = row * $KEYS;
$BODY)",
                   {{"WARPS", num(kWarps)},
                    {"ROWS", num(rows)},
                    {"KEYS", num(keys)},
                    {"BODY", std::string(body)}});
}

} // namespace

std::string emitSoftmaxFwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(SoftmaxFwd::op::x);
  int64_t keys = shape.back(), seq = shape[shape.size() - 2];
  bool causal = v.flag(SoftmaxFwd::attr::causal);
  warpPerRow(code, v.count(SoftmaxFwd::op::x) / keys, keys,
             fill(R"(  i64 valid = $CAUSAL ? row % $SEQ + 1 : $KEYS;
  if (valid > $KEYS)
    valid = $KEYS;
  float max = -__uint_as_float(0x7f800000u);
  for (i64 j = lane; j < valid; j += 32)
    max = fmaxf(max, load(x, base + j));
  max = warpMax(max);
  double sum = 0.0;
  for (i64 j = lane; j < valid; j += 32)
    sum += expf(load(x, base + j) - max);
  sum = warpSum(sum);
  for (i64 j = lane; j < $KEYS; j += 32)
    store(y, base + j,
          j < valid ? (float)(expf(load(x, base + j) - max) / sum)
                    : 0.0f);
)",
                  {{"CAUSAL", causal ? "true" : "false"},
                   {"SEQ", num(seq)},
                   {"KEYS", num(keys)}}));
  return "";
}

std::string emitSoftmaxBwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t keys = v.lastDim(SoftmaxBwd::op::y);
  warpPerRow(code, v.count(SoftmaxBwd::op::y) / keys, keys,
             fill(R"(  double dot = 0.0;
  for (i64 j = lane; j < $KEYS; j += 32)
    dot += (double)load(y, base + j) * load(dy, base + j);
  dot = warpSum(dot);
  for (i64 j = lane; j < $KEYS; j += 32)
    store(dx, base + j,
          (float)(load(y, base + j) * (load(dy, base + j) - dot)));
)",
                  {{"KEYS", num(keys)}}));
  return "";
}

} // namespace strata::codegen
