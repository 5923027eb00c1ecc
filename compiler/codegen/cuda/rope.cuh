//===- rope.cuh - rotary position embedding -------------------------------===//
//
// x [batch, seq, heads, dim]: for each row (a position's head) and k below
// dim / 2, the pair (x_k, x_{k+dim/2}) rotated by θ = position ·
// base^(-2k/dim) (inverse: by -θ). The angle and the rotation in double,
// as the CPU backend computes them (an f32 angle at position 8192 would be
// 5e-4 off). A thread takes 8 consecutive k of a row (16-byte loads of
// bf16 where the row allows), else one. With context parallelism a row's
// position is its place in the whole sequence (context.cuh).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"
#include "context.cuh"

template <int V, int SEQ, int HEADS, int DIM, typename TX, typename TY>
__device__ __forceinline__ void ropeChunk(const TX *x, TY *y, i64 row, int k0,
                                          double base, double sign, i64 context,
                                          i64 contextRank) {
  constexpr int HALF = DIM / 2;
  const double position =
      (double)contextPosition(row / HEADS % SEQ, SEQ, context, contextRank);
  float a[V], b[V], outA[V], outB[V];
  loadN<V>(x, row * DIM + k0, a);
  loadN<V>(x, row * DIM + k0 + HALF, b);
#pragma unroll
  for (int e = 0; e < V; ++e) {
    double theta = position * pow(base, -2.0 * (double)(k0 + e) / DIM);
    double s, c;
    sincos(theta, &s, &c);
    s *= sign;
    outA[e] = (float)((double)a[e] * c - (double)b[e] * s);
    outB[e] = (float)((double)b[e] * c + (double)a[e] * s);
  }
  storeN<V>(y, row * DIM + k0, outA);
  storeN<V>(y, row * DIM + k0 + HALF, outB);
}

template <int SEQ, int HEADS, int DIM, typename TX, typename TY>
__device__ __forceinline__ void rope(const TX *x, TY *y, i64 rows, double base,
                                     double sign, bool vectors, i64 context,
                                     i64 contextRank) {
  constexpr int HALF = DIM / 2;
  const i64 stride = (i64)gridDim.x * blockDim.x;
  const i64 first = (i64)blockIdx.x * blockDim.x + threadIdx.x;
  if (HALF % 8 == 0 && vectors) {
    constexpr int V = HALF % 8 == 0 ? 8 : 1;
    for (i64 c = first; c < rows * (HALF / V); c += stride)
      ropeChunk<V, SEQ, HEADS, DIM>(x, y, c / (HALF / V),
                                    int(c % (HALF / V)) * V, base, sign,
                                    context, contextRank);
    return;
  }
  for (i64 c = first; c < rows * HALF; c += stride)
    ropeChunk<1, SEQ, HEADS, DIM>(x, y, c / HALF, int(c % HALF), base, sign,
                                  context, contextRank);
}
