//===- TimelineTest.cpp - the simulated cluster's clock -------------------===//
//
// Hand-built lanes with known answers: a wait holds its lane until the
// latest record before it; a collective starts when its last member
// arrives; an exchange ends when both sides of each transfer have started
// plus the transfer; a cycle of meetings is a deadlock, named; and every
// moment of a lane is attributed to compute, communication or waiting for
// other ranks, adding up to the iteration.
//
//===----------------------------------------------------------------------===//
#include "runtime/predict/Timeline.h"

#include <gtest/gtest.h>

using namespace strata::runtime::predict;

namespace {

Op work(double seconds, Work kind = Work::Compute) {
  Op op;
  op.work = kind;
  op.seconds = seconds;
  return op;
}

Op waitFor(OpRef record) {
  Op op;
  op.work = Work::Wait;
  op.waitsFor = record;
  return op;
}

double sum(const std::array<double, kUses> &uses) {
  double total = 0;
  for (double u : uses)
    total += u;
  return total;
}

TEST(Timeline, AWaitHoldsItsLaneUntilTheLatestRecordBeforeIt) {
  Timeline t;
  uint32_t compute = t.addLane(0, "compute"), comm = t.addLane(0, "comm");
  t.add(comm, work(2, Work::DataComm));
  OpRef early = t.add(comm, work(0, Work::Record));
  t.add(comm, work(3, Work::DataComm));
  OpRef late = t.add(comm, work(0, Work::Record));
  t.add(compute, work(1));
  OpRef first = t.add(compute, waitFor(early));
  OpRef second = t.add(compute, waitFor(late));
  OpRef after = t.add(compute, work(4));
  OpRef never = t.add(compute, waitFor(OpRef())); // no record: no wait
  ASSERT_EQ(t.solve(), "");
  EXPECT_EQ(t.start(first), 2);
  EXPECT_EQ(t.start(second), 5);
  EXPECT_EQ(t.start(after), 5);
  EXPECT_EQ(t.end(after), 9);
  EXPECT_EQ(t.start(never), 9);
  EXPECT_EQ(t.makespan(), 9);
  // 1 + 4 computing; the 4 between, waiting for the communication lane.
  auto uses = t.attribute(compute, 9);
  EXPECT_DOUBLE_EQ(uses[int(Use::Compute)], 5);
  EXPECT_DOUBLE_EQ(uses[int(Use::DataComm)], 4);
  EXPECT_DOUBLE_EQ(sum(uses), 9);
}

TEST(Timeline, ALaneAsleepInAWaitWakesLater) {
  Timeline t;
  t.setWakeSeconds(0.5);
  uint32_t compute = t.addLane(0, "compute"), comm = t.addLane(0, "comm");
  t.add(comm, work(2, Work::DataComm));
  OpRef record = t.add(comm, work(0, Work::Record));
  t.add(compute, work(1));
  // Got there at 1, the record at 2: asleep, it goes on at 2.5.
  OpRef asleep = t.add(compute, waitFor(record));
  t.add(compute, work(3));
  // The record long passed: no sleep, no wake-up.
  OpRef passed = t.add(compute, waitFor(record));
  ASSERT_EQ(t.solve(), "");
  EXPECT_EQ(t.start(asleep), 2.5);
  EXPECT_EQ(t.start(passed), 5.5);
}

TEST(Timeline, ACollectiveStartsWhenItsLastMemberArrives) {
  Timeline t;
  uint32_t a = t.addLane(0, "rank 0"), b = t.addLane(1, "rank 1");
  uint32_t meeting = t.addMeeting(1, 2);
  t.add(a, work(3));
  OpRef atA = t.joinMeeting(a, meeting, Work::TensorComm, 0);
  t.add(b, work(5));
  OpRef atB = t.joinMeeting(b, meeting, Work::TensorComm, 0);
  ASSERT_EQ(t.solve(), "");
  EXPECT_EQ(t.start(atA), 5);
  EXPECT_EQ(t.end(atA), 6);
  EXPECT_EQ(t.start(atB), 5);
  auto uses = t.attribute(a, 6);
  EXPECT_DOUBLE_EQ(uses[int(Use::Compute)], 3);
  EXPECT_DOUBLE_EQ(uses[int(Use::OtherRanks)], 2); // rank 1 was late
  EXPECT_DOUBLE_EQ(uses[int(Use::TensorComm)], 1);
}

TEST(Timeline, AnExchangeEndsWhenBothSidesStartedPlusTheTransfer) {
  Timeline t;
  uint32_t a = t.addLane(0, "rank 0 comm"), b = t.addLane(1, "rank 1 comm");
  t.add(a, work(1, Work::Memory));
  OpRef sendSide = t.addExchange(a, 0);
  t.add(b, work(4, Work::Memory));
  OpRef recvSide = t.addExchange(b, 0);
  t.addTransfer(t.exchangeOf(sendSide), t.exchangeOf(recvSide), 2);
  // A transfer whose peer is not simulated starts with its own side.
  OpRef alone = t.addExchange(a, 0);
  t.addTransfer(t.exchangeOf(alone), kNone, 0.5);
  ASSERT_EQ(t.solve(), "");
  EXPECT_EQ(t.start(sendSide), 1);
  EXPECT_EQ(t.end(sendSide), 6);
  EXPECT_EQ(t.end(recvSide), 6);
  EXPECT_EQ(t.start(alone), 6);
  EXPECT_EQ(t.end(alone), 6.5);
  auto uses = t.attribute(a, 6.5);
  EXPECT_DOUBLE_EQ(uses[int(Use::OtherRanks)], 3); // rank 1 from 1 to 4
  EXPECT_DOUBLE_EQ(uses[int(Use::PipelineComm)], 2.5);
}

TEST(Timeline, AWaitForAnotherLaneFollowsItsCauseBack) {
  // rank 0's compute waits for a receive that waited for rank 1's send,
  // which waited for rank 1's compute: the bubble, then the transfer.
  Timeline t;
  uint32_t compute0 = t.addLane(0, "rank 0 compute"),
           comm0 = t.addLane(0, "rank 0 comm"),
           compute1 = t.addLane(1, "rank 1 compute"),
           comm1 = t.addLane(1, "rank 1 comm");
  t.add(compute1, work(10));
  OpRef produced = t.add(compute1, work(0, Work::Record));
  t.add(comm1, waitFor(produced));
  OpRef send = t.addExchange(comm1, 0);
  OpRef receive = t.addExchange(comm0, 0);
  t.addTransfer(t.exchangeOf(send), t.exchangeOf(receive), 3);
  OpRef arrived = t.add(comm0, work(0, Work::Record));
  t.add(compute0, work(2));
  t.add(compute0, waitFor(arrived));
  t.add(compute0, work(1));
  ASSERT_EQ(t.solve(), "");
  EXPECT_EQ(t.makespan(), 14);
  auto uses = t.attribute(compute0, 14);
  EXPECT_DOUBLE_EQ(uses[int(Use::Compute)], 3);
  EXPECT_DOUBLE_EQ(uses[int(Use::OtherRanks)], 8);   // 2 to 10
  EXPECT_DOUBLE_EQ(uses[int(Use::PipelineComm)], 3); // 10 to 13
  EXPECT_DOUBLE_EQ(sum(uses), 14);
}

TEST(Timeline, AfterItsLastOpALaneWaitsForItsRanksOtherLanesThenOthers) {
  // Rank 0's compute ends at 2; its communication lane reduces until 5;
  // rank 1 computes until 7, the iteration's end.
  Timeline t;
  uint32_t compute = t.addLane(0, "rank 0 compute"),
           comm = t.addLane(0, "rank 0 comm"), other = t.addLane(1, "rank 1");
  t.add(compute, work(2));
  uint32_t meeting = t.addMeeting(5, 1);
  t.joinMeeting(comm, meeting, Work::DataComm, 0);
  t.add(other, work(7));
  ASSERT_EQ(t.solve(), "");
  auto uses = t.attribute(compute, t.makespan());
  EXPECT_DOUBLE_EQ(uses[int(Use::Compute)], 2);
  EXPECT_DOUBLE_EQ(uses[int(Use::DataComm)], 3); // 2 to 5, its own reduction
  EXPECT_DOUBLE_EQ(uses[int(Use::OtherRanks)], 2); // 5 to 7
}

TEST(Timeline, MeetingsInOppositeOrdersDeadlockAndSaySo) {
  Timeline t;
  uint32_t a = t.addLane(0, "rank 0 compute"), b = t.addLane(1, "rank 1 compute");
  uint32_t x = t.addMeeting(1, 2), y = t.addMeeting(1, 2);
  uint32_t first = t.label("all_reduce_sum over tp");
  t.joinMeeting(a, x, Work::TensorComm, first);
  t.joinMeeting(a, y, Work::TensorComm, first);
  t.joinMeeting(b, y, Work::TensorComm, first);
  t.joinMeeting(b, x, Work::TensorComm, first);
  std::string error = t.solve();
  EXPECT_NE(error.find("the plan deadlocks"), std::string::npos) << error;
  EXPECT_NE(error.find("rank 0 compute at all_reduce_sum over tp"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("rank 1 compute"), std::string::npos) << error;
}

} // namespace
