//===- reduce.cuh - sums over a grid's blocks, in a fixed order -----------===//
//
// A sum over the grid (a bias's gradient over the rows, a loss's mean, a
// gradient's norm) without atomics on the result, the same bits on every
// run, and without one block adding every block's part: each block writes
// its partial row of `width` floats; the last block to finish in each group
// of GROUP consecutive blocks adds its group's rows in block order; the
// last group to finish adds the groups' rows in group order. Two stages of
// at most GROUP and blocks / GROUP rows, where one last block would add
// them all.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

// What a launch's blocks share to add their partial rows, module scratch
// of the unit. A grid of x blocks by y tiles adds each tile's x partial
// rows: the partial rows [y][x][width], the groups' rows [y][groups][width],
// a count of finished blocks per tile and group [y][groups] and one of
// finished groups per tile [y] (zero when a launch starts; the finishers
// reset them).
struct GridSums {
  float *partials, *groupRows;
  unsigned *groupDone, *groupsDone;
};

// Called by every thread of every block, after the block's threads wrote
// its partial row (partialRow(s, width) says where). The block that adds
// a tile's last stage calls finish(column, sum) for every column of the
// tile's row, by its threads in turn, and returns true; the others return
// false.
// Where the calling block writes its partial row of `width` floats.
__device__ __forceinline__ float *partialRow(const GridSums &s, int width) {
  return s.partials + ((i64)blockIdx.y * gridDim.x + blockIdx.x) * width;
}

template <int THREADS, int GROUP, class Finish>
__device__ __forceinline__ bool addGridSums(const GridSums &s, int width,
                                            Finish finish) {
  __shared__ bool lastToFinish;
  const int blocks = gridDim.x, group = blockIdx.x / GROUP;
  const int groups = (blocks + GROUP - 1) / GROUP, first = group * GROUP;
  const int members = blocks - first < GROUP ? blocks - first : GROUP;
  const float *tilePartials = s.partials + (i64)blockIdx.y * blocks * width;
  float *tileGroupRows = s.groupRows + (i64)blockIdx.y * groups * width;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned *done = &s.groupDone[blockIdx.y * groups + group];
    lastToFinish = atomicAdd(done, 1u) == unsigned(members - 1);
    if (lastToFinish)
      *done = 0;
  }
  __syncthreads();
  if (!lastToFinish)
    return false;
  __threadfence(); // the group's rows, as their blocks wrote them
  for (int c = threadIdx.x; c < width; c += THREADS) {
    float sum = 0.0f;
    for (int b = first; b < first + members; ++b)
      sum += __ldcg(&tilePartials[(i64)b * width + c]);
    tileGroupRows[(i64)group * width + c] = sum;
  }
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned *done = &s.groupsDone[blockIdx.y];
    lastToFinish = atomicAdd(done, 1u) == unsigned(groups - 1);
    if (lastToFinish)
      *done = 0;
  }
  __syncthreads();
  if (!lastToFinish)
    return false;
  __threadfence();
  for (int c = threadIdx.x; c < width; c += THREADS) {
    float sum = 0.0f;
    for (int g = 0; g < groups; ++g)
      sum += __ldcg(&tileGroupRows[(i64)g * width + c]);
    finish(c, sum);
  }
  return true;
}

// What a launch's blocks share to add one number each over the grid (T:
// float or double): the blocks' numbers, per group of THREADS blocks its
// sum, a count of finished blocks per group and one of finished groups
// (zero at launch start; reset by the finishers).
template <typename T> struct GridTotal {
  T *blockValues, *groupValues;
  unsigned *groupDone, *groupsDone;
};

// Called by every thread of every block of a grid along x, `value` in
// thread 0: the last block of each group of THREADS blocks adds the
// group's values (a block sum, fixed order), the last group's finisher the
// groups' sums, and calls finish(total) in its thread 0.
template <int THREADS, typename T, class Finish>
__device__ __forceinline__ void addGridTotal(const GridTotal<T> &s, T value,
                                             Finish finish) {
  __shared__ bool lastToFinish;
  const int blocks = gridDim.x, group = blockIdx.x / THREADS;
  const int groups = (blocks + THREADS - 1) / THREADS, first = group * THREADS;
  const int members = blocks - first < THREADS ? blocks - first : THREADS;
  if (threadIdx.x == 0)
    s.blockValues[blockIdx.x] = value;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    lastToFinish = atomicAdd(&s.groupDone[group], 1u) == unsigned(members - 1);
    if (lastToFinish)
      s.groupDone[group] = 0;
  }
  __syncthreads();
  if (!lastToFinish)
    return;
  __threadfence();
  T sum = blockSum<THREADS>((int)threadIdx.x < members
                                ? __ldcg(&s.blockValues[first + threadIdx.x])
                                : T(0));
  if (threadIdx.x == 0)
    s.groupValues[group] = sum;
  __threadfence();
  __syncthreads();
  if (threadIdx.x == 0) {
    lastToFinish = atomicAdd(s.groupsDone, 1u) == unsigned(groups - 1);
    if (lastToFinish)
      *s.groupsDone = 0;
  }
  __syncthreads();
  if (!lastToFinish)
    return;
  __threadfence();
  T part = T(0);
  for (int g = threadIdx.x; g < groups; g += THREADS)
    part += __ldcg(&s.groupValues[g]);
  T total = blockSum<THREADS>(part);
  if (threadIdx.x == 0)
    finish(total);
}
