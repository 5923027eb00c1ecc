//===- Kernels.h - the CPU kernels ------------------------------*- C++ -*-===//
//
// One function per KernelId (runtime/exec/KernelTable.h), computing in f32:
// the backend hands bf16 buffers to them converted, and rounds what they
// write back to bf16. Each kernel file says the math it computes.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CPU_KERNELS_H
#define STRATA_RUNTIME_CPU_KERNELS_H

#include "runtime/exec/Hyper.h"
#include "runtime/exec/KernelTable.h"

#include <vector>

namespace strata::runtime::cpu {

struct KernelArgs {
  const Instruction &instruction;
  std::vector<void *> in, out;
  std::vector<const Buffer *> inBuffer, outBuffer;
  const Hyper &hyper;

  float *inF(size_t i) const { return static_cast<float *>(in[i]); }
  const int32_t *ids(size_t i) const {
    return static_cast<const int32_t *>(in[i]);
  }
  float *outF(size_t i) const { return static_cast<float *>(out[i]); }
  int64_t inCount(size_t i) const { return inBuffer[i]->elements; }
  int64_t outCount(size_t i) const { return outBuffer[i]->elements; }
  const std::vector<int64_t> &inShape(size_t i) const {
    return inBuffer[i]->shape;
  }
  bool flag(const char *key) const { return instruction.boolAttr(key); }
};

using KernelFn = void (*)(const KernelArgs &);

/// The implementation of a kernel id.
KernelFn kernelFunction(KernelId id);

// Gemm.cpp
void gemm(const KernelArgs &);
// Elementwise.cpp
void fill(const KernelArgs &);
void copy(const KernelArgs &);
void add(const KernelArgs &);
void sub(const KernelArgs &);
void mul(const KernelArgs &);
void scale(const KernelArgs &);
void sumTo(const KernelArgs &);
void accumulate(const KernelArgs &);
void geluFwd(const KernelArgs &);
void geluBwd(const KernelArgs &);
void siluFwd(const KernelArgs &);
void siluBwd(const KernelArgs &);
void transpose(const KernelArgs &);
void slice(const KernelArgs &);
// Embedding.cpp
void embeddingFwd(const KernelArgs &);
void embeddingBwd(const KernelArgs &);
// Norms.cpp
void layerNormFwd(const KernelArgs &);
void layerNormBwd(const KernelArgs &);
void rmsNormFwd(const KernelArgs &);
void rmsNormBwd(const KernelArgs &);
// Rope.cpp
void rope(const KernelArgs &);
// Attention.cpp
void attentionFwd(const KernelArgs &);
void attentionBwd(const KernelArgs &);
// Loss.cpp
void crossEntropyFwd(const KernelArgs &);
void crossEntropyBwd(const KernelArgs &);
void logitsMax(const KernelArgs &);
void logitsTarget(const KernelArgs &);
void logitsSumExp(const KernelArgs &);
void crossEntropyFromStats(const KernelArgs &);
void crossEntropyGradFromStats(const KernelArgs &);
// Optimizer.cpp
void sumSquares(const KernelArgs &);
void clipCoefficient(const KernelArgs &);
void adamw(const KernelArgs &);

/// Threads the kernels use (OpenMP and OpenBLAS); 0 leaves the default.
void setThreads(int threads);

} // namespace strata::runtime::cpu

#endif
