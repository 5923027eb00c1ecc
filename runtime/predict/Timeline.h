//===- Timeline.h - when each modelled instruction runs ---------*- C++ -*-===//
//
// The simulated cluster's clock. While the real executor issues a plan's
// instructions, each rank's streams (lanes here) collect operations
// with their modelled cost; nothing is timed then, because a collective
// or a transfer ends only when its peers, on other ranks, have got there.
// solve() then gives every operation its start and end as a GPU's streams
// would run them: in order on a lane; a wait not before the latest record
// of its event issued before it (CUDA's rule), and if that record ends
// after the lane got there, the lane's wake-up time after it (a CPU
// stream's thread asleep in its wait; 0 for a GPU); a collective when the last
// of its members arrives; an exchange group (a step's sends and receives,
// as Megatron's batched isend/irecv) when each transfer's two sides have
// both started, plus the transfer. A lane that can never go on is a
// deadlock, reported with what each stuck lane waits for.
//
// attribute() then says, for each moment of a lane, what it was doing or
// waiting for, following each wait back to what it waited on: compute,
// tensor-, data-, context- or pipeline-parallel communication, or other
// ranks (the pipeline bubble).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PREDICT_TIMELINE_H
#define STRATA_RUNTIME_PREDICT_TIMELINE_H

#include <array>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace strata::runtime::predict {

/// What an operation is, for the solver and for the breakdown.
enum class Work : uint8_t {
  Compute,      // a gemm or a kernel
  Memory,       // a fill or a copy
  TensorComm,   // a collective over tensor-parallel ranks
  DataComm,     // a collective that reduces or gathers gradients, parameters
  ContextComm,  // a collective over context-parallel ranks: keys, values
  PipelineComm, // an exchange group of pipeline transfers
  Record,       // an event recorded
  Wait,         // a wait for an event
};
inline constexpr int kWorks = 8;

/// Where the time of a lane went (attribute()).
enum class Use : uint8_t {
  Compute,
  TensorComm,
  DataComm,
  ContextComm,
  PipelineComm,
  OtherRanks, // waiting for another rank to get somewhere: the bubble
};
inline constexpr int kUses = 6;
const char *useName(Use use);

inline constexpr uint32_t kNone = 0xFFFFFFFF;

struct OpRef {
  uint32_t lane = kNone, index = kNone;
  bool valid() const { return lane != kNone; }
};

struct Op {
  Work work = Work::Compute;
  double seconds = 0; // a collective's is its meeting's
  uint32_t label = 0; // into Timeline::labels()
  // A wait: the record it waits for (none: no record before it).
  // A collective: its meeting. An exchange: its exchange.
  OpRef waitsFor;
  uint32_t link = kNone;
  bool optimizer = false; // issued by the optimizer's step
};

/// A run of a lane's ops that one schedule step issued, for a trace.
struct StepSpan {
  uint32_t lane = 0, label = 0, begin = 0, end = 0; // ops [begin, end)
  int32_t chunk = -1; // a chunk's forward, B or W: its chunk, and
  uint8_t phase = 0;  // its sim::Phase
};

class Timeline {
public:
  /// A new lane (a rank's stream); `rank` is the world rank it belongs to.
  uint32_t addLane(int rank, std::string name);
  uint32_t lanes() const { return uint32_t(lanesState.size()); }
  /// How long a lane that waits for a record on another lane takes to go
  /// on after it (the spec's stream_wake_s).
  void setWakeSeconds(double seconds) { wakeSeconds = seconds; }
  int rankOf(uint32_t lane) const { return lanesState[lane].rank; }
  const std::string &laneName(uint32_t lane) const {
    return lanesState[lane].name;
  }

  /// A label's number (kept once for all the ops that share it).
  uint32_t label(const std::string &text);
  const std::vector<std::string> &labels() const { return labelText; }
  /// An op's label, or "an unnamed operation".
  const std::string &labelOf(const Op &op) const;

