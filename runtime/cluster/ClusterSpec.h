//===- ClusterSpec.h - the machine a plan's speed is predicted on -*- C++ -*-===//
//
// A cluster spec names every constant the simulator may use, each read
// from a file that says where it comes from (examples/clusters/*.json), so
// that nothing is tuned in code: per GPU, its peak rate by dtype, its
// memory's bandwidth and size and a kernel's launch overhead; per level of
// the interconnect (the node's, the cluster's), the bandwidth one GPU has
// in one direction and the latency of a message. Specs travel: every field
// is checked, an unknown one is an error (a misspelt field must not fall
// back to a default), and every number must be finite, positive and
// within what a machine could have.
//
// The format, all fields required but `source` (a comment: where the
// numbers come from), on the cluster, the GPU and each level:
//   { "name": "...", "gpus_per_node": 8,
//     "gpu": { "name": "...", "peak_flops": { "bf16": 312e12, ... },
//              "hbm_bytes_per_s": 2.039e12, "hbm_bytes": 85899345920,
//              "launch_overhead_s": 4e-6, "sm_count": 108,
//              "gemm_tile": [256, 128], "gemm_waves": "quantized",
//              "gemm_efficiency": 0.8, "gemm_k_overhead": 224,
//              "hbm_efficiency": 0.85 },
//     "levels": [ { "name": "...", "spans": "node", "bytes_per_s": ...,
//                   "latency_s": ... },
//                 { "name": "...", "spans": "cluster", ... } ] }
// peak_flops names at least bf16 and fp32 (dense, without sparsity), among
// bf16, fp16, tf32 and fp32. A gemm is cut into gemm_tile (rows, columns)
// tiles, one per multiprocessor at a time; gemm_waves says whether its
// last wave of tiles costs a whole one ("quantized") or the library
// balances it ("balanced", as stream-K does); where tiles are full it
// reaches gemm_efficiency of the peak, less a tile's fixed cost, the
// equal of gemm_k_overhead more of the reduced dimension. A kernel moves
// its bytes at hbm_efficiency of the memory's bandwidth. The efficiencies
// are fractions in (0, 1].
//
// Optional on the gpu: "kernel_rates": { "gelu_bwd": 1.2e8, ... }, kernels
// of the catalog with the work each does per second, as a microbenchmark
// measured them (strata-fit-cpu's, for a CPU, whose kernels are bound by
// their arithmetic, not their bytes): a kernel's work is its FLOPs where
// it counts them (attention), else the elements of its largest operand
// (exec/KernelCost.h). A kernel so rated costs its work at that rate, or
// its bytes if slower; and a gemm's epilogue, on such a device a pass of
// its own after the product, costs its kernel's (add, gelu_fwd, sum_to).
// Optional on the gpu too: "stream_wake_s", how long a stream that waits
// for an event recorded on another stream takes to go on once it is
// recorded, or, idle, once the host issues it work (on a CPU, the
// stream's thread woken from its sleep; given for none of the GPUs,
// whose streams the hardware wakes); and
// "synchronous_compute": true, where the compute stream runs on the thread
// that issues (a CPU rank): another stream gets an instruction only once
// the compute issued before it has run (false, a GPU's, when not given).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CLUSTER_CLUSTERSPEC_H
#define STRATA_RUNTIME_CLUSTER_CLUSTERSPEC_H

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::runtime {

struct GpuSpec {
  std::string name, source;
  std::map<std::string, double> peakFlops; // by dtype, dense
  double hbmBytesPerSecond = 0;
  int64_t hbmBytes = 0;
  double launchOverheadSeconds = 0;
  int64_t smCount = 0;
  int64_t gemmTileRows = 0, gemmTileColumns = 0;
  bool gemmWavesQuantized = false;
  double gemmEfficiency = 0, gemmKOverhead = 0, hbmEfficiency = 0;
  std::map<std::string, double> kernelRates; // by kernel name; may be empty
  double streamWakeSeconds = 0; // optional; 0 when not given
  bool synchronousCompute = false; // optional
};

/// One level of the interconnect: what a GPU has towards the GPUs the
/// level joins (`node`: its node's; `cluster`: every other node's).
struct LinkLevel {
  std::string name, source;
  bool spansNode = true;     // else the whole cluster
  double bytesPerSecond = 0; // per GPU, one direction
  double latencySeconds = 0;
  // Measured all-reduce bus bandwidth by message size (nccl-tests' size
  // and busbw), sizes ascending; may be empty. Within its range it gives a
  // collective's rate, latency included (CostModel::collective).
  std::vector<std::pair<double, double>> busBandwidthBySize;

  /// The measured bus bandwidth at `bytes`, interpolated in the log of the
  /// size; 0 outside the measured range.
  double measuredBusBandwidth(double bytes) const;
};

struct ClusterSpec {
  std::string name, source;
  int64_t gpusPerNode = 0;
  GpuSpec gpu;
  LinkLevel node, cluster;
};

/// `text` (a spec's JSON) read into `out`; "" or what is wrong with it,
/// naming the field.
std::string parseClusterSpec(std::string_view text, ClusterSpec &out);

/// The spec in file `path`; "" or what is wrong, naming the file.
std::string loadClusterSpec(const std::string &path, ClusterSpec &out);

} // namespace strata::runtime

#endif
