//===- CpuBackend.h - a rank's device on the CPU ----------------*- C++ -*-===//
//
// Arenas in host memory and six streams. The communication stream (the
// collectives a plan puts there) and the four transfer streams (the
// pipeline's transfers, which the executor posts there by kind and
// direction) are each a thread of its own that takes work in issue order. The compute stream
// runs on the rank's own thread as it issues (a launch returns when the
// kernel is done: traces and profiles time it exactly), or, with
// `asyncCompute`, on a thread of its own too, as a GPU runs ahead of its
// host. Events count records issued and passed, so a wait holds its stream
// until the latest record issued before it has been passed, as a CUDA
// event does. Because the streams really run at once, a wait missing from
// a plan is a data race: the CPU parity tests under ThreadSanitizer find
// the waits of the compute stream on communication, and with asyncCompute
// those of communication on compute as well.
//
// Kernels compute in f32: a bf16 operand is widened into scratch first and
// a bf16 result rounded back (to nearest even) after, which is how bf16
// training is emulated on a CPU.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CPU_CPUBACKEND_H
#define STRATA_RUNTIME_CPU_CPUBACKEND_H

#include "runtime/device/Backend.h"
#include "runtime/device/Trace.h"

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

namespace strata::runtime::cpu {

/// Threads the kernels use (OpenMP and OpenBLAS); 0 leaves the default.
void setThreads(int threads);

/// Bytes of memory the process can still use (MemAvailable), or 0 if it
/// cannot tell.
uint64_t availableHostBytes();

class CpuBackend : public Backend {
public:
  /// `asyncCompute`: the compute stream on a thread of its own, with
  /// `threads` kernel threads (0: the default).
  explicit CpuBackend(bool asyncCompute = false, int threads = 0);
  ~CpuBackend() override;

  std::string allocate(Arena arena, uint64_t bytes) override;
  uint8_t *arena(Arena arena) const override {
    return arenas[int(arena)].get();
  }
  void createEvents(uint32_t count) override;

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
  int64_t highWater(Arena arena) const override;
  double exposedSeconds() const override;
  double communicationSeconds() const override;
  void traceCommunication(std::chrono::steady_clock::time_point epoch) override;
  std::vector<TraceEvent> takeCommunicationTrace() override;
  /// With asyncCompute the compute stream runs apart from the host, as a
  /// GPU's does: a mark's time is taken when the stream's thread reaches it.
  bool timesDevice() const override { return asyncCompute; }
  uint32_t markTime(Stream stream) override;
  std::vector<double> markTimes() override;
  void clearMarks() override { marks.clear(); }

  /// Graphs: the gemm and launch tasks recorded as issued (with their
  /// operands), submitted again on replay, as a CUDA graph replays the
  /// kernels it captured; how strata-run --graphs tests the executor's
  /// graphs where no GPU is.
  bool recordsGraphs() const override { return true; }
  void beginGraph() override;
  uint32_t endGraph() override;
  void replayGraph(uint32_t graph) override;

  /// Runs `task` on `stream`: in issue order on the stream's thread, or now
  /// for the compute stream when it runs as issued. `name` labels it in
  /// traces.
  void submit(Stream stream, const std::string &name,
              std::function<void()> task);

protected:
  /// Runs a launch's kernel, on whichever thread its stream runs: here the
  /// CPU's, in the simt backend (runtime/simt) the plan's generated one.
  virtual void runLaunch(const LaunchOp &op,
                         const std::vector<Operand> &operands);

private:
  struct Task {
    std::string name;
    std::function<void()> run;
  };
  /// Keeps a compute-stream task in the graph being recorded.
  void keep(const std::string &name, std::function<void()> task);
  /// Throws if a graph is being recorded: it holds gemms and launches only.
  void notRecording(const char *what) const;
  bool recording = false;
  std::vector<std::vector<Task>> graphs;
  /// A stream with a thread of its own: its queue and whether it is busy.
  struct Queue {
    std::deque<Task> tasks;
    bool busy = false;
    std::thread thread;
  };
  bool threaded(Stream stream) const {
    return stream != Stream::Compute || asyncCompute;
  }
  void worker(Stream stream, int threads);
  void enqueue(Stream stream, Task task);
  /// Blocks until `stream`'s queue is done (or something failed).
  void drain(Stream stream);
  /// Blocks until event `event` has passed `target` (or something failed,
  /// or the backend stops), counting the time as exposed on the compute
  /// stream.
  void block(std::unique_lock<std::mutex> &lock, uint32_t event,
             uint64_t target, bool compute);
  /// Rethrows what failed on a stream's thread, if anything did.
  void rethrow();
  void runGemm(const GemmOp &op, const Operand operands[5]);

  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> arenas[kArenas];
  uint64_t arenaBytes[kArenas] = {0, 0, 0};
  bool asyncCompute;
  // markTime's times: a deque, whose elements stay where they are while
  // the host appends and a stream's thread writes the last ones.
  std::deque<std::chrono::steady_clock::time_point> marks;
  std::vector<std::vector<float>> scratch; // widened bf16 operands
  // A launch's operands as its kernel reads them, reused by every launch
  // (launches run on the compute stream only).
  std::vector<void *> launchData;
  std::vector<const Buffer *> launchBuffers;

  mutable std::mutex mutex;
  std::condition_variable changed;
  Queue queues[kStreams];
  bool stopping = false;
  std::exception_ptr failure;
  std::vector<uint64_t> issued, passed; // per event
  bool tracing = false;
  std::chrono::steady_clock::time_point epoch;
  std::vector<TraceEvent> commTrace;
  double commSeconds = 0;
  double exposed = 0; // compute waiting on communication
};

} // namespace strata::runtime::cpu

#endif
