//===- SimtRuntime.h - CUDA's device builtins on the host -------*- C++ -*-===//
//
// Included ahead of a generated kernel unit (compiler/codegen) that is
// compiled for the host, so that the kernel strata-compile writes for a GPU
// runs on a machine without one. A block's threads run as fibers on one OS
// thread, each until it reaches a barrier: __syncthreads waits for every
// live thread of the block, a shuffle for every live lane of its warp.
// Blocks run one after another, in grid order, so __shared__ variables are
// plain statics and a dynamic shared buffer is one allocation reused by
// every block (filled with NaN bytes first, as a GPU leaves it undefined).
// What a GPU would make undefined and this can see is an error, not a
// guess: a barrier some threads never reach, a shuffle that reads a lane
// that did not take part, a block larger than a GPU's, a cp.async
// destination read before the copy's wait (it holds NaN bytes until then)
// or a copy never waited for, an ldmatrix at an address that is not 16-byte
// aligned, a wait for a flag that no block before it set (blocks run in
// index order here; on a GPU the wait would never end).
//
// This is a model of the CUDA execution model for tests (strata-run
// --backend simt, the kernel tests), not a GPU: it shows
// whether a kernel computes the right values under that model, not how it
// performs, and blocks never race with one another here.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_SIMT_SIMTRUNTIME_H
#define STRATA_RUNTIME_SIMT_SIMTRUNTIME_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if !defined(__x86_64__)
#error "the simt model's fiber switch is written for x86-64"
#endif

// A unit may hold a GPU's own code (inline PTX) and this model's stand-in
// for it, chosen by this.
#define STRATA_SIMT 1

// Qualifiers that mean nothing on the host.
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __restrict__
#define __launch_bounds__(...)
// A block's shared variables: one copy, since blocks run one at a time.
#define __shared__ static

