//===- dropout.cuh - dropout, drawn the same on every layout --------------===//
//
//   y[i] = x[i] / (1 - rate) where the element survives, else 0; every
//   element survives where its sample's key is negative (evaluation)
// Whether an element survives is runtime/plan/Dropout.h's hash of its
// sample's key, the dropout's site and the element's index within its
// sample in the unsplit tensor (written again here; the float64 test checks
// both against its own copy). A split tensor (tensor or sequence parallel)
// gives a rank's element its index in the whole: dimension `split` of
// SIZE parts holds this rank's LOCAL rows from split_offset on. The scale
// is applied in double, as the CPU backend applies it. Eight elements a
// thread, 16-byte loads and stores where aligned.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

__device__ __forceinline__ unsigned dropoutMix(unsigned x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}
__device__ __forceinline__ bool
dropoutKeeps(unsigned key, unsigned site, unsigned index, unsigned threshold) {
  unsigned h =
      dropoutMix(dropoutMix(key ^ dropoutMix(site + 0x9e3779b9u)) ^ index);
  return (h >> 8) >= threshold;
}

// The split's shape: a sample's elements as OUTER x LOCAL x INNER of a
// dimension cut into SIZE parts (SPLIT false: not split).
template <bool SPLIT, long long LOCAL, long long INNER, long long SIZE>
struct DropoutSplit {
  // Element r of a sample here, as an index in the unsplit sample.
  __device__ __forceinline__ static unsigned long long
  whole(unsigned long long r, long long offset) {
    if (!SPLIT)
      return r;
    const unsigned long long block = LOCAL * INNER;
    unsigned long long outer = r / block, rest = r % block;
    return (outer * (unsigned long long)SIZE + (unsigned long long)offset +
            rest / INNER) *
               INNER +
           rest % INNER;
  }
};

// Elements [i, i + V) (V 8: one 16-byte access, or 1).
template <int V, long long PER_SAMPLE, class Split, typename TX, typename TY>
__device__ __forceinline__ void
dropoutChunk(const TX *x, const int *keys, TY *y, i64 i, long long site,
             long long splitOffset, unsigned threshold, double scale) {
  float v[V];
  loadN<V>(x, i, v);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    i64 at = i + e;
    int key = keys[at / PER_SAMPLE];
    if (key < 0)
      continue;
    unsigned long long index =
        Split::whole((unsigned long long)(at % PER_SAMPLE), splitOffset);
    v[e] =
        dropoutKeeps((unsigned)key, (unsigned)site, (unsigned)index, threshold)
            ? (float)((double)v[e] * scale)
            : 0.0f;
  }
  storeN<V>(y, i, v);
}

template <long long PER_SAMPLE, class Split, typename TX, typename TY>
__device__ __forceinline__ void
dropout(const TX *x, const int *keys, TY *y, i64 count, long long site,
        long long splitOffset, unsigned threshold, double scale, bool vectors) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 done = 0;
  if (vectors) {
    for (i64 c = first; c < count / 8; c += stride)
      dropoutChunk<8, PER_SAMPLE, Split>(x, keys, y, c * 8, site, splitOffset,
                                         threshold, scale);
    done = count / 8 * 8;
  }
  for (i64 i = done + first; i < count; i += stride)
    dropoutChunk<1, PER_SAMPLE, Split>(x, keys, y, i, site, splitOffset,
                                       threshold, scale);
}
