//===- LocalCollectives.cpp - collectives among threads sharing memory ----===//
#include "runtime/comm/LocalCollectives.h"
#include "runtime/base/BFloat16.h"

#include <algorithm>
#include <cstring>
#include <tuple>

namespace strata::runtime {

namespace {

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

void Seats::assign(const Plan &plan, const RingCollectives &groups, int rank) {
  ring = &groups;
  me = rank;
  setOf.clear();
  indexIn.clear();
  issued.clear();
  for (uint32_t g = 0; g < plan.groups.size(); ++g) {
    const std::vector<int> &ranks = ring->group(g);
    size_t set = issued.size();
    for (uint32_t earlier = 0; earlier < g; ++earlier)
      if (ring->group(earlier) == ranks)
        set = setOf[earlier];
    if (set == issued.size())
      issued.emplace_back();
    setOf.push_back(set);
    indexIn.push_back(rankIndex(ranks, me));
  }
}

Seat Seats::next(uint32_t group, Stream stream) {
  return {&ring->group(group), int(stream), issued[setOf[group]][int(stream)]++,
          indexIn[group], me};
}

void CollectiveHub::meet(const Seat &seat, const CollectiveOperands &operands,
                         const Lead &lead, const Use &use, const Use &release,
                         std::chrono::milliseconds timeout, const char *kind,
                         const std::string &where) {
  const std::vector<int> &ranks = *seat.ranks;
  size_t index = seat.index;
  auto what = [&] { return std::string(kind) + " (" + where + ")"; };
  auto key = std::make_tuple(ranks, seat.stream, seat.count);
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
  } else {
    // The timeout is for the others to come, not for the leader's work
    // once they have (the CPU computes the whole collective there).
    if (!changed.wait_until(lock, Clock::now() + timeout,
                            [&] { return meeting.count == int(n); })) {
      // The run ends on this error (the launcher's die), so the meeting
      // is left as it is.
      std::string missing;
      for (size_t r = 0; r < n; ++r)
        if (!meeting.arrived[r])
          missing += (missing.empty() ? "" : ", ") + std::to_string(ranks[r]);
      throw CommTimeout("rank " + std::to_string(seat.me) + ": timed out in " +
                        what() + " waiting for rank " + missing);
    }
    changed.wait(lock, [&] { return meeting.done; });
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
    throw std::runtime_error(what() + ": " + error);
}

void computeCollective(const CollectiveOp &op,
                       const std::vector<CollectiveOperands> &ranks) {
  size_t n = ranks.size();
  // Every input read before any output is written: outputs may be their
  // rank's input (in place) or hold it (a gather's own block).
  if (op.kind == CollectiveKind::Shift) {
    // Rank i's output is rank i - 1's input (the last's goes to the first).
    std::vector<std::vector<uint8_t>> inputs;
    for (const CollectiveOperands &rank : ranks) {
      auto *in = static_cast<const uint8_t *>(rank.in.data);
      inputs.emplace_back(in, in + rank.in.buffer->bytes);
    }
    for (size_t i = 0; i < n; ++i)
      std::memcpy(ranks[i].out.data, inputs[(i + n - 1) % n].data(),
                  inputs[(i + n - 1) % n].size());
    return;
  }
  std::vector<std::vector<float>> values;
  if (op.kind != CollectiveKind::AllGather)
    for (const CollectiveOperands &rank : ranks)
      values.push_back(widenOperand(rank.in));
  if (op.kind == CollectiveKind::AllReduceSum ||
      op.kind == CollectiveKind::AllReduceMax) {
    size_t count = values[0].size();
    std::vector<size_t> begin = ringChunks(count, n);
    std::vector<float> result(count);
    for (size_t c = 0; c < n; ++c)
      for (size_t e = begin[c]; e < begin[c + 1]; ++e)
        result[e] =
            ringOrder(values, c, e, op.kind == CollectiveKind::AllReduceMax);
    for (const CollectiveOperands &rank : ranks)
      storeOperand(rank.out, result.data());
    return;
  }
  const Buffer &part = partOf(op, ranks[0].in, ranks[0].out);
  int64_t outer = outerBlocks(part, op.dim);
  if (op.kind == CollectiveKind::AllGather) {
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
    storeOperand(ranks[i].out, result.data());
  }
}

LocalCollectives::LocalCollectives(std::shared_ptr<CollectiveHub> hub,
                                   Transport &transport, SubmitToStream submit,
                                   std::chrono::milliseconds timeout)
    : RingCollectives(transport, std::move(submit), timeout),
      hub(std::move(hub)) {}

std::string LocalCollectives::createGroups(const Plan &plan, uint32_t rank) {
  std::string error = RingCollectives::createGroups(plan, rank);
  seats.assign(plan, *this, transport.rank());
  return error;
}

void LocalCollectives::collective(Stream stream, const CollectiveOp &op,
                                  Operand in, Operand out,
                                  const std::string &where) {
  if (group(op.group).size() == 1) { // the ring's result: a copy
    submit(stream, kindName(op), [op, in, out] {
      computeCollective(op, {{in, out}});
    });
    return;
  }
  // `where` is the executor's, kept as long as the rank runs.
  submit(stream, kindName(op),
         [this, seat = seats.next(op.group, stream), op, in, out, &where] {
           hub->meet(
               seat, {in, out, nullptr},
               [op](const std::vector<CollectiveOperands> &ranks) -> void * {
                 computeCollective(op, ranks);
                 return nullptr;
               },
               nullptr, nullptr, timeout, collectiveName(op.kind), where);
         });
}

} // namespace strata::runtime
