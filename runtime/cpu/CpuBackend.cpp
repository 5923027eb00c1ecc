//===- CpuBackend.cpp - a rank's device on the CPU ------------------------===//
#include "runtime/cpu/CpuBackend.h"
#include "runtime/base/BFloat16.h"
#include "runtime/cpu/Kernels.h"

#include <array>
#include <stdexcept>

#include <cblas.h>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <omp.h>

// Weak: a BLAS other than OpenBLAS (the GPU bundle's reference BLAS, which
// runs on one thread anyway) lacks it.
#pragma weak openblas_set_num_threads

namespace strata::runtime::cpu {

namespace {

void blasOnOneThread() {
  if (openblas_set_num_threads)
    openblas_set_num_threads(1);
}

} // namespace

KernelFn kernelFunction(KernelId id) {
  static const KernelFn table[] = {
#define KERNEL(Name, text) run##Name,
#include "runtime/plan/Kernels.def"
  };
  static_assert(sizeof(table) / sizeof(table[0]) == size_t(kKernelCount));
  return table[static_cast<size_t>(id)];
}

void setThreads(int threads) {
  // One pool: OpenMP splits the work, OpenBLAS runs inside it on one thread.
  blasOnOneThread();
  if (threads > 0)
    omp_set_num_threads(threads);
}

uint64_t availableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  uint64_t kib = 0;
  while (meminfo >> key >> kib) {
    if (key == "MemAvailable:")
      return kib * 1024;
    meminfo.ignore(256, '\n');
  }
  return 0;
}

// Kernels call OpenBLAS from inside OpenMP regions: it must not start
// threads of its own there.
CpuBackend::CpuBackend(bool asyncCompute, int threads)
    : asyncCompute(asyncCompute) {
  blasOnOneThread();
  for (int s = 0; s < kStreams; ++s)
    if (Stream stream = Stream(s); threaded(stream))
      queues[int(stream)].thread =
          std::thread([this, stream, threads] { worker(stream, threads); });
}

CpuBackend::~CpuBackend() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  // Work still queued is dropped: a run that ends normally synchronized
  // first, and one that ends in an error no longer needs it.
  for (Queue &queue : queues)
    if (queue.thread.joinable())
      queue.thread.join();
}

std::string CpuBackend::allocate(Arena which, uint64_t bytes) {
  // Arenas start filled with 0xFF, a byte no float or id the kernels write
  // ends in (it would be the top byte of a negative NaN, or a negative id),
  // so that the highest byte that differs is the measured high-water mark.
  uint64_t rounded = (bytes + 63) / 64 * 64 + 64;
  auto *memory = static_cast<uint8_t *>(std::aligned_alloc(64, rounded));
  if (!memory)
    return "cannot allocate the " + std::string(arenaName(which)) +
           " arena of " + humanBytes(bytes);
  std::memset(memory, 0xFF, rounded);
  arenas[int(which)].reset(memory);
  arenaBytes[int(which)] = bytes;
  return "";
}

int64_t CpuBackend::highWater(Arena which) const {
  const uint8_t *base = arenas[int(which)].get();
  uint64_t rounded = (arenaBytes[int(which)] + 63) / 64 * 64 + 64;
  while (rounded > 0 && base[rounded - 1] == 0xFF)
    --rounded;
  return int64_t(rounded);
}

void CpuBackend::createEvents(uint32_t count) {
  std::lock_guard<std::mutex> lock(mutex);
  issued.assign(count, 0);
  passed.assign(count, 0);
}

void CpuBackend::worker(Stream stream, int threads) {
  if (stream == Stream::Compute)
    setThreads(threads); // the kernels' OpenMP team is this thread's
  Queue &queue = queues[int(stream)];
  std::unique_lock<std::mutex> lock(mutex);
  while (true) {
    changed.wait(lock, [&] { return stopping || !queue.tasks.empty(); });
    if (stopping)
      return;
    Task task = std::move(queue.tasks.front());
    queue.tasks.pop_front();
    queue.busy = true;
    bool skip = failure != nullptr; // after a failure nothing more runs
    lock.unlock();
    auto start = std::chrono::steady_clock::now();
    std::exception_ptr error;
    if (!skip) {
      try {
        task.run();
      } catch (...) {
        error = std::current_exception();
      }
    }
    auto end = std::chrono::steady_clock::now();
    lock.lock();
    if (error && !failure)
      failure = error;
    if (stream != Stream::Compute) {
      // --report-comm's figure is the communication stream's alone (the
      // transfer stream's time is mostly waiting for a peer).
      if (stream == Stream::Comm)
        commSeconds += std::chrono::duration<double>(end - start).count();
      if (tracing) {
        TraceEvent event;
        event.name = task.name;
        event.track = int(stream); // the trace's tracks are the streams
        event.startUs =
            std::chrono::duration<double, std::micro>(start - epoch).count();
        event.durationUs =
            std::chrono::duration<double, std::micro>(end - start).count();
        commTrace.push_back(std::move(event));
      }
    }
    queue.busy = false;
    changed.notify_all();
  }
}

