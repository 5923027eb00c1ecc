//===- EmitAttention.cpp - flash attention, forward and backward ----------===//
//
// The flash-attention contract of runtime/cpu/Attention.cpp: no s×s matrix
// in memory; the forward keeps each query row's log-sum-exp, the backward
// recomputes the probabilities from it. This writes a launch's stub for
// the SIMT kernels of cuda/attention_simt.cuh: exact to f32 and correct for
// any head dimension, what fp32 plans run, to verify against the CPU. bf16
// launches whose head dimension is a multiple of 8 run on tensor cores
// instead (EmitAttentionMma.cpp), context-parallel ones too. The ring's
// attention_merge is a warp a row of the SIMT file too.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Attention.h"
#include "compiler/codegen/cuda/attention_layout.cuh"

#include <algorithm>
#include <cmath>

namespace strata::codegen {

using namespace runtime::kernels;

AttentionShape::AttentionShape(const View &v) {
  const std::vector<int64_t> &q = v.shape(AttentionFwd::op::q),
                             &k = v.shape(AttentionFwd::op::k);
  batch = q[0];
  seq = q[1];
  heads = q[2];
  dim = q[3];
  keys = k[1];
  kvHeads = k[2];
  causal = v.flag(AttentionFwd::attr::causal);
  context = v.attr(AttentionFwd::attr::context_parallel).i;
}

std::string AttentionShape::constants() const {
  return "\n// The launch's shape.\nstruct Shape {\n"
         "  static constexpr int kBatch = " +
         std::to_string(batch) + ", kSeq = " + std::to_string(seq) +
         ", kKeys = " + std::to_string(keys) +
         ",\n                       kHeads = " + std::to_string(heads) +
         ", kKvHeads = " + std::to_string(kvHeads) +
         ", kDim = " + std::to_string(dim) +
         ";\n  static constexpr bool kCausal = " + (causal ? "true" : "false") +
         ";\n  static constexpr int kContext = " + std::to_string(context) +
         ";\n  static constexpr float kScale = " +
         f32(runtime::attentionScale(dim)) + ";\n};\n";
}

bool attentionOnTensorCores(const LaunchDesc &launch) {
  View v{launch};
  std::vector<unsigned> operands = {AttentionFwd::op::q, AttentionFwd::op::k,
                                    AttentionFwd::op::v};
  if (launch.kernel == runtime::KernelId::AttentionBwd)
    operands.push_back(AttentionBwd::op::dout);
  for (unsigned i : operands)
    if (v.op(i).dtype != runtime::DType::BF16)
      return false;
  // Up to 128: past it the accumulators outgrow the registers (a tiling
  // for 256 is for later). The tiles index a sample's rows in 32 bits, and
  // need a row to tile.
  AttentionShape s(v);
  return s.dim % 8 == 0 && s.dim <= 128 && s.seq > 0 && s.keys > 0 &&
         s.seq * s.heads * s.dim < (int64_t(1) << 31) &&
         s.keys * s.kvHeads * s.dim < (int64_t(1) << 31);
}

std::string emitAttentionFwd(const LaunchDesc &launch, KernelCode &code) {
  if (attentionOnTensorCores(launch))
    return emitAttentionFwdMma(launch, code);
  View v{launch};
  AttentionShape s(v);
  code.sources = {"attention_simt.cuh"};
  code.globals = s.constants();
  code.body = "  attentionFwdSimt<Shape>(q, k, v, o, lse, group_size, "
              "query_head_offset,\n                          "
              "ContextPlace{context_rank, ring_step});\n";
  code.block = {uint32_t(32 * kAttentionSimtRows), 1, 1};
  code.grid = {blocksFor(s.seq, kAttentionSimtRows, 1u << 30),
               uint32_t(s.heads), uint32_t(s.batch)};
  code.sharedBytes = uint32_t(attentionSimtFwdSharedBytes(int(s.dim)));
  return "";
}

std::string emitAttentionBwd(const LaunchDesc &launch, KernelCode &code) {
  if (attentionOnTensorCores(launch))
    return emitAttentionBwdMma(launch, code);
  View v{launch};
  AttentionShape s(v);
  // Blocks of the query rows (dq), then blocks of the key rows (dk, dv).
  int64_t queryBlocks = (s.seq + kAttentionSimtRows - 1) / kAttentionSimtRows;
  int64_t keyBlocks = (s.keys + kAttentionSimtRows - 1) / kAttentionSimtRows;
  code.sources = {"attention_simt.cuh"};
  code.globals = s.constants();
  code.body = "  attentionBwdSimt<Shape>(q, k, v, o, lse, dout, dq, dk, dv, "
              "group_size,\n                          query_head_offset, "
              "ContextPlace{context_rank, ring_step});\n";
  code.block = {uint32_t(32 * kAttentionSimtRows), 1, 1};
  code.grid = {uint32_t(queryBlocks + keyBlocks),
               uint32_t(std::max(s.heads, s.kvHeads)), uint32_t(s.batch)};
  code.sharedBytes = uint32_t(attentionSimtBwdSharedBytes(int(s.dim)));
  return "";
}

std::string emitAttentionMerge(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &o = v.shape(AttentionMerge::op::o);
  const int64_t batch = o[0], seq = o[1], heads = o[2], dim = o[3];
  code.sources = {"attention_simt.cuh"};
  code.globals = "\n// The launch's shape.\nstruct Shape {\n"
                 "  static constexpr int kSeq = " +
                 std::to_string(seq) + ", kKeys = " + std::to_string(seq) +
                 ", kHeads = " + std::to_string(heads) +
                 ", kKvHeads = " + std::to_string(heads) +
                 ", kDim = " + std::to_string(dim) + ";\n};\n";
  code.body = "  attentionMergeSimt<Shape>(o_step, lse_step, o, lse);\n";
  code.block = {uint32_t(32 * kAttentionSimtRows), 1, 1};
  code.grid = {blocksFor(seq, kAttentionSimtRows, 1u << 30), uint32_t(heads),
               uint32_t(batch)};
  code.sharedBytes = 0;
  return "";
}

} // namespace strata::codegen
