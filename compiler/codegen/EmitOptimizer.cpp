//===- EmitOptimizer.cpp - gradient norm, clipping, multi-tensor AdamW ----===//
//
// The math of runtime/cpu/Optimizer.cpp, each kernel one launch over the
// flat regions. The ranges a kernel covers are constants of the source;
// which part of each window the rank owns is its run-time `part`
// (runtime/plan/Ownership.h). The elements a rank owns are numbered
// 0..owned-1 window by window (a window's owned length is the same for
// every part); a thread finds an element's window and segment by binary
// search in the constant tables.
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

/// The search both kernels' tables need, once.
constexpr const char *kLastAtMost = R"(
// The last of `count` tuples of `width` in `table` whose first field is at
// most x, or -1: the window of an owned element, the segment of an index.
__device__ i64 lastAtMost(const i64 *table, i64 count, i64 width, i64 x) {
  i64 lo = -1, hi = count - 1;
  while (lo < hi) {
    i64 mid = (lo + hi + 1) / 2;
    if (table[mid * width] <= x) lo = mid; else hi = mid - 1;
  }
  return lo;
}
)";

/// The windows' tables, and `windowOf(u)`, the window of owned element u
/// (windows are numbered by where their owned elements start).
std::string windowTables(const std::vector<int64_t> &windows, int64_t &owned) {
  std::vector<int64_t> starts = {0};
  for (size_t w = 0; w + runtime::kWindowWidth <= windows.size();
       w += runtime::kWindowWidth)
    starts.push_back(starts.back() + windows[w + 1]);
  owned = starts.back();
  return kLastAtMost + table("kWindows", windows) +
         table("kWindowStarts", starts) +
         fill("__device__ i64 windowOf(i64 u) {\n"
              "  return lastAtMost(kWindowStarts, $COUNT, 1, u);\n}\n",
              {{"COUNT", num(int64_t(starts.size() - 1))}});
}

/// A function `name(flat)` giving the segment of `list` (tuples of
/// `width`: begin, length, ...) that holds flat index `flat`, or -1.
std::string segmentFinder(const char *name, const char *tableName,
                          const std::vector<int64_t> &list, int64_t width) {
  return table(tableName, list) +
         fill(R"(__device__ i64 $NAME(i64 flat) {
  i64 s = lastAtMost($TABLE, $COUNT, $WIDTH, flat);
  return s >= 0 && flat < $TABLE[s * $WIDTH] + $TABLE[s * $WIDTH + 1] ? s : -1;
}
)",
              {{"NAME", name},
               {"TABLE", tableName},
               {"COUNT", num(int64_t(list.size()) / width)},
               {"WIDTH", num(width)}});
}

/// The loop over the rank's owned elements, with `flat`, `state` and the
/// element's segment `s` (of kSegments) in scope.
constexpr const char *kOwnedLoop =
    R"(  for (i64 u = blockIdx.x * (i64)blockDim.x + threadIdx.x; u < $OWNED;
       u += (i64)gridDim.x * blockDim.x) {
    i64 w = windowOf(u), offset = u - kWindowStarts[w];
    i64 flat = kWindows[3 * w] + part * kWindows[3 * w + 1] + offset;
    i64 state = kWindows[3 * w + 2] + offset;
$BODY
  }
)";

} // namespace

std::string emitSumSquares(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t owned = 0;
  code.globals =
      windowTables(v.attr(SumSquares::attr::windows).list, owned) +
      segmentFinder("segmentOf", "kSegments",
                    v.attr(SumSquares::attr::segments).list, 2) +
      segmentFinder("firstSegmentOf", "kFirstSegments",
                    v.attr(SumSquares::attr::first_segments).list, 2);
  uint32_t blocks = blocksFor(owned, kThreads, 1024);
  code.globals +=
      "__device__ double partial[" + std::to_string(blocks) + "];\n";
  code.block = {kThreads, 1, 1};
  code.grid = {blocks, 1, 1};
  // Each thread's sum, the block's in fixed order, then the last block
  // adds the blocks' in order.
  code.body =
      "  double total = 0.0;\n" +
      fill(kOwnedLoop, {{"OWNED", num(owned)}, {"BODY", R"(    (void)state;
    if (segmentOf(flat) >= 0 || (first_part == 0 && firstSegmentOf(flat) >= 0)) {
      double g = grads[flat];
      total += g * g;
    })"}}) +
      fill(R"(  total = blockSum<$THREADS>(total);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = total;
  if (!lastBlock() || threadIdx.x != 0)
    return;
  double all = 0.0;
  for (int k = 0; k < $BLOCKS; ++k)
    all += __ldcg(&partial[k]);
  sum[0] = (float)all;
)",
           {{"THREADS", std::to_string(kThreads)},
            {"BLOCKS", std::to_string(blocks)}});
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
  int64_t owned = 0;
  bool master = v.op(op::master).present;
  code.globals =
      windowTables(v.attr(attr::windows).list, owned) +
      segmentFinder("segmentOf", "kSegments", v.attr(attr::segments).list, 3);
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(owned, kThreads, 8192), 1, 1};
  // In the order and precision the CPU backend (and torch) computes.
  std::string body = R"(    i64 s = segmentOf(flat);
    if (s < 0)
      continue;
    float decay = kSegments[3 * s + 2] ? decayFactor : 1.0f;
    float g = load(grads, flat);
    if (clipped)
      g *= c;
    float param = $READ * decay;
    float m = exp_avg[state] * beta1 + g * oneMinusBeta1;
    float sq = exp_avg_sq[state] * beta2 + g * g * oneMinusBeta2;
    exp_avg[state] = m;
    exp_avg_sq[state] = sq;
    float denom = sqrtf(sq) / correction2 + eps;
    param -= stepSize * (m / denom);
$WRITE)";
  body = fill(body, {{"READ", master ? "master[state]" : "load(params, flat)"},
                     {"WRITE", master ? "    master[state] = param;\n    store("
                                        "params, flat, param);"
                                      : "    store(params, flat, param);"}});
  auto slot = [](runtime::HyperSlot s) { return std::to_string(int(s)); };
  code.body = fill(R"(  float c = coefficient[0];
  if (!(c > 0.0f))
    return; // a gradient norm that is not finite: the step is skipped
  bool clipped = c < 1.0f;
  float decayFactor = hyper[$DECAY], beta1 = hyper[$BETA1],
        oneMinusBeta1 = hyper[$OMB1], beta2 = hyper[$BETA2],
        oneMinusBeta2 = hyper[$OMB2], stepSize = hyper[$STEP],
        correction2 = hyper[$CORR2], eps = hyper[$EPS];
)",
                   {{"DECAY", slot(runtime::kHyperDecay)},
                    {"BETA1", slot(runtime::kHyperBeta1)},
                    {"OMB1", slot(runtime::kHyperOneMinusBeta1)},
                    {"BETA2", slot(runtime::kHyperBeta2)},
                    {"OMB2", slot(runtime::kHyperOneMinusBeta2)},
                    {"STEP", slot(runtime::kHyperStepSize)},
                    {"CORR2", slot(runtime::kHyperCorrection2)},
                    {"EPS", slot(runtime::kHyperEps)}}) +
              fill(kOwnedLoop, {{"OWNED", num(owned)}, {"BODY", body}});
  return "";
}

} // namespace strata::codegen
