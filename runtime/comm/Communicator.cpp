//===- Communicator.cpp - collectives over a rank's mesh groups -----------===//
#include "runtime/comm/Communicator.h"
#include "runtime/exec/BFloat16.h"

#include <algorithm>
#include <cstring>

namespace strata::runtime {
namespace {

constexpr int kTagReduce = 1, kTagGather = 2;
// Pipeline transfers: a tag per channel and microbatch (mod 64), so that a
// receive can only match the transfer it waits for.
constexpr int kTagTransfer = 16;
int transferTag(int64_t channel, int64_t microbatch) {
  return kTagTransfer + int(channel * 64 + (microbatch & 63));
}

const char *axisName(int64_t axis) {
  return axis == 0 ? "tp" : axis == 1 ? "dp" : "pp";
}

std::string axesName(const std::vector<int64_t> &axes) {
  std::string name;
  for (int64_t axis : axes)
    name += (name.empty() ? "" : "+") + std::string(axisName(axis));
  return name;
}

/// Chunk c of n over count elements: [begin[c], begin[c + 1]).
std::vector<size_t> chunks(size_t count, size_t n) {
  std::vector<size_t> begin(n + 1);
  for (size_t c = 0; c <= n; ++c)
    begin[c] = count * c / n;
  return begin;
}

int indexIn(const std::vector<int> &group, int rank) {
  return int(std::find(group.begin(), group.end(), rank) - group.begin());
}

} // namespace

std::vector<int> Communicator::group(const std::vector<int64_t> &axes) const {
  // Coordinates of this rank (tp fastest), then vary the named axes.
  int64_t coords[3], rest = rank();
  for (int a = 0; a < 3; ++a) {
    coords[a] = rest % mesh.sizes[a];
    rest /= mesh.sizes[a];
  }
  std::vector<int> members;
  int64_t count = mesh.groupSize(axes);
  for (int64_t k = 0; k < count; ++k) {
    int64_t c[3] = {coords[0], coords[1], coords[2]}, digit = k;
    for (int64_t axis : axes) {
      c[axis] = digit % mesh.sizes[axis];
      digit /= mesh.sizes[axis];
    }
    members.push_back(
        int(c[0] + mesh.sizes[0] * (c[1] + mesh.sizes[1] * c[2])));
  }
  return members;
}

void Communicator::ringReduceScatter(const std::vector<int> &group,
                                     float *data,
                                     const std::vector<size_t> &begin,
                                     bool max, const std::string &what) {
  int n = int(group.size()), i = indexIn(group, rank());
  int right = group[(i + 1) % n], left = group[(i + n - 1) % n];
  size_t largest = 0;
  for (int c = 0; c < n; ++c)
    largest = std::max(largest, begin[c + 1] - begin[c]);
  std::vector<float> incoming(largest);
  for (int s = 0; s < n - 1; ++s) {
    int send = ((i - s - 1) % n + n) % n, recv = ((i - s - 2) % n + n) % n;
    size_t sendCount = begin[send + 1] - begin[send];
    size_t recvCount = begin[recv + 1] - begin[recv];
    transport.exchange(right, data + begin[send], sendCount * 4, left,
                       incoming.data(), recvCount * 4, kTagReduce, deadline(),
                       what);
    float *mine = data + begin[recv];
    if (max)
      for (size_t e = 0; e < recvCount; ++e)
        mine[e] = std::max(mine[e], incoming[e]);
    else
      for (size_t e = 0; e < recvCount; ++e)
        mine[e] += incoming[e];
  }
}

void Communicator::ringAllGather(const std::vector<int> &group, uint8_t *data,
                                 const std::vector<size_t> &begin,
                                 const std::string &what) {
  int n = int(group.size()), i = indexIn(group, rank());
  int right = group[(i + 1) % n], left = group[(i + n - 1) % n];
  for (int s = 0; s < n - 1; ++s) {
    int send = ((i - s) % n + n) % n, recv = ((i - s - 1) % n + n) % n;
    transport.exchange(right, data + begin[send], begin[send + 1] - begin[send],
                       left, data + begin[recv], begin[recv + 1] - begin[recv],
                       kTagGather, deadline(), what);
  }
}

void Communicator::allReduce(const std::vector<int> &group, float *data,
                             size_t count, bool max, const std::string &what) {
  size_t n = group.size();
  if (n == 1)
    return;
  std::vector<size_t> begin = chunks(count, n);
  ringReduceScatter(group, data, begin, max, what);
  std::vector<size_t> bytes(begin);
  for (size_t &b : bytes)
    b *= 4;
  ringAllGather(group, reinterpret_cast<uint8_t *>(data), bytes, what);
}

void Communicator::allGather(const std::vector<int> &group, const void *in,
                             void *out, size_t bytesEach,
                             const std::string &what) {
  size_t n = group.size();
  int i = indexIn(group, rank());
  std::vector<uint8_t> mine(static_cast<const uint8_t *>(in),
                            static_cast<const uint8_t *>(in) + bytesEach);
  auto *bytes = static_cast<uint8_t *>(out);
  std::memcpy(bytes + i * bytesEach, mine.data(), bytesEach);
  std::vector<size_t> begin(n + 1);
  for (size_t c = 0; c <= n; ++c)
    begin[c] = c * bytesEach;
  ringAllGather(group, bytes, begin, what);
}

void Communicator::reduceScatter(const std::vector<int> &group,
                                 const float *in, float *out,
                                 size_t countEach, const std::string &what) {
  size_t n = group.size();
  int i = indexIn(group, rank());
  std::vector<float> work(in, in + countEach * n);
  std::vector<size_t> begin(n + 1);
  for (size_t c = 0; c <= n; ++c)
    begin[c] = c * countEach;
  ringReduceScatter(group, work.data(), begin, false, what);
  std::memcpy(out, work.data() + i * countEach, countEach * 4);
}

void Communicator::transfer(const Instruction &instruction,
                            RankMemory &memory, const std::string &where,
                            int64_t microbatch) {
  bool sending = instruction.kernelId == int(KernelId::Send);
  uint32_t index = sending ? instruction.inputs[0] : instruction.outputs[0];
  const Buffer &buffer = memory.plan().buffers[index];
  int peer = int(instruction.intAttr("peer"));
  int64_t channel = instruction.intAttr("channel");
  int tag = transferTag(channel, microbatch);
  if (sending) {
    transport.post(peer, memory.data(index), buffer.bytes, tag);
    bytesByKind["send over pp"] += buffer.bytes;
  } else {
    transport.recv(peer, memory.data(index), buffer.bytes, tag, deadline(),
                   "recv of channel " + std::to_string(channel) +
                       " for microbatch " + std::to_string(microbatch) +
                       " (" + where + ")");
  }
}

void Communicator::run(const Instruction &instruction, RankMemory &memory,
                       const std::string &where, int64_t microbatch) {
  auto id = static_cast<KernelId>(instruction.kernelId);
  if (id == KernelId::Send || id == KernelId::Recv)
    return transfer(instruction, memory, where, microbatch);
  const RankPlan &plan = memory.plan();
  const Buffer &in = plan.buffers[instruction.inputs[0]];
  const Buffer &out = plan.buffers[instruction.outputs[0]];
  const std::vector<int64_t> &axes = instruction.attr("axes")->ints;
  std::vector<int> members = group(axes);
  if (const AttrValue *stages = instruction.attr("stages")) {
    // Only the pipeline stages listed (those sharing a tied parameter).
    int64_t perStage = mesh.sizes[0] * mesh.sizes[1];
    std::erase_if(members, [&](int member) {
      return std::find(stages->ints.begin(), stages->ints.end(),
                       member / perStage) == stages->ints.end();
    });
  }
  std::string kind = instruction.kernel + " over " + axesName(axes);
  std::string what = kind + " (" + where + ")";
  uint64_t before = transport.bytesSent;
  auto kernel = static_cast<KernelId>(instruction.kernelId);

  // Reductions work in f32: bf16 operands are widened, the result rounded.
  auto widen = [&](const Buffer &b, uint32_t index) {
    std::vector<float> values(b.elements);
    if (b.dtype == DType::BF16) {
      auto *bits = static_cast<const uint16_t *>(memory.data(index));
      for (int64_t e = 0; e < b.elements; ++e)
        values[e] = bf16ToFloat(bits[e]);
    } else {
      std::memcpy(values.data(), memory.data(index), b.bytes);
    }
    return values;
  };
  auto store = [&](const Buffer &b, uint32_t index, const float *values) {
    if (b.dtype == DType::BF16) {
      auto *bits = static_cast<uint16_t *>(memory.data(index));
      for (int64_t e = 0; e < b.elements; ++e)
        bits[e] = floatToBf16(values[e]);
    } else {
      std::memmove(memory.data(index), values, b.bytes);
    }
  };

  if (kernel == KernelId::AllReduce) {
    std::vector<float> values = widen(in, instruction.inputs[0]);
    allReduce(members, values.data(), values.size(),
              instruction.intAttr("reduction") == 1, what);
    store(out, instruction.outputs[0], values.data());
  } else {
    // Gather and scatter along `dim`: blocks of the whole tensor are
    // [outer][n][inner] and each rank holds [outer][inner].
    bool gather = kernel == KernelId::AllGather;
    const Buffer &part = gather ? in : out;
    int64_t dim = instruction.intAttr("dim");
    int64_t outer = 1;
    for (int64_t d = 0; d < dim; ++d)
      outer *= part.shape[d];
    size_t n = members.size();
    size_t partBytes = part.bytes, innerBytes = partBytes / outer;
    if (gather) {
      std::vector<uint8_t> blocks(partBytes * n);
      allGather(members, memory.data(instruction.inputs[0]), blocks.data(),
                partBytes, what);
      auto *target = static_cast<uint8_t *>(memory.data(instruction.outputs[0]));
      for (int64_t o = 0; o < outer; ++o)
        for (size_t r = 0; r < n; ++r)
          std::memcpy(target + (o * n + r) * innerBytes,
                      blocks.data() + r * partBytes + o * innerBytes,
                      innerBytes);
    } else {
      std::vector<float> whole = widen(in, instruction.inputs[0]);
      size_t inner = innerBytes / dtypeBytes(part.dtype);
      std::vector<float> blocks(whole.size());
      for (int64_t o = 0; o < outer; ++o)
        for (size_t r = 0; r < n; ++r)
          std::memcpy(blocks.data() + (r * outer + o) * inner,
                      whole.data() + (o * n + r) * inner, inner * 4);
      std::vector<float> mine(part.elements);
      reduceScatter(members, blocks.data(), mine.data(), part.elements, what);
      store(out, instruction.outputs[0], mine.data());
    }
  }
  bytesByKind[kind] += transport.bytesSent - before;
}

} // namespace strata::runtime
