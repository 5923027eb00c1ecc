//===- KernelTable.h - the kernels a plan may name --------------*- C++ -*-===//
//
// Every kernel the compiler emits, with the operand conventions that each
// backend implements and that a plan is checked against when it loads:
// counts, dtypes, element counts and arguments. A backend provides one
// function per KernelId.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_EXEC_KERNELTABLE_H
#define STRATA_RUNTIME_EXEC_KERNELTABLE_H

#include "runtime/plan/Plan.h"

#include <string>
#include <vector>

namespace strata::runtime {

enum class KernelId : int {
  Fill,
  Copy,
  Gemm,
  EmbeddingFwd,
  EmbeddingBwd,
  Add,
  Sub,
  Mul,
  Scale,
  SumTo,
  GeluFwd,
  GeluBwd,
  SiluFwd,
  SiluBwd,
  LayerNormFwd,
  LayerNormBwd,
  RmsNormFwd,
  RmsNormBwd,
  Transpose,
  Rope,
  AttentionFwd,
  AttentionBwd,
  CrossEntropyFwd,
  CrossEntropyBwd,
  Accumulate,
  SumSquares,
  ClipCoefficient,
  AdamW,
  Slice,
  LogitsMax,
  LogitsTarget,
  LogitsSumExp,
  CrossEntropyFromStats,
  CrossEntropyGradFromStats,
  // Collectives: run by the communicator, not a backend.
  AllReduce,
  AllGather,
  ReduceScatter,
  // Point to point between pipeline stages, also the communicator's.
  Send,
  Recv,
  Count
};

/// Kernels the communicator runs: collectives and pipeline transfers.
inline bool isCommunication(KernelId id) {
  return id == KernelId::AllReduce || id == KernelId::AllGather ||
         id == KernelId::ReduceScatter || id == KernelId::Send ||
         id == KernelId::Recv;
}

/// Pipeline channels a plan may use: tags must stay within what every MPI
/// guarantees (32767).
inline constexpr int64_t kMaxChannels = 500;

/// The mesh a plan runs on: axis sizes in the order tp, dp, pp.
struct MeshShape {
  int64_t sizes[3] = {1, 1, 1};
  int64_t world() const { return sizes[0] * sizes[1] * sizes[2]; }
  /// Ranks in a group over `axes`.
  int64_t groupSize(const std::vector<int64_t> &axes) const {
    int64_t n = 1;
    for (int64_t axis : axes)
      n *= sizes[axis];
    return n;
  }
};

/// The id of a kernel name, or -1.
int findKernel(const std::string &name);
const char *kernelName(KernelId id);

/// Checks an instruction against its kernel's conventions; "" when right.
std::string checkInstruction(const Instruction &instruction,
                             const std::vector<Buffer> &buffers,
                             const MeshShape &mesh = MeshShape());

} // namespace strata::runtime

#endif
