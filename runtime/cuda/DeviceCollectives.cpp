//===- DeviceCollectives.cpp - collectives of ranks sharing one GPU -------===//
#include "runtime/cuda/DeviceCollectives.h"
#include "runtime/cuda/CollectiveLaunch.h"

#include <algorithm>
#include <iterator>
#include <mutex>
#include <string>

namespace strata::runtime::cuda {

extern const char kCollectiveKernelsPtx[]; // strata-embed-kernels' output

namespace {

/// The kernels, loaded into the primary context once per process.
struct Kernels {
  CUfunction functions[std::size(kCollectiveKernelNames)] = {};
  std::string error;
};

const Kernels &kernels() {
  static Kernels loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    const Driver &d = driver();
    CUmodule module = nullptr;
    if (CUresult r = d.cuModuleLoadData(&module, kCollectiveKernelsPtx);
        r != CUDA_SUCCESS) {
      loaded.error = "the device-side communicator's kernels do not load: " +
                     d.error(r, "cuModuleLoadData");
      return;
    }
    for (size_t k = 0; k < std::size(kCollectiveKernelNames); ++k)
      if (CUresult r = d.cuModuleGetFunction(&loaded.functions[k], module,
                                             kCollectiveKernelNames[k]);
          r != CUDA_SUCCESS) {
        loaded.error = std::string("the communicator's kernel ") +
                       kCollectiveKernelNames[k] + ": " +
                       d.error(r, "cuModuleGetFunction");
        return;
      }
  });
  return loaded;
}

/// The events that mark where a collective's kernel ends, kept for the
/// next collective once every rank's stream waits on one (any rank may be
/// the last to leave a meeting).
struct DoneEvents {
  std::mutex mutex;
  std::vector<CUevent> free;

  CUevent take() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      if (!free.empty()) {
        CUevent event = free.back();
        free.pop_back();
        return event;
      }
    }
    CUevent event = nullptr;
    check(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
          "cuEventCreate");
    return event;
  }
  void give(CUevent event) {
    std::lock_guard<std::mutex> lock(mutex);
    free.push_back(event);
  }
};
DoneEvents doneEvents;

} // namespace

DeviceCollectives::DeviceCollectives(std::shared_ptr<CollectiveHub> hub,
                                     Transport &transport, CudaBackend &device,
                                     std::chrono::milliseconds timeout)
    : StagedCollectives(transport, device, timeout), hub(std::move(hub)),
      device(device) {}

DeviceCollectives::~DeviceCollectives() {
  // The backend may be gone: the event goes with the context it is in,
  // and nothing here may throw (the result is ignored).
  if (ready)
    driver().cuEventDestroy(ready);
}

std::string DeviceCollectives::createGroups(const Plan &plan, uint32_t rank) {
  if (std::string error = StagedCollectives::createGroups(plan, rank);
      !error.empty())
    return error;
  seats.assign(plan, *this, transport.rank());
  for (uint32_t g = 0; g < plan.groups.size(); ++g)
    if (size_t size = group(g).size(); size > kMaxDeviceGroup)
      return "a communication group of " + std::to_string(size) +
             " ranks on one GPU: the device-side communicator holds " +
             std::to_string(kMaxDeviceGroup) + " (use --staged-collectives)";
  device.bind();
  if (const std::string &error = kernels().error; !error.empty())
    return error;
  if (CUresult r = driver().cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING);
      r != CUDA_SUCCESS)
    return driver().error(r, "cuEventCreate");
  return "";
}

CollectiveLaunch
collectiveLaunch(const CollectiveOp &op,
                 const std::vector<CollectiveOperands> &ranks) {
  CollectiveLaunch launch;
  for (size_t r = 0; r < ranks.size(); ++r) {
    launch.pointers.in[r] = ranks[r].in.data;
    launch.pointers.out[r] = ranks[r].out.data;
  }
  launch.ranks = int32_t(ranks.size());
  const Buffer &in = *ranks[0].in.buffer, &out = *ranks[0].out.buffer;
  bool bf16 = in.dtype == DType::BF16;
  const Buffer &part = partOf(op, ranks[0].in, ranks[0].out);
  int64_t outer = outerBlocks(part, op.dim), items = 0;
  switch (op.kind) {
  case CollectiveKind::AllReduceSum:
  case CollectiveKind::AllReduceMax:
    launch.kernel =
        bf16 ? CollectiveKernel::AllReduceBf16 : CollectiveKernel::AllReduceF32;
    launch.a = out.elements;
    launch.max = op.kind == CollectiveKind::AllReduceMax ? 1 : 0;
    items = out.elements;
    break;
  case CollectiveKind::ReduceScatter:
    launch.kernel = bf16 ? CollectiveKernel::ReduceScatterBf16
                         : CollectiveKernel::ReduceScatterF32;
    launch.a = outer;
    launch.b = part.elements / outer;
    items = part.elements * launch.ranks;
    break;
  case CollectiveKind::AllGather:
    launch.kernel = CollectiveKernel::AllGather;
    launch.a = outer;
    launch.b = int64_t(part.bytes) / outer;
    items = int64_t(part.bytes) * launch.ranks * launch.ranks;
    break;
  case CollectiveKind::Shift: // device copies (DeviceCollectives::launch)
    throw std::logic_error("a shift has no collective kernel");
  }
  launch.blocks = uint32_t(std::clamp<int64_t>((items + 255) / 256, 1, 65535));
  return launch;
}

