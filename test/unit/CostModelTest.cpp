//===- CostModelTest.cpp - what the modelled GPU charges ------------------===//
//
// The cost model's terms one at a time, on a made-up GPU with round
// numbers: a full gemm at the efficiency, a tile's fixed cost as more k,
// partial tiles, quantized against balanced last waves, the memory
// roofline, kernels, ring collectives by the level their members span,
// transfers, and communication made free.
//
//===----------------------------------------------------------------------===//
#include "runtime/predict/CostModel.h"

#include <gtest/gtest.h>

using namespace strata::runtime;
using namespace strata::runtime::predict;

namespace {

ClusterSpec roundSpec(bool quantized) {
  ClusterSpec spec;
  spec.gpusPerNode = 4;
  spec.gpu.peakFlops = {{"bf16", 100e12}, {"fp32", 10e12}};
  spec.gpu.hbmBytesPerSecond = 1e12;
  spec.gpu.hbmEfficiency = 0.5;
  spec.gpu.launchOverheadSeconds = 1e-6;
  spec.gpu.smCount = 10;
  spec.gpu.gemmTileRows = 100;
  spec.gpu.gemmTileColumns = 100;
  spec.gpu.gemmWavesQuantized = quantized;
  spec.gpu.gemmEfficiency = 0.5;
  spec.gpu.gemmKOverhead = 1000;
  spec.node = {"n", "", true, 100e9, 1e-6};
  spec.cluster = {"c", "", false, 10e9, 10e-6};
  return spec;
}

GemmOp gemmOf(int64_t m, int64_t n, int64_t k) {
  GemmOp op;
  op.m = m;
  op.n = n;
  op.k = k;
  return op;
}

TEST(CostModel, AGemmOfWholeTilesAndWaves) {
  ClusterSpec spec = roundSpec(true);
  CostModel costs(spec);
  // 1000 x 1000: 100 tiles, 10 whole waves; k = 1000 halves the rate.
  double flops = 2e9; // 2 m n k
  EXPECT_DOUBLE_EQ(costs.gemm(gemmOf(1000, 1000, 1000), DType::BF16, 0),
                   flops / (100e12 * 0.5 * 0.5) + 1e-6);
  // fp32's peak for an fp32 gemm.
  EXPECT_DOUBLE_EQ(costs.gemm(gemmOf(1000, 1000, 1000), DType::F32, 0),
                   flops / (10e12 * 0.5 * 0.5) + 1e-6);
}

TEST(CostModel, APartialTileCostsAWholeOne) {
  ClusterSpec spec = roundSpec(false);
  CostModel costs(spec);
  // 1001 rows: 11 row tiles for 10.01 tiles' work.
  double full = costs.gemm(gemmOf(1000, 1000, 1000), DType::BF16, 0) - 1e-6;
  double ragged = costs.gemm(gemmOf(1001, 1000, 1000), DType::BF16, 0) - 1e-6;
  EXPECT_NEAR(ragged / full, 1.1, 1e-12);
}

TEST(CostModel, AQuantizedLastWaveCostsAWholeWave) {
  // Whole waves scale with the work either way (100 tiles to 110); 101
  // tiles take 11 waves where waves are quantized, as long as 110, and
  // 1.01 times 100 tiles' time where the library balances the last wave.
  double k = 1000;
  for (bool quantized : {true, false}) {
    ClusterSpec spec = roundSpec(quantized);
    CostModel costs(spec);
    double hundred = costs.gemm(gemmOf(1000, 1000, k), DType::BF16, 0) - 1e-6;
    double more = costs.gemm(gemmOf(1100, 1000, k), DType::BF16, 0) - 1e-6;
    EXPECT_NEAR(more / hundred, 1.1, 1e-12);
    // One row of 100 tiles, then of 101.
    double one = costs.gemm(gemmOf(100, 10000, k), DType::BF16, 0) - 1e-6;
    double past = costs.gemm(gemmOf(100, 10100, k), DType::BF16, 0) - 1e-6;
    EXPECT_NEAR(past / one, quantized ? 11.0 / 10.0 : 1.01, 1e-12)
        << (quantized ? "quantized" : "balanced");
  }
}

TEST(CostModel, AGemmThatMovesMoreThanItComputesIsMemoryBound) {
  ClusterSpec spec = roundSpec(false);
  CostModel costs(spec);
  double bytes = 1e12; // two seconds at half of 1 TB/s
  EXPECT_DOUBLE_EQ(costs.gemm(gemmOf(1000, 1000, 1000), DType::BF16, bytes),
                   2 + 1e-6);
  InstructionCost copy, attention;
  copy.bytes = 1e9;
  copy.members = {{KernelId::Copy, 1e6, 0}};
  attention.members = {{KernelId::AttentionFwd, 1e12, 1e12}};
  EXPECT_DOUBLE_EQ(costs.kernel(copy, DType::BF16), 2e-3 + 1e-6);
  EXPECT_DOUBLE_EQ(costs.kernel(attention, DType::BF16), 1e12 / 50e12 + 1e-6);
}

TEST(CostModel, AMeasuredKernelRateAndAGemmsEpilogueOnACpu) {
  ClusterSpec gpuSpec = roundSpec(false), cpuSpec = roundSpec(false);
  cpuSpec.gpu.kernelRates = {{"gelu_bwd", 1e8}, {"gelu_fwd", 2e8}};
  CostModel gpu(gpuSpec), cpu(cpuSpec);
  // A million elements of gelu_bwd at 1e8 a second: 10 ms, not the 8 us
  // its bytes would take; a kernel without a rate keeps its roofline.
  InstructionCost gelu;
  gelu.bytes = 12e6;
  gelu.members = {{KernelId::GeluBwd, 1e6, 0}};
  EXPECT_DOUBLE_EQ(cpu.kernel(gelu, DType::F32), 1e-2 + 1e-6);
  EXPECT_DOUBLE_EQ(gpu.kernel(gelu, DType::F32), 12e6 / 0.5e12 + 1e-6);
  InstructionCost add = gelu;
  add.members = {{KernelId::Add, 1e6, 0}};
  EXPECT_DOUBLE_EQ(cpu.kernel(add, DType::F32), 12e6 / 0.5e12 + 1e-6);
  // A rate slower than the bytes: the bytes.
  gelu.bytes = 1e10;
  EXPECT_DOUBLE_EQ(cpu.kernel(gelu, DType::F32), 2e-2 + 1e-6);
  // The gelu epilogue of a 1000 x 1000 gemm: a pass of gelu_fwd over its
  // million outputs, 5 ms, where the spec rates it; free on a GPU.
  GemmOp op = gemmOf(1000, 1000, 1000);
  op.epilogue = Epilogue::GeluBias;
  EXPECT_DOUBLE_EQ(cpu.gemm(op, DType::BF16, 0) - gpu.gemm(op, DType::BF16, 0),
                   5e-3);
  op.epilogue = Epilogue::Bias; // add: not rated here
  EXPECT_DOUBLE_EQ(cpu.gemm(op, DType::BF16, 0), gpu.gemm(op, DType::BF16, 0));
}

TEST(CostModel, RingCollectivesOverTheSlowestLevelTheirMembersSpan) {
  ClusterSpec spec = roundSpec(false);
  CostModel costs(spec);
  double bytes = 4e9;
  // Four GPUs of node 0: the node's links.
  std::vector<int> inNode = {0, 1, 2, 3}, across = {0, 4, 8, 12};
  EXPECT_DOUBLE_EQ(
      costs.collective(CollectiveKind::AllReduceSum, inNode, bytes),
      6 * (1e9 / 100e9 + 1e-6));
  EXPECT_DOUBLE_EQ(costs.collective(CollectiveKind::AllGather, inNode, bytes),
                   3 * (1e9 / 100e9 + 1e-6));
  EXPECT_DOUBLE_EQ(
      costs.collective(CollectiveKind::ReduceScatter, across, bytes),
      3 * (1e9 / 10e9 + 10e-6));
  EXPECT_EQ(costs.collective(CollectiveKind::AllReduceSum, {5}, bytes), 0);
  // Across nodes a channel runs through each member's adapter: two GPUs a
  // node move twice one GPU's rate, all four four times; a node holding
  // one member holds the ring to one.
  EXPECT_DOUBLE_EQ(
      costs.collective(CollectiveKind::AllGather, {0, 1, 4, 5}, bytes),
      3 * (1e9 / 20e9 + 10e-6));
  EXPECT_DOUBLE_EQ(costs.collective(CollectiveKind::AllGather,
                                    {0, 1, 2, 3, 4, 5, 6, 7}, bytes),
                   7 * (0.5e9 / 40e9 + 10e-6));
  EXPECT_DOUBLE_EQ(
      costs.collective(CollectiveKind::AllGather, {0, 1, 2, 4}, bytes),
      3 * (1e9 / 10e9 + 10e-6));
  // Never faster than within a node.
  spec.node.bytesPerSecond = 30e9;
  EXPECT_DOUBLE_EQ(costs.collective(CollectiveKind::AllGather,
                                    {0, 1, 2, 3, 4, 5, 6, 7}, bytes),
                   7 * (0.5e9 / 30e9 + 10e-6));
  spec.node.bytesPerSecond = 100e9;
  EXPECT_DOUBLE_EQ(costs.transfer(0, 3, 1e9), 1e-6 + 1e-2);
  EXPECT_DOUBLE_EQ(costs.transfer(3, 4, 1e9), 10e-6 + 1e-1);
  CostModel free(spec, /*freeCommunication=*/true);
  EXPECT_EQ(free.collective(CollectiveKind::AllReduceSum, across, bytes), 0);
  EXPECT_EQ(free.transfer(3, 4, 1e9), 0);
}

// A shift (the ring of context parallelism): every rank sends its whole
// buffer to the next at once, one step, each pair over one link: within
// a node the node's, across nodes one GPU's adapter however many members
// a node holds.
TEST(CostModel, AShiftIsOneStepOverEachPairsLink) {
  ClusterSpec spec = roundSpec(false);
  CostModel costs(spec);
  double bytes = 1e9;
  EXPECT_DOUBLE_EQ(costs.collective(CollectiveKind::Shift, {0, 1, 2, 3}, bytes),
                   1e9 / 100e9 + 1e-6);
  EXPECT_DOUBLE_EQ(costs.collective(CollectiveKind::Shift, {0, 4, 8}, bytes),
                   1e9 / 10e9 + 10e-6);
  EXPECT_DOUBLE_EQ(costs.collective(CollectiveKind::Shift, {0, 1, 4, 5}, bytes),
                   1e9 / 10e9 + 10e-6);
  EXPECT_EQ(costs.collective(CollectiveKind::Shift, {2}, bytes), 0);
}

// A level that measured its bus bandwidth by size (nccl-tests' busbw)
// costs a collective of a measured size at that rate, latency included,
// interpolated in the log of the size between measured sizes, never
// faster than the ring; outside the measured sizes, rate and latency.
TEST(CostModel, CollectivesOfAMeasuredSizeMoveAtTheMeasuredRate) {
  ClusterSpec spec = roundSpec(false);
  spec.node.busBandwidthBySize = {{1e6, 10e9}, {1e8, 50e9}, {1e10, 200e9}};
  CostModel costs(spec);
  std::vector<int> inNode = {0, 1, 2, 3};
  auto allReduce = [&](double bytes) {
    return costs.collective(CollectiveKind::AllReduceSum, inNode, bytes);
  };
  EXPECT_DOUBLE_EQ(allReduce(1e6), 6 * 0.25e6 / 10e9);
  EXPECT_DOUBLE_EQ(allReduce(1e8), 6 * 0.25e8 / 50e9);
  // Halfway in log size between 1e6 and 1e8: halfway in rate.
  EXPECT_DOUBLE_EQ(allReduce(1e7), 6 * 0.25e7 / 30e9);
  // 200 GB/s measured, but the ring moves at most 100.
  EXPECT_DOUBLE_EQ(allReduce(1e10), 6 * 0.25e10 / 100e9);
  // Outside the measured sizes, and across nodes (no curve there).
  EXPECT_DOUBLE_EQ(allReduce(1e5), 6 * (0.25e5 / 100e9 + 1e-6));
  EXPECT_DOUBLE_EQ(allReduce(1e11), 6 * (0.25e11 / 100e9 + 1e-6));
  EXPECT_DOUBLE_EQ(
      costs.collective(CollectiveKind::AllReduceSum, {0, 4, 8, 12}, 1e8),
      6 * (0.25e8 / 10e9 + 10e-6));
}

TEST(CostModel, AGroupIsCostedOverItsSlowestInstance) {
  // d=7, p=2 on nodes of 4: stage 0's data group {0..6} holds at least 3
  // GPUs on each node it spans, stage 1's {7..13} only one of node 1:
  // both are costed over stage 1's, the slower ring, even from rank 0,
  // whose own group crosses nodes too.
  ClusterSpec spec = roundSpec(false);
  CostModel costs(spec);
  Plan plan;
  plan.dataParallel = 7;
  plan.pipelineParallel = 2;
  plan.groups = {{{1}, {}}};
  std::vector<int> stage1 = {7, 8, 9, 10, 11, 12, 13};
  EXPECT_EQ(costs.slowestInstance(plan, 0, 0), stage1);
  EXPECT_EQ(costs.slowestInstance(plan, 0, 9), stage1);
  EXPECT_DOUBLE_EQ(costs.ring({0, 1, 2, 3, 4, 5, 6}).bytesPerSecond, 30e9);
  EXPECT_DOUBLE_EQ(costs.ring(stage1).bytesPerSecond, 10e9);
  // Equals: a rank's own. Within a node: the node's ring.
  plan.dataParallel = 4;
  EXPECT_EQ(costs.slowestInstance(plan, 0, 5), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_DOUBLE_EQ(costs.ring({4, 5, 6, 7}).latencySeconds, 1e-6);
}

} // namespace
