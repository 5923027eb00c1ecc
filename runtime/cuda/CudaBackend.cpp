//===- CudaBackend.cpp - a rank's device on an NVIDIA GPU -----------------===//
#include "runtime/cuda/CudaBackend.h"
#include "runtime/base/Text.h"
#include "runtime/comm/Transport.h"

#include <stdexcept>
#include <tuple>

namespace strata::runtime::cuda {

namespace {

/// The JIT's log, its lines joined by "; ": an error is one line.
std::string oneLine(const char *log) {
  std::string out;
  for (const char *c = log; *c; ++c) {
    if (*c != '\n')
      out += *c;
    else if (c[1] && c[1] != '\n')
      out += "; ";
  }
  return out;
}

} // namespace

std::string openDevice(int ordinal, CUcontext &context, DeviceInfo &info) {
  const Driver &d = driver();
  CUdevice device = 0;
  if (CUresult r = d.cuDeviceGet(&device, ordinal); r != CUDA_SUCCESS)
    return "GPU " + std::to_string(ordinal) + ": " + d.error(r, "cuDeviceGet");
  char name[256] = {};
  if (d.cuDeviceGetName(name, sizeof name - 1, device) != CUDA_SUCCESS)
    std::snprintf(name, sizeof name, "GPU %d", ordinal);
  info.name = name;
  int shared = 0;
  if (CUresult r = d.cuDeviceGetAttribute(
          &info.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
      r != CUDA_SUCCESS)
    return info.name + ": " + d.error(r, "cuDeviceGetAttribute");
  d.cuDeviceGetAttribute(&info.minor,
                         CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
  d.cuDeviceGetAttribute(
      &shared, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device);
  info.sharedPerBlockOptIn = uint64_t(shared);
  d.cuDeviceGetAttribute(&info.multiprocessors,
                         CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
  if (CUresult r = d.cuDevicePrimaryCtxRetain(&context, device);
      r != CUDA_SUCCESS)
    return info.name + ": " + d.error(r, "cuDevicePrimaryCtxRetain");
  if (CUresult r = d.cuCtxSetCurrent(context); r != CUDA_SUCCESS)
    return info.name + ": " + d.error(r, "cuCtxSetCurrent");
  size_t free = 0, total = 0;
  if (CUresult r = d.cuMemGetInfo(&free, &total); r != CUDA_SUCCESS)
    return info.name + ": " + d.error(r, "cuMemGetInfo");
  info.freeBytes = free;
  info.totalBytes = total;
  return "";
}

std::string openGpu(const Plan &plan, Gpu &gpu) {
  if (std::string error = checkCudaPlan(plan); !error.empty())
    return error;
  // The driver is loaded only here: a CPU run never touches it.
  DriverInfo driver;
  if (std::string error = probeDriver(driver); !error.empty())
    return error;
  int ordinal =
      launcherWorldSize() > 0 ? launcherLocalRank() % driver.devices : 0;
  if (std::string error = openDevice(ordinal, gpu.context, gpu.info);
      !error.empty())
    return error;
  gpu.devices = driver.devices;
  if (std::string error = checkArchitecture(plan.cudaArch, gpu.info);
      !error.empty())
    return error;
  for (const auto &[index, rank] : plan.ranks)
    if (std::string error = checkSharedMemory(plan, rank, gpu.info);
        !error.empty())
      return error;
  return "";
}

CudaBackend::CudaBackend(CUcontext context, AttentionBackend attention)
    : context(context), attention(attention) {}

void CudaBackend::bind() const {
  // Each rank's thread, and the thread that loads the plan, call in.
  thread_local CUcontext current = nullptr;
  if (current != context) {
    check(driver().cuCtxSetCurrent(context), "cuCtxSetCurrent");
    current = context;
  }
}

std::string CudaBackend::create() {
  const Driver &d = driver();
  bind();
  for (CUstream &stream : streams)
    if (CUresult r = d.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING);
        r != CUDA_SUCCESS)
      return d.error(r, "cuStreamCreate");
  if (std::string error = loadCublasLt(); !error.empty())
    return error;
  if (std::string error = gemms.create(); !error.empty())
    return error;
  if (std::string error = attention.create(); !error.empty())
    return error;
  for (void *&workspace : workspaces) {
    CUdeviceptr bytes = 0;
    if (CUresult r = d.cuMemAlloc(&bytes, GemmRunner::kWorkspaceBytes);
        r != CUDA_SUCCESS)
      return "cuBLASLt's workspace: " + d.error(r, "cuMemAlloc");
    workspace = reinterpret_cast<void *>(uintptr_t(bytes));
  }
  return "";
}

CudaBackend::~CudaBackend() {
  // Nothing here may throw: errors are ignored on the way out.
  const Driver &d = driver();
  if (d.cuCtxSetCurrent(context) != CUDA_SUCCESS)
    return;
  for (CUstream stream : streams)
    if (stream)
      d.cuStreamSynchronize(stream);
  attention.release(); // cuDNN's handle and plans while the streams are
  for (CUgraphExec executable : executables)
    d.cuGraphExecDestroy(executable);
  for (CUgraph graph : graphs)
    d.cuGraphDestroy(graph);
  for (CUevent event : events)
    d.cuEventDestroy(event);
  for (CUevent event : marks)
    d.cuEventDestroy(event);
  for (CUmodule module : modules)
    d.cuModuleUnload(module);
  for (void *pointer : workspaces)
    if (pointer)
      d.cuMemFree(devicePointer(pointer));
  for (void *pointer : {attentionRowSum, attentionWorkspace})
    if (pointer)
      d.cuMemFree(devicePointer(pointer));
  for (uint8_t *pointer : arenas)
    if (pointer)
      d.cuMemFree(devicePointer(pointer));
  for (CUstream stream : streams)
    if (stream)
      d.cuStreamDestroy(stream);
}

std::string CudaBackend::allocate(Arena which, uint64_t bytes) {
  if (bytes == 0)
    return "";
  bind();
  const Driver &d = driver();
  CUdeviceptr pointer = 0;
  if (CUresult r = d.cuMemAlloc(&pointer, bytes); r != CUDA_SUCCESS)
    return std::string("the ") + arenaName(which) + " arena (" +
           humanBytes(bytes) + "): " + d.error(r, "cuMemAlloc");
  arenas[int(which)] = reinterpret_cast<uint8_t *>(uintptr_t(pointer));
  return "";
}

void CudaBackend::createEvents(uint32_t count) {
  bind();
  events.resize(count, nullptr);
  for (CUevent &event : events)
    check(driver().cuEventCreate(&event, CU_EVENT_DISABLE_TIMING),
          "cuEventCreate");
}

std::string CudaBackend::prepare(const Plan &plan, const RankPlan &rank) {
  bind();
  const Driver &d = driver();
  // Each rank its own modules, of the code its launches run: a kernel's
  // module-scope scratch is the rank's alone.
  functions.assign(plan.code.size(), nullptr);
  auto load = [&](int32_t index) -> std::string {
    const CodeObject &code = plan.code[index];
    char log[4096] = {};
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                              CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {log, reinterpret_cast<void *>(uintptr_t(sizeof log))};
    CUmodule module = nullptr;
    if (CUresult r =
            d.cuModuleLoadDataEx(&module, code.ptx.c_str(), 2, options, values);
        r != CUDA_SUCCESS)
      return "the plan's PTX for kernel " + code.name +
             " does not load: " + d.error(r, "cuModuleLoadDataEx") +
             (log[0] ? ": " + oneLine(log) : std::string());
    modules.push_back(module);
    if (CUresult r =
            d.cuModuleGetFunction(&functions[index], module, code.name.c_str());
        r != CUDA_SUCCESS)
      return "the plan's PTX for kernel " + code.name + " has no kernel " +
             code.name + ": " + d.error(r, "cuModuleGetFunction");
    return "";
  };
  // cuDNN's attention: the largest plan's workspace and the backwards'
  // scratch, each one allocation the rank's launches share.
  uint64_t workspaceBytes = 0, rowSumBytes = 0;
  for (const Program &program : rank.programs)
    for (const Instruction &instruction : program.instructions) {
      if (const GemmOp *gemm = instruction.gemm()) {
        if (std::string error = gemms.prepare(*gemm, rank.buffers);
            !error.empty())
          return error;
      }
      const LaunchOp *launch = instruction.launch();
      if (launch)
        if (std::string error = attention.prepare(*launch, rank.buffers,
                                                  workspaceBytes, rowSumBytes);
            !error.empty())
          return error;
      if (!launch || launch->code < 0) // a fused group's member has none
        continue;
      if (!functions[launch->code])
        if (std::string error = load(launch->code); !error.empty())
          return error;
      // Dynamic shared memory past 48 KiB must be allowed per function.
      if (launch->sharedBytes > 48 * 1024)
        if (CUresult r = d.cuFuncSetAttribute(
                functions[launch->code],
                CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                int(launch->sharedBytes));
            r != CUDA_SUCCESS)
          return "kernel " + plan.code[launch->code].name + ": " +
                 d.error(r, "cuFuncSetAttribute");
    }
  for (auto [pointer, held, bytes, what] :
       {std::tuple{&attentionRowSum, &attentionRowSumBytes, rowSumBytes,
                   "scratch"},
        std::tuple{&attentionWorkspace, &attentionWorkspaceBytes,
                   workspaceBytes, "workspace"}}) {
    if (bytes == 0 || *pointer)
      continue;
    CUdeviceptr allocated = 0;
    if (CUresult r = d.cuMemAlloc(&allocated, bytes); r != CUDA_SUCCESS)
      return std::string("cuDNN attention's ") + what + " (" +
             std::to_string(bytes) + " bytes): " + d.error(r, "cuMemAlloc");
    *pointer = reinterpret_cast<void *>(uintptr_t(allocated));
    *held = bytes;
  }
  return "";
}

std::string CudaBackend::memoryBeyondArenas() const {
  std::string text = "cuBLASLt's workspaces " + humanBytes(kExtraBytes);
  if (attentionWorkspaceBytes + attentionRowSumBytes > 0)
    text += ", cuDNN attention's workspace " +
            humanBytes(attentionWorkspaceBytes) + " and scratch " +
            humanBytes(attentionRowSumBytes);
  return text;
}

void CudaBackend::gemm(Stream stream, const GemmOp &op,
                       const Operand operands[5]) {
  if (int(stream) >= kGemmStreams)
    throw std::logic_error("a gemm was issued on the transfer stream");
  bind();
  gemms.run(op, streamOf(stream), operands[0].data, operands[1].data,
            operands[2].data, operands[3].data, workspaces[int(stream)]);
}

void CudaBackend::launch(Stream stream, const LaunchOp &op,
                         const std::vector<Operand> &operands) {
  bind();
  if (attention.runs(op)) {
    // One workspace and scratch: attention runs on the compute stream.
    if (stream != Stream::Compute)
      throw std::logic_error("an attention launch off the compute stream");
    if (std::string error = attention.run(op, streamOf(stream), operands,
                                          attentionWorkspace, attentionRowSum);
        !error.empty())
      throw std::runtime_error(error);
    return;
  }
  args.build(op, operands);
  check(driver().cuLaunchKernel(functions[op.code], op.grid[0], op.grid[1],
                                op.grid[2], op.block[0], op.block[1],
                                op.block[2], op.sharedBytes, streamOf(stream),
                                args.params(), nullptr),
        "cuLaunchKernel");
}

void CudaBackend::beginGraph() {
  bind();
  check(driver().cuStreamBeginCapture(streamOf(Stream::Compute),
                                      CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
        "cuStreamBeginCapture");
}

uint32_t CudaBackend::endGraph() {
  bind();
  const Driver &d = driver();
  CUgraph graph = nullptr;
  check(d.cuStreamEndCapture(streamOf(Stream::Compute), &graph),
        "cuStreamEndCapture");
  graphs.push_back(graph);
  CUgraphExec executable = nullptr;
  check(d.cuGraphInstantiate(&executable, graph, 0), "cuGraphInstantiate");
  executables.push_back(executable);
  return uint32_t(executables.size() - 1);
}

void CudaBackend::replayGraph(uint32_t graph) {
  bind();
  check(
      driver().cuGraphLaunch(executables.at(graph), streamOf(Stream::Compute)),
      "cuGraphLaunch");
}

void CudaBackend::record(Stream stream, uint32_t event) {
  bind();
  check(driver().cuEventRecord(events[event], streamOf(stream)),
        "cuEventRecord");
}

uint32_t CudaBackend::markTime(Stream stream) {
  bind();
  if (marksUsed == marks.size()) {
    CUevent event = nullptr;
    check(driver().cuEventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate");
    marks.push_back(event);
  }
  check(driver().cuEventRecord(marks[marksUsed], streamOf(stream)),
        "cuEventRecord");
  return uint32_t(marksUsed++);
}

std::vector<double> CudaBackend::markTimes() {
  bind();
  std::vector<double> times(marksUsed, 0.0);
  for (size_t i = 1; i < marksUsed; ++i) {
    float ms = 0;
    check(driver().cuEventElapsedTime(&ms, marks[0], marks[i]),
          "cuEventElapsedTime");
    times[i] = double(ms) * 1e3;
  }
  return times;
}

void CudaBackend::wait(Stream stream, uint32_t event) {
  bind();
  check(driver().cuStreamWaitEvent(streamOf(stream), events[event], 0),
        "cuStreamWaitEvent");
}

void CudaBackend::copyIn(Stream stream, void *device, const void *host,
                         size_t bytes) {
  bind();
  // From pageable memory the driver stages the bytes before it returns,
  // so the host bytes may be reused at once, as the interface promises.
  check(driver().cuMemcpyHtoDAsync(devicePointer(device), host, bytes,
                                   streamOf(stream)),
        "cuMemcpyHtoDAsync");
}

void CudaBackend::copyOut(Stream stream, void *host, const void *device,
                          size_t bytes) {
  bind();
  check(driver().cuMemcpyDtoHAsync(host, devicePointer(device), bytes,
                                   streamOf(stream)),
        "cuMemcpyDtoHAsync");
}

void CudaBackend::fillZero(Stream stream, void *device, size_t bytes) {
  bind();
  check(driver().cuMemsetD8Async(devicePointer(device), 0, bytes,
                                 streamOf(stream)),
        "cuMemsetD8Async");
}

void CudaBackend::synchronizeStream(Stream stream) {
  bind();
  check(driver().cuStreamSynchronize(streamOf(stream)), "cuStreamSynchronize");
}

void CudaBackend::synchronize() {
  for (int s = 0; s < kStreams; ++s)
    synchronizeStream(Stream(s));
}

} // namespace strata::runtime::cuda
