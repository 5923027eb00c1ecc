//===- ContextPositions.h - a rank's tokens in the sequence --*- C++ -*-===//
//
// Context parallelism cuts each sample's sequence into 2c chunks and
// context-parallel rank i holds chunks i and 2c - 1 - i, one after the
// other (Megatron's order: under a causal mask every rank's queries see as
// many keys). The kernels that must know a token's place in the whole
// sequence (rope's angles, a position table's rows, attention's causal
// mask) take c as `context_parallel` (0 or 1: the rows are the whole
// sequence) and the rank as `context_rank`; this is their one definition
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

} // namespace strata::runtime

#endif
