//===- Executor.h - one rank's plan on a backend ----------------*- C++ -*-===//
//
// Runs a rank's schedule: each step's program, instruction by instruction,
// on the stream the plan gives it, through the Backend and Collectives
// interfaces. Instructions were decoded once when the plan loaded; here
// each operand is only resolved to an address (arena base + offset, + the
// step's stash slot). Pipeline transfers are posted at the schedule's
// exchange points: the sends that trail the steps since the last point and
// the receives that lead the steps up to the next go as one group, as
// Megatron's batched isend/irecv (the schedule simulator checked that such
// groups cannot deadlock when sends wait to be matched).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_EXEC_EXECUTOR_H
#define STRATA_RUNTIME_EXEC_EXECUTOR_H

#include "runtime/comm/Collectives.h"
#include "runtime/device/Backend.h"
#include "runtime/device/Trace.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/plan/Hyper.h"

#include <chrono>
#include <functional>
#include <map>
#include <tuple>

namespace strata::runtime {

class Executor {
public:
  Executor(const Plan &plan, uint32_t rank, Backend &backend,
           Collectives &collectives);

  /// Allocates the arenas, creates events and groups, checks the rank's
  /// inputs and outputs; "" or what is wrong.
  std::string load();

  const Plan &plan() const { return whole; }
  const RankPlan &rankPlan() const { return rank; }
  Backend &device() { return backend; }
  Collectives &communication() { return collectives; }

  /// A buffer's device address (for a stash buffer, in the slot of its
  /// pool among `slots`).
  void *address(uint32_t buffer, const StashSlots &slots = kNoSlots) const;
  /// The device address of an io entry's buffer, or null.
  void *io(const std::string &name) const;

  /// Called before each step that reads the batch, with the microbatch:
  /// writes the tokens, labels and dropout keys (on the compute stream).
  using LoadBatch = std::function<void(int64_t microbatch)>;

  /// Runs one iteration's schedule; returns the sum of the losses of the
  /// microbatches this rank computed the loss of (0 if none).
  float runIteration(int64_t iteration, const Hyper &hyper,
                     const LoadBatch &loadBatch);

  /// Runs the schedule for the loss alone: every step but the optimizer,
  /// then the gradient accumulators zeroed as the optimizer would have,
  /// so that training goes on as if nothing had run (the backward runs
  /// too: the plan holds no forward-only programs yet). Returns what
  /// runIteration does.
  float evaluate(int64_t iteration, const LoadBatch &loadBatch);

  /// The gradient norm the last optimizer program computed.
  float gradNorm();

  /// Fault injection for tests (strata-run --fail-grad-at-iteration):
  /// every gradient of iteration `iteration` made infinite just before
  /// the optimizer, on every rank, as an overflow in the backward would.
  void poisonGradientsAt(int64_t iteration) { poisonAt = iteration; }

  // Measurement.
  void enableTrace(std::chrono::steady_clock::time_point epoch);
  std::vector<TraceEvent> takeTrace();
  void enableProfile() {
    profiling = true;
    deviceTiming = backend.timesDevice();
  }
  /// Runs each step's body as a graph (Backend::beginGraph) recorded the
  /// first time its program runs in its stash slots, and replayed after:
  /// the body's gemms and launches between the compute stream's leading
  /// waits and trailing records, when that is all it holds. Not while
  /// tracing or profiling, which time each instruction.
  void enableGraphs() { graphs = backend.recordsGraphs(); }
  /// Graphs recorded so far, and replays (a recording runs as one).
  std::pair<size_t, int64_t> graphCounts() const {
    return {recorded.size(), replays};
  }
  /// Seconds and calls per instruction name, compute stream only: the
  /// device's time where the backend times the device (timesDevice).
  std::map<std::string, std::pair<double, int64_t>> profile() const {
    return kernelTime;
  }
  /// The last iteration's gemms and launches by name and shape, with their
  /// cost (KernelCost.h) and device time.
  struct ProfileEntry {
    InstructionCost cost;
    std::string library; // Backend::launchLibrary's, "" for the plan's own
    double seconds = 0;
    int64_t calls = 0;
  };
  std::map<std::string, ProfileEntry> profileDetail() const;
  /// Whether the times are the device's (else the host's clock).
  bool profilesDevice() const { return deviceTiming; }
  /// Seconds the compute stream spent in communication it could not hide:
  /// its own collectives and its waits for the communication stream.
  double exposedCommunicationSeconds() const;

private:
  int64_t poisonAt = -1;
  struct ProgramInfo {
    bool readsBatch = false, writesLoss = false;
    std::vector<std::string> where; // per instruction, for messages
    // The part of the body a graph holds, [graphBegin, graphEnd): empty
    // when the body holds anything but gemms and launches between its
    // leading waits and trailing records on the compute stream.
    size_t graphBegin = 0, graphEnd = 0;
    bool conditional = false; // some instruction runs on the last microbatch
  };

