//===- Timeline.cpp - when each modelled instruction runs -----------------===//
#include "runtime/predict/Timeline.h"

#include <algorithm>
#include <deque>

namespace strata::runtime::predict {

const char *useName(Use use) {
  switch (use) {
  case Use::Compute:
    return "compute";
  case Use::TensorComm:
    return "tensor-parallel communication";
  case Use::DataComm:
    return "data-parallel communication";
  case Use::ContextComm:
    return "context-parallel communication";
  case Use::PipelineComm:
    return "pipeline communication";
  case Use::OtherRanks:
    return "pipeline bubble";
  }
  return "?";
}

uint32_t Timeline::addLane(int rank, std::string name) {
  Lane &lane = lanesState.emplace_back();
  lane.rank = rank;
  lane.name = std::move(name);
  return uint32_t(lanesState.size() - 1);
}

const std::string &Timeline::labelOf(const Op &op) const {
  static const std::string unnamed = "an unnamed operation";
  return op.label < labelText.size() ? labelText[op.label] : unnamed;
}

uint32_t Timeline::label(const std::string &text) {
  auto [it, fresh] = labelIndex.try_emplace(text, uint32_t(labelText.size()));
  if (fresh)
    labelText.push_back(text);
  return it->second;
}

OpRef Timeline::add(uint32_t lane, const Op &op) {
  std::vector<Op> &ops = lanesState[lane].ops;
  ops.push_back(op);
  return {lane, uint32_t(ops.size() - 1)};
}

uint32_t Timeline::addMeeting(double seconds, uint32_t members) {
  Meeting &meeting = meetings.emplace_back();
  meeting.seconds = seconds;
  meeting.expected = members;
  return uint32_t(meetings.size() - 1);
}

OpRef Timeline::joinMeeting(uint32_t lane, uint32_t meeting, Work work,
                            uint32_t label) {
  Op op;
  op.work = work;
  op.seconds = meetings[meeting].seconds;
  op.label = label;
  op.link = meeting;
  return add(lane, op);
}

OpRef Timeline::addExchange(uint32_t lane, uint32_t label) {
  Op op;
  op.work = Work::PipelineComm;
  op.label = label;
  op.link = uint32_t(exchanges.size());
  OpRef at = add(lane, op);
  exchanges.emplace_back().at = at;
  return at;
}

uint32_t Timeline::addTransfer(uint32_t one, uint32_t other, double seconds) {
  Transfer &t = transfers.emplace_back();
  t.side[0] = one;
  t.side[1] = other;
  t.seconds = seconds;
  uint32_t index = uint32_t(transfers.size() - 1);
  exchanges[one].transfers.push_back(index);
  if (other != kNone)
    exchanges[other].transfers.push_back(index);
  return index;
}

void Timeline::setTransferSide(uint32_t transfer, uint32_t exchange) {
  transfers[transfer].side[1] = exchange;
  exchanges[exchange].transfers.push_back(transfer);
}

double Timeline::otherStart(uint32_t t, uint32_t from) const {
  const Transfer &transfer = transfers[t];
  uint32_t other = transfer.side[0] == from ? transfer.side[1]
                                            : transfer.side[0];
  if (other == kNone) // a peer not simulated: as this side
    return start(exchanges[from].at);
  return exchanges[other].started ? start(exchanges[other].at) : -1;
}

bool Timeline::finishExchange(uint32_t e) {
  const Exchange &exchange = exchanges[e];
  double begin = start(exchange.at), finish = begin;
  for (uint32_t t : exchange.transfers) {
    double other = otherStart(t, e);
    if (other < 0)
      return false;
    finish = std::max(finish, std::max(begin, other) + transfers[t].seconds);
  }
  times[exchange.at.lane][exchange.at.index][1] = finish;
  return true;
}

bool Timeline::tryAdvance(uint32_t lane, std::vector<uint32_t> &wake) {
  const std::vector<Op> &ops = lanesState[lane].ops;
  bool moved = false;
  while (cursor[lane] < ops.size()) {
    uint32_t index = cursor[lane];
    const Op &op = ops[index];
    std::array<double, 2> &at = times[lane][index];
    double ready = laneFree[lane];
    // Communication with no meeting or exchange takes its own time alone.
    Work kind = op.link == kNone && op.work != Work::Wait ? Work::Compute
                                                           : op.work;
    switch (kind) {
    case Work::Wait:
      if (op.waitsFor.valid()) {
        if (cursor[op.waitsFor.lane] <= op.waitsFor.index) {
          waiters[op.waitsFor.lane].push_back(lane);
          return moved;
        }
        // A lane that got there first sleeps until the record wakes it
        // (only another lane's record can end after this lane got here).
        if (double recorded = end(op.waitsFor); recorded > ready)
          ready = recorded + wakeSeconds;
      }
      at = {ready, ready};
      break;
    case Work::Record:
    case Work::Compute:
    case Work::Memory:
      at = {ready, ready + op.seconds};
      break;
    case Work::TensorComm:
    case Work::DataComm:
    case Work::ContextComm: {
      Meeting &meeting = meetings[op.link];
      if (!joined[lane]) {
        joined[lane] = true;
        if (meeting.arrived == meeting.expected) {
          overfull = lanesState[lane].name + " at " + labelOf(op);
          return moved;
        }
        meeting.members.push_back({lane, index});
        meeting.arrivals.push_back(ready);
        if (++meeting.arrived == meeting.expected) {
          double begin = *std::max_element(meeting.arrivals.begin(),
                                           meeting.arrivals.end());
          for (OpRef member : meeting.members) {
            times[member.lane][member.index] = {begin,
                                                begin + meeting.seconds};
            wake.push_back(member.lane);
          }
          meeting.done = true;
        }
      }
      if (!meeting.done)
        return moved;
      break;
    }
    case Work::PipelineComm: {
      Exchange &exchange = exchanges[op.link];
      if (!joined[lane]) {
        joined[lane] = true;
        at[0] = ready;
        exchange.started = true;
        for (uint32_t t : exchange.transfers)
          for (uint32_t side : transfers[t].side)
            if (side != kNone && side != op.link)
              wake.push_back(exchanges[side].at.lane);
      }
      if (!finishExchange(op.link))
        return moved;
      break;
    }
    }
    laneFree[lane] = at[1];
    ++cursor[lane];
    joined[lane] = false;
    moved = true;
  }
  return moved;
}

std::string Timeline::solve() {
  size_t count = lanesState.size();
  times.assign(count, {});
  for (size_t l = 0; l < count; ++l)
    times[l].assign(lanesState[l].ops.size(), {0, 0});
  cursor.assign(count, 0);
  laneFree.assign(count, 0);
  joined.assign(count, false);
  waiters.assign(count, {});
  for (Meeting &meeting : meetings) {
    meeting.arrived = 0;
    meeting.members.clear();
    meeting.arrivals.clear();
    meeting.done = false;
  }
  for (Exchange &exchange : exchanges)
    exchange.started = false;
  overfull.clear();

  std::deque<uint32_t> queue;
  std::vector<bool> queued(count, true);
  for (uint32_t l = 0; l < count; ++l)
    queue.push_back(l);
  std::vector<uint32_t> wake;
  while (!queue.empty()) {
    uint32_t lane = queue.front();
    queue.pop_front();
    queued[lane] = false;
    wake.clear();
    if (tryAdvance(lane, wake)) {
      wake.insert(wake.end(), waiters[lane].begin(), waiters[lane].end());
      waiters[lane].clear();
    }
    for (uint32_t other : wake)
      if (!queued[other] && cursor[other] < lanesState[other].ops.size()) {
        queued[other] = true;
        queue.push_back(other);
      }
  }
  if (!overfull.empty())
    return "a collective has more members than its group: " + overfull;
  return describeStuck();
}

std::string Timeline::describeStuck() const {
  std::string stuck;
  int shown = 0;
  for (uint32_t l = 0; l < lanesState.size(); ++l) {
    if (cursor[l] >= lanesState[l].ops.size())
      continue;
    if (shown++ == 8) {
      stuck += "; ...";
      break;
    }
    const Op &op = lanesState[l].ops[cursor[l]];
    stuck += (stuck.empty() ? "" : "; ") + lanesState[l].name + " at " +
             labelOf(op) + " (operation " + std::to_string(cursor[l]) +
             ")";
  }
  return stuck.empty() ? "" : "the plan deadlocks: " + stuck;
}

double Timeline::meanTransferSeconds() const {
  double sum = 0;
  for (const Transfer &t : transfers)
    sum += t.seconds;
  return transfers.empty() ? 0 : sum / double(transfers.size());
}

double Timeline::makespan() const {
  double last = 0;
  for (const auto &lane : times)
    for (const auto &at : lane)
      last = std::max(last, at[1]);
  return last;
}

namespace {
Use useOf(Work work) {
  switch (work) {
  case Work::TensorComm:
    return Use::TensorComm;
  case Work::DataComm:
    return Use::DataComm;
  case Work::ContextComm:
    return Use::ContextComm;
  case Work::PipelineComm:
    return Use::PipelineComm;
  default:
    return Use::Compute;
  }
}
} // namespace

double Timeline::attributeSpan(OpRef at, double lo, double hi,
                               std::array<double, kUses> &uses) const {
  // The op's own span, clipped to [lo, hi); an exchange's wait for its
  // peer is the other rank's time.
  const Op &op = this->op(at);
  double begin = start(at), finish = std::min(end(at), hi);
  double from = std::max(begin, lo);
  if (finish > from) {
    if (op.work == Work::PipelineComm && op.link != kNone) {
      double peer = begin;
      for (uint32_t t : exchanges[op.link].transfers)
        peer = std::max(peer, otherStart(t, op.link));
      double split = std::clamp(peer, from, finish);
      uses[int(Use::OtherRanks)] += split - from;
      uses[int(Use::PipelineComm)] += finish - split;
    } else {
      uses[int(useOf(op.work))] += finish - from;
    }
  }
  return std::min(hi, begin);
}

void Timeline::blame(OpRef at, double lo, double hi,
                     std::array<double, kUses> &uses) const {
  // [lo, hi) ends where `at` started: find what held it back, attribute
  // the part of [lo, hi) that cause's own span covers, and go on before
  // it until lo is reached.
  while (hi > lo) {
    const Op &op = this->op(at);
    double ready = at.index ? end({at.lane, at.index - 1}) : 0;
    OpRef cause;
    if (op.work == Work::Wait && op.waitsFor.valid() &&
        end(op.waitsFor) > ready)
      cause = op.waitsFor;
    else if ((op.work == Work::TensorComm || op.work == Work::DataComm ||
              op.work == Work::ContextComm) &&
             op.link != kNone && start(at) > ready) {
      uses[int(Use::OtherRanks)] += hi - lo; // a member arrived later
      return;
    } else if (at.index)
      cause = {at.lane, at.index - 1};
    if (!cause.valid()) {
      uses[int(Use::OtherRanks)] += hi - lo; // nothing before it: idle
      return;
    }
    hi = attributeSpan(cause, lo, hi, uses);
    at = cause;
  }
}

std::array<double, kUses> Timeline::attribute(uint32_t lane,
                                              double until) const {
  std::array<double, kUses> uses{};
  double free = 0;
  for (uint32_t i = 0; i < lanesState[lane].ops.size(); ++i) {
    OpRef at{lane, i};
    if (start(at) > free)
      blame(at, free, start(at), uses);
    attributeSpan(at, start(at), end(at), uses);
    free = std::max(free, end(at));
  }
  // Past its last op the lane waits for the rank's other lanes (what
  // they still do, followed back), then for other ranks.
  OpRef last;
  double own = free;
  for (uint32_t other = 0; other < lanesState.size(); ++other)
    if (other != lane && lanesState[other].rank == lanesState[lane].rank &&
        !lanesState[other].ops.empty()) {
      OpRef end{other, uint32_t(lanesState[other].ops.size() - 1)};
      if (this->end(end) > own) {
        own = this->end(end);
        last = end;
      }
    }
  own = std::min(own, until);
  if (last.valid() && own > free)
    blame(last, free, attributeSpan(last, free, own, uses), uses);
  if (until > std::max(free, own))
    uses[int(Use::OtherRanks)] += until - std::max(free, own);
  return uses;
}

} // namespace strata::runtime::predict
