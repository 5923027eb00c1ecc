//===- CostModel.h - what an instruction costs on a modelled GPU -*- C++
//-*-===//
//
// Seconds for each thing a plan does, from a cluster spec alone (every
// constant is the spec's, with its source):
// - a gemm: the larger of its FLOPs at the tensor cores' rate and its
//   bytes at the memory's, where the rate is the peak for its dtype times
//   the spec's efficiency, the share of its tiles that is the matrix (a
//   partial tile costs a whole one), the share of its last wave that works
//   (when waves are quantized), and k / (k + a tile's fixed cost), plus
//   the launch overhead;
// - a kernel: the larger of its FLOPs (attention's) at that efficiency and
//   its bytes at the memory's efficiency, plus the launch overhead; where
//   the spec measured a kernel's rate, its work at that rate in place of
//   its FLOPs (and a gemm's epilogue, a pass of its own there, at its
//   kernel's rate);
// - a collective: ring algorithms over the slowest level its members span
//   (all in one node: the node's links; else the cluster's): an
//   all-reduce 2(n-1)/n of the tensor each way and 2(n-1) latencies, a
//   gather or reduce-scatter (n-1)/n and n-1; across nodes with a channel
//   through each member's adapter, so at the cluster level's rate (one
//   GPU's) times the fewest members on a node, at most the node's rate;
// - a transfer: one latency and its bytes over the level between the two
//   GPUs.
// Ranks sit on nodes in order: rank r on node r / gpus_per_node.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PREDICT_COSTMODEL_H
#define STRATA_RUNTIME_PREDICT_COSTMODEL_H

#include "runtime/cluster/ClusterSpec.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/plan/Plan.h"

#include <vector>

namespace strata::runtime::predict {

class CostModel {
public:
  /// `freeCommunication`: collectives and transfers cost nothing (the
  /// schedule alone).
  explicit CostModel(const ClusterSpec &spec, bool freeCommunication = false)
      : spec(spec), free(freeCommunication) {}

  /// A gemm whose A has `dtype`; its bytes read and written once.
  double gemm(const GemmOp &op, DType dtype, double bytes) const;
  /// A launch in `dtype` (a fused group's members together): its bytes,
  /// or its members' work if slower, each at the spec's measured rate
  /// where it has one, else its FLOPs at the gemm's.
  double kernel(const InstructionCost &cost, DType dtype) const;
  /// A collective of `kind` over `members` (world ranks) on a tensor of
  /// `bytes` (the whole: an all-reduce's buffer, a gather's output, a
  /// reduce-scatter's input, a shift's input, which each rank sends to the
  /// next at once).
  double collective(CollectiveKind kind, const std::vector<int> &members,
                    double bytes) const;
  /// A pipeline transfer of `bytes` between two world ranks.
  double transfer(int from, int to, double bytes) const;
  /// The rate and each step's latency of a ring over `members`.
  struct Ring {
    double bytesPerSecond = 0, latencySeconds = 0;
    const LinkLevel *level = nullptr; // the slowest its members span
  };
  Ring ring(const std::vector<int> &members) const;
  /// Of the instances of `plan`'s group `group` (one per rank no earlier
  /// instance holds), the members of the one whose ring is slowest: the
  /// lowest rate, then the longest latency; `rank`'s own among equals.
  std::vector<int> slowestInstance(const Plan &plan, uint32_t group,
                                   uint32_t rank) const;
  /// Memory traffic alone (a fill, a copy on the device).
  double memory(double bytes) const;

  /// The peak FLOP/s of `dtype` (fp32 for F32).
  double peak(DType dtype) const;
  const ClusterSpec &cluster() const { return spec; }

private:
  /// A gemm's epilogue as a pass of its own (0 unless the spec rates it).
  double epilogue(const GemmOp &op) const;
  const LinkLevel &levelOf(const std::vector<int> &members) const;
  const ClusterSpec &spec;
  bool free;
};

} // namespace strata::runtime::predict

#endif
