//===- ClusterSpecTest.cpp - cluster specs read, and refused --------------===//
//
// The specs under examples/clusters/ read with the figures their sources
// state; every malformed spec is refused with a message naming the field.
//
//===----------------------------------------------------------------------===//
#include "runtime/cluster/ClusterSpec.h"

#include <gtest/gtest.h>

#include <string>

using namespace strata::runtime;

namespace {

std::string example(const char *name) {
  return std::string(STRATA_SOURCE_DIR) + "/examples/clusters/" + name;
}

TEST(ClusterSpec, SeleneReadsAsThePaperStatesIt) {
  ClusterSpec spec;
  ASSERT_EQ(loadClusterSpec(example("selene.json"), spec), "");
  EXPECT_EQ(spec.gpusPerNode, 8);
  EXPECT_EQ(spec.gpu.peakFlops.at("bf16"), 312e12);
  EXPECT_EQ(spec.gpu.peakFlops.at("fp32"), 19.5e12);
  EXPECT_EQ(spec.gpu.hbmBytes, int64_t(80) << 30);
  EXPECT_TRUE(spec.node.spansNode);
  EXPECT_FALSE(spec.cluster.spansNode);
  EXPECT_EQ(spec.cluster.bytesPerSecond, 24e9); // NCCL on 8 x 200 Gb/s HDR
  EXPECT_FALSE(spec.gpu.source.empty());
  EXPECT_EQ(spec.gpu.smCount, 108);
  EXPECT_FALSE(spec.gpu.gemmWavesQuantized); // fitted: cuBLAS balances them
  // NVLink's all-reduce bus bandwidth as nccl-tests measured it, 1 MiB to
  // 16 GiB; an interpolated size lies between its neighbours.
  ASSERT_EQ(spec.node.busBandwidthBySize.size(), 9u);
  EXPECT_EQ(spec.node.busBandwidthBySize.front().first, 1 << 20);
  EXPECT_EQ(spec.node.measuredBusBandwidth(double(128 << 20)), 176.92e9);
  double between = spec.node.measuredBusBandwidth(100e6);
  EXPECT_GT(between, 171.54e9);
  EXPECT_LT(between, 176.92e9);
  EXPECT_TRUE(spec.cluster.busBandwidthBySize.empty());
}

TEST(ClusterSpec, EveryExampleReads) {
  for (const char *name : {"selene.json", "dgx-h100.json", "dgx-h200.json"}) {
    ClusterSpec spec;
    EXPECT_EQ(loadClusterSpec(example(name), spec), "") << name;
    EXPECT_GT(spec.node.bytesPerSecond, spec.cluster.bytesPerSecond) << name;
  }
}

// A spec that reads, to break one field at a time.
const char *kGood = R"({"name": "c", "gpus_per_node": 8,
  "gpu": {"name": "g", "peak_flops": {"bf16": 1e12, "fp32": 1e11},
          "hbm_bytes_per_s": 1e12, "hbm_bytes": 1000,
          "launch_overhead_s": 1e-6, "sm_count": 100,
          "gemm_tile": [128, 256], "gemm_waves": "balanced",
          "gemm_efficiency": 0.75, "gemm_k_overhead": 200,
          "hbm_efficiency": 0.9},
  "levels": [{"name": "n", "spans": "node", "bytes_per_s": 1e11,
              "latency_s": 1e-6},
             {"name": "x", "spans": "cluster", "bytes_per_s": 1e10,
              "latency_s": 1e-5}]})";

