//===- CudaBackend.h - a rank's device on an NVIDIA GPU ---------*- C++ -*-===//
//
// The second implementation of Backend (runtime/device/Backend.h): each arena
// is one device allocation; the compute and communication streams are CUDA
// streams and the plan's events CUDA events, so the plan's records and
// waits order them as on the CPU backend. Launches run the plan's
// generated kernels: the rank loads the plan's PTX into modules of its own
// (a kernel's scratch is its module's) and launches them with the
// parameters of the launch contract (KernelArgs.h). Gemms go through
// cuBLASLt (CublasLt.h). Ranks that share a GPU (threads of one process)
// share its primary context; every call first makes it current on the
// calling thread.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUDABACKEND_H
#define STRATA_RUNTIME_CUDA_CUDABACKEND_H

#include "runtime/cuda/AttentionRunner.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/CudaDriver.h"
#include "runtime/cuda/DeviceChecks.h"
#include "runtime/device/Backend.h"
#include "runtime/device/KernelArgs.h"

#include <vector>

namespace strata::runtime::cuda {

/// The GPU the ranks of a process run on: its primary context and what the
/// checks read of it.
struct Gpu {
  CUcontext context = nullptr;
  DeviceInfo info;
  int devices = 0; // the node's GPUs
};

/// Opens device `ordinal` (its primary context) and reads what the checks
/// need; "" or why not. The driver must be loaded (probeDriver).
std::string openDevice(int ordinal, CUcontext &context, DeviceInfo &info);

/// Everything checked before a rank is made: a plan of the cuda target,
/// the driver and a GPU (GPU 0 for ranks as threads, one per process under
/// a launcher), the plan's architecture and shared memory against the
/// GPU's. Opens the GPU into `gpu`; "" or why the plan cannot run here.
std::string openGpu(const Plan &plan, Gpu &gpu);

class CudaBackend : public Backend {
public:
  /// The streams a gemm may run on (not the transfer stream's).
  static constexpr int kGemmStreams = 2;
  /// Device memory a rank takes beyond its arenas: cuBLASLt's workspaces.
  static constexpr uint64_t kExtraBytes =
      kGemmStreams * GemmRunner::kWorkspaceBytes;

  /// On `context` (openGpu's); create() makes the streams. Attention
  /// launches run as `attention` says (AttentionRunner.h).
  explicit CudaBackend(CUcontext context,
                       AttentionBackend attention = AttentionBackend::Strata);
  ~CudaBackend() override;
  /// The streams and cuBLASLt's handle and workspaces; "" or why not.
  std::string create();

  std::string allocate(Arena arena, uint64_t bytes) override;
  uint8_t *arena(Arena arena) const override { return arenas[int(arena)]; }
  void createEvents(uint32_t count) override;
  std::string prepare(const Plan &plan, const RankPlan &rank) override;

  void gemm(Stream stream, const GemmOp &op,
            const Operand operands[5]) override;
  void launch(Stream stream, const LaunchOp &op,
              const std::vector<Operand> &operands) override;
  void record(Stream stream, uint32_t event) override;
  void wait(Stream stream, uint32_t event) override;
  void copyIn(Stream stream, void *device, const void *host,
              size_t bytes) override;
  void copyOut(Stream stream, void *host, const void *device,
               size_t bytes) override;
  void fillZero(Stream stream, void *device, size_t bytes) override;
  void synchronize() override;
  void synchronizeStream(Stream stream) override;
  bool runsFusedKernels() const override { return true; }
  std::string memoryBeyondArenas() const override;
  std::string launchLibrary(const LaunchOp &op) const override {
    return attention.runs(op) ? "cudnn" : "";
  }
  /// CUDA graphs, captured from the compute stream (this thread's calls
  /// only: other ranks' threads go on) and instantiated once.
  bool recordsGraphs() const override { return true; }
  void beginGraph() override;
  uint32_t endGraph() override;
  void replayGraph(uint32_t graph) override;
  /// Timing events on the streams, a pool reused after clearMarks().
  bool timesDevice() const override { return true; }
  uint32_t markTime(Stream stream) override;
  std::vector<double> markTimes() override;
  void clearMarks() override { marksUsed = 0; }

  /// What runs the attention launches (a line, after prepare).
  std::string attentionReport() const { return attention.report(); }

  /// Makes the context current on the calling thread.
  void bind() const;
  CUstream streamOf(Stream stream) const { return streams[int(stream)]; }

private:
  CUcontext context;
  CUstream streams[kStreams] = {};
  uint8_t *arenas[kArenas] = {nullptr, nullptr, nullptr};
  std::vector<CUevent> events;
  std::vector<CUevent> marks; // timing events (markTime), the first marksUsed
  size_t marksUsed = 0;
  std::vector<CUmodule> modules;
  std::vector<CUfunction> functions; // by the plan's code index
  std::vector<CUgraph> graphs;
  std::vector<CUgraphExec> executables; // by graph
  void *workspaces[kGemmStreams] = {};  // cuBLASLt's
  GemmRunner gemms;
  AttentionRunner attention;
  void *attentionRowSum = nullptr;    // the cuDNN backward's D, f32
  void *attentionWorkspace = nullptr; // the cuDNN plans' workspace
  uint64_t attentionRowSumBytes = 0, attentionWorkspaceBytes = 0;
  KernelArgs args;
};

} // namespace strata::runtime::cuda

#endif
