//===- TransferGroups.cpp - a schedule's transfers as the runtime posts them =//
#include "runtime/schedule/TransferGroups.h"

#include <algorithm>
#include <array>
#include <map>
#include <set>
#include <tuple>
#include <utility>

namespace strata::sim {

namespace {

/// A transfer between stages: a forward's activation to the next chunk, a
/// backward's gradient to the previous one.
struct Transfer {
  bool gradient = false;
  int fromChunk = 0, microbatch = 0;
  auto key() const { return std::tie(gradient, fromChunk, microbatch); }
  bool operator<(const Transfer &o) const { return key() < o.key(); }
  bool operator==(const Transfer &o) const { return key() == o.key(); }
};

/// The transfer streams of a stage (kTransferLanes, the runtime's).
constexpr int kLanes = kTransferLanes;

struct Group {
  std::vector<Transfer> sends, receives; // to or from other stages
  // The index of the work each send comes from and each receive goes to.
  std::vector<int> sendWork, receiveWork;
  int before = 0; // the work index this group precedes
};

/// Each stage's groups, per lane, in the order it posts them.
struct Groups {
  int stages = 0, chunks = 0;
  Placement placement = Placement::Looped;
  std::vector<std::array<std::vector<Group>, kLanes>> of; // by stage
  int stageOf(int chunk) const {
    return sim::stageOf(placement, chunk, stages);
  }
  int senderOf(const Transfer &t) const { return stageOf(t.fromChunk); }
  /// The stage at the other end of `t` from its sender.
  int receiverOf(const Transfer &t) const {
    return stageOf(t.gradient ? t.fromChunk - 1 : t.fromChunk + 1);
  }
  /// The lane `t` travels on, at both of its ends.
  int laneOf(const Transfer &t) const {
    return transferLane(senderOf(t), receiverOf(t), t.gradient);
  }
  /// What `w` sends to, or receives from, another stage (a W neither).
  bool sends(const Work &w, Transfer &out) const {
    int to = w.phase == Phase::Forward ? w.chunk + 1 : w.chunk - 1;
    out = {w.phase == Phase::Backward, w.chunk, w.microbatch};
    return w.phase != Phase::Weight && to >= 0 && to < chunks &&
           stageOf(to) != stageOf(w.chunk);
  }
  bool receives(const Work &w, Transfer &out) const {
    int from = w.phase == Phase::Forward ? w.chunk - 1 : w.chunk + 1;
    out = {w.phase == Phase::Backward, from, w.microbatch};
    return w.phase != Phase::Weight && from >= 0 && from < chunks &&
           stageOf(from) != stageOf(w.chunk);
  }
};

Groups buildGroups(const std::vector<std::vector<Work>> &orders,
                   const std::vector<std::vector<bool>> &exchange, int chunks,
                   Placement placement) {
  Groups groups;
  groups.stages = int(orders.size());
  groups.chunks = chunks;
  groups.placement = placement;
  groups.of.resize(orders.size());
  for (size_t s = 0; s < orders.size(); ++s) {
    const std::vector<Work> &order = orders[s];
    std::array<Group, kLanes> next; // the sends pending for the next point
    for (size_t i = 0; i <= order.size(); ++i) {
      bool point = i == order.size() || i == 0 ||
                   (i < exchange[s].size() && exchange[s][i]);
      Transfer t;
      if (point) {
        std::array<Group, kLanes> posted = std::move(next);
        next = {};
        for (size_t j = i; j < order.size(); ++j) {
          if (j > i && j < exchange[s].size() && exchange[s][j])
            break;
          if (groups.receives(order[j], t)) {
            Group &group = posted[groups.laneOf(t)];
            group.receives.push_back(t);
            group.receiveWork.push_back(int(j));
          }
        }
        for (int lane = 0; lane < kLanes; ++lane) {
          Group &group = posted[size_t(lane)];
          group.before = int(i);
          if (!group.sends.empty() || !group.receives.empty())
            groups.of[s][size_t(lane)].push_back(std::move(group));
        }
      }
      if (i < order.size() && groups.sends(order[i], t)) {
        Group &group = next[groups.laneOf(t)];
        group.sends.push_back(t);
        group.sendWork.push_back(int(i));
      }
    }
  }
  return groups;
}

} // namespace

std::vector<std::vector<bool>>
exchangeBeforeEachWork(const std::vector<std::vector<Work>> &orders) {
  std::vector<std::vector<bool>> points;
  for (const std::vector<Work> &order : orders)
    points.emplace_back(order.size(), true);
  return points;
}

std::string checkTransferGroups(const std::vector<std::vector<Work>> &orders,
                                const std::vector<std::vector<bool>> &exchange,
                                int chunks, Placement placement) {
  Groups all = buildGroups(orders, exchange, chunks, placement);
  int stages = all.stages;
  // Each lane's current group, and its transfers matched so far.
  std::vector<std::array<size_t, kLanes>> at(stages, std::array<size_t, kLanes>{});
  std::vector<std::array<std::set<std::pair<bool, Transfer>>, kLanes>> done(
      stages);
  auto current = [&](int s, int lane) -> const Group * {
    const std::vector<Group> &groups = all.of[s][size_t(lane)];
    return at[s][size_t(lane)] < groups.size()
               ? &groups[at[s][size_t(lane)]]
               : nullptr;
  };
  auto has = [](const std::vector<Transfer> &list, const Transfer &t) {
    return std::find(list.begin(), list.end(), t) != list.end();
  };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < stages; ++s)
      for (int lane = 0; lane < kLanes; ++lane) {
        const Group *group = current(s, lane);
        if (!group)
          continue;
        auto &matched = done[s][size_t(lane)];
        for (const Transfer &t : group->sends) {
          if (matched.count({true, t}))
            continue;
          int to = all.receiverOf(t);
          const Group *other = current(to, lane);
          if (other && has(other->receives, t)) {
            matched.insert({true, t});
            done[to][size_t(lane)].insert({false, t});
            progress = true;
          }
        }
        if (matched.size() == group->sends.size() + group->receives.size()) {
          ++at[s][size_t(lane)];
          matched.clear();
          progress = true;
        }
      }
  }
  std::string stuck;
  for (int s = 0; s < stages; ++s)
    for (int lane = 0; lane < kLanes; ++lane) {
      const Group *group = current(s, lane);
      if (!group)
        continue;
      const auto &matched = done[s][size_t(lane)];
      // The first transfer of the group not matched, sends first.
      std::string what;
      auto firstUnmatched = [&](bool send, const std::vector<Transfer> &list) {
        for (const Transfer &t : list)
          if (what.empty() && !matched.count({send, t}))
            what = (send ? "sending " : "receiving ") +
                   describe({t.gradient ? Phase::Backward : Phase::Forward,
                             t.fromChunk, t.microbatch}) +
                   "'s output";
      };
      firstUnmatched(true, group->sends);
      firstUnmatched(false, group->receives);
      size_t before = size_t(group->before);
      stuck += (stuck.empty() ? "" : "; ") + std::string("stage ") +
               std::to_string(s) + " waits " + what +
               (before < orders[s].size()
                    ? " before " + describe(orders[s][before])
                    : " after its last work");
    }
  return stuck;
}

