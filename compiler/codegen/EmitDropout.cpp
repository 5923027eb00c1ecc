//===- EmitDropout.cpp - dropout, drawn the same on every layout ----------===//
//
// The math of runtime/cpu/Dropout.cpp, a thread per element: the mask is
// runtime/plan/Dropout.h's function, written again here in the unit's
// globals (the float64 test checks both against its own copy). The site
// and the rank's share of a split dimension are read at run time, so that
// the layers' dropouts share one kernel.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"
#include "runtime/plan/Dropout.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

constexpr const char *kDropoutHash =
    R"(__device__ __forceinline__ unsigned dropoutMix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
__device__ __forceinline__ bool dropoutKeeps(unsigned key, unsigned site,
                                             unsigned index,
                                             unsigned threshold) {
  unsigned h =
      dropoutMix(dropoutMix(key ^ dropoutMix(site + 0x9e3779b9u)) ^ index);
  return (h >> 8) >= threshold;
}
)";

} // namespace

std::string emitDropout(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(Dropout::op::x);
  int64_t count = v.count(Dropout::op::x);
  int64_t perSample = count / shape[0];
  int64_t dim = v.attr(Dropout::attr::split_dim).i;
  int64_t inner = 1, local = 1, size = 1;
  if (dim > 0) {
    for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
      inner *= shape[d];
    local = shape[size_t(dim)];
    size = v.attr(Dropout::attr::split_size).i;
  }
  double rate = v.attr(Dropout::attr::rate).f;
  code.globals = kDropoutHash;
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(count, kThreads), 1, 1};
  code.body = forEach(
      count,
      fill(R"(    int key = keys[i / $PER_SAMPLE];
    if (key < 0) {
      store(y, i, load(x, i));
      continue;
    }
    unsigned long long r = (unsigned long long)(i % $PER_SAMPLE), index = r;
    if ($SPLIT) {
      unsigned long long block = $BLOCK, inner = $INNER;
      unsigned long long outer = r / block, rest = r % block;
      index = (outer * (unsigned long long)$SIZE +
               (unsigned long long)split_offset + rest / inner) * inner +
              rest % inner;
    }
    store(y, i, dropoutKeeps((unsigned)key, (unsigned)site, (unsigned)index,
                             (unsigned)$THRESHOLD)
                    ? (float)((double)load(x, i) * $SCALE)
                    : 0.0f);)",
           {{"PER_SAMPLE", num(perSample)},
            {"SPLIT", dim > 0 ? "true" : "false"},
            {"BLOCK", num(local * inner)},
            {"SIZE", num(size)},
            {"INNER", num(inner)},
            {"THRESHOLD", std::to_string(runtime::dropoutThreshold(rate))},
            {"SCALE", f64(1.0 / (1.0 - rate))}}));
  return "";
}

} // namespace strata::codegen