void CpuBackend::rethrow() {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mutex);
    error = failure;
  }
  if (error)
    std::rethrow_exception(error);
}

void CpuBackend::enqueue(Stream stream, Task task) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    queues[int(stream)].tasks.push_back(std::move(task));
  }
  changed.notify_all();
}

void CpuBackend::submit(Stream stream, const std::string &name,
                        std::function<void()> task) {
  if (!threaded(stream)) {
    rethrow();
    task();
    return;
  }
  enqueue(stream, {name, std::move(task)});
}

uint32_t CpuBackend::markTime(Stream stream) {
  auto *slot = &marks.emplace_back();
  submit(stream, "mark",
         [slot] { *slot = std::chrono::steady_clock::now(); });
  return uint32_t(marks.size() - 1);
}

std::vector<double> CpuBackend::markTimes() {
  std::vector<double> times;
  for (const auto &at : marks)
    times.push_back(
        std::chrono::duration<double, std::micro>(at - marks.front()).count());
  return times;
}

void CpuBackend::block(std::unique_lock<std::mutex> &lock, uint32_t event,
                       uint64_t target, bool compute) {
  auto start = std::chrono::steady_clock::now();
  changed.wait(lock,
               [&] { return passed[event] >= target || failure || stopping; });
  if (compute)
    exposed +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
            .count();
}

void CpuBackend::record(Stream stream, uint32_t event) {
  notRecording("a record");
  std::unique_lock<std::mutex> lock(mutex);
  uint64_t target = ++issued[event];
  if (!threaded(stream)) {
    // The compute stream has done everything issued before this.
    passed[event] = target;
    changed.notify_all();
    return;
  }
  lock.unlock();
  enqueue(stream, {"record", [this, event, target] {
                     std::lock_guard<std::mutex> inner(mutex);
                     passed[event] = std::max(passed[event], target);
                     changed.notify_all();
                   }});
}

void CpuBackend::wait(Stream stream, uint32_t event) {
  notRecording("a wait");
  std::unique_lock<std::mutex> lock(mutex);
  uint64_t target = issued[event];
  bool compute = stream == Stream::Compute;
  if (!threaded(stream)) {
    block(lock, event, target, compute);
    if (failure)
      std::rethrow_exception(failure);
    return;
  }
  lock.unlock();
  enqueue(stream, {compute ? "wait for communication" : "wait for compute",
                   [this, event, target, compute] {
                     std::unique_lock<std::mutex> inner(mutex);
                     block(inner, event, target, compute);
                   }});
}

void CpuBackend::drain(Stream stream) {
  std::unique_lock<std::mutex> lock(mutex);
  const Queue &queue = queues[int(stream)];
  changed.wait(lock,
               [&] { return (queue.tasks.empty() && !queue.busy) || failure; });
}

void CpuBackend::synchronize() {
  for (int s = 0; s < kStreams; ++s)
    drain(Stream(s));
  rethrow();
}

void CpuBackend::synchronizeStream(Stream stream) {
  drain(stream);
  rethrow();
}

void CpuBackend::copyIn(Stream stream, void *device, const void *host,
                        size_t bytes) {
  notRecording("a copy");
  if (!threaded(stream)) {
    rethrow();
    std::memcpy(device, host, bytes);
    return;
  }
  // The caller may reuse its bytes at once: they travel with the task.
  auto staged = std::make_shared<std::vector<uint8_t>>(
      static_cast<const uint8_t *>(host),
      static_cast<const uint8_t *>(host) + bytes);
  enqueue(stream, {"copy in", [device, staged] {
                     std::memcpy(device, staged->data(), staged->size());
                   }});
}

void CpuBackend::copyOut(Stream stream, void *host, const void *device,
                         size_t bytes) {
  notRecording("a copy");
  submit(stream, "copy out", [=] { std::memcpy(host, device, bytes); });
}

void CpuBackend::fillZero(Stream stream, void *device, size_t bytes) {
  notRecording("a fill");
  submit(stream, "fill", [=] { std::memset(device, 0, bytes); });
}

void CpuBackend::traceCommunication(std::chrono::steady_clock::time_point at) {
  std::lock_guard<std::mutex> lock(mutex);
  tracing = true;
  epoch = at;
}

std::vector<TraceEvent> CpuBackend::takeCommunicationTrace() {
  std::lock_guard<std::mutex> lock(mutex);
  return std::move(commTrace);
}

double CpuBackend::communicationSeconds() const {
  std::lock_guard<std::mutex> lock(mutex);
  return commSeconds;
}

