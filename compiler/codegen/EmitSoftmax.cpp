//===- EmitSoftmax.cpp - attention's probabilities, computed apart --------===//
//
// The softmax kernels are cuda/softmax.cuh's templates (a warp a row, f32,
// 16-byte chunks where the row allows): what --attention-backend unfused
// runs between its batched gemms. This writes the stubs.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr int64_t kWarps = 4; // rows per block

void warpPerRow(KernelCode &code, int64_t rows) {
  code.sources = {"softmax.cuh"};
  code.block = {uint32_t(32 * kWarps), 1, 1};
  code.grid = {blocksFor(rows, kWarps, 1u << 30), 1, 1};
}

} // namespace

std::string emitSoftmaxFwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(SoftmaxFwd::op::x);
  int64_t keys = shape.back(), seq = shape[shape.size() - 2];
  int64_t rows = v.count(SoftmaxFwd::op::x) / keys;
  warpPerRow(code, rows);
  code.body = "  softmaxFwd<" + std::to_string(keys) + ", " +
              std::to_string(seq) + ", " +
              (v.flag(SoftmaxFwd::attr::causal) ? "true" : "false") + ", " +
              std::to_string(kWarps) + ">(x, y, " + num(rows) +
              ", aligned16(x) && aligned16(y));\n";
  return "";
}

std::string emitSoftmaxBwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t keys = v.lastDim(SoftmaxBwd::op::y);
  int64_t rows = v.count(SoftmaxBwd::op::y) / keys;
  warpPerRow(code, rows);
  code.body = "  softmaxBwd<" + std::to_string(keys) + ", " +
              std::to_string(kWarps) + ">(y, dy, dx, " + num(rows) +
              ",\n      aligned16(y) && aligned16(dy) && aligned16(dx));\n";
  return "";
}

} // namespace strata::codegen