SimResult simulateTransfers(const std::vector<std::vector<Work>> &orders,
                            const std::vector<std::vector<bool>> &exchange,
                            int chunks, int microbatches, const Costs &costs,
                            Placement placement) {
  // The data-dependency run checks the orders and finds plain deadlocks.
  SimResult result = simulate(orders, chunks, microbatches, costs, placement);
  if (!result.deadlock.empty())
    return result;
  if (std::string stuck =
          checkTransferGroups(orders, exchange, chunks, placement);
      !stuck.empty()) {
    result.deadlock = stuck;
    return result;
  }
  Groups all = buildGroups(orders, exchange, chunks, placement);
  int stages = all.stages;
  bool cut = holdsWeights(orders);
  constexpr double kUnknown = -1;
  /// A group: its lane and index in that lane.
  struct At {
    int lane = -1, group = -1;
  };
  struct LaneState {
    std::vector<double> start, end;
    size_t next = 0; // the next group to start
  };
  struct Stage {
    std::array<LaneState, kLanes> lanes;
    std::vector<double> workEnd;
    std::vector<At> receivedIn, sentIn; // each work's groups
    std::vector<int> lastRun;           // the same program's run before
    std::vector<int> freer; // the work its receive's slot waits for, or -1
    size_t nextWork = 0;
    double free = 0, busy = 0;
  };
  std::vector<Stage> state(stages);
  // Where each transfer's two sides are posted: (stage, group).
  std::map<std::pair<bool, Transfer>, std::pair<int, int>> postedAt;
  for (int s = 0; s < stages; ++s) {
    Stage &st = state[s];
    size_t works = orders[s].size();
    st.workEnd.assign(works, kUnknown);
    st.receivedIn.assign(works, At());
    st.sentIn.assign(works, At());
    st.lastRun.assign(works, -1);
    for (int lane = 0; lane < kLanes; ++lane) {
      const std::vector<Group> &groups = all.of[s][size_t(lane)];
      st.lanes[size_t(lane)].start.assign(groups.size(), kUnknown);
      st.lanes[size_t(lane)].end.assign(groups.size(), kUnknown);
      for (size_t g = 0; g < groups.size(); ++g) {
        const Group &group = groups[g];
        for (size_t k = 0; k < group.sends.size(); ++k) {
          postedAt[{true, group.sends[k]}] = {s, int(g)};
          st.sentIn[size_t(group.sendWork[k])] = {lane, int(g)};
        }
        for (size_t k = 0; k < group.receives.size(); ++k) {
          postedAt[{false, group.receives[k]}] = {s, int(g)};
          st.receivedIn[size_t(group.receiveWork[k])] = {lane, int(g)};
        }
      }
    }
    std::map<std::pair<int, Phase>, int> last;
    for (size_t i = 0; i < works; ++i) {
      auto [it, fresh] =
          last.try_emplace({orders[s][i].chunk, orders[s][i].phase}, int(i));
      if (!fresh)
        st.lastRun[i] = std::exchange(it->second, int(i));
    }
    // A receive lands in a stash slot: a forward's input in the chunk's
    // slot that a B frees (the models here keep a chunk's input until B;
    // one W read would wait for the W), a B's gradient (the backward cut
    // in two) in the one a W frees. Its section waits for the last such
    // work the stage issued before posting it (the plan's `freed` event,
    // recorded by each), whichever slot it takes.
    st.freer.assign(works, -1);
    last.clear();
    std::array<size_t, kLanes> next = {};
    for (size_t i = 0; i <= works; ++i) {
      for (int lane = 0; lane < kLanes; ++lane) {
        const std::vector<Group> &groups = all.of[s][size_t(lane)];
        for (; next[lane] < groups.size() &&
               groups[next[lane]].before == int(i);
             ++next[lane])
          for (int w : groups[next[lane]].receiveWork) {
            const Work &work = orders[s][size_t(w)];
            if (work.phase == Phase::Backward && !cut)
              continue;
            Phase freeing = work.phase == Phase::Forward ? Phase::Backward
                                                         : Phase::Weight;
            if (auto it = last.find({work.chunk, freeing}); it != last.end())
              st.freer[size_t(w)] = it->second;
          }
      }
      if (i < works)
        last[{orders[s][i].chunk, orders[s][i].phase}] = int(i);
    }
  }
  auto groupEnd = [&](int s, At at) {
    return state[size_t(s)].lanes[size_t(at.lane)].end[size_t(at.group)];
  };
  // End times of works, for a dependency within one stage (no transfer).
  std::map<std::pair<std::pair<int, int>, Phase>, double> ended;
  auto known = [](double t) { return t != kUnknown; };
  bool progress = true;
  while (progress) {
    progress = false;
    for (int s = 0; s < stages; ++s) {
      Stage &st = state[s];
      for (int lane = 0; lane < kLanes; ++lane) {
        const std::vector<Group> &groups = all.of[s][size_t(lane)];
        LaneState &ls = st.lanes[size_t(lane)];
        // Start the lane's next group once what it needs has ended.
        while (ls.next < groups.size()) {
          size_t g = ls.next;
          const Group &group = groups[g];
          double start = g > 0 ? ls.end[g - 1] : 0;
          bool ready = known(start);
          for (int w : group.sendWork)
            if (ready && (ready = known(st.workEnd[size_t(w)])))
              start = std::max(start, st.workEnd[size_t(w)]);
          for (int w : group.receiveWork)
            for (int before : {st.lastRun[size_t(w)], st.freer[size_t(w)]})
              if (ready && before >= 0 &&
                  (ready = known(st.workEnd[size_t(before)])))
                start = std::max(start, st.workEnd[size_t(before)]);
          if (!ready)
            break;
          ls.start[g] = start;
          ++ls.next;
          progress = true;
        }
        // End the last started group once every peer has posted its side.
        if (ls.next > 0 && !known(ls.end[ls.next - 1])) {
          size_t g = ls.next - 1;
          const Group &group = groups[g];
          double end = ls.start[g];
          bool ready = true;
          auto meet = [&](bool send, const Transfer &t) {
            auto [peer, at] = postedAt.at({!send, t});
            double other =
                state[size_t(peer)].lanes[size_t(lane)].start[size_t(at)];
            if (!known(other))
              ready = false;
            else
              end = std::max(end,
                             std::max(ls.start[g], other) + costs.transfer);
          };
          for (const Transfer &t : group.sends)
            meet(true, t);
          for (const Transfer &t : group.receives)
            meet(false, t);
          if (ready) {
            ls.end[g] = end;
            progress = true;
          }
        }
      }
      // Run works whose inputs have arrived and whose last sends left.
      while (st.nextWork < orders[s].size()) {
        size_t i = st.nextWork;
        const Work &w = orders[s][i];
        double start = st.free;
        bool ready = true;
        auto after = [&](double t) {
          if (ready && (ready = known(t)))
            start = std::max(start, t);
        };
        if (st.receivedIn[i].lane >= 0)
          after(groupEnd(s, st.receivedIn[i]));
        if (int before = st.lastRun[i];
            before >= 0 && st.sentIn[size_t(before)].lane >= 0)
          after(groupEnd(s, st.sentIn[size_t(before)]));
        // A dependency on a chunk of this stage: no transfer, its end.
        Transfer t;
        bool crossStage = all.receives(w, t);
        if (!crossStage && w.phase != Phase::Weight) {
          Work on = w;
          if (w.phase == Phase::Forward && w.chunk > 0)
            on.chunk = w.chunk - 1;
          else if (w.phase == Phase::Backward && w.chunk + 1 < chunks)
            on.chunk = w.chunk + 1;
          else if (w.phase == Phase::Backward)
            on.phase = Phase::Forward;
          if (!(on == w)) {
            auto it = ended.find({{on.chunk, on.microbatch}, on.phase});
            after(it == ended.end() ? kUnknown : it->second);
          }
        }
        if (!ready)
          break;
        double cost = workCost(costs, w, stages, chunks);
        st.workEnd[i] = start + cost;
        st.free = start + cost;
        st.busy += cost;
        ended[{{w.chunk, w.microbatch}, w.phase}] = start + cost;
        result.stages[size_t(s)][i] = {w, start, start + cost};
        ++st.nextWork;
        progress = true;
      }
    }
  }
  result.makespan = result.busy = result.idleWithin = 0;
  for (int s = 0; s < stages; ++s) {
    Stage &st = state[s];
    if (st.nextWork < orders[s].size()) {
      result.deadlock += (result.deadlock.empty() ? "" : "; ") +
                         std::string("stage ") + std::to_string(s) +
                         " waits before " + describe(orders[s][st.nextWork]);
      continue;
    }
    double last = st.free;
    for (const LaneState &ls : st.lanes)
      for (double end : ls.end)
        last = std::max(last, end);
    result.makespan = std::max(result.makespan, last);
    result.busy = std::max(result.busy, st.busy);
    if (!orders[s].empty())
      result.idleWithin =
          std::max(result.idleWithin,
                   st.free - result.stages[size_t(s)].front().start - st.busy);
  }
  return result;
}

} // namespace strata::sim
