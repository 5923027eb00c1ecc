//===- ModelledNetwork.cpp - a rank's communication as a cost model -------===//
#include "runtime/predict/ModelledNetwork.h"
#include "runtime/plan/MeshAxes.h"

namespace strata::runtime::predict {

std::string Rendezvous::unmatched() const {
  for (const auto &[key, posted] : open) {
    auto [from, to, tag, nth] = key;
    if (!simulates(from) || !simulates(to))
      continue;
    std::string which = "transfer " + std::to_string(nth + 1) + " with tag " +
                        std::to_string(tag) + " from rank " +
                        std::to_string(from) + " to rank " + std::to_string(to);
    return posted.second
               ? "rank " + std::to_string(to) + " never receives " + which
               : "rank " + std::to_string(from) + " never sends " + which;
  }
  return "";
}

std::string ModelledNetwork::createGroups(const Plan &whole, uint32_t rank) {
  plan = &whole;
  me = int(rank);
  return "";
}

const std::vector<int> &ModelledNetwork::costedMembers(uint32_t group) {
  auto [it, fresh] = shared.slowestMembers.try_emplace(group);
  if (fresh)
    it->second = shared.costs.slowestInstance(*plan, group, uint32_t(me));
  return it->second;
}

std::pair<int, int> ModelledNetwork::costedPair(int from, int to) {
  uint32_t a = plan->stageOf(uint32_t(from)), b = plan->stageOf(uint32_t(to));
  auto [it, fresh] = shared.slowestPair.try_emplace({a, b}, from, to);
  if (!fresh)
    return it->second;
  // The same transfer between every other tensor and data position of the
  // two stages: the first pair that crosses nodes, else this one.
  int64_t perNode = shared.costs.cluster().gpusPerNode;
  if (from / perNode == to / perNode)
    for (uint32_t rank = plan->firstRankOf(a);
         rank < plan->firstRankOf(a) + plan->ranksPerStage(); ++rank) {
      int peer = int(plan->onStage(rank, b));
      if (int64_t(rank) / perNode != peer / perNode) {
        it->second = {int(rank), peer};
        break;
      }
    }
  return it->second;
}

void ModelledNetwork::collective(Stream stream, const CollectiveOp &op,
                                 Operand in, Operand out, const std::string &) {
  std::vector<int> members = plan->groupMembers(op.group, uint32_t(me));
  // The whole tensor: an all-reduce's buffer, a gather's output, a
  // reduce-scatter's input, a shift's input.
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
        shared.costs.collective(op.kind, costedMembers(op.group), bytes),
        simulatedMembers);
  }
  // Over tensor ranks alone, tensor parallelism's. Over context ranks
  // alone, attention's keys and values (the ring's shifts; the all-gather
  // and reduce-scatter along the sequence) are context parallelism's, but
  // the flat buckets of gradients and parameters (no dimension), reduced
  // and gathered over the same ranks where d = 1, are data-parallel, as is
  // every collective over data ranks.
  const Group &group = plan->groups[op.group];
  auto only = [&](int axis) {
    return group.axes.size() == 1 && group.axes[0] == axis;
  };
  bool activations = op.kind == CollectiveKind::Shift || op.dim > 0;
  Work work = only(mesh::kTensor)                    ? Work::TensorComm
              : only(mesh::kContext) && activations ? Work::ContextComm
                                                    : Work::DataComm;
  device.issue(stream);
  shared.timeline.joinMeeting(device.lane(stream), it->second, work,
                              shared.timeline.label(kind));
}

void ModelledNetwork::exchange(Stream stream, std::vector<Transfer> sends,
                               std::vector<Transfer> receives) {
  if (sends.empty() && receives.empty())
    return;
  Timeline &timeline = shared.timeline;
  device.issue(stream);
  OpRef at =
      timeline.addExchange(device.lane(stream), timeline.label("exchange"));
  uint32_t exchange = timeline.exchangeOf(at);
  auto post = [&](const Transfer &t, int from, int to, bool sending) {
    // Between chunks of one stage (ZB-V's turn, virtual stages on one
    // stage) a transfer is a copy the send makes and the receive takes,
    // neither waiting for the other (as the backends run it): no meeting.
    if (from == to)
      return;
    double bytes = t.buffer.buffer ? double(t.buffer.buffer->bytes) : 0;
    if (sending)
      sent["pipeline send"] += uint64_t(bytes);
    uint64_t &nth = transfersSoFar[{from, to, t.tag}];
    auto key = std::make_tuple(from, to, t.tag, nth++);
    auto found = shared.open.find(key);
    if (found != shared.open.end()) {
      timeline.setTransferSide(found->second.first, exchange);
      shared.open.erase(found);
      return;
    }
    auto [costFrom, costTo] = costedPair(from, to);
    uint32_t transfer = timeline.addTransfer(
        exchange, kNone, shared.costs.transfer(costFrom, costTo, bytes));
    int peer = sending ? to : from;
    if (shared.simulates(peer))
      shared.open.emplace(key, std::make_pair(transfer, sending));
  };
  for (const Transfer &t : sends)
    post(t, me, t.peer, true);
  for (const Transfer &t : receives)
    post(t, t.peer, me, false);
}

} // namespace strata::runtime::predict
