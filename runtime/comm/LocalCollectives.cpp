//===- LocalCollectives.cpp - collectives among threads sharing memory ----===//
#include "runtime/comm/LocalCollectives.h"
#include "runtime/exec/BFloat16.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace strata::runtime {

namespace {

std::vector<float> widen(Operand operand) {
  const Buffer &b = *operand.buffer;
  std::vector<float> values(b.elements);
  if (b.dtype == DType::BF16)
    widenBf16(static_cast<const uint16_t *>(operand.data), values.data(),
              b.elements);
  else
    std::memcpy(values.data(), operand.data, b.bytes);
  return values;
}

void store(Operand operand, const float *values) {
  const Buffer &b = *operand.buffer;
  if (b.dtype == DType::BF16)
    narrowToBf16(values, static_cast<uint16_t *>(operand.data), b.elements);
  else
    std::memmove(operand.data, values, b.bytes);
}

/// Element `e` reduced over the ranks in the ring's order for chunk `c`:
/// rank c + 1's value, then each next rank's added to it (its maximum
/// taken), round to rank c.
float ringOrder(const std::vector<std::vector<float>> &values, size_t c,
                size_t e, bool max) {
  size_t n = values.size();
  float acc = values[(c + 1) % n][e];
  for (size_t k = 2; k <= n; ++k) {
    float v = values[(c + k) % n][e];
    acc = max ? std::max(v, acc) : v + acc;
  }
  return acc;
}

} // namespace

std::shared_ptr<CollectiveHub> makeCollectiveHub() {
  return std::make_shared<CollectiveHub>();
}

void CollectiveHub::meet(const std::vector<int> &ranks, int stream,
                         uint64_t count, size_t index, int me,
                         const CollectiveOperands &operands, const Lead &lead,
                         const Use &use, const Use &release,
                         std::chrono::milliseconds timeout,
                         const std::string &what) {
  auto key = std::make_tuple(ranks, stream, count);
  std::unique_lock<std::mutex> lock(mutex);
  Meeting &meeting = meetings[key];
  size_t n = ranks.size();
  if (meeting.ranks.empty()) {
    meeting.ranks.resize(n);
    meeting.arrived.assign(n, false);
    meeting.left = int(n);
  }
  meeting.ranks[index] = operands;
  meeting.arrived[index] = true;
  if (++meeting.count == int(n)) {
    // The others wait for the leader and leave their buffers alone.
    lock.unlock();
    void *result = nullptr;
    std::string error;
    try {
      result = lead(meeting.ranks);
    } catch (const std::exception &failure) {
      error = failure.what();
    }
    lock.lock();
    meeting.result = result;
    meeting.error = error;
    meeting.done = true;
    changed.notify_all();
  } else if (!changed.wait_until(lock, Clock::now() + timeout,
                                 [&] { return meeting.done; })) {
    // The run ends on this error (the launcher's die), so the meeting is
    // left as it is.
    std::string missing;
    for (size_t r = 0; r < n; ++r)
      if (!meeting.arrived[r])
        missing += (missing.empty() ? "" : ", ") + std::to_string(ranks[r]);
    throw CommTimeout("rank " + std::to_string(me) + ": timed out in " + what +
                      " waiting for rank " + missing);
  }
  std::string error = meeting.error;
  void *result = meeting.result;
  if (error.empty() && use) {
    lock.unlock();
    try {
      use(result);
    } catch (const std::exception &failure) {
      error = failure.what();
    }
    lock.lock();
  }
  if (--meeting.left == 0) {
    // Every rank has used the result: it can go.
    if (release && result)
      release(result);
    meetings.erase(key);
  }
  if (!error.empty())
    throw std::runtime_error(what + ": " + error);
}