bool safeCollectiveAliasing(const CollectiveOp &op,
                            const CollectiveOperands &rank, size_t index) {
  auto begin = [](Operand o) { return static_cast<const uint8_t *>(o.data); };
  const uint8_t *in = begin(rank.in), *out = begin(rank.out);
  uint64_t inBytes = rank.in.buffer->bytes, outBytes = rank.out.buffer->bytes;
  if (in + inBytes <= out || out + outBytes <= in)
    return true;
  if (op.kind == CollectiveKind::Shift) // its input goes to another rank
    return false;
  if (in == out)
    return true;
  if (outerBlocks(partOf(op, rank.in, rank.out), op.dim) != 1)
    return false;
  if (op.kind == CollectiveKind::ReduceScatter)
    return out == in + index * outBytes;
  if (op.kind == CollectiveKind::AllGather)
    return in == out + index * inBytes;
  return false;
}

void DeviceCollectives::launch(CUstream stream, const CollectiveOp &op,
                               const std::vector<CollectiveOperands> &ranks) {
  for (size_t r = 0; r < ranks.size(); ++r)
    if (!safeCollectiveAliasing(op, ranks[r], r))
      throw std::runtime_error(
          "the device-side communicator cannot run a collective whose "
          "output partly overlaps its input (use --staged-collectives)");
  if (op.kind == CollectiveKind::Shift) {
    // Rank i's output is rank i - 1's input: device copies on this stream.
    size_t n = ranks.size();
    for (size_t i = 0; i < n; ++i)
      check(driver().cuMemcpyDtoDAsync(
                devicePointer(ranks[i].out.data),
                devicePointer(ranks[(i + n - 1) % n].in.data),
                ranks[i].out.buffer->bytes, stream),
            "cuMemcpyDtoDAsync (a shift)");
    return;
  }
  CollectiveLaunch launch = collectiveLaunch(op, ranks);
  std::array<void *, 4> args = launch.args();
  check(driver().cuLaunchKernel(kernels().functions[int(launch.kernel)],
                                launch.blocks, 1, 1, 256, 1, 1, 0, stream,
                                args.data(), nullptr),
        "cuLaunchKernel (a collective)");
}

void DeviceCollectives::collective(Stream stream, const CollectiveOp &op,
                                   Operand in, Operand out,
                                   const std::string &where) {
  device.bind();
  const Driver &d = driver();
  CUstream mine = device.streamOf(stream);
  if (group(op.group).size() == 1) { // its result: its input
    if (in.data != out.data)
      launch(mine, op, {{in, out, nullptr}});
    return;
  }
  Seat seat = seats.next(op.group, stream);
  check(d.cuEventRecord(ready, mine), "cuEventRecord");
  hub->meet(
      seat, {in, out, ready},
      [&](const std::vector<CollectiveOperands> &ranks) -> void * {
        // On the last rank to arrive (this thread, its context bound
        // above): its stream waits for every rank's, runs the kernel, and
        // marks where every stream may go on.
        for (const CollectiveOperands &rank : ranks)
          check(d.cuStreamWaitEvent(mine, CUevent(rank.ready), 0),
                "cuStreamWaitEvent");
        launch(mine, op, ranks);
        CUevent done = doneEvents.take();
        check(d.cuEventRecord(done, mine), "cuEventRecord");
        return done;
      },
      [&](void *done) {
        check(d.cuStreamWaitEvent(mine, CUevent(done), 0), "cuStreamWaitEvent");
      },
      // Every stream waits on it already: it may be recorded again.
      [](void *done) { doneEvents.give(CUevent(done)); }, timeout,
      collectiveName(op.kind), where);
}

} // namespace strata::runtime::cuda
