//===- CpuBackend.cpp - run instructions on the CPU -----------------------===//
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/exec/BFloat16.h"

#include <cblas.h>
#include <omp.h>

namespace strata::runtime::cpu {

KernelFn kernelFunction(KernelId id) {
  switch (id) {
  case KernelId::Fill:
    return fill;
  case KernelId::Copy:
    return copy;
  case KernelId::Gemm:
    return gemm;
  case KernelId::EmbeddingFwd:
    return embeddingFwd;
  case KernelId::EmbeddingBwd:
    return embeddingBwd;
  case KernelId::Add:
    return add;
  case KernelId::Sub:
    return sub;
  case KernelId::Mul:
    return mul;
  case KernelId::Scale:
    return scale;
  case KernelId::SumTo:
    return sumTo;
  case KernelId::GeluFwd:
    return geluFwd;
  case KernelId::GeluBwd:
    return geluBwd;
  case KernelId::SiluFwd:
    return siluFwd;
  case KernelId::SiluBwd:
    return siluBwd;
  case KernelId::LayerNormFwd:
    return layerNormFwd;
  case KernelId::LayerNormBwd:
    return layerNormBwd;
  case KernelId::RmsNormFwd:
    return rmsNormFwd;
  case KernelId::RmsNormBwd:
    return rmsNormBwd;
  case KernelId::Transpose:
    return transpose;
  case KernelId::Rope:
    return rope;
  case KernelId::AttentionFwd:
    return attentionFwd;
  case KernelId::AttentionBwd:
    return attentionBwd;
  case KernelId::CrossEntropyFwd:
    return crossEntropyFwd;
  case KernelId::CrossEntropyBwd:
    return crossEntropyBwd;
  case KernelId::Accumulate:
    return accumulate;
  case KernelId::SumSquares:
    return sumSquares;
  case KernelId::ClipCoefficient:
    return clipCoefficient;
  case KernelId::AdamW:
    return adamw;
  case KernelId::Slice:
    return slice;
  case KernelId::LogitsMax:
    return logitsMax;
  case KernelId::LogitsTarget:
    return logitsTarget;
  case KernelId::LogitsSumExp:
    return logitsSumExp;
  case KernelId::CrossEntropyFromStats:
    return crossEntropyFromStats;
  case KernelId::CrossEntropyGradFromStats:
    return crossEntropyGradFromStats;
  case KernelId::AllReduce:
  case KernelId::AllGather:
  case KernelId::ReduceScatter:
  case KernelId::Count:
    break; // collectives run in the communicator
  }
  return nullptr;
}

void setThreads(int threads) {
  // One pool: OpenMP splits the work, OpenBLAS runs inside it on one thread.
  openblas_set_num_threads(1);
  if (threads > 0)
    omp_set_num_threads(threads);
}

// Kernels call OpenBLAS from inside OpenMP regions: it must not start
// threads of its own there.
CpuBackend::CpuBackend() { openblas_set_num_threads(1); }

void CpuBackend::run(const Instruction &instruction, RankMemory &memory,
                     const Hyper &hyper) {
  const std::vector<Buffer> &buffers = memory.plan().buffers;
  KernelArgs args{instruction, {}, {}, {}, {}, hyper};
  size_t used = 0;
  auto widen = [&](uint32_t index) -> void * {
    const Buffer &buffer = buffers[index];
    void *data = memory.data(index);
    if (buffer.dtype != DType::BF16)
      return data;
    if (scratch.size() <= used)
      scratch.emplace_back();
    std::vector<float> &wide = scratch[used++];
    wide.resize(buffer.elements);
    const auto *narrow = static_cast<const uint16_t *>(data);
    for (int64_t i = 0; i < buffer.elements; ++i)
      wide[i] = bf16ToFloat(narrow[i]);
    return wide.data();
  };
  for (uint32_t index : instruction.inputs) {
    args.in.push_back(widen(index));
    args.inBuffer.push_back(&buffers[index]);
  }
  for (uint32_t index : instruction.outputs) {
    args.out.push_back(widen(index));
    args.outBuffer.push_back(&buffers[index]);
  }
  kernelFunction(static_cast<KernelId>(instruction.kernelId))(args);
  for (size_t o = 0; o < instruction.outputs.size(); ++o) {
    const Buffer &buffer = *args.outBuffer[o];
    if (buffer.dtype != DType::BF16)
      continue;
    auto *narrow = static_cast<uint16_t *>(memory.data(instruction.outputs[o]));
    const float *wide = static_cast<const float *>(args.out[o]);
    for (int64_t i = 0; i < buffer.elements; ++i)
      narrow[i] = floatToBf16(wide[i]);
  }
}

} // namespace strata::runtime::cpu
