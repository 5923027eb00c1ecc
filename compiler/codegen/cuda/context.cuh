//===- context.cuh - where a rank's tokens sit in the sequence ------------===//
//
// Context parallelism cuts each sample's sequence into 2c chunks; rank i
// holds chunks i and 2c - 1 - i, one after the other. The device's copy of
// runtime/plan/ContextPositions.h (the CPU twins'): c below 2 is the whole
// sequence.
//
//===----------------------------------------------------------------------===//
#pragma once
#include "common.cuh"

// A rank's place in context parallelism, as attention's kernels take it:
// its cp rank and, for keys of one rank, the ring's step that brought them.
struct ContextPlace {
  i64 rank, ringStep;
};

// The place of row `row` of the `rows` rank `rank` holds.
__device__ __forceinline__ i64 contextPosition(i64 row, i64 rows, i64 c,
                                               i64 rank) {
  if (c < 2)
    return row;
  const i64 half = rows / 2;
  const i64 chunk = row < half ? rank : 2 * c - 1 - rank;
  return chunk * half + row % half;
}

// The place of row `row` of every rank's rows gathered in rank order.
__device__ __forceinline__ i64 gatheredContextPosition(i64 row, i64 rows,
                                                       i64 c) {
  if (c < 2)
    return row;
  return contextPosition(row % rows, rows, c, row / rows);
}

// The rank whose keys the ring's step `step` brings to rank `rank`.
__device__ __forceinline__ i64 ringKeyRank(i64 rank, i64 step, i64 c) {
  return ((rank - step) % c + c) % c;
}

// The place of key row `row` in attention whose queries are the `rows`
// rank `rank` holds: every rank's keys gathered (`keys` = c · rows), or the
// ring's step `step` (`keys` = `rows`, ringKeyRank's).
__device__ __forceinline__ i64 keyContextPosition(i64 row, i64 rows, i64 keys,
                                                  i64 c, i64 rank, i64 step) {
  if (c < 2)
    return row;
  if (keys != rows)
    return gatheredContextPosition(row, rows, c);
  return contextPosition(row, rows, c, ringKeyRank(rank, step, c));
}

// The row of the `rows` rank `rank` holds at place `place`, or -1 where
// another rank holds it.
__device__ __forceinline__ i64 contextRow(i64 place, i64 rows, i64 c,
                                          i64 rank) {
  if (c < 2)
    return place < rows ? place : -1;
  const i64 half = rows / 2, chunk = place / half;
  if (chunk == rank)
    return place % half;
  if (chunk == 2 * c - 1 - rank)
    return half + place % half;
  return -1;
}