  /// An op of its own (a communication op added here, with no meeting or
  /// exchange, simply takes its seconds).
  OpRef add(uint32_t lane, const Op &op);
  const Op &op(OpRef at) const { return lanesState[at.lane].ops[at.index]; }
  uint32_t size(uint32_t lane) const {
    return uint32_t(lanesState[lane].ops.size());
  }

  /// A collective's meeting: `members` ops (one per simulated rank that
  /// takes part) each join it with joinMeeting; it lasts `seconds`.
  uint32_t addMeeting(double seconds, uint32_t members);
  OpRef joinMeeting(uint32_t lane, uint32_t meeting, Work work,
                    uint32_t label);

  /// An exchange group on `lane`; its transfers are added with
  /// addTransfer, each side by the exchange it belongs to.
  OpRef addExchange(uint32_t lane, uint32_t label);
  /// A transfer of `seconds` between the exchanges `one` and `other`
  /// (other == kNone: the peer is not simulated; it is taken to start
  /// when `one` does, as the symmetric rank it stands for would).
  uint32_t addTransfer(uint32_t one, uint32_t other, double seconds);
  /// The exchange op `at` is.
  uint32_t exchangeOf(OpRef at) const { return op(at).link; }
  /// A transfer's other side, to be filled once its exchange is issued.
  void setTransferSide(uint32_t transfer, uint32_t exchange);

  void addStep(const StepSpan &step) { stepSpans.push_back(step); }
  /// The transfers' mean seconds (0 without any).
  double meanTransferSeconds() const;
  const std::vector<StepSpan> &steps() const { return stepSpans; }

  /// Every op's start and end; "" or the deadlock.
  std::string solve();
  double start(OpRef at) const { return times[at.lane][at.index][0]; }
  double end(OpRef at) const { return times[at.lane][at.index][1]; }
  /// When the last op of any lane ends.
  double makespan() const;

  /// Seconds of each Use on `lane` from 0 to `until`, every gap followed
  /// back to its cause.
  std::array<double, kUses> attribute(uint32_t lane, double until) const;

private:
  struct Lane {
    int rank = 0;
    std::string name;
    std::vector<Op> ops;
  };
  struct Meeting {
    double seconds = 0;
    uint32_t expected = 0, arrived = 0;
    std::vector<OpRef> members;
    std::vector<double> arrivals;
    bool done = false;
  };
  struct Exchange {
    OpRef at;
    std::vector<uint32_t> transfers;
    bool started = false;
  };
  struct Transfer {
    uint32_t side[2] = {kNone, kNone};
    double seconds = 0;
  };

  // The solver's state.
  bool tryAdvance(uint32_t lane, std::vector<uint32_t> &wake);
  bool finishExchange(uint32_t exchange);
  /// When the other side of transfer `t` (seen from exchange `from`)
  /// started, or -1 if not yet.
  double otherStart(uint32_t t, uint32_t from) const;
  std::string describeStuck() const;
  /// Adds [lo, hi) before `at`'s cause to `uses`, following waits back.
  void blame(OpRef at, double lo, double hi,
             std::array<double, kUses> &uses) const;
  /// Adds the part of `at`'s own span within [lo, hi) to `uses`; returns
  /// where what came before it must be explained up to: min(hi, start).
  double attributeSpan(OpRef at, double lo, double hi,
                       std::array<double, kUses> &uses) const;

  double wakeSeconds = 0;
  std::vector<Lane> lanesState;
  std::vector<std::string> labelText;
  std::unordered_map<std::string, uint32_t> labelIndex;
  std::vector<StepSpan> stepSpans;
  std::vector<Meeting> meetings;
  std::vector<Exchange> exchanges;
  std::vector<Transfer> transfers;
  std::vector<std::vector<std::array<double, 2>>> times;
  std::vector<uint32_t> cursor;
  std::vector<double> laneFree;
  std::vector<bool> joined; // the op at the lane's cursor met or started
  std::string overfull;     // a lane that joined a full meeting
  std::vector<std::vector<uint32_t>> waiters; // lanes to wake, by lane
};

} // namespace strata::runtime::predict

#endif
