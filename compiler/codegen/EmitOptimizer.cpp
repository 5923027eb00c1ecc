//===- EmitOptimizer.cpp - gradient norm, clipping, multi-tensor AdamW ----===//
//
// The math of runtime/cpu/Optimizer.cpp, each kernel one launch over the
// flat regions: sum_squares and adamw are cuda/optimizer.cuh's templates
// (8 owned elements a thread, as 16-byte vectors where they lie together);
// this writes their tables, the ranges a kernel covers as constants of the
// source, and the stub. Which part of each window the rank owns is its
// run-time `part` (runtime/plan/Ownership.h). clip_coefficient is written
// here whole.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"
#include "runtime/plan/Hyper.h"
#include "runtime/plan/Ownership.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

/// `values` as a constant array `name` (one dummy entry when empty: C++
/// has no empty arrays).
std::string table(const char *name, const std::vector<int64_t> &values) {
  std::string out = std::string("__device__ const i64 ") + name + "[] = {";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i ? (i % 8 ? ", " : ",\n    ") : "") + std::to_string(values[i]);
  return out + (values.empty() ? "0};\n" : "};\n");
}

/// The windows' tables: kWindows (begin, length, state) and kWindowStarts,
/// where each window's owned elements start in the rank's numbering, then
/// the total; `owned` gets the total.
std::string windowTables(const std::vector<int64_t> &windows, int64_t &owned) {
  std::vector<int64_t> starts = {0};
  for (size_t w = 0; w + runtime::kWindowWidth <= windows.size();
       w += runtime::kWindowWidth)
    starts.push_back(starts.back() + windows[w + 1]);
  owned = starts.back();
  return table("kWindows", windows) + table("kWindowStarts", starts);
}

/// OwnedTables (cuda/optimizer.cuh) over the unit's tables.
std::string ownedTables(const std::vector<int64_t> &windows,
                        const std::vector<int64_t> &segments, int width,
                        const std::vector<int64_t> *firstSegments) {
  return "OwnedTables{kWindows, kWindowStarts, " +
         std::to_string(windows.size() / runtime::kWindowWidth) +
         ", kSegments, " + std::to_string(segments.size() / width) + ", " +
         std::to_string(width) + ", " +
         (firstSegments
              ? "kFirstSegments, " + std::to_string(firstSegments->size() / 2)
              : std::string("kSegments, 0")) +
         "}";
}

} // namespace

std::string emitSumSquares(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &windows = v.attr(SumSquares::attr::windows).list,
                             &segments =
                                 v.attr(SumSquares::attr::segments).list,
                             &first =
                                 v.attr(SumSquares::attr::first_segments).list;
  int64_t owned = 0;
  code.globals = "\n// The rank's owned elements (cuda/optimizer.cuh).\n" +
                 windowTables(windows, owned) + table("kSegments", segments) +
                 table("kFirstSegments", first);
  uint32_t blocks = blocksFor((owned + 7) / 8, kThreads, 2048);
  code.globals += "\n// The grid's sum (reduce.cuh).\n__device__ double "
                  "normBlockValues[" +
                  std::to_string(blocks) +
                  "];\n__device__ double normGroupValues[" +
                  std::to_string((blocks + kThreads - 1) / kThreads) +
                  "];\n__device__ unsigned normGroupDone[" +
                  std::to_string((blocks + kThreads - 1) / kThreads) +
                  "];\n__device__ unsigned normGroupsDone[1];\n";
  code.sources = {"optimizer.cuh"};
  code.block = {kThreads, 1, 1};
  code.grid = {blocks, 1, 1};
  code.body = "  sumSquares<" + std::to_string(kThreads) +
              ">(\n      grads, sum, part, first_part,\n      " +
              ownedTables(windows, segments, 2, &first) + ",\n      " +
              num(owned) +
              ", {normBlockValues, normGroupValues, normGroupDone, "
              "normGroupsDone});\n";
  return "";
}

std::string emitClipCoefficient(const LaunchDesc &, KernelCode &code) {
  code.body = fill(R"(  if (threadIdx.x != 0)
    return;
  double value = sqrt((double)sum[0]);
  double clip = hyper[$CLIP];
  norm[0] = (float)value;
  // 0 when the norm is not finite: adamw skips the step (every rank reads
  // the same global norm).
  coefficient[0] = (float)(!isfinite(value) ? 0.0
                           : clip > 0.0    ? fmin(1.0, clip / (value + 1e-6))
                                           : 1.0);
)",
                   {{"CLIP", std::to_string(runtime::kHyperClip)}});
  return "";
}

std::string emitAdamW(const LaunchDesc &launch, KernelCode &code) {
  using namespace AdamW;
  View v{launch};
  const std::vector<int64_t> &windows = v.attr(attr::windows).list,
                             &segments = v.attr(attr::segments).list;
  int64_t owned = 0;
  bool master = v.op(op::master).present;
  code.globals = "\n// The rank's owned elements (cuda/optimizer.cuh).\n" +
                 windowTables(windows, owned) + table("kSegments", segments);
  code.sources = {"optimizer.cuh"};
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor((owned + 7) / 8, kThreads, 8192), 1, 1};
  auto slot = [](runtime::HyperSlot s) {
    return "hyper[" + std::to_string(int(s)) + "]";
  };
  code.body =
      "  const float c = coefficient[0];\n"
      "  const AdamWStep step{" +
      slot(runtime::kHyperDecay) + ", " + slot(runtime::kHyperBeta1) + ", " +
      slot(runtime::kHyperOneMinusBeta1) + ",\n      " +
      slot(runtime::kHyperBeta2) + ", " + slot(runtime::kHyperOneMinusBeta2) +
      ", " + slot(runtime::kHyperStepSize) + ",\n      " +
      slot(runtime::kHyperCorrection2) + ", " + slot(runtime::kHyperEps) +
      ", c, c < 1.0f};\n"
      "  adamw<" +
      std::to_string(kThreads) + ", " + (master ? "true" : "false") +
      ">(grads, params, exp_avg, exp_avg_sq, " +
      (master ? "master" : "(float *)nullptr") + ", part,\n      " +
      ownedTables(windows, segments, 3, nullptr) + ",\n      " + num(owned) +
      ", step);\n";
  return "";
}

} // namespace strata::codegen
