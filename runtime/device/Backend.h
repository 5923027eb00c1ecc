//===- Backend.h - where one rank's instructions run ------------*- C++ -*-===//
//
// What the executor needs of a device: arenas, instructions launched on a
// stream, events between streams, copies in and out, synchronization. Each
// rank has a compute stream, a communication stream (gradient reductions)
// and four transfer streams (pipeline transfers, by kind and direction), so
// that communication overlaps computation. Work on one stream
// runs in issue order; across streams only events order it (CUDA's rules).
// The CPU backend (runtime/cpu/) is the first implementation; nothing
// outside it assumes that device memory is host memory.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DEVICE_BACKEND_H
#define STRATA_RUNTIME_DEVICE_BACKEND_H

#include "runtime/device/Trace.h"
#include "runtime/plan/Plan.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime {

/// An instruction's operand, resolved: its device address and buffer (both
/// null for an absent optional operand).
struct Operand {
  void *data = nullptr;
  const Buffer *buffer = nullptr;
};

class Backend {
public:
  virtual ~Backend() = default;

  /// Allocates the rank's arena of `bytes`; "" or why it cannot.
  virtual std::string allocate(Arena arena, uint64_t bytes) = 0;
  /// The arena's device address.
  virtual uint8_t *arena(Arena arena) const = 0;
  /// Creates the rank's events (index 0..count-1).
  virtual void createEvents(uint32_t count) = 0;
  /// Readies what the rank's instructions need beyond memory and events (a
  /// GPU's modules and GEMM algorithms), once the arenas exist; "" or why
  /// the rank cannot run here.
  virtual std::string prepare(const Plan &, const RankPlan &) { return ""; }

  /// `operands`: A, B, D, bias, aux.
  virtual void gemm(Stream stream, const GemmOp &op,
                    const Operand operands[5]) = 0;
  /// `operands` in the kernel's order (Kernels.def). `hyper` is not passed:
  /// the optimizer kernels read the plan's hyper buffer. On a backend that
  /// runs fused kernels, a launch that fuses gets its members' operands
  /// after its own, and the members are not launched.
  virtual void launch(Stream stream, const LaunchOp &op,
                      const std::vector<Operand> &operands) = 0;
  /// Whether a fused group runs as its first launch's kernel (the CPU runs
  /// each member instead).
  virtual bool runsFusedKernels() const { return false; }
  /// The library that runs `op` in place of the plan's kernel ("cudnn":
  /// the cuda backend's attention, AttentionRunner.h), or "" where the
  /// kernel runs; named in --profile and --trace.
  virtual std::string launchLibrary(const LaunchOp &) const { return ""; }

  /// Graphs: the gemms and launches issued on the compute stream between
  /// beginGraph and endGraph are recorded, not run, with their operands'
  /// addresses; replayGraph runs them again, in order, on the compute
  /// stream (a CUDA graph; the CPU backend records its tasks).
  virtual bool recordsGraphs() const { return false; }
  virtual void beginGraph() {}
  /// The recorded graph's number.
  virtual uint32_t endGraph() { return 0; }
  virtual void replayGraph(uint32_t) {}
  /// Marks the point of `stream` that later waits on `event` wait for.
  virtual void record(Stream stream, uint32_t event) = 0;
  /// Holds `stream` until the stream of the event's latest record has
  /// passed it (no-op for an event never recorded).
  virtual void wait(Stream stream, uint32_t event) = 0;

  /// The host bytes may be reused as soon as copyIn returns.
  virtual void copyIn(Stream stream, void *device, const void *host,
                      size_t bytes) = 0;
  /// The host bytes are written when the stream gets there: synchronize
  /// before reading them.
  virtual void copyOut(Stream stream, void *host, const void *device,
                       size_t bytes) = 0;
  virtual void fillZero(Stream stream, void *device, size_t bytes) = 0;
  /// Waits for every stream; rethrows what failed on one of them.
  virtual void synchronize() = 0;
  /// Waits for one stream alone (to read what it wrote); rethrows what
  /// failed on it.
  virtual void synchronizeStream(Stream stream) = 0;
  void synchronizeCompute() { synchronizeStream(Stream::Compute); }

  /// Device memory the backend holds beyond the plan's arenas (libraries'
  /// workspaces), in words for --report-memory, or "" for none.
  virtual std::string memoryBeyondArenas() const { return ""; }
  /// The highest byte written in an arena, + 1, where the backend can tell
  /// (the CPU backend starts its arenas filled with a marker); else -1.
  virtual int64_t highWater(Arena) const { return -1; }
  /// Seconds the compute stream has spent waiting for the communication
  /// stream (the communication it could not hide).
  virtual double exposedSeconds() const { return 0; }
  /// Seconds the communication stream has been busy.
  virtual double communicationSeconds() const { return 0; }
  /// Device timing, for --profile and --trace where the streams run apart
  /// from the host (a GPU, where the host only enqueues): markTime records
  /// a timing point on `stream` and returns its index; once the stream has
  /// passed them (after synchronize), markTimes() gives each mark's
  /// microseconds after the first mark since clearMarks(). A backend that
  /// does the work as it is called (the CPU) says false to timesDevice()
  /// and is timed by the host's clock.
  virtual bool timesDevice() const { return false; }
  virtual uint32_t markTime(Stream) { return 0; }
  virtual std::vector<double> markTimes() { return {}; }
  virtual void clearMarks() {}
  /// The executor is about to issue `step` (of `program`): a backend that
  /// times work it does not run (the simulated cluster) labels it so.
  virtual void noteStep(const Program &, const Step &) {}
  /// Starts keeping when each piece of communication-stream work ran, in
  /// microseconds from `epoch`; takeCommunicationTrace() hands them over
  /// (after synchronize()).
  virtual void traceCommunication(std::chrono::steady_clock::time_point) {}
  virtual std::vector<TraceEvent> takeCommunicationTrace() { return {}; }
};

} // namespace strata::runtime

#endif