namespace simt {

struct Dim3 {
  unsigned x, y, z;
};

enum class State { Runnable, AtBlockBarrier, AtWarpBarrier, Done };

// A fiber's saved stack pointer; the callee-saved registers are on its
// stack. On x86-64 a switch is the few instructions below (no system
// call, as swapcontext makes to save the signal mask): a block's threads
// switch at every barrier and a kernel has many of them.
extern "C" void strataSimtSwitch(void **saveTo, void *resume);
__asm__(".text\n"
        ".globl strataSimtSwitch\n"
        ".hidden strataSimtSwitch\n"
        ".type strataSimtSwitch, @function\n"
        "strataSimtSwitch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size strataSimtSwitch, .-strataSimtSwitch\n");

struct Thread {
  void *stack; // saved stack pointer while parked
  Dim3 index;
  unsigned lane, warp;
  State state;
  unsigned shuffles; // taken part in, in this block
  unsigned copies;   // cp.async in flight
  unsigned groups;   // cp.async groups committed
};

constexpr unsigned kMaxThreads = 1024, kWarp = 32;
// A thread's cp.async in flight at once (a GPU has no such bound; a kernel
// that needs more fails here with a message that says so).
constexpr unsigned kMaxCopies = 128;

/// A cp.async in flight: what lands at its group's wait.
struct AsyncCopy {
  unsigned char *to;
  const unsigned char *from;
  unsigned bytes, group;
};
constexpr size_t kStackBytes = 128 * 1024;

struct Machine {
  Dim3 grid, block, blockIndex;
  Thread threads[kMaxThreads];
  unsigned count = 0;
  Thread *current = nullptr;
  void *scheduler; // the scheduler's saved stack pointer
  char *stacks = nullptr;
  unsigned char *shared = nullptr;
  size_t sharedCapacity = 0;
  // A warp's shuffles (and tensor-core products): each lane posts its
  // value (its fragments) and the number of the exchange, then reads its
  // sources' after the warp's barrier. Exchanges alternate between two
  // slots, so the next one's barrier, not one of its own, keeps a slot
  // until every lane has read it.
  uint64_t exchange[2][kMaxThreads][3];
  unsigned posted[2][kMaxThreads];
  AsyncCopy copies[kMaxThreads][kMaxCopies];
  void **args = nullptr;
  char error[512];
  bool failed = false;
};

inline Machine &machine() {
  static Machine m;
  return m;
}

/// Parks the running thread in `state` and returns to the scheduler; the
/// thread goes on when the scheduler makes it runnable again.
inline void park(State state) {
  Machine &m = machine();
  Thread *t = m.current;
  t->state = state;
  strataSimtSwitch(&t->stack, m.scheduler);
}

/// Records the first error and stops the running thread for good.
inline void fail(const char *what) {
  Machine &m = machine();
  if (!m.failed)
    snprintf(m.error, sizeof m.error, "block (%u, %u, %u) thread %u: %s",
             m.blockIndex.x, m.blockIndex.y, m.blockIndex.z,
             unsigned(m.current - m.threads), what);
  m.failed = true;
  park(State::Done);
}

template <typename T> T shuffle(T value, unsigned source) {
  static_assert(sizeof(T) <= 8, "a shuffle moves at most 8 bytes");
  Machine &m = machine();
  Thread *t = m.current;
  unsigned base = t->warp * kWarp, lane = t->lane;
  unsigned number = ++t->shuffles, slot = number & 1;
  memcpy(&m.exchange[slot][base + lane][0], &value, sizeof value);
  m.posted[slot][base + lane] = number;
  park(State::AtWarpBarrier);
  source &= kWarp - 1;
  if (m.posted[slot][base + source] != number)
    fail("a shuffle reads a lane that did not take part in it");
  T out;
  memcpy(&out, &m.exchange[slot][base + source][0], sizeof out);
  return out;
}

/// Element `half` (0: the low 16 bits) of a word of two bf16, as f32.
inline float bf16Half(uint32_t word, unsigned half) {
  uint32_t bits = (half ? word >> 16 : word & 0xFFFFu) << 16;
  float f;
  memcpy(&f, &bits, 4);
  return f;
}

/// PTX's mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 with C = D:
/// d += A·B for the warp's 16x16 A and 16x8 B, each lane holding the
/// fragments the PTX ISA assigns it (lane l, g = l / 4, t = l % 4; word r
/// holds two bf16 along k, the lower k in the low half):
///   a[r]: row g + 8 (r % 2), k 2t + 8 (r / 2) and the next;
///   b[r]: column g, k 2t + 8 r and the next;
///   d[r]: row g + 8 (r / 2), column 2t + r % 2.
/// Every lane of the warp must take part, as the instruction's .aligned
/// requires. The products of bf16 are exact in f32; the sum over k is
/// f32's, in k order (a tensor core's order and rounding may differ in the
/// last bits).
inline void mmaBf16(float d[4], const uint32_t a[4], const uint32_t b[2]) {
  Machine &m = machine();
  Thread *t = m.current;
  unsigned base = t->warp * kWarp, lane = t->lane;
  unsigned number = ++t->shuffles, slot = number & 1;
  uint64_t *mine = m.exchange[slot][base + lane];
  mine[0] = a[0] | uint64_t(a[1]) << 32;
  mine[1] = a[2] | uint64_t(a[3]) << 32;
  mine[2] = b[0] | uint64_t(b[1]) << 32;
  m.posted[slot][base + lane] = number;
  park(State::AtWarpBarrier);
  for (unsigned l = 0; l < kWarp; ++l)
    if (m.posted[slot][base + l] != number)
      fail("an mma some lanes of the warp did not take part in");
  // Register r of lane l's fragments, as posted.
  auto word = [&](unsigned l, unsigned r) {
    return uint32_t(m.exchange[slot][base + l][r / 2] >> (32 * (r % 2)));
  };
  unsigned g = lane / 4, tid = lane % 4;
  for (unsigned r = 0; r < 4; ++r) {
    unsigned row = g + 8 * (r / 2), col = 2 * tid + r % 2;
    float sum = 0.0f;
    for (unsigned k = 0; k < 16; ++k) {
      unsigned kk = k % 8;
      // A's row `row`, k: lane (row % 8) * 4 + kk / 2, word row / 8 + 2 (k /
      // 8).
      float x =
          bf16Half(word((row % 8) * 4 + kk / 2, row / 8 + 2 * (k / 8)), k % 2);
      // B's column `col`, k: lane col * 4 + kk / 2, word 4 + k / 8.
      float y = bf16Half(word(col * 4 + kk / 2, 4 + k / 8), k % 2);
      sum += x * y;
    }
    d[r] += sum;
  }
}

/// PTX's ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16: lane l gives
/// the address of row l % 8 of matrix l / 8, 16 bytes; without `trans`
/// r[i] is matrix i's row l / 4, elements 2 (l % 4) and +1; with it, the
/// elements at rows 2 (l % 4) and +1 of column l / 4. Every lane of the
/// warp takes part; each row address is 16-byte aligned. Shared memory is
/// read once every lane has given its address (no lane writes meanwhile).
inline void ldmatrix(unsigned r[4], const void *row, bool trans) {
  Machine &m = machine();
  Thread *t = m.current;
  unsigned base = t->warp * kWarp, lane = t->lane;
  unsigned number = ++t->shuffles, slot = number & 1;
  m.exchange[slot][base + lane][0] = uint64_t(uintptr_t(row));
  m.posted[slot][base + lane] = number;
  park(State::AtWarpBarrier);
  for (unsigned l = 0; l < kWarp; ++l) {
    if (m.posted[slot][base + l] != number)
      fail("an ldmatrix some lanes of the warp did not take part in");
    if (m.exchange[slot][base + l][0] % 16 != 0)
      fail("an ldmatrix row address that is not 16-byte aligned");
  }
  auto rowOf = [&](unsigned l) {
    return (const unsigned char *)uintptr_t(m.exchange[slot][base + l][0]);
  };
  for (unsigned i = 0; i < 4; ++i) {
    if (!trans) {
      memcpy(&r[i], rowOf(8 * i + lane / 4) + 4 * (lane % 4), 4);
      continue;
    }
    uint16_t lo, hi;
    memcpy(&lo, rowOf(8 * i + 2 * (lane % 4)) + 2 * (lane / 4), 2);
    memcpy(&hi, rowOf(8 * i + 2 * (lane % 4) + 1) + 2 * (lane / 4), 2);
    r[i] = unsigned(lo) | unsigned(hi) << 16;
  }
}

/// __ballot_sync: bit l of the result is lane l's predicate, over the lanes
/// that take part (a lane that does not has its bit 0; the mask is not
/// checked against them).
inline unsigned ballot(bool predicate) {
  Machine &m = machine();
  Thread *t = m.current;
  unsigned base = t->warp * kWarp, lane = t->lane;
  unsigned number = ++t->shuffles, slot = number & 1;
  m.exchange[slot][base + lane][0] = predicate ? 1 : 0;
  m.posted[slot][base + lane] = number;
  park(State::AtWarpBarrier);
  unsigned bits = 0;
  for (unsigned l = 0; l < kWarp; ++l)
    if (m.posted[slot][base + l] == number && m.exchange[slot][base + l][0])
      bits |= 1u << l;
  return bits;
}

/// A copy lands: its bytes, then zeros to 16.
inline void land(const AsyncCopy &copy) {
  memcpy(copy.to, copy.from, copy.bytes);
  memset(copy.to + copy.bytes, 0, 16 - copy.bytes);
}

/// PTX's cp.async.cg.shared.global of 16 bytes, the first `bytes` read:
/// the destination holds NaN bytes until the copy's group is waited for,
/// so a read before the wait (or without a barrier after another thread's
/// wait) shows.
inline void cpAsync16(void *shared, const void *global, unsigned bytes) {
  Machine &m = machine();
  Thread *t = m.current;
  if (uintptr_t(shared) % 16 || uintptr_t(global) % 16)
    fail("a cp.async address that is not 16-byte aligned");
  if (bytes > 16)
    fail("a cp.async of 16 bytes that reads more than 16");
  if (t->copies == kMaxCopies)
    fail("more cp.async in flight in one thread than the simt model holds");
  unsigned index = unsigned(t - m.threads);
  m.copies[index][t->copies++] = {
      (unsigned char *)shared, (const unsigned char *)global, bytes, t->groups};
  memset(shared, 0xFF, 16);
}

/// PTX's cp.async.wait_group: every copy of a group older than the
/// `pending` most recent committed ones lands.
inline void cpAsyncWaitGroup(unsigned pending) {
  Machine &m = machine();
  Thread *t = m.current;
  AsyncCopy *mine = m.copies[t - m.threads];
  unsigned kept = 0;
  for (unsigned i = 0; i < t->copies; ++i) {
    if (mine[i].group + pending < t->groups)
      land(mine[i]);
    else
      mine[kept++] = mine[i];
  }
  t->copies = kept;
}

} // namespace simt

