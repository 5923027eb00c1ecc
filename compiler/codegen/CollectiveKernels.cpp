//===- CollectiveKernels.cpp - the device-side communicator's kernels -----===//
//
// What ranks that are threads sharing one GPU run for a collective, once
// they have met (runtime/cuda/DeviceCollectives.h): one launch computes
// every rank's result. A reduction takes each element in the ring's order
// (runtime/comm/LocalCollectives.h: chunk c's element summed from rank
// c + 1 round to rank c, each rank's value added to what came before) in
// f32, bf16 widened and the result rounded once, as the CPU computes it.
// A thread owns an element: it reads every rank's value of it before
// writing any rank's result, so an output that is its rank's input (in
// place), or a rank's block inside it, is safe.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

std::string collectiveKernelsUnit() {
  std::string kernels = R"(
// The ranks of a meeting: each one's input and output.
struct Ranks {
  const void *in[$GROUP];
  void *out[$GROUP];
};

template <typename T>
__device__ __forceinline__ float value(const Ranks &r, int rank, i64 e) {
  return load((const T *)r.in[rank], e);
}

template <typename T>
__device__ float ringOrder(const Ranks &r, int n, int c, i64 e, bool max) {
  float acc = value<T>(r, (c + 1) % n, e);
  for (int k = 2; k <= n; ++k) {
    float v = value<T>(r, (c + k) % n, e);
    acc = max ? (v < acc ? acc : v) : v + acc;
  }
  return acc;
}

// All-reduce (sum or max) of `count` elements: chunk c is
// [count·c/n, count·(c+1)/n).
template <typename T>
__device__ void allReduce(const Ranks &r, int n, i64 count, int max) {
  for (i64 e = blockIdx.x * (i64)blockDim.x + threadIdx.x; e < count;
       e += (i64)gridDim.x * blockDim.x) {
    int c = 0;
    while (count * (c + 1) / n <= e)
      ++c;
    float result = ringOrder<T>(r, n, c, e, max != 0);
    for (int k = 0; k < n; ++k)
      store((T *)r.out[k], e, result);
  }
}

// Reduce-scatter along a dimension: the whole tensor is
// [outer][n][inner], rank i's result is block i, [outer][inner].
template <typename T>
__device__ void reduceScatter(const Ranks &r, int n, i64 outer, i64 inner) {
  i64 part = outer * inner;
  for (i64 u = blockIdx.x * (i64)blockDim.x + threadIdx.x; u < part * n;
       u += (i64)gridDim.x * blockDim.x) {
    int i = (int)(u / part);
    i64 e = u % part, o = e / inner, k = e % inner;
    store((T *)r.out[i], e, ringOrder<T>(r, n, i, (o * n + i) * inner + k,
                                         false));
  }
}

// All-gather along a dimension, as bytes: every rank's output is
// [outer][n][innerBytes] of the ranks' [outer][innerBytes] blocks. A
// rank's own block may already be in place (its input is a view of it).
__device__ void allGather(const Ranks &r, int n, i64 outer, i64 innerBytes) {
  i64 block = outer * innerBytes, total = block * n * n;
  for (i64 u = blockIdx.x * (i64)blockDim.x + threadIdx.x; u < total;
       u += (i64)gridDim.x * blockDim.x) {
    int j = (int)(u / (block * n));     // the output's rank
    i64 w = u % (block * n);
    int from = (int)(w / block);        // the block's rank
    i64 b = w % block, o = b / innerBytes, x = b % innerBytes;
    const unsigned char *src = (const unsigned char *)r.in[from] + b;
    unsigned char *dst =
        (unsigned char *)r.out[j] + (o * n + from) * innerBytes + x;
    if (dst != src)
      *dst = *src;
  }
}

extern "C" __global__ void strata_all_reduce_f32(Ranks r, int n, i64 count,
                                                 int max) {
  allReduce<float>(r, n, count, max);
}
extern "C" __global__ void strata_all_reduce_bf16(Ranks r, int n, i64 count,
                                                  int max) {
  allReduce<bf16>(r, n, count, max);
}
extern "C" __global__ void strata_reduce_scatter_f32(Ranks r, int n, i64 outer,
                                                     i64 inner) {
  reduceScatter<float>(r, n, outer, inner);
}
extern "C" __global__ void strata_reduce_scatter_bf16(Ranks r, int n,
                                                      i64 outer, i64 inner) {
  reduceScatter<bf16>(r, n, outer, inner);
}
extern "C" __global__ void strata_all_gather(Ranks r, int n, i64 outer,
                                             i64 innerBytes) {
  allGather(r, n, outer, innerBytes);
}
)";
  return std::string(unitPrelude()) +
         fill(kernels, {{"GROUP", std::to_string(runtime::kMaxDeviceGroup)}});
}

} // namespace strata::codegen
