//===- CostModel.cpp - what an instruction costs on a modelled GPU --------===//
#include "runtime/predict/CostModel.h"

#include <algorithm>
#include <cmath>
#include <map>

namespace strata::runtime::predict {

double CostModel::peak(DType dtype) const {
  const auto &rates = spec.gpu.peakFlops;
  // The spec requires bf16 and fp32; int32 work is counted as memory.
  return rates.at(dtype == DType::BF16 ? "bf16" : "fp32");
}

double CostModel::gemm(const GemmOp &op, DType dtype, double bytes) const {
  const GpuSpec &gpu = spec.gpu;
  double m = double(op.m), n = double(op.n), k = double(op.k),
         batch = double(op.batch);
  double flops = 2 * m * n * k * batch;
  if (flops <= 0)
    return gpu.launchOverheadSeconds;
  double rowTiles = std::ceil(m / double(gpu.gemmTileRows)),
         columnTiles = std::ceil(n / double(gpu.gemmTileColumns));
  double tileShare = (m * n) / (rowTiles * double(gpu.gemmTileRows) *
                                columnTiles * double(gpu.gemmTileColumns));
  double tiles = rowTiles * columnTiles * batch;
  double waveShare = 1;
  if (gpu.gemmWavesQuantized) {
    double waves = std::ceil(tiles / double(gpu.smCount));
    waveShare = tiles / (waves * double(gpu.smCount));
  }
  double rate = peak(dtype) * gpu.gemmEfficiency * tileShare * waveShare * k /
                (k + gpu.gemmKOverhead);
  double seconds = std::max(flops / rate, memory(bytes));
  return seconds + epilogue(op) + gpu.launchOverheadSeconds;
}

double CostModel::epilogue(const GemmOp &op) const {
  KernelWork pass;
  if (!epilogueWork(op, pass))
    return 0;
  auto rate = spec.gpu.kernelRates.find(kernelName(pass.kernel));
  return rate == spec.gpu.kernelRates.end() ? 0 : pass.work / rate->second;
}

double CostModel::memory(double bytes) const {
  return bytes / (spec.gpu.hbmBytesPerSecond * spec.gpu.hbmEfficiency);
}

double CostModel::kernel(const InstructionCost &cost, DType dtype) const {
  // Rated members at their rates, the others' FLOPs at the gemm's rate.
  const auto &rates = spec.gpu.kernelRates;
  double compute = 0;
  for (const KernelWork &member : cost.members) {
    if (auto rate = rates.find(kernelName(member.kernel)); rate != rates.end())
      compute += member.work / rate->second;
    else if (member.flops > 0)
      compute += member.flops / (peak(dtype) * spec.gpu.gemmEfficiency);
  }
  return std::max(compute, memory(cost.bytes)) + spec.gpu.launchOverheadSeconds;
}

const LinkLevel &CostModel::levelOf(const std::vector<int> &members) const {
  if (members.empty())
    return spec.node;
  int64_t node = members.front() / spec.gpusPerNode;
  for (int member : members)
    if (member / spec.gpusPerNode != node)
      return spec.cluster;
  return spec.node;
}

double CostModel::collective(CollectiveKind kind,
                             const std::vector<int> &members,
                             double bytes) const {
  double n = double(members.size());
  if (n <= 1 || free)
    return 0;
  // A shift: every rank sends its whole buffer to the next at once, each
  // pair over its own link (across nodes, one GPU's adapter).
  if (kind == CollectiveKind::Shift) {
    const LinkLevel &level = levelOf(members);
    return bytes / level.bytesPerSecond + level.latencySeconds;
  }
  Ring r = ring(members);
  bool allReduce = kind == CollectiveKind::AllReduceSum ||
                   kind == CollectiveKind::AllReduceMax;
  double steps = (allReduce ? 2 : 1) * (n - 1);
  // Where the spec measured the level's bus bandwidth at this size, that
  // rate (its latency within it) and no more than the ring's.
  if (double measured = r.level->measuredBusBandwidth(bytes); measured > 0)
    return steps * bytes / n / std::min(measured, r.bytesPerSecond);
  return steps * (bytes / n / r.bytesPerSecond + r.latencySeconds);
}

CostModel::Ring CostModel::ring(const std::vector<int> &members) const {
  const LinkLevel &level = levelOf(members);
  if (&level != &spec.cluster)
    return {level.bytesPerSecond, level.latencySeconds, &level};
  // Across nodes a ring runs a channel through each GPU's own adapter (as
  // NCCL does), so it moves at the level's rate times the fewest members
  // a node holds, and no faster than within a node.
  std::map<int64_t, int64_t> perNode;
  for (int member : members)
    ++perNode[member / spec.gpusPerNode];
  int64_t fewest = perNode.begin()->second;
  for (const auto &[node, count] : perNode)
    fewest = std::min(fewest, count);
  return {
      std::min(level.bytesPerSecond * double(fewest), spec.node.bytesPerSecond),
      level.latencySeconds, &level};
}

std::vector<int> CostModel::slowestInstance(const Plan &plan, uint32_t group,
                                            uint32_t rank) const {
  // Instances that cross nodes differ in how many members a node holds,
  // and so in rate.
  auto slower = [](const Ring &a, const Ring &b) {
    return a.bytesPerSecond < b.bytesPerSecond ||
           (a.bytesPerSecond == b.bytesPerSecond &&
            a.latencySeconds > b.latencySeconds);
  };
  std::vector<int> slowest = plan.groupMembers(group, rank);
  Ring slowestRing = ring(slowest);
  std::vector<bool> held(plan.world(), false);
  for (uint32_t r = 0; r < plan.world(); ++r) {
    if (held[r])
      continue;
    std::vector<int> members = plan.groupMembers(group, r);
    for (int member : members)
      if (member >= 0 && uint32_t(member) < plan.world())
        held[uint32_t(member)] = true;
    if (Ring candidate = ring(members); slower(candidate, slowestRing)) {
      slowestRing = candidate;
      slowest = std::move(members);
    }
  }
  return slowest;
}

double CostModel::transfer(int from, int to, double bytes) const {
  if (free)
    return 0;
  const LinkLevel &level = levelOf({from, to});
  return level.latencySeconds + bytes / level.bytesPerSecond;
}

} // namespace strata::runtime::predict