  void runBody(const Step &step);
  /// Runs instructions [begin, end) of the step's program.
  void runRange(const Step &step, size_t begin, size_t end);
  void runInstruction(const Program &program, size_t index, const Step &step,
                      const std::string &where);
  /// Posts the exchange group at schedule position `at`: the trailing
  /// sends of `pending` steps and the leading receives of the steps up to
  /// the next exchange point.
  void exchangeAt(size_t at, std::vector<size_t> &pending);
  Operand operand(uint32_t buffer, const StashSlots &slots) const;
  double now() const;

  const Plan &whole;
  const RankPlan &rank;
  Backend &backend;
  Collectives &collectives;
  std::vector<ProgramInfo> programs;
  std::vector<bool> exchangePoint; // per schedule position
  int tokens = -1, labels = -1, dropoutKeys = -1, loss = -1,
      gradNormBuffer = -1, hyper = -1;
  float hyperHost[kHyperSlots] = {};
  std::vector<float> lossHost; // one per step that writes the loss
  /// The schedule's steps, the optimizer's only if `optimizer`.
  void runSteps(int64_t iteration, const LoadBatch &loadBatch, bool optimizer);
  float lossSum() const;
  float gradNormHost = 0;
  std::vector<Operand> scratch; // a launch's operands
  bool fusedKernels = false;    // the backend's runsFusedKernels()
  // Graphs by (program, stash slots, last microbatch).
  bool graphs = false;
  std::map<std::tuple<uint32_t, StashSlots, bool>, uint32_t> recorded;
  int64_t replays = 0;
  // Measurement.
  bool tracing = false, profiling = false;
  std::chrono::steady_clock::time_point epoch;
  std::vector<TraceEvent> trace;
  std::map<std::string, std::pair<double, int64_t>> kernelTime;
  // The last iteration's seconds and calls by (program, instruction, the
  // launches it runs fused): profileDetail() names and costs them.
  std::map<std::tuple<uint32_t, size_t, size_t>, std::pair<double, int64_t>>
      lastIteration;
  // Device timing (Backend::timesDevice): each timed span is two marks on
  // the compute stream, resolved once the iteration has synchronized.
  bool deviceTiming = false;
  struct TimedSpan {
    uint32_t begin = 0, end = 0;
    int64_t traceEvent = -1; // its event in `trace`, if tracing
    bool profiled = false;   // an instruction to add to the profile:
    uint32_t program = 0;
    size_t index = 0, width = 1;
  };
  std::vector<TimedSpan> spans;
  double firstMarkHostUs = 0; // the host's time when mark 0 went
  /// A mark on the compute stream (mark 0 also notes the host's time).
  uint32_t mark();
  /// The library that runs a launch in place of its kernel
  /// (Backend::launchLibrary), "" for the plan's own and for the rest.
  std::string libraryOf(const Instruction &instruction) const;
  /// An instruction's name in the profile and the trace: a launch that a
  /// library runs says which ("attention_fwd (cudnn)").
  std::string timedName(const Instruction &instruction) const;
  /// Adds an instruction's time to kernelTime and lastIteration.
  void addProfile(uint32_t program, size_t index, size_t width, double seconds);
  /// After the iteration synchronized: the device's times into the trace
  /// and the profile.
  void resolveDeviceTimes();
  double computeCollectiveSeconds = 0;
  double stepWaitSeconds = 0; // compute-stream waits, in the current step
};

} // namespace strata::runtime

#endif
