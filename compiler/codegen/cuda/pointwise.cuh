//===- pointwise.cuh - a chain of pointwise kernels over every element ----===//
//
// y[i] = f(x[i], ...) for every element, f a chain of the catalog's
// pointwise kernels (one, or a group the fusion pass made one kernel):
// EmitFused.cpp writes the chain as a functor whose call runs every member
// on V consecutive elements from i, loading what comes from memory once and
// storing every output. This loop hands it 8 elements at a time (16-byte
// loads and stores) where every pointer is 16-byte aligned and every
// broadcast row a multiple of 8 wide, the rest one at a time; a grid-stride
// loop, so any grid covers the elements.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

template <class Chain>
__device__ __forceinline__ void pointwise(const Chain &chain, i64 n,
                                          bool vectors) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 done = 0;
  if (vectors) {
    for (i64 v = first; v < n / 8; v += stride) {
      float out[8];
      chain.template operator()<8>(v * 8, out);
    }
    done = n / 8 * 8;
  }
  for (i64 i = done + first; i < n; i += stride) {
    float out[1];
    chain.template operator()<1>(i, out);
  }
}

// y[i] = value for every element: fill, 8 elements a thread where y is
// 16-byte aligned.
template <typename T>
__device__ __forceinline__ void fillAll(T *y, i64 n, float value,
                                        bool vectors) {
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  i64 done = 0;
  if (vectors) {
    float v[8];
#pragma unroll
    for (int e = 0; e < 8; ++e)
      v[e] = value;
    for (i64 c = first; c < n / 8; c += stride)
      storeN<8>(y, c * 8, v);
    done = n / 8 * 8;
  }
  for (i64 i = done + first; i < n; i += stride)
    store(y, i, value);
}
