//===- RingCollectives.cpp - collectives over point-to-point --------------===//
#include "runtime/comm/RingCollectives.h"
#include "runtime/base/BFloat16.h"

#include <algorithm>
#include <cstring>

namespace strata::runtime {

// Message tags: Collectives.h (MessageTag).

size_t rankIndex(const std::vector<int> &group, int rank) {
  return size_t(std::find(group.begin(), group.end(), rank) - group.begin());
}

std::vector<size_t> ringChunks(size_t count, size_t n) {
  std::vector<size_t> begin(n + 1);
  for (size_t c = 0; c <= n; ++c)
    begin[c] = count * c / n;
  return begin;
}

std::vector<float> widenOperand(Operand operand) {
  const Buffer &b = *operand.buffer;
  std::vector<float> values(b.elements);
  if (b.dtype == DType::BF16)
    widenBf16(static_cast<const uint16_t *>(operand.data), values.data(),
              b.elements);
  else
    std::memcpy(values.data(), operand.data, b.bytes);
  return values;
}

void storeOperand(Operand operand, const float *values) {
  const Buffer &b = *operand.buffer;
  if (b.dtype == DType::BF16)
    narrowToBf16(values, static_cast<uint16_t *>(operand.data), b.elements);
  else
    std::memmove(operand.data, values, b.bytes);
}

std::string RingCollectives::createGroups(const Plan &plan, uint32_t rank) {
  members.clear();
  kindNames.clear();
  for (uint32_t g = 0; g < plan.groups.size(); ++g) {
    members.push_back(plan.groupMembers(g, rank));
    std::string name = plan.groupName(g);
    std::array<std::string, kCollectiveKinds> &kinds = kindNames.emplace_back();
    for (int k = 0; k < kCollectiveKinds; ++k)
      kinds[k] =
          std::string(collectiveName(CollectiveKind(k))) + " over " + name;
  }
  return "";
}

uint64_t RingCollectives::ringReduceScatter(const std::vector<int> &group,
                                            float *data,
                                            const std::vector<size_t> &begin,
                                            bool max, int tag,
                                            const std::string &what) {
  int n = int(group.size()), i = int(rankIndex(group, transport.rank()));
  int right = group[(i + 1) % n], left = group[(i + n - 1) % n];
  size_t largest = 0;
  for (int c = 0; c < n; ++c)
    largest = std::max(largest, begin[c + 1] - begin[c]);
  std::vector<float> incoming(largest);
  uint64_t sent = 0;
  for (int s = 0; s < n - 1; ++s) {
    int send = ((i - s - 1) % n + n) % n, recv = ((i - s - 2) % n + n) % n;
    size_t sendCount = begin[send + 1] - begin[send];
    size_t recvCount = begin[recv + 1] - begin[recv];
    transport.exchange(right, data + begin[send], sendCount * 4, left,
                       incoming.data(), recvCount * 4, tag, deadline(), what);
    sent += sendCount * 4;
    float *mine = data + begin[recv];
    if (max)
      for (size_t e = 0; e < recvCount; ++e)
        mine[e] = std::max(mine[e], incoming[e]);
    else
      for (size_t e = 0; e < recvCount; ++e)
        mine[e] += incoming[e];
  }
  return sent;
}

uint64_t RingCollectives::ringAllGather(const std::vector<int> &group,
                                        uint8_t *data,
                                        const std::vector<size_t> &begin,
                                        int tag, const std::string &what) {
  int n = int(group.size()), i = int(rankIndex(group, transport.rank()));
  int right = group[(i + 1) % n], left = group[(i + n - 1) % n];
  uint64_t sent = 0;
  for (int s = 0; s < n - 1; ++s) {
    int send = ((i - s) % n + n) % n, recv = ((i - s - 1) % n + n) % n;
    transport.exchange(right, data + begin[send], begin[send + 1] - begin[send],
                       left, data + begin[recv], begin[recv + 1] - begin[recv],
                       tag, deadline(), what);
    sent += begin[send + 1] - begin[send];
  }
  return sent;
}

uint64_t RingCollectives::allReduce(const std::vector<int> &group, float *data,
                                    size_t count, bool max, Tags tags,
                                    const std::string &what) {
  size_t n = group.size();
  if (n == 1)
    return 0;
  std::vector<size_t> begin = ringChunks(count, n);
  uint64_t sent = ringReduceScatter(group, data, begin, max, tags.reduce, what);
  std::vector<size_t> byteBegin(begin);
  for (size_t &b : byteBegin)
    b *= 4;
  return sent + ringAllGather(group, reinterpret_cast<uint8_t *>(data),
                              byteBegin, tags.gather, what);
}

void RingCollectives::hostAllReduce(const std::vector<int> &group,
                                    float *values, size_t count,
                                    const std::string &what) {
  allReduce(group, values, count, false, {kTagHost, kTagHost}, what);
}

uint64_t RingCollectives::run(const CollectiveOp &op, Operand in, Operand out,
                              Tags tags, const std::string &what) {
  const std::vector<int> &group = members[op.group];
  size_t n = group.size();
  if (op.kind == CollectiveKind::Shift) {
    // To the next rank, from the previous (the plan checker keeps the
    // two buffers' bytes apart).
    int i = int(rankIndex(group, transport.rank()));
    size_t bytes = in.buffer->bytes;
    if (n == 1) {
      std::memmove(out.data, in.data, bytes);
      return 0;
    }
    transport.exchange(group[(i + 1) % n], in.data, bytes,
                       group[(i + n - 1) % n], out.data, bytes, tags.gather,
                       deadline(), what);
    return bytes;
  }
  if (op.kind == CollectiveKind::AllReduceSum ||
      op.kind == CollectiveKind::AllReduceMax) {
    bool max = op.kind == CollectiveKind::AllReduceMax;
    if (in.buffer->dtype == DType::F32) {
      // In place in the output (a gradient bucket's all-reduce is in place
      // already): no copy of the whole tensor.
      if (out.data != in.data)
        std::memmove(out.data, in.data, in.buffer->bytes);
      return allReduce(group, static_cast<float *>(out.data),
                       size_t(out.buffer->elements), max, tags, what);
    }
    std::vector<float> values = widenOperand(in);
    uint64_t sent =
        allReduce(group, values.data(), values.size(), max, tags, what);
    storeOperand(out, values.data());
    return sent;
  }
  // Gather and scatter along `dim`: blocks of the whole tensor are
  // [outer][n][inner] and each rank holds [outer][inner].
  bool gather = op.kind == CollectiveKind::AllGather;
  const Buffer &part = partOf(op, in, out);
  int64_t outer = outerBlocks(part, op.dim);
  size_t partBytes = part.bytes, innerBytes = partBytes / outer;
  int i = int(rankIndex(group, transport.rank()));
  if (gather) {
    // Along the first dimension the ranks' blocks are the output's layout:
    // gathered in place. Else through [n][outer][inner], then reordered.
    auto *target = static_cast<uint8_t *>(out.data);
    std::vector<uint8_t> blocks(outer == 1 ? 0 : partBytes * n);
    uint8_t *whole = outer == 1 ? target : blocks.data();
    std::memmove(whole + i * partBytes, in.data, partBytes); // may alias
    std::vector<size_t> begin(n + 1);
    for (size_t c = 0; c <= n; ++c)
      begin[c] = c * partBytes;
    uint64_t sent = ringAllGather(group, whole, begin, tags.gather, what);
    if (outer == 1)
      return sent;
    for (int64_t o = 0; o < outer; ++o)
      for (size_t r = 0; r < n; ++r)
        std::memcpy(target + (o * n + r) * innerBytes,
                    blocks.data() + r * partBytes + o * innerBytes, innerBytes);
    return sent;
  }
  // Each rank's block made contiguous ([n][outer][inner]); along the
  // first dimension it is already.
  std::vector<float> blocks = widenOperand(in);
  if (outer > 1) {
    std::vector<float> whole = std::move(blocks);
    size_t inner = innerBytes / dtypeBytes(part.dtype);
    blocks.resize(whole.size());
    for (int64_t o = 0; o < outer; ++o)
      for (size_t r = 0; r < n; ++r)
        std::memcpy(blocks.data() + (r * outer + o) * inner,
                    whole.data() + (o * n + r) * inner, inner * 4);
  }
  std::vector<size_t> begin(n + 1);
  for (size_t c = 0; c <= n; ++c)
    begin[c] = c * part.elements;
  uint64_t sent =
      ringReduceScatter(group, blocks.data(), begin, false, tags.reduce, what);
  storeOperand(out, blocks.data() + i * part.elements);
  return sent;
}

void RingCollectives::collective(Stream stream, const CollectiveOp &op,
                                 Operand in, Operand out,
                                 const std::string &where) {
  const std::string &kind = kindName(op);
  Tags tags = tagsOf(stream);
  submit(stream, kind,
         [this, op, in, out, tags, &kind, what = kind + " (" + where + ")"] {
           bytes.add(kind, run(op, in, out, tags, what));
         });
}

void RingCollectives::exchange(Stream stream, std::vector<Transfer> sends,
                               std::vector<Transfer> receives) {
  if (sends.empty() && receives.empty())
    return;
  uint64_t sent = 0;
  for (const Transfer &t : sends)
    sent += t.buffer.buffer->bytes;
  submit(
      stream, "exchange",
      [this, sends = std::move(sends), receives = std::move(receives), sent] {
        // Sends are posted (copied) first, so that receives that wait can
        // never hold up the sends a peer is waiting for.
        for (const Transfer &t : sends)
          transport.post(t.peer, t.buffer.data, t.buffer.buffer->bytes, t.tag);
        for (const Transfer &t : receives)
          transport.recv(t.peer, t.buffer.data, t.buffer.buffer->bytes, t.tag,
                         deadline(), t.where);
        if (sent)
          bytes.add("send over pp", sent);
      });
}

} // namespace strata::runtime