// The built-in variables and functions the generated kernels use.
#define threadIdx (::simt::machine().current->index)
#define blockIdx (::simt::machine().blockIndex)
#define blockDim (::simt::machine().block)
#define gridDim (::simt::machine().grid)

inline void __syncthreads() { ::simt::park(::simt::State::AtBlockBarrier); }
inline void __threadfence() {}
template <typename T> T __shfl_sync(unsigned, T v, int source) {
  return ::simt::shuffle(v, unsigned(source));
}
template <typename T> T __shfl_xor_sync(unsigned, T v, int mask) {
  return ::simt::shuffle(v, ::simt::machine().current->lane ^ unsigned(mask));
}
template <typename T> T __shfl_down_sync(unsigned, T v, unsigned delta) {
  unsigned lane = ::simt::machine().current->lane;
  return ::simt::shuffle(v, lane + delta < 32 ? lane + delta : lane);
}
template <typename T> T __ldcg(const T *p) { return *p; }
inline void mmaBf16(float d[4], const unsigned a[4], const unsigned b[2]) {
  ::simt::mmaBf16(d, a, b);
}
// compiler/codegen/cuda/ptx.cuh's wrappers, on the model.
inline void ldmatrixX4(unsigned r[4], const void *row) {
  ::simt::ldmatrix(r, row, false);
}
inline void ldmatrixX4Trans(unsigned r[4], const void *row) {
  ::simt::ldmatrix(r, row, true);
}
inline void cpAsync16(void *shared, const void *global, unsigned bytes) {
  ::simt::cpAsync16(shared, global, bytes);
}
inline void cpAsyncCommit() { ++::simt::machine().current->groups; }
template <int PENDING> void cpAsyncWait() {
  ::simt::cpAsyncWaitGroup(unsigned(PENDING));
}
inline float exp2Fast(float x) { return exp2f(x); }
// Blocks run one after another in index order here: a flag a block waits
// for is set already, or no block before it set it and a GPU would wait
// for good.
inline void waitAtLeast(const int *flag, int value) {
  if (*(const volatile int *)flag < value)
    ::simt::fail("waits for a flag that no block before it set (on a GPU "
                 "this wait would never end)");
}
inline void releaseFlag(int *flag, int value) { *(volatile int *)flag = value; }
inline void __syncwarp(unsigned = 0xffffffffu) {
  ::simt::park(::simt::State::AtWarpBarrier);
}
inline void __nanosleep(unsigned) {}
inline unsigned __ballot_sync(unsigned, int predicate) {
  return ::simt::ballot(predicate != 0);
}
inline int __popc(unsigned v) { return __builtin_popcount(v); }
inline int __ffs(int v) { return __builtin_ffs(v); }
template <typename T> T atomicAdd(T *p, T v) {
  T old = *p;
  *p = old + v;
  return old;
}
inline float __uint_as_float(unsigned v) {
  float f;
  memcpy(&f, &v, 4);
  return f;
}
inline unsigned __float_as_uint(float v) {
  unsigned u;
  memcpy(&u, &v, 4);
  return u;
}
inline float __int_as_float(int v) { return __uint_as_float(unsigned(v)); }
inline int __float_as_int(float v) { return int(__float_as_uint(v)); }
inline double __longlong_as_double(long long v) {
  double d;
  memcpy(&d, &v, 8);
  return d;
}
inline long long __double_as_longlong(double v) {
  long long l;
  memcpy(&l, &v, 8);
  return l;
}

