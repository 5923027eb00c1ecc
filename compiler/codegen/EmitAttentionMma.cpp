//===- EmitAttentionMma.cpp - flash attention on tensor cores -------------===//
//
// The bf16 attention kernels, forward and backward, are the templates of
// cuda/attention_fwd.cuh and cuda/attention_bwd.cuh (FlashAttention-2 on
// mma.sync: their comments say how). This writes a launch's stub: its
// shape as constants, the backward's scratch, and the call that picks the
// tiles; the tiles' shared memory comes from cuda/attention_layout.cuh,
// which the kernels lay themselves out with.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Attention.h"
#include "compiler/codegen/cuda/attention_layout.cuh"

namespace strata::codegen {

std::string emitAttentionFwdMma(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  AttentionShape s(v);
  // A block of 8 warps takes 128 query rows; 64 keys a tile, three tiles
  // in flight up to head dimension 64, two past it. One block an SM: its
  // registers (145 at d64, 207 at d128 on sm_90a) leave no room for two.
  const int warps = 8, tileKeys = 64;
  const bool small = attentionPaddedDim(int(s.dim)) <= 64;
  const int stages = small ? 3 : 2;
  code.sources = {"attention_fwd.cuh"};
  code.globals = s.constants();
  code.body = "  attentionFwdMma<Shape, AttentionFwdTiles<" +
              std::to_string(warps) + ", " + std::to_string(tileKeys) + ", " +
              std::to_string(stages) +
              ">>(q, k, v, o, lse, group_size, query_head_offset,\n"
              "      ContextPlace{context_rank, ring_step});\n";
  code.block = {uint32_t(32 * warps), 1, 1};
  code.grid = {blocksFor(s.seq, 16 * warps, 1u << 30), uint32_t(s.heads),
               uint32_t(s.batch)};
  code.sharedBytes =
      uint32_t(attentionFwdSharedBytes(int(s.dim), warps, tileKeys, stages));
  code.blocksPerSm = 1;
  return "";
}

std::string emitAttentionBwdMma(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  AttentionShape s(v);
  // A block of 8 warps holds 128 keys of one segment; the queries come 64
  // at a time up to head dimension 64 and 32 past it (the keys' dK and dV
  // take the registers), two tiles in flight.
  const int warps = 8, stages = 2;
  const int tileQueries = attentionPaddedDim(int(s.dim)) <= 64 ? 64 : 32;
  const int segments = attentionKeySegments(s.seq, s.keys, s.context, s.causal);
  const int64_t keyBlocks =
      segments * ((s.keys / segments + 16 * warps - 1) / (16 * warps));
  const int64_t queryTiles = (s.seq + tileQueries - 1) / tileQueries;
  code.sources = {"attention_bwd.cuh"};
  // What the blocks share (attention_bwd.cuh): dQ's f32 sums, D per query
  // row, a flag and a count per query tile.
  code.globals = s.constants() + "\n// Shared by the launch's blocks.\n" +
                 "__device__ float attentionDqAccum[" +
                 num(s.batch * s.seq * s.heads * s.dim) + "];\n" +
                 "__device__ float attentionRowD[" +
                 num(s.batch * s.heads * s.seq) + "];\n" +
                 "__device__ int attentionReady[" +
                 num(s.batch * s.heads * queryTiles) + "];\n" +
                 "__device__ int attentionTurn[" +
                 num(s.batch * s.heads * queryTiles) + "];\n";
  code.body =
      "  attentionBwdMma<Shape, AttentionBwdTiles<" + std::to_string(warps) +
      ", " + std::to_string(tileQueries) + ", " + std::to_string(stages) +
      ">>(\n      q, k, v, o, lse, dout, dq, dk, dv, group_size, "
      "query_head_offset,\n      ContextPlace{context_rank, ring_step},\n"
      "      {attentionDqAccum, attentionRowD, "
      "attentionReady, attentionTurn});\n";
  code.block = {uint32_t(32 * warps), 1, 1};
  code.grid = {uint32_t(keyBlocks), uint32_t(s.kvHeads), uint32_t(s.batch)};
  code.sharedBytes =
      uint32_t(attentionBwdSharedBytes(int(s.dim), warps, tileQueries, stages));
  code.blocksPerSm = 1;
  return "";
}

} // namespace strata::codegen
