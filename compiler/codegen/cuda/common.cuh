//===- common.cuh - what every generated unit starts with -----------------===//
//
// bf16 as its 16 bits (no CUDA header, so NVRTC needs none and a unit
// compiles in milliseconds), loads that widen to f32 and stores that round
// to nearest even as the CPU backend does (runtime/base/BFloat16.h), the
// activations, and the reductions the kernels share. Sums over a block add
// the warps' partials in a fixed order, so that a kernel gives the same
// bits on every run.
//
//===----------------------------------------------------------------------===//
#pragma once

typedef long long i64;
typedef unsigned short bf16;

// A compile-time int as a type (a generic lambda's argument).
template <int N> struct IntConstant { static constexpr int value = N; };

// 16 bytes, as one vector load or store moves them.
struct alignas(16) Bytes16 {
  unsigned w[4];
};

__device__ __forceinline__ float load(const float *p, i64 i) { return p[i]; }
__device__ __forceinline__ float load(const bf16 *p, i64 i) {
  return __uint_as_float((unsigned)p[i] << 16);
}
__device__ __forceinline__ bf16 toBf16(float v) {
  unsigned bits = __float_as_uint(v);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu))
    return (bf16)((bits >> 16) | 0x0040u);
  return (bf16)((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
__device__ __forceinline__ void store(float *p, i64 i, float v) { p[i] = v; }
__device__ __forceinline__ void store(bf16 *p, i64 i, float v) {
  p[i] = toBf16(v);
}
// What a store of `v` to a buffer of p's type leaves there, as f32.
__device__ __forceinline__ float stored(const float *, float v) { return v; }
__device__ __forceinline__ float stored(const bf16 *, float v) {
  return __uint_as_float((unsigned)toBf16(v) << 16);
}

// Whether a pointer is 16-byte aligned: a vector of 8 bf16 or 4 f32 moves
// in one load or store from there.
__device__ __forceinline__ bool aligned16(const void *p) {
  return ((unsigned long long)p & 15u) == 0;
}

// V consecutive elements from p + i as f32, and back (each store rounding
// as store() does). V is 8 (16-byte loads: p + i 16-byte aligned) or 1.
template <int V>
__device__ __forceinline__ void loadN(const bf16 *p, i64 i, float out[V]) {
  if constexpr (V == 8) {
    Bytes16 w = *(const Bytes16 *)(p + i);
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      out[2 * k] = __uint_as_float(w.w[k] << 16);
      out[2 * k + 1] = __uint_as_float(w.w[k] & 0xFFFF0000u);
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      out[k] = load(p, i + k);
  }
}
template <int V>
__device__ __forceinline__ void loadN(const float *p, i64 i, float out[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V / 4; ++k) {
      Bytes16 w = *(const Bytes16 *)(p + i + 4 * k);
#pragma unroll
      for (int e = 0; e < 4; ++e)
        out[4 * k + e] = __uint_as_float(w.w[e]);
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      out[k] = p[i + k];
  }
}
template <int V>
__device__ __forceinline__ void storeN(bf16 *p, i64 i, const float in[V]) {
  if constexpr (V == 8) {
    Bytes16 w;
#pragma unroll
    for (int k = 0; k < 4; ++k)
      w.w[k] =
          (unsigned)toBf16(in[2 * k]) | ((unsigned)toBf16(in[2 * k + 1]) << 16);
    *(Bytes16 *)(p + i) = w;
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      store(p, i + k, in[k]);
  }
}
template <int V>
__device__ __forceinline__ void storeN(float *p, i64 i, const float in[V]) {
  if constexpr (V % 4 == 0) {
#pragma unroll
    for (int k = 0; k < V / 4; ++k) {
      Bytes16 w;
#pragma unroll
      for (int e = 0; e < 4; ++e)
        w.w[e] = __float_as_uint(in[4 * k + e]);
      *(Bytes16 *)(p + i + 4 * k) = w;
    }
  } else {
#pragma unroll
    for (int k = 0; k < V; ++k)
      p[i + k] = in[k];
  }
}

// The activations, GELU (exact, erf) and SiLU, and their gradients.
__device__ __forceinline__ float gelu(float v) {
  return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));
}
__device__ __forceinline__ float geluGrad(float v, float dy) {
  float cdf = 0.5f * (1.0f + erff(v * 0.70710678118654752440f));
  float pdf = 0.39894228040143267794f * expf(-0.5f * v * v);
  return dy * (cdf + v * pdf);
}
// GELU's tanh form (GPT-2's): 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
__device__ __forceinline__ float geluTanh(float v) {
  float u = 0.79788456080286535588f * (v + 0.044715f * v * v * v);
  return 0.5f * v * (1.0f + tanhf(u));
}
__device__ __forceinline__ float geluTanhGrad(float v, float dy) {
  float t = tanhf(0.79788456080286535588f * (v + 0.044715f * v * v * v));
  float du = 0.79788456080286535588f * (1.0f + 3.0f * 0.044715f * v * v);
  return dy * (0.5f * (1.0f + t) + 0.5f * v * (1.0f - t * t) * du);
}
__device__ __forceinline__ float silu(float v) { return v / (1.0f + expf(-v)); }
__device__ __forceinline__ float siluGrad(float v, float dy) {
  float s = 1.0f / (1.0f + expf(-v));
  return dy * s * (1.0f + v * (1.0f - s));
}

template <typename T> __device__ __forceinline__ T warpSum(T v) {
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warpMax(float v) {
  for (int o = 16; o > 0; o >>= 1)
    v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// The sum over a block of THREADS threads (a multiple of 32), in every
// thread.
template <int THREADS, typename T> __device__ T blockSum(T v) {
  __shared__ T partial[THREADS / 32];
  v = warpSum(v);
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = v;
  __syncthreads();
  T total = 0;
  for (int w = 0; w < THREADS / 32; ++w)
    total += partial[w];
  __syncthreads();
  return total;
}
template <int THREADS> __device__ float blockMax(float v) {
  __shared__ float partial[THREADS / 32];
  v = warpMax(v);
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = v;
  __syncthreads();
  float total = partial[0];
  for (int w = 1; w < THREADS / 32; ++w)
    total = fmaxf(total, partial[w]);
  __syncthreads();
  return total;
}

// Whether this block is the grid's last to finish, in every thread of the
// block; what the other blocks wrote before is then visible to it. The
// count starts again for the next launch.
__device__ unsigned int strataBlocksDone;
__device__ bool lastBlock() {
  __shared__ bool last;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned int blocks = gridDim.x * gridDim.y * gridDim.z;
    last = atomicAdd(&strataBlocksDone, 1u) == blocks - 1;
    if (last)
      strataBlocksDone = 0;
  }
  __syncthreads();
  if (last)
    __threadfence();
  return last;
}