// The kernel's entry with its parameters unpacked, which the harness
// appends after the kernel (runtime/simt/Simt.cpp).
extern "C" void strataSimtEntry(void **args);

namespace simt {

/// A fiber's first frame: it runs the kernel, then parks for good.
inline void threadMain() {
  Machine &m = machine();
  strataSimtEntry(m.args);
  if (m.current->copies)
    fail("a cp.async never waited for (cp.async.wait_group) before the "
         "thread ended");
  park(State::Done);
}

/// A stack whose first switch enters threadMain, as if called (so the
/// stack is aligned as the ABI expects at a function's entry).
inline void *freshStack(char *base, size_t bytes) {
  uintptr_t top = (uintptr_t(base) + bytes) & ~uintptr_t(15);
  void **sp = (void **)top;
  *--sp = nullptr;             // threadMain's return address: none
  *--sp = (void *)&threadMain; // where the switch's ret goes
  for (int r = 0; r < 6; ++r)  // rbp, rbx, r12-r15
    *--sp = nullptr;
  return sp;
}

/// Runs the current block's threads until every one is done; false on an
/// error (in m.error).
inline bool runBlock() {
  Machine &m = machine();
  for (;;) {
    for (unsigned i = 0; i < m.count; ++i) {
      Thread &t = m.threads[i];
      if (t.state != State::Runnable)
        continue;
      m.current = &t;
      strataSimtSwitch(&m.scheduler, t.stack);
      if (m.failed)
        return false;
    }
    unsigned live = 0, atBlock = 0;
    bool released = false;
    for (unsigned w = 0; w * kWarp < m.count; ++w) {
      unsigned end = (w + 1) * kWarp < m.count ? (w + 1) * kWarp : m.count;
      unsigned lanes = 0, waiting = 0;
      for (unsigned i = w * kWarp; i < end; ++i) {
        lanes += m.threads[i].state != State::Done;
        waiting += m.threads[i].state == State::AtWarpBarrier;
        atBlock += m.threads[i].state == State::AtBlockBarrier;
      }
      live += lanes;
      if (lanes > 0 && waiting == lanes) {
        for (unsigned i = w * kWarp; i < end; ++i)
          if (m.threads[i].state == State::AtWarpBarrier)
            m.threads[i].state = State::Runnable;
        released = true;
      }
    }
    if (live == 0)
      return true;
    if (released)
      continue;
    if (atBlock != live) {
      snprintf(m.error, sizeof m.error,
               "block (%u, %u, %u): threads wait at different barriers (a "
               "__syncthreads not every live thread reaches, or a shuffle "
               "some lanes of a warp skip)",
               m.blockIndex.x, m.blockIndex.y, m.blockIndex.z);
      return false;
    }
    for (unsigned i = 0; i < m.count; ++i)
      if (m.threads[i].state == State::AtBlockBarrier)
        m.threads[i].state = State::Runnable;
  }
}

} // namespace simt

