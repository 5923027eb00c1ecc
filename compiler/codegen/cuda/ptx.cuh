//===- ptx.cuh - the PTX instructions the hand-tuned kernels name ---------===//
//
// Small wrappers, one per instruction, so that a kernel reads as its
// algorithm: the warp's tensor-core product (mma.sync m16n8k16), shared
// memory to fragments (ldmatrix), global to shared memory without the
// registers (cp.async, in groups), the exponential's hardware
// approximation, and waits on a flag another block sets. No CUDA header:
// NVRTC compiles a unit in milliseconds.
//
// The simt model (runtime/simt/SimtRuntime.h) defines each of these with
// the same name and meaning when STRATA_SIMT is set, and checks what a GPU
// leaves undefined: a cp.async destination read before its wait, an
// ldmatrix or mma some lanes skip, a wait for a block that runs later.
//
// Fragments of mma.m16n8k16 (the PTX ISA's layout): lane l, g = l / 4,
// t = l % 4; a word holds two bf16 along k, the lower k in the low half.
//   A (16x16, row-major): a[r] row g + 8 (r % 2), k 2t + 8 (r / 2) and +1
//   B (16x8, column-major): b[r] column g, k 2t + 8 r and +1
//   C, D (16x8, f32): d[r] row g + 8 (r / 2), column 2t + r % 2
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

#ifndef STRATA_SIMT

// d += a·b: one warp's 16x16 by 16x8 bf16 product, f32 accumulators.
__device__ __forceinline__ void mmaBf16(float d[4], const unsigned a[4],
                                        const unsigned b[2]) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]),
                 "r"(b[1]));
}

// A shared-memory address as the 32-bit offset the shared state space takes.
__device__ __forceinline__ unsigned sharedAddress(const void *p) {
  return (unsigned)__cvta_generic_to_shared(p);
}

// Four 8x8 matrices of 16-bit elements from shared memory: lane l gives
// the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned);
// r[i] is matrix i's word at row l / 4, elements 2 (l % 4) and +1.
__device__ __forceinline__ void ldmatrixX4(unsigned r[4], const void *row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(row)));
}
// The same matrices transposed: r[i] holds matrix i's elements at rows
// 2 (l % 4) and +1 of column l / 4.
__device__ __forceinline__ void ldmatrixX4Trans(unsigned r[4],
                                                const void *row) {
  asm volatile(
      "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
      : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
      : "r"(sharedAddress(row)));
}

// 16 bytes from global to shared memory, the first `bytes` (0 or 16) of
// them read and the rest zero: no register holds them on the way. Both
// addresses 16-byte aligned.
__device__ __forceinline__ void cpAsync16(void *shared, const void *global,
                                          unsigned bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(
                   sharedAddress(shared)),
               "l"(global), "r"(bytes)
               : "memory");
}
// Closes the thread's group of cp.async issued since the last commit.
__device__ __forceinline__ void cpAsyncCommit() {
  asm volatile("cp.async.commit_group;" ::: "memory");
}
// Waits until at most PENDING of the thread's most recent groups are still
// in flight: every older one has landed (for this thread; a barrier then
// shows them to the block).
template <int PENDING> __device__ __forceinline__ void cpAsyncWait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(PENDING) : "memory");
}

// 2^x by the special function unit (2 ulp; flushes subnormals).
__device__ __forceinline__ float exp2Fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// Spins until *flag reaches `value`, then makes what the block that set
// it wrote before visible: the thread that calls it is the block's
// lookout, and a barrier after it gives the rest the same view. The flag's
// setter is a block that started earlier (blocks start in the order of
// their index), so the wait ends.
__device__ __forceinline__ void waitAtLeast(const int *flag, int value) {
  int seen;
  for (;;) {
    asm volatile("ld.acquire.gpu.global.s32 %0, [%1];"
                 : "=r"(seen)
                 : "l"(flag)
                 : "memory");
    if (seen >= value)
      break;
    __nanosleep(64);
  }
}
// Sets *flag to `value` after everything this thread (having passed a
// barrier after the block's writes and a __threadfence) wrote before.
__device__ __forceinline__ void releaseFlag(int *flag, int value) {
  asm volatile("st.release.gpu.global.s32 [%0], %1;" ::"l"(flag), "r"(value)
               : "memory");
}

// Two floats as two bf16 in one word, the first in the low half, each
// rounded to nearest even as every store of strata's rounds.
__device__ __forceinline__ unsigned packBf16(float lo, float hi) {
  unsigned word;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(word) : "f"(hi), "f"(lo));
  return word;
}

#else // the simt model's host code

__device__ __forceinline__ unsigned packBf16(float lo, float hi) {
  return (unsigned)toBf16(lo) | ((unsigned)toBf16(hi) << 16);
}

#endif // STRATA_SIMT
