//===- ModelledNetwork.h - a rank's communication as a cost model -*- C++ -*-===//
//
// The Collectives of `strata-run --backend sim`. A collective becomes a
// meeting of the simulated ranks of its group (matched by group, its
// instance's first member and how many collectives that instance has had
// on this rank: ranks issue a group's collectives in one order), costed
// by the CostModel over the levels its members span. An exchange group
// becomes one operation; each of its sends is paired with the peer's
// receive of the same tag (and count of such), costed by the level
// between the two. Members and peers that are not simulated are taken to
// arrive when this rank does: they stand for ranks whose programs are
// this one's. Their links may differ (a data group of one tensor position
// within a node, another's across), so each collective is costed over the
// slowest instance of its group, each transfer over the slowest pair of
// its two stages.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PREDICT_MODELLEDNETWORK_H
#define STRATA_RUNTIME_PREDICT_MODELLEDNETWORK_H

#include "runtime/comm/Collectives.h"
#include "runtime/predict/ModelledDevice.h"

#include <map>
#include <set>
#include <tuple>

namespace strata::runtime::predict {

/// What the simulated ranks' networks share: the meetings and transfers
/// issued so far, to be matched by the ranks issued after.
class Rendezvous {
public:
  Rendezvous(Timeline &timeline, const CostModel &costs,
             std::set<int> simulated)
      : timeline(timeline), costs(costs), simulated(std::move(simulated)) {}

  bool simulates(int rank) const { return simulated.count(rank) != 0; }
  /// "" or a transfer that one simulated rank posted and its simulated
  /// peer never did (once every rank has issued its iteration).
  std::string unmatched() const;

private:
  friend class ModelledNetwork;
  Timeline &timeline;
  const CostModel &costs;
  std::set<int> simulated;
  // (group, first member, n-th collective of that instance) -> meeting.
  std::map<std::tuple<uint32_t, int, uint64_t>, uint32_t> meetings;
  // (from, to, tag, n-th with that tag) -> the transfer and whether its
  // sender posted it (else its receiver), until both sides post.
  std::map<std::tuple<int, int, int, uint64_t>, std::pair<uint32_t, bool>>
      open;
  // The members whose links a group's collectives, and the ranks whose
  // link a transfer between two stages, are costed over: of all the
  // instances the simulated ranks stand for, the slowest (computed once).
  std::map<uint32_t, std::vector<int>> slowestMembers;
  std::map<std::pair<uint32_t, uint32_t>, std::pair<int, int>> slowestPair;
};

class ModelledNetwork : public Collectives {
public:
  ModelledNetwork(Rendezvous &shared, ModelledDevice &device)
      : shared(shared), device(device) {}

  std::string createGroups(const Plan &plan, uint32_t rank) override;
  void collective(Stream stream, const CollectiveOp &op, Operand in,
                  Operand out, const std::string &where) override;
  void exchange(Stream stream, std::vector<Transfer> sends,
                std::vector<Transfer> receives) override;
  void hostAllReduce(const std::vector<int> &, float *, size_t,
                     const std::string &) override {}
  void flush() override {}
  std::map<std::string, uint64_t> bytesByKind() const override {
    return sent;
  }

private:
  /// The members a collective of `group` is costed over, and the two ranks
  /// a transfer between `from`'s and `to`'s stages is.
  const std::vector<int> &costedMembers(uint32_t group);
  std::pair<int, int> costedPair(int from, int to);

  Rendezvous &shared;
  ModelledDevice &device;
  const Plan *plan = nullptr;
  int me = 0;
  std::map<std::pair<uint32_t, int>, uint64_t> collectivesSoFar;
  std::map<std::tuple<int, int, int>, uint64_t> transfersSoFar;
  std::map<std::string, uint64_t> sent;
};

} // namespace strata::runtime::predict

#endif
