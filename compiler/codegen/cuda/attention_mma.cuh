//===- attention_mma.cuh - what attention's tensor-core kernels share -----===//
//
// Tiles of q-, k- and v-shaped operands ([batch, rows, heads, dim], bf16)
// into shared memory by cp.async, the reductions over the four lanes that
// hold a row of an mma accumulator, stores of an accumulator's pairs, and
// where a launch's rows sit in the sequence (AttentionPlaces).
//
//===----------------------------------------------------------------------===//
#pragma once
#include "attention_layout.cuh"
#include "context.cuh"
#include "ptx.cuh"

// Where a launch's query and key rows sit in the sequence, for the causal
// mask and for skipping the tiles no row sees; in 32 bits, as the tiles
// index a sample's rows. Without context parallelism a row's place is its
// index. With it (context.cuh), the queries are the rank's two chunks,
// whose places rise with the row, and the keys are kSegments runs of
// kSegmentKeys rows whose places rise (attentionKeySegments): the ring
// step's rank's, or each rank's of the gathered keys. A tile of keys never
// crosses a segment, so its first and last keys bound its places.
template <class S> struct AttentionPlaces {
  static constexpr bool kByPlace = S::kCausal && S::kContext >= 2;
  static constexpr int kSegments =
      attentionKeySegments(S::kSeq, S::kKeys, S::kContext, S::kCausal);
  static constexpr int kSegmentKeys = S::kKeys / kSegments;
  static constexpr int kHalf = S::kSeq / 2, kLastChunk = 2 * S::kContext - 1;
  static_assert(!kByPlace || S::kSeq % 2 == 0, "a rank holds two chunks");
  static_assert(!kByPlace || S::kKeys == (i64)kSegments * S::kSeq,
                "one rank's keys, or every rank's gathered");

  int rank, keyRank; // the queries' rank; the ring step's keys' rank

  __device__ explicit AttentionPlaces(ContextPlace at)
      : rank((int)at.rank),
        keyRank(kByPlace ? (int)ringKeyRank(at.rank, at.ringStep, S::kContext)
                         : 0) {}

  // The place of row `row` of the rows rank `owner` holds (context.cuh's
  // rule; the rows are a compile-time count, so its division folds).
  __device__ static int place(int row, int owner) {
    return kByPlace ? (int)contextPosition(row, S::kSeq, S::kContext, owner)
                    : row;
  }
  // How many of the `rows` rank `owner` holds sit before place p.
  __device__ static int before(int p, int owner, int rows) {
    auto clamp = [](int x, int hi) { return x < 0 ? 0 : x > hi ? hi : x; };
    if (!kByPlace)
      return clamp(p, rows);
    return clamp(p - owner * kHalf, kHalf) +
           clamp(p - (kLastChunk - owner) * kHalf, kHalf);
  }
  __device__ int keyOwner(int segment) const {
    return kSegments > 1 ? segment : keyRank;
  }

  __device__ int query(int i) const { return place(i, rank); }
  __device__ int key(int segment, int j) const {
    return place(j, keyOwner(segment));
  }
  // How many queries sit before place p; how many of a segment's keys sit
  // at or before it.
  __device__ int queriesBefore(int p) const { return before(p, rank, S::kSeq); }
  __device__ int keysThrough(int segment, int p) const {
    return before(p + 1, keyOwner(segment), kSegmentKeys);
  }
};

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