std::string withReplaced(const std::string &from, const std::string &to) {
  std::string text = kGood;
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

TEST(ClusterSpec, TheBaseOfTheRefusalsReads) {
  ClusterSpec spec;
  EXPECT_EQ(parseClusterSpec(kGood, spec), "");
  EXPECT_EQ(spec.cluster.latencySeconds, 1e-5);
  EXPECT_EQ(spec.gpu.gemmTileRows, 128);
  EXPECT_EQ(spec.gpu.gemmTileColumns, 256);
  EXPECT_FALSE(spec.gpu.gemmWavesQuantized);
  EXPECT_EQ(spec.gpu.gemmKOverhead, 200);
}

TEST(ClusterSpec, ACpusMeasuredFieldsRead) {
  ClusterSpec spec;
  EXPECT_EQ(parseClusterSpec(withReplaced("\"hbm_efficiency\": 0.9",
                                          "\"hbm_efficiency\": 0.9, "
                                          "\"kernel_rates\": {\"gelu_bwd\": "
                                          "1.5e8, \"add\": 3e9}, "
                                          "\"stream_wake_s\": 4e-5, "
                                          "\"synchronous_compute\": true"),
                             spec),
            "");
  EXPECT_EQ(spec.gpu.kernelRates.size(), 2u);
  EXPECT_EQ(spec.gpu.kernelRates.at("gelu_bwd"), 1.5e8);
  EXPECT_EQ(spec.gpu.streamWakeSeconds, 4e-5);
  EXPECT_TRUE(spec.gpu.synchronousCompute);
  // A GPU's spec gives none of them.
  EXPECT_EQ(parseClusterSpec(kGood, spec), "");
  EXPECT_TRUE(spec.gpu.kernelRates.empty());
  EXPECT_EQ(spec.gpu.streamWakeSeconds, 0);
  EXPECT_FALSE(spec.gpu.synchronousCompute);
}

TEST(ClusterSpec, EveryMalformedSpecIsRefusedNamingItsField) {
  struct Case {
    std::string text, message;
  };
  std::vector<Case> cases = {
      {"", " must be an object"},
      {"[]", " must be an object"},
      {withReplaced("\"gpus_per_node\": 8", "\"gpus_per_node\": 0"),
       "gpus_per_node must be at least 1 and at most 1024, got 0"},
      {withReplaced("\"gpus_per_node\": 8", "\"gpus_per_node\": 8.5"),
       "is not valid JSON"},
      {withReplaced("\"gpus_per_node\": 8", "\"gpu_per_node\": 8"),
       "gpu_per_node is not a field strata knows"},
      {withReplaced("\"gpus_per_node\": 8,", ""), "gpus_per_node is missing"},
      {withReplaced("\"hbm_bytes_per_s\": 1e12", "\"hbm_bytes_per_s\": -1"),
       "gpu.hbm_bytes_per_s must be positive and at most 1e+15, got -1"},
      {withReplaced("\"hbm_bytes_per_s\": 1e12", "\"hbm_bytes_per_s\": 1e999"),
       "gpu.hbm_bytes_per_s must be a finite number"},
      {withReplaced("\"hbm_bytes_per_s\": 1e12", "\"hbm_bytes_per_s\": \"1\""),
       "gpu.hbm_bytes_per_s must be a finite number"},
      {withReplaced("\"bf16\": 1e12, ", ""), "gpu.peak_flops.bf16 is missing"},
      {withReplaced("\"bf16\": 1e12", "\"int8\": 1e12"),
       "gpu.peak_flops.int8 is not a dtype strata knows"},
      {withReplaced("\"bf16\": 1e12", "\"bf16\": 1e19"),
       "gpu.peak_flops.bf16 must be positive and at most 1e+18, got 1e+19"},
      {withReplaced("\"launch_overhead_s\": 1e-6", "\"launch_overhead_s\": 0"),
       "gpu.launch_overhead_s must be positive"},
      {withReplaced("\"sm_count\": 100", "\"sm_count\": 0"),
       "gpu.sm_count must be at least 1"},
      {withReplaced("[128, 256]", "[128]"),
       "gpu.gemm_tile must be a list of two whole numbers"},
      {withReplaced("[128, 256]", "[128, 0]"),
       "gpu.gemm_tile[1] must be at least 1"},
      {withReplaced("\"balanced\"", "\"smooth\""),
       "gpu.gemm_waves must be \"quantized\" or \"balanced\", got \"smooth\""},
      {withReplaced("\"gemm_efficiency\": 0.75", "\"gemm_efficiency\": 1.5"),
       "gpu.gemm_efficiency must be positive and at most 1, got 1.5"},
      {withReplaced("\"hbm_efficiency\": 0.9", "\"hbm_efficiency\": 0"),
       "gpu.hbm_efficiency must be positive"},
      {withReplaced("\"gemm_k_overhead\": 200,", ""),
       "gpu.gemm_k_overhead is missing"},
      {withReplaced("\"name\": \"g\"", "\"name\": \"g\", \"name\": \"h\""),
       "gpu.name is given twice"},
      {withReplaced("\"spans\": \"node\"", "\"spans\": \"rack\""),
       "levels[0].spans must be \"node\" or \"cluster\", got \"rack\""},
      {withReplaced("\"spans\": \"node\"", "\"spans\": \"cluster\""),
       "levels[0].spans must be \"node\": the node's level comes first"},
      {withReplaced("\"latency_s\": 1e-5}]", "\"latency_s\": 1e-5}, {}]"),
       "levels must list two levels"},
      {withReplaced("\"levels\": [", "\"levels\": {"), "levels must be a list"},
      {withReplaced("\"latency_s\": 1e-5}]",
                    "\"latency_s\": 1e-5, \"bus_bytes_per_s_by_size\": "
                    "[[2e6, 5e9], [1e6, 6e9]]}]"),
       "levels[1].bus_bytes_per_s_by_size must be a list of [bytes, bytes per "
       "second] pairs, the sizes ascending"},
      {withReplaced("\"latency_s\": 1e-5}]",
                    "\"latency_s\": 1e-5, \"bus_bytes_per_s_by_size\": "
                    "[[1e6, 5e9, 1]]}]"),
       "levels[1].bus_bytes_per_s_by_size must be a list of [bytes, bytes per "
       "second] pairs"},
      {withReplaced("\"latency_s\": 1e-5}]",
                    "\"latency_s\": 1e-5, \"bus_bytes_per_s_by_size\": "
                    "[[1e6, -5e9]]}]"),
       "levels[1].bus_bytes_per_s_by_size[0][1] must be positive"},
      {withReplaced("\"hbm_efficiency\": 0.9",
                    "\"hbm_efficiency\": 0.9, \"kernel_rates\": {\"gelu\": 1e8}"),
       "gpu.kernel_rates.gelu is not a kernel of the catalog"},
      {withReplaced("\"hbm_efficiency\": 0.9",
                    "\"hbm_efficiency\": 0.9, \"kernel_rates\": {\"add\": 0}"),
       "gpu.kernel_rates.add must be positive"},
      {withReplaced("\"hbm_efficiency\": 0.9",
                    "\"hbm_efficiency\": 0.9, \"kernel_rates\": [1e8]"),
       "gpu.kernel_rates must be an object"},
      {withReplaced("\"hbm_efficiency\": 0.9",
                    "\"hbm_efficiency\": 0.9, \"stream_wake_s\": 2"),
       "gpu.stream_wake_s must be positive and at most 1, got 2"},
      {withReplaced("\"hbm_efficiency\": 0.9",
                    "\"hbm_efficiency\": 0.9, \"synchronous_compute\": 1"),
       "gpu.synchronous_compute must be true or false"},
      {std::string(kGood) + " {}", "the spec has text after its object"},
  };
  for (const Case &c : cases) {
    ClusterSpec spec;
    std::string error = parseClusterSpec(c.text, spec);
    EXPECT_NE(error.find(c.message), std::string::npos)
        << "expected '" << c.message << "', got '" << error << "'";
  }
}

TEST(ClusterSpec, AFileThatIsNotThereIsNamed) {
  ClusterSpec spec;
  std::string error = loadClusterSpec("/nonexistent/c.json", spec);
  EXPECT_NE(error.find("/nonexistent/c.json"), std::string::npos) << error;
}

} // namespace