/// Runs the kernel over `grid` blocks of `block` threads with `sharedBytes`
/// of dynamic shared memory; 0, or 1 with the reason in `error`.
extern "C" int strataSimtLaunch(const unsigned grid[3], const unsigned block[3],
                                unsigned sharedBytes, void **args, char *error,
                                size_t errorBytes) {
  using namespace simt;
  Machine &m = machine();
  m.failed = false;
  m.error[0] = 0;
  m.grid = {grid[0], grid[1], grid[2]};
  m.block = {block[0], block[1], block[2]};
  m.args = args;
  unsigned long long threads =
      (unsigned long long)block[0] * block[1] * block[2];
  if (threads == 0 || threads > kMaxThreads ||
      (unsigned long long)grid[0] * grid[1] * grid[2] == 0) {
    snprintf(error, errorBytes,
             "a launch of %u x %u x %u blocks of %u x %u x %u threads: a "
             "block holds 1 to 1024 threads and the grid at least one block",
             grid[0], grid[1], grid[2], block[0], block[1], block[2]);
    return 1;
  }
  m.count = unsigned(threads);
  if (!m.stacks)
    m.stacks = (char *)malloc(kMaxThreads * kStackBytes);
  if (sharedBytes > m.sharedCapacity) {
    free(m.shared);
    m.shared = (unsigned char *)malloc(sharedBytes);
    m.sharedCapacity = sharedBytes;
  }
  for (unsigned z = 0; z < grid[2]; ++z)
    for (unsigned y = 0; y < grid[1]; ++y)
      for (unsigned x = 0; x < grid[0]; ++x) {
        m.blockIndex = {x, y, z};
        memset(m.posted, 0, sizeof m.posted); // no lane has taken part
        if (sharedBytes)
          memset(m.shared, 0xFF, sharedBytes);
        for (unsigned i = 0; i < m.count; ++i) {
          Thread &t = m.threads[i];
          t.index = {i % block[0], i / block[0] % block[1],
                     i / (block[0] * block[1])};
          t.lane = i % kWarp;
          t.warp = i / kWarp;
          t.state = State::Runnable;
          t.shuffles = 0;
          t.copies = t.groups = 0;
          t.stack = freshStack(m.stacks + size_t(i) * kStackBytes, kStackBytes);
        }
        if (!runBlock()) {
          snprintf(error, errorBytes, "%s", m.error);
          return 1;
        }
      }
  return 0;
}

namespace simt {
/// The dynamic shared memory (extern __shared__), as the harness rewrites
/// its declaration.
inline void *dynamicShared() { return machine().shared; }
} // namespace simt

#endif
