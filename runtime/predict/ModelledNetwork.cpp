//===- ModelledNetwork.cpp - a rank's communication as a cost model -------===//
#include "runtime/predict/ModelledNetwork.h"

namespace strata::runtime::predict {

std::string Rendezvous::unmatched() const {
  for (const auto &[key, transfer] : open) {
    auto [from, to, tag, nth] = key;
    if (simulates(from) && simulates(to))
      return "rank " + std::to_string(from) + "'s transfer to rank " +
             std::to_string(to) + " (tag " + std::to_string(tag) +
             ", the " + std::to_string(nth + 1) +
             "th) has no matching receive on the other side";
  }
  return "";
}

std::string ModelledNetwork::createGroups(const Plan &whole, uint32_t rank) {
  plan = &whole;
  me = int(rank);
  return "";
}

void ModelledNetwork::collective(Stream stream, const CollectiveOp &op,
                                 Operand in, Operand out,
                                 const std::string &) {
  std::vector<int> members = plan->groupMembers(op.group, uint32_t(me));
  // The whole tensor: an all-reduce's buffer, a gather's output, a
  // reduce-scatter's input.
  const Buffer *whole =
      op.kind == CollectiveKind::AllGather ? out.buffer : in.buffer;
  double bytes = whole ? double(whole->bytes) : 0;
  std::string kind = std::string(collectiveName(op.kind)) + " over " +
                     plan->groupName(op.group);
  sent[kind] += uint64_t(bytes);
  uint64_t &nth = collectivesSoFar[{op.group, members.front()}];
  auto [it, fresh] = shared.meetings.try_emplace(
      std::make_tuple(op.group, members.front(), nth++), 0);
  if (fresh) {
    uint32_t simulatedMembers = 0;
    for (int member : members)
      simulatedMembers += shared.simulates(member);
    it->second = shared.timeline.addMeeting(
        shared.costs.collective(op.kind, members, bytes), simulatedMembers);
  }
  const Group &group = plan->groups[op.group];
  bool tensorOnly = group.axes.size() == 1 && group.axes[0] == 0;
  shared.timeline.joinMeeting(device.lane(stream), it->second,
                              tensorOnly ? Work::TensorComm : Work::DataComm,
                              shared.timeline.label(kind));
}

void ModelledNetwork::exchange(Stream stream, std::vector<Transfer> sends,
                               std::vector<Transfer> receives) {
  if (sends.empty() && receives.empty())
    return;
  Timeline &timeline = shared.timeline;
  OpRef at =
      timeline.addExchange(device.lane(stream), timeline.label("exchange"));
  uint32_t exchange = timeline.exchangeOf(at);
  auto post = [&](const Transfer &t, int from, int to) {
    double bytes = t.buffer.buffer ? double(t.buffer.buffer->bytes) : 0;
    if (from == me)
      sent["pipeline send"] += uint64_t(bytes);
    uint64_t &nth = transfersSoFar[{from, to, t.tag}];
    auto key = std::make_tuple(from, to, t.tag, nth++);
    auto found = shared.open.find(key);
    if (found != shared.open.end()) {
      timeline.setTransferSide(found->second, exchange);
      shared.open.erase(found);
      return;
    }
    uint32_t transfer = timeline.addTransfer(
        exchange, kNone, shared.costs.transfer(from, to, bytes));
    int peer = from == me ? to : from;
    if (shared.simulates(peer))
      shared.open.emplace(key, transfer);
  };
  for (const Transfer &t : sends)
    post(t, me, t.peer);
  for (const Transfer &t : receives)
    post(t, t.peer, me);
}

} // namespace strata::runtime::predict
