//===- ContextPositions.h - a rank's tokens in the sequence --*- C++ -*-===//
//
// Context parallelism cuts each sample's sequence into 2c chunks and
// context-parallel rank i holds chunks i and 2c - 1 - i, one after the
// other (Megatron's order: under a causal mask every rank's queries see as
// many keys). The kernels that must know a token's place in the whole
// sequence (rope's angles, a position table's rows, attention's causal
// mask) take c as `context_parallel` (0 or 1: the rows are the whole
// sequence) and the rank as `context_rank` (attention's keys are every
// rank's, gathered, or, at the ring's step s, rank (i − s) mod c's, its
// `ring_step`); this is their one definition
// on the host (the CPU twins and the float64 tests), and
// compiler/codegen/cuda/context.cuh the device's.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_CONTEXTPOSITIONS_H
#define STRATA_RUNTIME_PLAN_CONTEXTPOSITIONS_H

#include <cstdint>

namespace strata::runtime {

/// The place of row `row` of the `rows` rank `rank` holds.
inline int64_t contextPosition(int64_t row, int64_t rows, int64_t c,
                               int64_t rank) {
  if (c < 2)
    return row;
  int64_t half = rows / 2;
  int64_t chunk = row < half ? rank : 2 * c - 1 - rank;
  return chunk * half + row % half;
}

/// The place of row `row` of every rank's rows gathered in rank order
/// (`rows` a rank).
inline int64_t gatheredContextPosition(int64_t row, int64_t rows, int64_t c) {
  if (c < 2)
    return row;
  return contextPosition(row % rows, rows, c, row / rows);
}

/// The rank whose keys the ring's step `step` brings to rank `rank`: its
/// `step`-th predecessor, (rank − step) mod c.
inline int64_t ringKeyRank(int64_t rank, int64_t step, int64_t c) {
  return ((rank - step) % c + c) % c;
}

/// The place of key row `row` in attention whose queries are the `rows`
/// rank `rank` holds: with every rank's keys gathered (`keys` = c · rows)
/// its place among them; with one rank's (the ring's step `step`, `keys` =
/// `rows`) its place among ringKeyRank's.
inline int64_t keyContextPosition(int64_t row, int64_t rows, int64_t keys,
                                  int64_t c, int64_t rank, int64_t step) {
  if (c < 2)
    return row;
  if (keys != rows)
    return gatheredContextPosition(row, rows, c);
  return contextPosition(row, rows, c, ringKeyRank(rank, step, c));
}

} // namespace strata::runtime

#endif