double CpuBackend::exposedSeconds() const {
  std::lock_guard<std::mutex> lock(mutex);
  return exposed;
}

namespace {

/// Widens bf16 operands into f32 scratch for the kernels, and rounds the
/// outputs back.
class Widened {
public:
  Widened(std::vector<std::vector<float>> &scratch) : scratch(scratch) {}

  void *in(const Operand &operand) {
    if (!operand.buffer || operand.buffer->dtype != DType::BF16)
      return operand.data;
    if (scratch.size() <= used)
      scratch.emplace_back();
    std::vector<float> &wide = scratch[used++];
    int64_t n = operand.buffer->elements;
    wide.resize(n);
    widenBf16(static_cast<const uint16_t *>(operand.data), wide.data(), n);
    return wide.data();
  }
  /// An output: widened too (kernels may accumulate into it), and noted
  /// to be rounded back.
  void *out(const Operand &operand) {
    void *wide = in(operand);
    if (wide != operand.data)
      outputs.push_back({operand, static_cast<float *>(wide)});
    return wide;
  }
  void narrow() {
    for (auto &[operand, wide] : outputs)
      narrowToBf16(wide, static_cast<uint16_t *>(operand.data),
                   operand.buffer->elements);
  }

private:
  std::vector<std::vector<float>> &scratch;
  size_t used = 0;
  std::vector<std::pair<Operand, float *>> outputs;
};

} // namespace

void CpuBackend::gemm(Stream stream, const GemmOp &op,
                      const Operand operands[5]) {
  if (stream != Stream::Compute)
    throw std::logic_error("a gemm was issued on the communication stream");
  if (recording) {
    std::array<Operand, 5> copy = {operands[0], operands[1], operands[2],
                                   operands[3], operands[4]};
    keep("gemm", [this, &op, copy] { runGemm(op, copy.data()); });
    return;
  }
  if (!threaded(stream)) {
    rethrow();
    runGemm(op, operands);
    return;
  }
  std::array<Operand, 5> copy = {operands[0], operands[1], operands[2],
                                 operands[3], operands[4]};
  enqueue(stream, {"gemm", [this, &op, copy] { runGemm(op, copy.data()); }});
}

void CpuBackend::beginGraph() {
  notRecording("a graph");
  recording = true;
  graphs.emplace_back();
}

uint32_t CpuBackend::endGraph() {
  recording = false;
  return uint32_t(graphs.size() - 1);
}

void CpuBackend::keep(const std::string &name, std::function<void()> task) {
  graphs.back().push_back({name, std::move(task)});
}

void CpuBackend::notRecording(const char *what) const {
  if (recording)
    throw std::logic_error(std::string(what) +
                           " was issued while a graph was being recorded");
}

void CpuBackend::replayGraph(uint32_t graph) {
  notRecording("a graph's replay");
  for (const Task &task : graphs.at(graph))
    submit(Stream::Compute, task.name, task.run);
}

void CpuBackend::runGemm(const GemmOp &op, const Operand operands[5]) {
  Widened widened(scratch);
  auto *a = static_cast<const float *>(widened.in(operands[0]));
  auto *b = static_cast<const float *>(widened.in(operands[1]));
  auto *d = static_cast<float *>(widened.out(operands[2]));
  auto *bias = static_cast<float *>(op.epilogue == Epilogue::BiasGrad
                                        ? widened.out(operands[3])
                                        : widened.in(operands[3]));
  auto *aux = static_cast<float *>(widened.out(operands[4]));
  cpu::gemm(op, a, b, d, bias, aux);
  widened.narrow();
}

void CpuBackend::launch(Stream stream, const LaunchOp &op,
                        const std::vector<Operand> &operands) {
  if (stream != Stream::Compute)
    throw std::logic_error("a kernel was issued on the communication stream");
  if (recording) {
    keep(kernelName(op.kernel),
         [this, &op, operands] { runLaunch(op, operands); });
    return;
  }
  if (!threaded(stream)) {
    rethrow();
    runLaunch(op, operands);
    return;
  }
  // The plan owns `op`; the operands travel with the task.
  enqueue(stream, {kernelName(op.kernel),
                   [this, &op, operands] { runLaunch(op, operands); }});
}

void CpuBackend::runLaunch(const LaunchOp &op,
                           const std::vector<Operand> &operands) {
  const KernelSpec &spec = kernelSpec(op.kernel);
  Widened widened(scratch);
  launchData.clear();
  launchBuffers.clear();
  for (size_t o = 0; o < operands.size(); ++o) {
    launchData.push_back(spec.operands[o].output ? widened.out(operands[o])
                                                 : widened.in(operands[o]));
    launchBuffers.push_back(operands[o].buffer);
  }
  kernelFunction(op.kernel)(KernelArgs{op, launchData, launchBuffers});
  widened.narrow();
}

} // namespace strata::runtime::cpu
