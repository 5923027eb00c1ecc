//===- attention_layout.cuh - attention's tiles, for kernel and compiler --===//
//
// The attention kernels' tiles and shared memory, written once: the kernels
// (attention_fwd.cuh, attention_bwd.cuh, attention_simt.cuh) lay out their
// shared memory with these at compile time, and the emitters
// (compiler/codegen/EmitAttention*.cpp), which include this file as C++,
// size the launch with the same functions. Plain constexpr C++.
//
// A shared tile holds rows of the head dimension, padded with zeros to a
// multiple of 16 (the k of the products over it), then 8 more bf16 that
// nothing reads: a row's 16-byte chunks then fall in distinct bank groups
// for any 8 consecutive rows, so ldmatrix and cp.async run without bank
// conflicts (the padding does what a swizzle does, for any head
// dimension).
//
//===----------------------------------------------------------------------===//
#pragma once

#if defined(__CUDACC__) || defined(STRATA_SIMT)
#define STRATA_LAYOUT __host__ __device__ constexpr
#else
#define STRATA_LAYOUT constexpr
#endif

// The head dimension padded to the products' k.
STRATA_LAYOUT int attentionPaddedDim(int dim) { return (dim + 15) / 16 * 16; }
// bf16 elements a shared row of the head dimension takes.
STRATA_LAYOUT int attentionPitch(int dim) {
  return attentionPaddedDim(dim) + 8;
}

// The forward: a block of `warps` warps takes 16 query rows a warp and
// walks the keys `tileKeys` at a time, `stages` key and value tiles in
// shared memory at once. Shared: the block's query rows, then the key
// tiles, then the value tiles.
STRATA_LAYOUT int attentionFwdSharedBytes(int dim, int warps, int tileKeys,
                                          int stages) {
  return (16 * warps + 2 * stages * tileKeys) * attentionPitch(dim) * 2;
}

// The backward: a block of `warps` warps holds 16 keys a warp (their
// gradients in registers) and walks the queries that see them
// `tileQueries` at a time, `stages` query and output-gradient tiles in
// shared memory at once. Shared: the block's keys, its values, the query
// tiles, the output-gradient tiles, then dSᵀ for dQ's product (the keys'
// rows of tileQueries + 8 bf16).
STRATA_LAYOUT int attentionBwdSharedBytes(int dim, int warps, int tileQueries,
                                          int stages) {
  return (2 * 16 * warps + 2 * stages * tileQueries) * attentionPitch(dim) * 2 +
         16 * warps * (tileQueries + 8) * 2;
}

// The runs of key rows the tensor-core kernels' tiles keep apart, each
// one whose places in the sequence rise with the row: with context
// parallelism under the causal mask, every rank's keys gathered (`keys`
// = context · seq) are `context` runs, one rank's each; any other launch's
// keys are one (context.cuh says where a rank's rows sit).
STRATA_LAYOUT int attentionKeySegments(long long seq, long long keys,
                                       long long context, bool causal) {
  return causal && context >= 2 && keys != seq ? int(context) : 1;
}

// The SIMT kernels (attention_simt.cuh, f32 math for any head dimension):
// a block of this many warps, a row each.
constexpr int kAttentionSimtRows = 4;
// The forward's shared memory: a tile of 32 keys and one of 32 values, rows
// padded to dim + 1 floats, then each warp's query row.
STRATA_LAYOUT int attentionSimtFwdSharedBytes(int dim) {
  return (2 * 32 * (dim + 1) + kAttentionSimtRows * dim) * 4;
}
// The backward's: two padded tiles of 32 rows, two rows a warp, then D and
// the log-sum-exp of 32 queries.
STRATA_LAYOUT int attentionSimtBwdSharedBytes(int dim) {
  return (2 * 32 * (dim + 1) + 2 * kAttentionSimtRows * dim + 64) * 4;
}
