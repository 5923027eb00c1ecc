//===- attention_mma.cuh - what attention's tensor-core kernels share -----===//
//
// Tiles of q-, k- and v-shaped operands ([batch, rows, heads, dim], bf16)
// into shared memory by cp.async, the reductions over the four lanes that
// hold a row of an mma accumulator, and stores of an accumulator's pairs.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "attention_layout.cuh"
#include "ptx.cuh"

// Rows [first, first + ROWS) of one head of an operand into a shared tile,
// issued as 16-byte cp.async by THREADS threads: `head` is the head's row
// 0, its rows `stride` elements apart; rows from `count` on and the
// padding past DIM are zero. The caller commits and waits.
template <int DIM, int ROWS, int THREADS>
__device__ __forceinline__ void
loadRowsAsync(bf16 *tile, const bf16 *head, int stride, int first, int count) {
  constexpr int kChunks = attentionPaddedDim(DIM) / 8; // 16 bytes each
  constexpr int kPitch = attentionPitch(DIM);
  constexpr int kTotal = ROWS * kChunks;
#pragma unroll
  for (int k = 0; k < (kTotal + THREADS - 1) / THREADS; ++k) {
    int c = threadIdx.x + k * THREADS;
    if (kTotal % THREADS != 0 && c >= kTotal)
      break;
    int row = c / kChunks, chunk = c % kChunks;
    bool in = first + row < count && chunk * 8 < DIM;
    const bf16 *from = in ? head + (first + row) * stride + chunk * 8 : head;
    cpAsync16(tile + row * kPitch + chunk * 8, from, in ? 16u : 0u);
  }
}

// The sum and the max of a row's values over the four lanes that hold it.
__device__ __forceinline__ float quadSum(float v) {
  v += __shfl_xor_sync(0xffffffffu, v, 1);
  return v + __shfl_xor_sync(0xffffffffu, v, 2);
}
__device__ __forceinline__ float quadMax(float v) {
  v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
  return fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
}

// Elements i and i + 1 of an output (i even, so the pair is aligned).
__device__ __forceinline__ void storePair(bf16 *p, int i, float a, float b) {
  *(unsigned *)(p + i) = packBf16(a, b);
}
__device__ __forceinline__ void storePair(float *p, int i, float a, float b) {
  struct alignas(8) Pair {
    float a, b;
  };
  *(Pair *)(p + i) = Pair{a, b};
}

// -infinity, a masked score.
__device__ __forceinline__ float minusInfinity() {
  return -__uint_as_float(0x7f800000u);
}
