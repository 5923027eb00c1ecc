//===- NcclCollectives.cpp - collectives of processes with a GPU each -----===//
#include "runtime/cuda/NcclCollectives.h"

#include <algorithm>

namespace strata::runtime::cuda {

namespace {

ncclDataType_t ncclType(DType dtype) {
  if (dtype == DType::I32)
    throw std::logic_error("a collective over integers");
  return dtype == DType::BF16 ? ncclBfloat16 : ncclFloat32;
}

} // namespace

NcclCollectives::NcclCollectives(Transport &transport, CudaBackend &device,
                                 std::chrono::milliseconds timeout)
    : RingCollectives(transport, runNow, timeout), device(device) {}

NcclCollectives::~NcclCollectives() {
  // Nothing here may throw: results are ignored on the way out.
  for (auto &[set, comm] : comms)
    if (comm)
      api->ncclCommDestroy(comm);
  for (void *bytes : scratch)
    if (bytes)
      driver().cuMemFree(devicePointer(bytes));
}

std::string NcclCollectives::createGroups(const Plan &plan, uint32_t rank) {
  std::string error;
  api = loadNccl(error);
  if (!api)
    return error;
  if (std::string error = RingCollectives::createGroups(plan, rank);
      !error.empty())
    return error;
  device.bind();
  if (std::string error = createCommunicators(*api, plan, rank, transport,
                                              Clock::now() + timeout, comms);
      !error.empty())
    return error;
  // Each plan group's communicator per stream (none for one rank), and the
  // line's per transfer stream.
  auto find = [&](const std::vector<int> &ranks, Stream stream) {
    auto it = comms.find({ranks, stream});
    return it == comms.end() ? nullptr : it->second;
  };
  groupComms.assign(plan.groups.size(), {});
  for (uint32_t g = 0; g < plan.groups.size(); ++g)
    for (int s = 0; s < kStreams; ++s)
      groupComms[g][size_t(s)] = find(group(g), Stream(s));
  line = pipelineLine(plan, rank);
  for (int s = 0; s < kTransferStreamCount; ++s)
    lineComms[size_t(s)] = find(line, kTransferStreams[s]);
  // Each stream's scratch: what its largest gather or scatter along a
  // later dim needs.
  uint64_t scratchBytes[kStreams] = {};
  const RankPlan &mine = plan.ranks.at(rank);
  for (const Program &program : mine.programs)
    for (const Instruction &instruction : program.instructions)
      if (const CollectiveOp *op = instruction.collective()) {
        bool gather = op->kind == CollectiveKind::AllGather;
        if (!gather && op->kind != CollectiveKind::ReduceScatter)
          continue;
        const Buffer &whole = mine.buffers[gather ? op->output : op->input];
        const Buffer &part = mine.buffers[gather ? op->input : op->output];
        uint64_t &needed = scratchBytes[int(instruction.stream)];
        if (outerBlocks(part, op->dim) > 1)
          needed = std::max(needed, whole.bytes);
      }
  for (int s = 0; s < kStreams; ++s) {
    if (!scratchBytes[s])
      continue;
    CUdeviceptr bytes = 0;
    if (CUresult r = driver().cuMemAlloc(&bytes, scratchBytes[s]);
        r != CUDA_SUCCESS)
      return "NCCL's scratch: " + driver().error(r, "cuMemAlloc");
    scratch[s] = reinterpret_cast<void *>(uintptr_t(bytes));
  }
  return "";
}

void NcclCollectives::copyRows(CUstream stream, void *to, size_t toPitch,
                               const void *from, size_t fromPitch, size_t width,
                               size_t height) {
  CUDA_MEMCPY2D copy = {};
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = devicePointer(from);
  copy.srcPitch = fromPitch;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = devicePointer(to);
  copy.dstPitch = toPitch;
  copy.WidthInBytes = width;
  copy.Height = height;
  check(driver().cuMemcpy2DAsync(&copy, stream), "cuMemcpy2DAsync");
}

void NcclCollectives::collective(Stream stream, const CollectiveOp &op,
                                 Operand in, Operand out,
                                 const std::string &where) {
  device.bind();
  CUstream s = device.streamOf(stream);
  void *scratch = this->scratch[int(stream)];
  size_t n = group(op.group).size();
  if (n == 1) { // the ring's result for one rank: its input
    if (in.data != out.data)
      check(driver().cuMemcpyDtoDAsync(devicePointer(out.data),
                                       devicePointer(in.data),
                                       out.buffer->bytes, s),
            "cuMemcpyDtoDAsync");
    return;
  }
  ncclComm_t comm = groupComms.at(op.group)[size_t(stream)];
  if (!comm) // Group::streams is read from every template: a plan bug
    throw std::logic_error(
        "a collective over group " + std::to_string(op.group) + " on the " +
        streamName(stream) + " stream, which no template runs it on");
  ncclDataType_t type = ncclType(in.buffer->dtype);
  auto nccl = [&](ncclResult_t result, const char *call) {
    if (std::string error = api->error(result, call); !error.empty())
      throw std::runtime_error("rank " + std::to_string(transport.rank()) +
                               ": " + collectiveName(op.kind) + " (" + where +
                               "): " + error);
  };
  const std::string &kind = kindName(op);
  switch (op.kind) {
  case CollectiveKind::Shift: {
    // To the next rank, from the previous, as one group call.
    size_t i = rankIndex(group(op.group), int(transport.rank()));
    size_t bytes = in.buffer->bytes;
    nccl(api->ncclGroupStart(), "ncclGroupStart");
    ncclResult_t sent =
        api->ncclSend(in.data, bytes, ncclUint8, int((i + 1) % n), comm, s);
    ncclResult_t received = sent == ncclSuccess
                                ? api->ncclRecv(out.data, bytes, ncclUint8,
                                                int((i + n - 1) % n), comm, s)
                                : ncclSuccess;
    // The group is closed whatever failed in it.
    ncclResult_t ended = api->ncclGroupEnd();
    nccl(sent, "ncclSend");
    nccl(received, "ncclRecv");
    nccl(ended, "ncclGroupEnd");
    countBytes(kind, bytes);
    return;
  }
  case CollectiveKind::AllReduceSum:
  case CollectiveKind::AllReduceMax:
    nccl(api->ncclAllReduce(
             in.data, out.data, size_t(out.buffer->elements), type,
             op.kind == CollectiveKind::AllReduceMax ? ncclMax : ncclSum, comm,
             s),
         "ncclAllReduce");
    countBytes(kind, 2 * (n - 1) * out.buffer->bytes / n);
    return;
  case CollectiveKind::AllGather: {
    const Buffer &part = *in.buffer;
    int64_t outer = outerBlocks(part, op.dim);
    void *target = outer == 1 ? out.data : scratch;
    nccl(api->ncclAllGather(in.data, target, size_t(part.elements), type, comm,
                            s),
         "ncclAllGather");
    if (outer > 1) {
      // [n][outer][inner] to [outer][n][inner]: rank r's rows.
      size_t inner = part.bytes / size_t(outer);
      for (size_t r = 0; r < n; ++r)
        copyRows(s, static_cast<uint8_t *>(out.data) + r * inner, n * inner,
                 static_cast<uint8_t *>(scratch) + r * part.bytes, inner, inner,
                 size_t(outer));
    }
    countBytes(kind, (n - 1) * part.bytes);
    return;
  }
  case CollectiveKind::ReduceScatter: {
    const Buffer &part = *out.buffer;
    int64_t outer = outerBlocks(part, op.dim);
    const void *source = in.data;
    if (outer > 1) {
      // [outer][n][inner] to [n][outer][inner]: rank r's block together.
      size_t inner = part.bytes / size_t(outer);
      for (size_t r = 0; r < n; ++r)
        copyRows(s, static_cast<uint8_t *>(scratch) + r * part.bytes, inner,
                 static_cast<const uint8_t *>(in.data) + r * inner, n * inner,
                 inner, size_t(outer));
      source = scratch;
    }
    nccl(api->ncclReduceScatter(source, out.data, size_t(part.elements), type,
                                ncclSum, comm, s),
         "ncclReduceScatter");
    countBytes(kind, (n - 1) * part.bytes);
    return;
  }
  }
}

void NcclCollectives::exchange(Stream stream, std::vector<Transfer> sends,
                               std::vector<Transfer> receives) {
  if (sends.empty() && receives.empty())
    return;
  device.bind();
  const Driver &d = driver();
  CUstream s = device.streamOf(stream);
  // To itself (virtual stages on one stage): through a buffer the stream
  // allocates, in the order sent.
  for (const Transfer &t : sends)
    if (t.peer == transport.rank()) {
      CUdeviceptr copy = 0;
      size_t size = t.buffer.buffer->bytes;
      check(d.cuMemAllocAsync(&copy, size, s), "cuMemAllocAsync");
      check(d.cuMemcpyDtoDAsync(copy, devicePointer(t.buffer.data), size, s),
            "cuMemcpyDtoDAsync");
      toSelf[t.tag].push_back(copy);
    }
  for (const Transfer &t : receives)
    if (t.peer == transport.rank()) {
      std::deque<CUdeviceptr> &queue = toSelf[t.tag];
      if (queue.empty())
        throw std::runtime_error("rank " + std::to_string(transport.rank()) +
                                 ": " + t.where +
                                 ": a transfer to itself before it was sent");
      check(d.cuMemcpyDtoDAsync(devicePointer(t.buffer.data), queue.front(),
                                t.buffer.buffer->bytes, s),
            "cuMemcpyDtoDAsync");
      check(d.cuMemFreeAsync(queue.front(), s), "cuMemFreeAsync");
      queue.pop_front();
    }
  // The others: one NCCL group, so that sends and receives pair up.
  ncclComm_t comm = lineComms[size_t(transferStreamIndex(stream))];
  auto index = [&](int peer) { return int(rankIndex(line, peer)); };
  auto nccl = [&](ncclResult_t result, const char *call) {
    if (std::string error = api->error(result, call); !error.empty())
      throw std::runtime_error("rank " + std::to_string(transport.rank()) +
                               ": a pipeline exchange: " + error);
  };
  // NCCL pairs a pair of ranks' sends and receives in order, without
  // tags: both sides go by tag (a channel and microbatch the two share).
  auto byPeerAndTag = [](const Transfer &a, const Transfer &b) {
    return std::pair(a.peer, a.tag) < std::pair(b.peer, b.tag);
  };
  std::stable_sort(sends.begin(), sends.end(), byPeerAndTag);
  std::stable_sort(receives.begin(), receives.end(), byPeerAndTag);
  uint64_t sent = 0;
  nccl(api->ncclGroupStart(), "ncclGroupStart");
  ncclResult_t result = ncclSuccess;
  const char *call = "";
  for (const Transfer &t : sends)
    if (t.peer != transport.rank() && result == ncclSuccess) {
      result = api->ncclSend(t.buffer.data, t.buffer.buffer->bytes, ncclUint8,
                             index(t.peer), comm, s);
      call = "ncclSend";
      sent += t.buffer.buffer->bytes;
    }
  for (const Transfer &t : receives)
    if (t.peer != transport.rank() && result == ncclSuccess) {
      result = api->ncclRecv(t.buffer.data, t.buffer.buffer->bytes, ncclUint8,
                             index(t.peer), comm, s);
      call = "ncclRecv";
    }
  // The group is closed whatever failed in it.
  ncclResult_t ended = api->ncclGroupEnd();
  nccl(result, call);
  nccl(ended, "ncclGroupEnd");
  if (sent)
    countBytes("send over pp", sent);
}

} // namespace strata::runtime::cuda