void computeCollective(const CollectiveOp &op,
                       const std::vector<CollectiveOperands> &ranks) {
  size_t n = ranks.size();
  // Every input read before any output is written: outputs may be their
  // rank's input (in place) or hold it (a gather's own block).
  std::vector<std::vector<float>> values;
  if (op.kind != CollectiveKind::AllGather)
    for (const CollectiveOperands &rank : ranks)
      values.push_back(widen(rank.in));
  if (op.kind == CollectiveKind::AllReduceSum ||
      op.kind == CollectiveKind::AllReduceMax) {
    // The ring's chunks: chunk c is [count·c/n, count·(c+1)/n).
    size_t count = values[0].size();
    std::vector<float> result(count);
    for (size_t c = 0; c < n; ++c)
      for (size_t e = count * c / n; e < count * (c + 1) / n; ++e)
        result[e] =
            ringOrder(values, c, e, op.kind == CollectiveKind::AllReduceMax);
    for (const CollectiveOperands &rank : ranks)
      store(rank.out, result.data());
    return;
  }
  // Blocks along `dim`: the whole tensor is [outer][n][inner], each rank's
  // block [outer][inner].
  bool gather = op.kind == CollectiveKind::AllGather;
  const Buffer &part = gather ? *ranks[0].in.buffer : *ranks[0].out.buffer;
  int64_t outer = 1;
  for (int64_t d = 0; d < op.dim; ++d)
    outer *= part.shape[d];
  if (gather) {
    size_t innerBytes = part.bytes / outer;
    std::vector<std::vector<uint8_t>> blocks;
    for (const CollectiveOperands &rank : ranks) {
      auto *in = static_cast<const uint8_t *>(rank.in.data);
      blocks.emplace_back(in, in + part.bytes);
    }
    for (const CollectiveOperands &rank : ranks)
      for (int64_t o = 0; o < outer; ++o)
        for (size_t r = 0; r < n; ++r)
          std::memcpy(static_cast<uint8_t *>(rank.out.data) +
                          (o * n + r) * innerBytes,
                      blocks[r].data() + o * innerBytes, innerBytes);
    return;
  }
  // Reduce-scatter: rank i's block is the ring's chunk i.
  size_t inner = size_t(part.elements / outer);
  std::vector<float> result(part.elements);
  for (size_t i = 0; i < n; ++i) {
    for (int64_t o = 0; o < outer; ++o)
      for (size_t k = 0; k < inner; ++k)
        result[o * inner + k] =
            ringOrder(values, i, (o * n + i) * inner + k, false);
    store(ranks[i].out, result.data());
  }
}

LocalCollectives::LocalCollectives(std::shared_ptr<CollectiveHub> hub,
                                   Transport &transport, SubmitToStream submit,
                                   std::chrono::milliseconds timeout)
    : hub(std::move(hub)), me(transport.rank()), submit(submit),
      timeout(timeout), ring(transport, submit, timeout) {}

std::string LocalCollectives::createGroups(const Plan &plan, uint32_t rank) {
  members.clear();
  for (uint32_t g = 0; g < plan.groups.size(); ++g)
    members.push_back(plan.groupMembers(g, rank));
  return ring.createGroups(plan, rank);
}

void LocalCollectives::collective(Stream stream, const CollectiveOp &op,
                                  Operand in, Operand out,
                                  const std::string &where) {
  const std::vector<int> &group = members[op.group];
  if (group.size() == 1) { // the ring's result for one rank: a copy
    submit(stream, collectiveName(op.kind), [op, in, out] {
      computeCollective(op, {{in, out}});
    });
    return;
  }
  uint64_t count = issued[{group, stream}]++;
  size_t index =
      size_t(std::find(group.begin(), group.end(), me) - group.begin());
  std::string what = std::string(collectiveName(op.kind)) + " (" + where + ")";
  submit(stream, collectiveName(op.kind),
         [this, group, count, stream, index, op, in, out, what] {
           hub->meet(
               group, int(stream), count, index, me, {in, out, nullptr},
               [op](const std::vector<CollectiveOperands> &ranks) -> void * {
                 computeCollective(op, ranks);
                 return nullptr;
               },
               nullptr, nullptr, timeout, what);
         });
}

} // namespace strata::runtime
