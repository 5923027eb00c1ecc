//===- Attention.h - what the attention emitters share ----------*- C++ -*-===//
//
// Attention's kernels come in two kinds, both templates under cuda/ that
// the emitters write a stub for: the SIMT kernels (cuda/attention_simt.cuh,
// EmitAttention.cpp: exact to f32, any head dimension, the fp32
// verification path) and the tensor-core kernels (cuda/attention_fwd.cuh
// and attention_bwd.cuh, EmitAttentionMma.cpp: bf16 operands, head
// dimensions that are multiples of 8, what training runs). Both keep the
// flash-attention contract of runtime/cpu/Attention.cpp.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_CODEGEN_ATTENTION_H
#define STRATA_COMPILER_CODEGEN_ATTENTION_H

#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

/// A launch's attention shape: q [batch, seq, heads, dim], k and v
/// [batch, keys, kvHeads, dim].
struct AttentionShape {
  int64_t batch, seq, heads, keys, kvHeads, dim;
  bool causal;
  int64_t context; // the context-parallel size (below 2: none)
  explicit AttentionShape(const View &v);
  /// The shape as the constants of a `struct Shape`, which the templates
  /// of cuda/attention_*.cuh take.
  std::string constants() const;
};

/// Whether the launch runs on tensor cores: q, k, v (and the backward's
/// dout) bf16, the head dimension a multiple of 8 up to 128.
bool attentionOnTensorCores(const LaunchDesc &launch);

std::string emitAttentionFwdMma(const LaunchDesc &launch, KernelCode &code);
std::string emitAttentionBwdMma(const LaunchDesc &launch, KernelCode &code);

} // namespace strata::codegen

#endif
