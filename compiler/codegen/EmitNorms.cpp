//===- EmitNorms.cpp - LayerNorm and RMSNorm, forward and backward --------===//
//
// The norms are cuda/norms.cuh's templates (a warp a row, 16-byte chunks,
// f32; the backward's weight and bias gradients summed over the grid in a
// fixed order in two stages). This writes a launch's stub: the call with
// the row width and the tiles, and the backward's scratch.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr int64_t kFwdWarps = 4; // rows a block in the forward
constexpr int64_t kBwdWarps = 8;
// Blocks a launch of the backward at least fills, 2 an SM of an H100 or
// H200, where the rows allow (a block takes at least one row).
constexpr int64_t kBwdBlocks = 2 * 132;
constexpr int64_t kSumGroup = 16; // reduce.cuh's GROUP

/// `aligned16(a) && aligned16(b) ...` for the pointers of `names`.
std::string allAligned(const std::vector<std::string> &names) {
  std::string out;
  for (const std::string &name : names)
    out += (out.empty() ? "" : " && ") + std::string("aligned16(") + name + ")";
  return out;
}

} // namespace

std::string emitNormFwdWith(const LaunchDesc &launch,
                            const std::vector<std::string> &operands,
                            const std::string &globals,
                            const std::string &input,
                            const std::string &inputVectors, KernelCode &code) {
  bool layerNorm = launch.kernel == runtime::KernelId::LayerNormFwd;
  View v{launch};
  int64_t cols = v.lastDim(LayerNormFwd::op::x);
  int64_t rows = v.count(LayerNormFwd::op::x) / cols;
  // x, weight, (bias,) y.
  const std::string &x = operands[0], &weight = operands[1];
  std::string bias = layerNorm ? operands[2] : "(const float *)nullptr";
  const std::string &y = operands[layerNorm ? 3 : 2];
  std::vector<std::string> pointers = {x, weight, y};
  if (layerNorm)
    pointers.push_back(bias);
  code.sources = {"norms.cuh"};
  code.globals = globals;
  code.block = {uint32_t(32 * kFwdWarps), 1, 1};
  code.grid = {blocksFor(rows, kFwdWarps, 1u << 30), 1, 1};
  // 128 registers a thread: a row of 2048 is 64 of them.
  code.blocksPerSm = 4;
  code.body = "  normFwd<" + std::to_string(cols) + ", " +
              (layerNorm ? "true" : "false") + ", " +
              std::to_string(kFwdWarps) + ">(\n      " + input + ", " + x +
              ", " + weight + ", " + bias + ", " + y + ", " + num(rows) + ", " +
              f32(v.attr(LayerNormFwd::attr::epsilon).f) + ",\n      " +
              inputVectors + " && " + allAligned(pointers) + ");\n";
  return "";
}

namespace {

std::string normFwd(const LaunchDesc &launch, KernelCode &code) {
  bool layerNorm = launch.kernel == runtime::KernelId::LayerNormFwd;
  std::vector<std::string> operands = {"x", "weight"};
  if (layerNorm)
    operands.push_back("bias");
  operands.push_back("y");
  std::string input =
      std::string("NormInput<") + ctype(launch.operands[0].dtype) + ">{x}";
  return emitNormFwdWith(launch, operands, "", input, "true", code);
}

std::string normBwd(const LaunchDesc &launch, KernelCode &code,
                    bool layerNorm) {
  View v{launch};
  int64_t cols = v.lastDim(LayerNormBwd::op::x);
  int64_t rows = v.count(LayerNormBwd::op::x) / cols;
  // Rows a block: as many as leave the grid kBwdBlocks blocks, at least
  // one, at most 64 (the block's statistics in shared memory).
  int64_t rowsPerBlock = std::clamp<int64_t>(rows / kBwdBlocks, 1, 64);
  int64_t blocks = (rows + rowsPerBlock - 1) / rowsPerBlock;
  int64_t groups = (blocks + kSumGroup - 1) / kSumGroup;
  int64_t width = layerNorm ? 2 * cols : cols;
  code.sources = {"norms.cuh"};
  code.globals =
      "\n// The grid's partial sums of the weight" +
      std::string(layerNorm ? " and bias" : "") +
      " gradient (reduce.cuh).\n__device__ alignas(16) float normPartials[" +
      num(blocks * width) + "];\n__device__ float normGroupRows[" +
      num(groups * width) + "];\n__device__ unsigned normGroupDone[" +
      num(groups) + "];\n__device__ unsigned normGroupsDone[1];\n";
  code.block = {uint32_t(32 * kBwdWarps), 1, 1};
  code.grid = {uint32_t(blocks), 1, 1};
  code.blocksPerSm = 2; // 128 registers a thread: x and dy held, 64

  std::vector<std::string> pointers = {"x", "weight", "dy", "dx"};
  code.body = "  normBwd<" + std::to_string(cols) + ", " +
              (layerNorm ? "true" : "false") + ", " +
              std::to_string(kBwdWarps) + ", " + std::to_string(rowsPerBlock) +
              ">(\n      x, weight, dy, dx, dweight, " +
              (layerNorm ? "dbias" : "(float *)nullptr") + ", " + num(rows) +
              ", " + f32(v.attr(LayerNormBwd::attr::epsilon).f) + ",\n      " +
              allAligned(pointers) +
              ",\n      {normPartials, normGroupRows, normGroupDone, "
              "normGroupsDone});\n";
  return "";
}

} // namespace

std::string emitLayerNormFwd(const LaunchDesc &launch, KernelCode &code) {
  return normFwd(launch, code);
}
std::string emitRmsNormFwd(const LaunchDesc &launch, KernelCode &code) {
  return normFwd(launch, code);
}
std::string emitLayerNormBwd(const LaunchDesc &launch, KernelCode &code) {
  return normBwd(launch, code, true);
}
std::string emitRmsNormBwd(const LaunchDesc &launch, KernelCode &code) {
  return normBwd(launch, code, false);
}

} // namespace strata::codegen
