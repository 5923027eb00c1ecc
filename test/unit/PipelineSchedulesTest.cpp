//===- PipelineSchedulesTest.cpp - schedule orders, in flight, bubbles ----===//
//
// Pins each stage's order for gpipe, 1F1B and interleaved 1F1B against
// Megatron-LM's rules (worked out by hand here, F<mb>.<chunk>), the
// microbatches each stage holds in flight, and the bubble the simulator
// measures with unit costs (forward 1, backward 2, transfers free): the
// paper's (p-1)/m, and (p-1)/(v*m) interleaved. The zero-bubble schedules
// against the paper's unit-cost figures (F = B = W = 1), and the list
// scheduler that builds ZB-H2.
//
//===----------------------------------------------------------------------===//
#include "compiler/PipelineSchedules.h"
#include "compiler/ListSchedule.h"
#include "compiler/StashSlots.h"
#include "compiler/ZeroBubbleAuto.h"
#include "runtime/schedule/PipelineSim.h"
#include "runtime/schedule/TransferGroups.h"

#include <gtest/gtest.h>

#include <limits>
#include <sstream>

using namespace strata;
using pipeline::ScheduleKind;

namespace {

std::string text(const std::vector<sim::Work> &order) {
  std::ostringstream out;
  for (size_t i = 0; i < order.size(); ++i)
    out << (i ? " " : "") << sim::describe(order[i]);
  return out.str();
}

std::string order(ScheduleKind kind, int p, int v, int m, int stage) {
  return text(pipeline::stageOrder(kind, p, v, m, stage));
}

TEST(PipelineSchedules, GPipeRunsAllForwardsThenAllBackwards) {
  EXPECT_EQ(order(ScheduleKind::GPipe, 2, 1, 3, 0),
            "F0.0 F1.0 F2.0 B0.0 B1.0 B2.0");
  EXPECT_EQ(order(ScheduleKind::GPipe, 2, 1, 3, 1),
            "F0.1 F1.1 F2.1 B0.1 B1.1 B2.1");
  // With two chunks per stage: chunk by chunk, backwards in reverse.
  EXPECT_EQ(order(ScheduleKind::GPipe, 2, 2, 2, 0),
            "F0.0 F1.0 F0.2 F1.2 B0.2 B1.2 B0.0 B1.0");
}

TEST(PipelineSchedules, OneFOneBWarmsUpByStagesAfter) {
  // p = 4, m = 8: stage r runs p - r - 1 forwards, then alternates.
  EXPECT_EQ(order(ScheduleKind::OneFOneB, 4, 1, 8, 0),
            "F0.0 F1.0 F2.0 F3.0 B0.0 F4.0 B1.0 F5.0 B2.0 F6.0 B3.0 F7.0 "
            "B4.0 B5.0 B6.0 B7.0");
  EXPECT_EQ(order(ScheduleKind::OneFOneB, 4, 1, 8, 2),
            "F0.2 F1.2 B0.2 F2.2 B1.2 F3.2 B2.2 F4.2 B3.2 F5.2 B4.2 F6.2 "
            "B5.2 F7.2 B6.2 B7.2");
  EXPECT_EQ(order(ScheduleKind::OneFOneB, 4, 1, 8, 3),
            "F0.3 B0.3 F1.3 B1.3 F2.3 B2.3 F3.3 B3.3 F4.3 B4.3 F5.3 B5.3 "
            "F6.3 B6.3 F7.3 B7.3");
  // Fewer microbatches than stages: warm-up is all of them.
  EXPECT_EQ(order(ScheduleKind::OneFOneB, 4, 1, 2, 0), "F0.0 F1.0 B0.0 B1.0");
}

TEST(PipelineSchedules, InterleavedTwoStagesTwoChunks) {
  // p = 2, v = 2, m = 4: chunks 0 and 2 on stage 0, 1 and 3 on stage 1;
  // microbatches go through each chunk in groups of p. Stage 0 warms up
  // with 2(p-1) + (v-1)p = 4 forwards, stage 1 with 2.
  EXPECT_EQ(order(ScheduleKind::Interleaved, 2, 2, 4, 0),
            "F0.0 F1.0 F0.2 F1.2 F2.0 B0.2 F3.0 B1.2 F2.2 B0.0 F3.2 B1.0 "
            "B2.2 B3.2 B2.0 B3.0");
  EXPECT_EQ(order(ScheduleKind::Interleaved, 2, 2, 4, 1),
            "F0.1 F1.1 F0.3 B0.3 F1.3 B1.3 F2.1 B0.1 F3.1 B1.1 F2.3 B2.3 "
            "F3.3 B3.3 B2.1 B3.1");
}

TEST(PipelineSchedules, InterleavedFourStagesTwoChunksAsThePaperDraws) {
  // p = 4, v = 2, m = 8 (the paper's Figure 4): stage 0 holds chunks 0
  // and 4 and warms up with 2*3 + 4 = 10 forwards.
  EXPECT_EQ(order(ScheduleKind::Interleaved, 4, 2, 8, 0),
            "F0.0 F1.0 F2.0 F3.0 F0.4 F1.4 F2.4 F3.4 F4.0 F5.0 "
            "F6.0 B0.4 F7.0 B1.4 F4.4 B2.4 F5.4 B3.4 F6.4 B0.0 F7.4 B1.0 "
            "B2.0 B3.0 B4.4 B5.4 B6.4 B7.4 B4.0 B5.0 B6.0 B7.0");
  // The last stage holds chunks 3 and 7 and warms up with (v-1)p = 4.
  EXPECT_EQ(order(ScheduleKind::Interleaved, 4, 2, 8, 3),
            "F0.3 F1.3 F2.3 F3.3 "
            "F0.7 B0.7 F1.7 B1.7 F2.7 B2.7 F3.7 B3.7 F4.3 B0.3 F5.3 B1.3 "
            "F6.3 B2.3 F7.3 B3.3 F4.7 B4.7 F5.7 B5.7 F6.7 B6.7 F7.7 B7.7 "
            "B4.3 B5.3 B6.3 B7.3");
}

TEST(PipelineSchedules, InterleavedWithAsManyMicrobatchesAsStagesWarmsUpFully) {
  // Megatron runs all forwards first when m == p.
  EXPECT_EQ(pipeline::warmupCount(ScheduleKind::Interleaved, 4, 2, 4, 3), 8);
  EXPECT_EQ(order(ScheduleKind::Interleaved, 2, 2, 2, 1),
            "F0.1 F1.1 F0.3 F1.3 B0.3 B1.3 B0.1 B1.1");
}

TEST(PipelineSchedules, InFlightMicrobatches) {
  // 1F1B: p - rank, the schedule's point (GPipe holds all m).
  for (int p : {2, 4, 8})
    for (int r = 0; r < p; ++r) {
      EXPECT_EQ(sim::inFlight(pipeline::stageOrder(ScheduleKind::OneFOneB, p, 1,
                                                   2 * p, r)),
                p - r)
          << "p=" << p << " stage " << r;
      EXPECT_EQ(sim::inFlight(
                    pipeline::stageOrder(ScheduleKind::GPipe, p, 1, 2 * p, r)),
                2 * p);
    }
  // Interleaved: Megatron's warm-up plus the one in its steady state,
  // 2(p - r - 1) + (v - 1)p + 1 (chunk-microbatches), when m > p.
  for (int p : {2, 4})
    for (int v : {2, 3})
      for (int r = 0; r < p; ++r)
        EXPECT_EQ(sim::inFlight(pipeline::stageOrder(ScheduleKind::Interleaved,
                                                     p, v, 2 * p, r)),
                  2 * (p - r - 1) + (v - 1) * p + 1)
            << "p=" << p << " v=" << v << " stage " << r;
}

double bubble(ScheduleKind kind, int p, int v, int m) {
  sim::SimResult run = sim::simulate(pipeline::scheduleOrders(kind, p, v, m),
                                     p * v, m, sim::Costs());
  EXPECT_EQ(run.deadlock, "");
  return run.bubbleFraction();
}

TEST(PipelineSchedules, BubbleIsTheStagesAfterOverMicrobatches) {
  for (int p : {2, 4, 8})
    for (int m : {p, 2 * p, 4 * p}) {
      double expected = double(p - 1) / m;
      EXPECT_DOUBLE_EQ(bubble(ScheduleKind::GPipe, p, 1, m), expected)
          << "gpipe p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(bubble(ScheduleKind::OneFOneB, p, 1, m), expected)
          << "1f1b p=" << p << " m=" << m;
    }
}

TEST(PipelineSchedules, InterleavingDividesTheBubbleByChunks) {
  for (int p : {2, 4, 8})
    for (int v : {2, 4})
      for (int m : {2 * p, 4 * p}) {
        EXPECT_DOUBLE_EQ(bubble(ScheduleKind::Interleaved, p, v, m),
                         double(p - 1) / (v * m))
            << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(PipelineSchedules, EveryScheduleRunsWithoutDeadlock) {
  for (int p : {1, 2, 3, 4, 8})
    for (int v : {1, 2, 3})
      for (int m : {1, 2, 3, 4, 8, 16})
        for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                  ScheduleKind::Interleaved}) {
          if (!pipeline::checkSchedule(kind, p, v, m).empty())
            continue;
          sim::SimResult run = sim::simulate(
              pipeline::scheduleOrders(kind, p, v, m), p * v, m, sim::Costs());
          EXPECT_EQ(run.deadlock, "") << pipeline::scheduleName(kind)
                                      << " p=" << p << " v=" << v << " m=" << m;
        }
}

/// A stage's exchange points, as stageOrder gives them with its order.
std::vector<bool> exchangePoints(ScheduleKind kind, int p, int v, int m,
                                 int stage) {
  std::vector<bool> points;
  pipeline::stageOrder(kind, p, v, m, stage, &points);
  return points;
}

std::vector<std::vector<bool>> exchangePoints(ScheduleKind kind, int p, int v,
                                              int m) {
  std::vector<std::vector<bool>> points;
  pipeline::scheduleOrders(kind, p, v, m, &points);
  return points;
}

TEST(PipelineSchedules, ExchangePointsAreMegatrons) {
  // 1F1B: one before every work (send_forward_recv_backward between a
  // forward and its backward, send_backward_recv_forward after).
  EXPECT_EQ(exchangePoints(ScheduleKind::OneFOneB, 4, 1, 8, 0),
            std::vector<bool>(16, true));
  // Interleaved, p=2, v=2, m=4, stage 0: four warm-up forwards each
  // alone, the steady state's forward-backward pairs sharing one (the
  // batched four-way exchange), the cool-down backwards each alone.
  std::vector<bool> points =
      exchangePoints(ScheduleKind::Interleaved, 2, 2, 4, 0);
  std::vector<bool> expected = {true, true, true, true};
  for (int k = 0; k < 4; ++k)
    expected.insert(expected.end(), {true, false});
  expected.insert(expected.end(), {true, true, true, true});
  EXPECT_EQ(points, expected);
  // GPipe: one before every work.
  EXPECT_EQ(exchangePoints(ScheduleKind::GPipe, 2, 1, 3, 1),
            std::vector<bool>(6, true));
}

TEST(PipelineSchedules, TransfersCannotDeadlockWhereSendsWaitToBeReceived) {
  // Every 1F1B and interleaved schedule (and GPipe with one chunk a stage),
  // its transfers posted in Megatron's groups on the transfer streams, runs
  // to the end with sends that wait for their receive: matched per stream,
  // and on one clock with the works and stash slots the groups wait for.
  int checked = 0;
  for (int p : {1, 2, 3, 4, 8})
    for (int v : {1, 2, 3, 4})
      for (int m : {1, 2, 3, 4, 8, 16, 32})
        for (ScheduleKind kind :
             {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
              ScheduleKind::Interleaved}) {
          if (!pipeline::checkSchedule(kind, p, v, m).empty() ||
              (kind == ScheduleKind::GPipe && v > 1))
            continue;
          auto orders = pipeline::scheduleOrders(kind, p, v, m);
          auto points = exchangePoints(kind, p, v, m);
          EXPECT_EQ(sim::checkTransferGroups(orders, points, p * v), "")
              << pipeline::scheduleName(kind) << " p=" << p << " v=" << v
              << " m=" << m;
          EXPECT_EQ(sim::simulateTransfers(orders, points, p * v, m,
                                           sim::unitCosts(orders))
                        .deadlock,
                    "")
              << pipeline::scheduleName(kind) << " p=" << p << " v=" << v
              << " m=" << m;
          ++checked;
        }
  EXPECT_GT(checked, 100);
}

/// Stage 1 takes microbatch 1's forward before microbatch 0's, which stage
/// 0 sends first.
std::vector<std::vector<sim::Work>> takenOutOfOrder() {
  using sim::Phase;
  return {{{Phase::Forward, 0, 0},
           {Phase::Forward, 0, 1},
           {Phase::Backward, 0, 1},
           {Phase::Backward, 0, 0}},
          {{Phase::Forward, 1, 1},
           {Phase::Forward, 1, 0},
           {Phase::Backward, 1, 1},
           {Phase::Backward, 1, 0}}};
}

TEST(PipelineSchedules, BlockingSendsDeadlockWhereCopiedOnesDoNot) {
  // With sends that are copied and posted the order runs (the
  // data-dependency simulation); with sends that wait for their receive,
  // one after another on a transfer stream, it cannot: stage 0's first
  // send waits for a receive stage 1 posts only after the one it waits for
  // in vain. The check says where each stops.
  auto orders = takenOutOfOrder();
  EXPECT_EQ(sim::simulate(orders, 2, 2, sim::Costs()).deadlock, "");
  std::string stuck = sim::checkTransferGroups(
      orders, sim::exchangeBeforeEachWork(orders), 2);
  EXPECT_EQ(stuck, "stage 0 waits sending F0.0's output before F1.0; "
                   "stage 1 waits receiving F1.0's output before F1.1");
  // GPipe with two chunks a stage holds chunk 1's outputs back until chunk
  // 2's turn; with 4 microbatches its groups hung when the transfers both
  // ways shared one stream, and run now that each way has its own. With 8
  // the groups still match stream by stream, but on the clock stage 1's
  // third forward waits to overwrite the output its first has not handed
  // over, which stage 0 takes only in its second chunk: only the clock
  // (simulateTransfers) sees that hang.
  EXPECT_EQ(sim::checkTransferGroups(
                pipeline::scheduleOrders(ScheduleKind::GPipe, 2, 2, 4),
                exchangePoints(ScheduleKind::GPipe, 2, 2, 4), 4),
            "");
  auto gpipe = pipeline::scheduleOrders(ScheduleKind::GPipe, 2, 2, 8);
  auto gpipePoints = exchangePoints(ScheduleKind::GPipe, 2, 2, 8);
  EXPECT_EQ(sim::checkTransferGroups(gpipe, gpipePoints, 4), "");
  EXPECT_EQ(sim::simulateTransfers(gpipe, gpipePoints, 4, 8,
                                   sim::unitCosts(gpipe))
                .deadlock,
            "stage 0 waits before F4.0; stage 1 waits before F2.1");
}

TEST(PipelineSchedules, TheSimulatorFindsADeadlock) {
  // Stage 0 waits in B0.0 for B0.1; stage 1 waits in F1.1 for F1.0, which
  // stage 0 runs only after B0.0.
  std::vector<std::vector<sim::Work>> orders = {{{sim::Phase::Forward, 0, 0},
                                                 {sim::Phase::Backward, 0, 0},
                                                 {sim::Phase::Forward, 0, 1},
                                                 {sim::Phase::Backward, 0, 1}},
                                                {{sim::Phase::Forward, 1, 0},
                                                 {sim::Phase::Forward, 1, 1},
                                                 {sim::Phase::Backward, 1, 0},
                                                 {sim::Phase::Backward, 1, 1}}};
  sim::SimResult run = sim::simulate(orders, 2, 2, sim::Costs());
  EXPECT_EQ(run.deadlock,
            "stage 0 waits in B0.0 for B0.1, which never runs first; stage 1 "
            "waits in F1.1 for F1.0, which never runs first");
}

TEST(PipelineSchedules, TheSimulatorChecksEveryWorkRunsOnceOnItsStage) {
  std::vector<std::vector<sim::Work>> orders = {{{sim::Phase::Forward, 1, 0}},
                                                {}};
  EXPECT_EQ(sim::simulate(orders, 2, 1, sim::Costs()).deadlock,
            "stage 0 runs F0.1, but chunk 1 lives on stage 1");
  orders = {{{sim::Phase::Forward, 0, 0}, {sim::Phase::Backward, 0, 0}}};
  EXPECT_EQ(sim::simulate(orders, 1, 2, sim::Costs()).deadlock,
            "no stage runs F1.0");
}

/// An order from "F0.0 B0.0 W0.0 ..." (microbatch.chunk, as describe()).
std::vector<sim::Work> parseOrder(const std::string &text) {
  std::vector<sim::Work> order;
  std::istringstream words(text);
  std::string word;
  while (words >> word) {
    sim::Work w;
    w.phase = word[0] == 'F'   ? sim::Phase::Forward
              : word[0] == 'B' ? sim::Phase::Backward
                               : sim::Phase::Weight;
    size_t dot = word.find('.');
    w.microbatch = std::stoi(word.substr(1, dot - 1));
    w.chunk = std::stoi(word.substr(dot + 1));
    order.push_back(w);
  }
  return order;
}

TEST(PipelineSchedules, TheSimulatorRunsWeightGradientsWhereNothingWaits) {
  // The backward cut in two, F = B = W = 1, two stages, two microbatches.
  // Stage 0's B's wait for stage 1's; its W0.0 runs in the hole before
  // B1.0, which waits for B1.1 until 5.
  std::vector<std::vector<sim::Work>> orders = {
      parseOrder("F0.0 F1.0 B0.0 W0.0 B1.0 W1.0"),
      parseOrder("F0.1 B0.1 F1.1 B1.1 W0.1 W1.1")};
  sim::Costs costs;
  costs.backward = 1;
  costs.weight = 1;
  sim::SimResult run = sim::simulate(orders, 2, 2, costs);
  ASSERT_EQ(run.deadlock, "");
  auto span = [&](int s, int i) {
    return std::pair{run.stages[s][i].start, run.stages[s][i].end};
  };
  EXPECT_EQ(span(1, 1), (std::pair{2.0, 3.0})); // B0.1 after F0.1
  EXPECT_EQ(span(0, 2), (std::pair{3.0, 4.0})); // B0.0 after B0.1
  EXPECT_EQ(span(0, 3), (std::pair{4.0, 5.0})); // W0.0 in the hole
  EXPECT_EQ(span(0, 4), (std::pair{5.0, 6.0})); // B1.0 after B1.1
  EXPECT_EQ(run.makespan, 7);
  EXPECT_EQ(run.busy, 6);
  // A W neither sends nor receives: posting at every work cannot hang.
  std::vector<std::vector<bool>> everywhere = {std::vector<bool>(6, true),
                                               std::vector<bool>(6, true)};
  EXPECT_EQ(sim::checkTransferGroups(orders, everywhere, 2), "");
  // A microbatch is held until its W.
  EXPECT_EQ(sim::inFlight(orders[0]), 2);
  EXPECT_EQ(sim::inFlight(parseOrder("F0.0 B0.0 W0.0 F1.0 B1.0 W1.0")), 1);
  EXPECT_EQ(sim::inFlight(parseOrder("F0.0 B0.0 F1.0 W0.0 B1.0 W1.0")), 2);
}

TEST(PipelineSchedules, EveryBackwardCutInTwoHasItsWeightGradient) {
  sim::Costs costs;
  EXPECT_EQ(sim::simulate({parseOrder("F0.0 B0.0 W0.0 F1.0 B1.0")}, 1, 2, costs)
                .deadlock,
            "no stage runs W1.0 (the backward is cut in two: every B has its "
            "W)");
  EXPECT_EQ(sim::simulate({parseOrder("F0.0 W0.0 B0.0")}, 1, 1, costs).deadlock,
            "stage 0 runs W0.0 before its backward");
  EXPECT_EQ(
      sim::simulate({parseOrder("F0.0 B0.0 W0.0 W0.0")}, 1, 1, costs).deadlock,
      "stage 0 runs W0.0 twice");
}

/// Every stage's order under `kind` at p stages and m microbatches.
std::vector<std::vector<sim::Work>> orders(ScheduleKind kind, int p, int m) {
  return pipeline::scheduleOrders(kind, p, 1, m);
}

/// F = B = W = 1 (the paper's unit costs; a whole backward costs 2).
sim::Costs unitCosts(ScheduleKind kind) {
  sim::Costs costs;
  costs.backward = sim::cutsBackward(kind) ? 1 : 2;
  costs.weight = 1;
  return costs;
}

sim::SimResult unitRun(ScheduleKind kind, int p, int m) {
  return sim::simulate(orders(kind, p, m), p, m, unitCosts(kind));
}

int mostInFlight(ScheduleKind kind, int p, int m) {
  int most = 0;
  for (const auto &order : orders(kind, p, m))
    most = std::max(most, sim::inFlight(order));
  return most;
}

TEST(ZeroBubbleSchedules, H1HoldsEachStagesFirstWeightGradientsBack) {
  // p = 4, m = 8: 1F1B's warm-up; stage r runs its first r B's without
  // their W's, which it runs in the cool-down.
  EXPECT_EQ(order(ScheduleKind::ZeroBubbleH1, 4, 1, 8, 0),
            "F0.0 F1.0 F2.0 F3.0 B0.0 W0.0 F4.0 B1.0 W1.0 F5.0 B2.0 W2.0 "
            "F6.0 B3.0 W3.0 F7.0 B4.0 W4.0 B5.0 W5.0 B6.0 W6.0 B7.0 W7.0");
  EXPECT_EQ(order(ScheduleKind::ZeroBubbleH1, 4, 1, 8, 2),
            "F0.2 F1.2 B0.2 F2.2 B1.2 F3.2 B2.2 W0.2 F4.2 B3.2 W1.2 F5.2 "
            "B4.2 W2.2 F6.2 B5.2 W3.2 F7.2 B6.2 W4.2 B7.2 W5.2 W6.2 W7.2");
  EXPECT_EQ(order(ScheduleKind::ZeroBubbleH1, 4, 1, 8, 3),
            "F0.3 B0.3 F1.3 B1.3 F2.3 B2.3 F3.3 B3.3 W0.3 F4.3 B4.3 W1.3 "
            "F5.3 B5.3 W2.3 F6.3 B6.3 W3.3 F7.3 B7.3 W4.3 W5.3 W6.3 W7.3");
}

TEST(ZeroBubbleSchedules, H1HasAThirdOfOneFOneBsBubbleAtItsMemory) {
  // Unit costs: 1F1B idles (p-1)(F+B+W), ZB-H1 (p-1)(F+B-W), and every
  // stage holds p microbatches, as 1F1B's first stage does.
  for (int p : {2, 4, 8, 16})
    for (int m : {p, 2 * p, 3 * p, 8 * p}) {
      sim::SimResult zb = unitRun(ScheduleKind::ZeroBubbleH1, p, m);
      sim::SimResult base = unitRun(ScheduleKind::OneFOneB, p, m);
      ASSERT_EQ(zb.deadlock, "");
      EXPECT_DOUBLE_EQ(zb.bubbleFraction(), double(p - 1) / (3 * m))
          << "p=" << p << " m=" << m;
      EXPECT_DOUBLE_EQ(base.bubbleFraction(), double(p - 1) / m);
      EXPECT_EQ(mostInFlight(ScheduleKind::ZeroBubbleH1, p, m),
                mostInFlight(ScheduleKind::OneFOneB, p, m));
      for (const auto &order : orders(ScheduleKind::ZeroBubbleH1, p, m))
        EXPECT_EQ(sim::inFlight(order), p);
    }
}

TEST(ZeroBubbleSchedules, H2IsAParallelogram) {
  // p = 4, m = 8: stage r runs 2(p-r)-1 forwards, then B's as they come
  // back with forwards and W's between; every stage runs without a hole
  // from its first work to its last.
  EXPECT_EQ(order(ScheduleKind::ZeroBubbleH2, 4, 1, 8, 0),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 B0.0 W0.0 B1.0 F7.0 B2.0 "
            "W1.0 B3.0 W2.0 B4.0 W3.0 B5.0 W4.0 B6.0 W5.0 W6.0 B7.0 W7.0");
  EXPECT_EQ(order(ScheduleKind::ZeroBubbleH2, 4, 1, 8, 3),
            "F0.3 B0.3 F1.3 B1.3 F2.3 B2.3 F3.3 B3.3 F4.3 B4.3 F5.3 B5.3 "
            "F6.3 B6.3 W0.3 F7.3 B7.3 W1.3 W2.3 W3.3 W4.3 W5.3 W6.3 W7.3");
  for (int p : {2, 4, 8, 16})
    for (int r = 0; r < p; ++r) {
      auto first =
          pipeline::stageOrder(ScheduleKind::ZeroBubbleH2, p, 1, 3 * p, r);
      int forwards = 0;
      while (first[forwards].phase == sim::Phase::Forward)
        ++forwards;
      EXPECT_EQ(forwards, pipeline::warmupCount(ScheduleKind::ZeroBubbleH2, p,
                                                1, 3 * p, r));
      EXPECT_EQ(forwards, 2 * (p - r) - 1);
    }
  for (int p : {2, 4, 8, 16})
    for (int m : {2 * p, 3 * p, 8 * p}) {
      sim::SimResult zb = unitRun(ScheduleKind::ZeroBubbleH2, p, m);
      ASSERT_EQ(zb.deadlock, "");
      EXPECT_DOUBLE_EQ(zb.bubbleWithinStagesFraction(), 0)
          << "p=" << p << " m=" << m;
      EXPECT_EQ(mostInFlight(ScheduleKind::ZeroBubbleH2, p, m), 2 * p - 1);
      // An iteration still pays the stages' skew, (p-1)F, while the
      // optimizer step waits for every stage: the same as ZB-H1's whole
      // bubble at unit costs, the least any order can have.
      EXPECT_DOUBLE_EQ(zb.bubbleFraction(), double(p - 1) / (3 * m));
    }
}

TEST(ZeroBubbleSchedules,
     TheIssuesTargetsAtEightStagesAndTwentyFourMicrobatches) {
  int p = 8, m = 24;
  double oneF = unitRun(ScheduleKind::OneFOneB, p, m).bubbleFraction();
  sim::SimResult h1 = unitRun(ScheduleKind::ZeroBubbleH1, p, m);
  sim::SimResult h2 = unitRun(ScheduleKind::ZeroBubbleH2, p, m);
  EXPECT_LE(h1.bubbleFraction(), oneF / 3 + 1e-12);
  EXPECT_EQ(mostInFlight(ScheduleKind::ZeroBubbleH1, p, m),
            mostInFlight(ScheduleKind::OneFOneB, p, m));
  // The paper's measure (each stage's own span): zero.
  EXPECT_LE(h2.bubbleWithinStagesFraction(), 0.02);
  EXPECT_LE(mostInFlight(ScheduleKind::ZeroBubbleH2, p, m), 2 * p - 1);
}

TEST(ZeroBubbleSchedules, NoneDeadlocksUpToSixteenStages) {
  // p up to 16, m from p to 8p (and fewer than p), on the clock and with
  // sends that wait for their receive.
  int checked = 0;
  for (ScheduleKind kind :
       {ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleH2})
    for (int p = 1; p <= 16; ++p)
      for (int m = 1; m <= 8 * p; m += (m < p ? 1 : std::max(1, p / 4))) {
        std::vector<std::vector<bool>> points;
        auto all = pipeline::scheduleOrders(kind, p, 1, m, &points);
        sim::SimResult run = sim::simulate(all, p, m, unitCosts(kind));
        ASSERT_EQ(run.deadlock, "")
            << pipeline::scheduleName(kind) << " p=" << p << " m=" << m;
        ASSERT_EQ(sim::checkTransferGroups(all, points, p), "")
            << pipeline::scheduleName(kind) << " p=" << p << " m=" << m;
        ASSERT_EQ(sim::simulateTransfers(all, points, p, m, unitCosts(kind))
                      .deadlock,
                  "")
            << pipeline::scheduleName(kind) << " p=" << p << " m=" << m;
        ++checked;
      }
  EXPECT_GT(checked, 1000);
}

TEST(ListSchedule, RefusesWhatCannotFinish) {
  pipeline::ListScheduleProblem problem;
  problem.stages = 2;
  problem.microbatches = 2;
  problem.stageOfChunk = {0, 1};
  problem.forward = problem.backward = problem.weight = {1, 1};
  problem.inFlightLimit = {1, 0};
  std::string error;
  pipeline::listSchedule(problem, error);
  EXPECT_EQ(error, "stage 1 may hold no microbatch: its in-flight limit must "
                   "be at least 1");
  problem.inFlightLimit = {1, 1};
  problem.weight = {1, 0};
  pipeline::listSchedule(problem, error);
  EXPECT_EQ(error, "chunk 1's costs must be positive");
  problem.weight = {1};
  pipeline::listSchedule(problem, error);
  EXPECT_EQ(error, "every chunk needs a forward, B and W cost");
  problem.weight = {1, 1};
  problem.stageOfChunk = {0, 2};
  pipeline::listSchedule(problem, error);
  EXPECT_EQ(error, "chunk 1 lives on no stage");
}

TEST(ListSchedule, FillsTheHolesWithWeightGradients) {
  // Two stages, unit costs: stage 0 runs W0.0 while B1.0 waits for
  // stage 1's B1.1.
  pipeline::ListScheduleProblem problem;
  problem.stages = 2;
  problem.microbatches = 2;
  problem.stageOfChunk = {0, 1};
  problem.forward = {1, 1};
  problem.backward = {1, 1};
  problem.weight = {1, 1};
  problem.inFlightLimit = {2, 2};
  std::string error;
  auto got = pipeline::listSchedule(problem, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(text(got[0]), "F0.0 F1.0 B0.0 W0.0 B1.0 W1.0");
  EXPECT_EQ(text(got[1]), "F0.1 B0.1 F1.1 B1.1 W0.1 W1.1");
  // Held to one microbatch a stage, each F waits for its W.
  problem.inFlightLimit = {1, 1};
  got = pipeline::listSchedule(problem, error);
  ASSERT_EQ(error, "");
  EXPECT_EQ(text(got[0]), "F0.0 B0.0 W0.0 F1.0 B1.0 W1.0");
}

TEST(PipelineSchedules, ChecksWhatEachScheduleNeeds) {
  EXPECT_NE(pipeline::checkSchedule(ScheduleKind::ZeroBubbleH1, 4, 2, 8), "");
  EXPECT_NE(pipeline::checkSchedule(ScheduleKind::ZeroBubbleH2, 4, 2, 8), "");
  EXPECT_EQ(pipeline::checkSchedule(ScheduleKind::ZeroBubbleH2, 4, 1, 3), "");
  EXPECT_NE(pipeline::checkSchedule(ScheduleKind::Interleaved, 4, 2, 6), "");
  EXPECT_EQ(pipeline::checkSchedule(ScheduleKind::Interleaved, 4, 2, 8), "");
  EXPECT_NE(pipeline::checkSchedule(ScheduleKind::OneFOneB, 2, 2, 4), "");
  EXPECT_NE(pipeline::checkSchedule(ScheduleKind::Interleaved, 2, 1, 4), "");
  EXPECT_EQ(pipeline::checkSchedule(ScheduleKind::GPipe, 2, 3, 5), "");
}

TEST(ScheduleNames, EveryKindIsItsFlagAndBack) {
  for (const sim::ScheduleName &row : sim::kScheduleNames) {
    EXPECT_EQ(sim::parseSchedule(row.flag), row.kind) << row.flag;
    EXPECT_STREQ(sim::scheduleName(row.kind), row.flag);
    EXPECT_STREQ(sim::scheduleTitle(row.kind), row.title);
  }
  EXPECT_EQ(sim::parseSchedule("zb-h3"), std::nullopt);
  EXPECT_EQ(sim::parseSchedule(""), std::nullopt);
  EXPECT_EQ(sim::scheduleFlagList(),
            "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-auto or zb-v");
  EXPECT_FALSE(sim::cutsBackward(ScheduleKind::OneFOneB));
  EXPECT_TRUE(sim::cutsBackward(ScheduleKind::ZeroBubbleH2));
}

} // namespace

TEST(TransferGroups, PostingInGroupsCostsNothingWhereEachSendIsTakenAtOnce) {
  // 1F1B, interleaved 1F1B, ZB-H1 and (with m > p) ZB-H2 run with the
  // runtime's groups on its transfer streams (a kind and direction each)
  // take exactly the time of their data dependencies. (ZB-H2's forwards
  // may start later than their inputs allow, waiting for the stage after to
  // take the output they overwrite, but the iteration ends on time. The
  // interleaved schedule's batched four-way exchange starts some works
  // later than their inputs allow, never the iteration's end.)
  int checked = 0;
  for (int p : {1, 2, 3, 4, 8})
    for (int v : {1, 2})
      for (int m : {p, 2 * p, 3 * p})
        for (ScheduleKind kind :
             {ScheduleKind::OneFOneB, ScheduleKind::Interleaved,
              ScheduleKind::ZeroBubbleH1, ScheduleKind::ZeroBubbleH2}) {
          if ((kind == ScheduleKind::Interleaved) != (v > 1) ||
              !pipeline::checkSchedule(kind, p, v, m).empty() ||
              (kind == ScheduleKind::ZeroBubbleH2 && m == p && p > 1))
            continue;
          std::vector<std::vector<bool>> points;
          auto orders = pipeline::scheduleOrders(kind, p, v, m, &points);
          sim::Costs costs = sim::unitCosts(orders);
          sim::SimResult plain = sim::simulate(orders, p * v, m, costs);
          sim::SimResult grouped =
              sim::simulateTransfers(orders, points, p * v, m, costs);
          ASSERT_EQ(grouped.deadlock, "");
          EXPECT_EQ(grouped.makespan, plain.makespan)
              << pipeline::scheduleName(kind) << " p=" << p << " v=" << v
              << " m=" << m;
          bool starts = kind != ScheduleKind::Interleaved &&
                        kind != ScheduleKind::ZeroBubbleH2;
          for (int s = 0; s < p && starts; ++s)
            for (size_t i = 0; i < orders[size_t(s)].size(); ++i)
              EXPECT_EQ(grouped.stages[size_t(s)][i].start,
                        plain.stages[size_t(s)][i].start)
                  << pipeline::scheduleName(kind) << " p=" << p << " v=" << v
                  << " m=" << m << " stage " << s << " "
                  << sim::describe(orders[size_t(s)][i]);
          ++checked;
        }
  EXPECT_GT(checked, 30);
}

TEST(TransferGroups, ZeroBubbleH2IsNotHeldBackByItsGroups) {
  // ZB-H2's deeper warm-up sends stage s+1 forwards two works before it
  // posts their receives. When a stage's transfers both ways shared one
  // stream, the send blocked it and the gradient a B waits for was received
  // behind it: 46 units at p=4, m=8, more than 1F1B's 33. With a stream
  // each way, it takes its data dependencies' 27, ZB-H1's (a forward may
  // start later, waiting for the stage after to take the output it
  // overwrites, and the works behind it with it, but not the last).
  std::vector<std::vector<bool>> points;
  auto orders =
      pipeline::scheduleOrders(ScheduleKind::ZeroBubbleH2, 4, 1, 8, &points);
  sim::Costs costs = sim::unitCosts(orders);
  sim::SimResult plain = sim::simulate(orders, 4, 8, costs);
  EXPECT_EQ(plain.makespan, 27);
  sim::SimResult grouped = sim::simulateTransfers(orders, points, 4, 8, costs);
  ASSERT_EQ(grouped.deadlock, "");
  EXPECT_EQ(grouped.makespan, 27);
  auto oneFOneB =
      pipeline::scheduleOrders(ScheduleKind::OneFOneB, 4, 1, 8, &points);
  EXPECT_EQ(sim::simulateTransfers(oneFOneB, points, 4, 8,
                                   sim::unitCosts(oneFOneB))
                .makespan,
            33);
  // With as many microbatches as stages, the last forwards wait for the
  // stage after to take the output they overwrite (a program sends from one
  // buffer), and its receives for the B that frees their stash slot: at
  // p=8, 34 units against its dependencies' 31 (1F1B 45).
  orders =
      pipeline::scheduleOrders(ScheduleKind::ZeroBubbleH2, 8, 1, 8, &points);
  costs = sim::unitCosts(orders);
  EXPECT_EQ(sim::simulate(orders, 8, 8, costs).makespan, 31);
  EXPECT_EQ(sim::simulateTransfers(orders, points, 8, 8, costs).makespan, 34);
}

TEST(TransferGroups, AHangIsReportedNotRun) {
  auto orders = takenOutOfOrder();
  EXPECT_EQ(sim::simulateTransfers(orders, sim::exchangeBeforeEachWork(orders),
                                   2, 2, sim::Costs())
                .deadlock,
            "stage 0 waits sending F0.0's output before F1.0; "
            "stage 1 waits receiving F1.0's output before F1.1");
}

/// The most any stage of `orders` keeps in its stash.
int64_t mostStash(const std::vector<std::vector<sim::Work>> &orders,
                  const std::vector<std::array<int64_t, 3>> &bytes) {
  int64_t most = 0;
  for (const auto &order : orders)
    most = std::max(most, pipeline::stashBytes(order, bytes));
  return most;
}

/// `orders` run as the executor posts them (an exchange before every work).
sim::SimResult runPosted(const std::vector<std::vector<sim::Work>> &orders,
                         int p, int m, const sim::Costs &costs) {
  return sim::simulateTransfers(orders, sim::exchangeBeforeEachWork(orders),
                                p, m, costs);
}

TEST(ZeroBubbleAuto, NeverSlowerThanZBH1Or1F1BWithinTheirMemory) {
  // At unit costs and memory counted in microbatches in flight, zb-auto's
  // order runs no longer than ZB-H1's or 1F1B's posted as the executor
  // posts them, holds no more than 1F1B (its W after its B) on any stage,
  // and cannot hang, for p up to 16 and m from p to 8p.
  int checked = 0;
  for (int p : {1, 2, 3, 4, 5, 8, 16})
    for (int m : {p, 2 * p, 3 * p, 8 * p}) {
      std::string error;
      pipeline::ZeroBubbleAutoResult r =
          pipeline::zeroBubbleAuto({p, m}, error);
      ASSERT_EQ(error, "") << "p=" << p << " m=" << m;
      auto h1 = pipeline::scheduleOrders(ScheduleKind::ZeroBubbleH1, p, 1, m);
      sim::Costs unit = sim::unitCosts(h1);
      sim::SimResult run = runPosted(r.orders, p, m, unit);
      ASSERT_EQ(run.deadlock, "") << "p=" << p << " m=" << m;
      EXPECT_EQ(run.makespan, r.makespan);
      EXPECT_LE(r.makespan, runPosted(h1, p, m, unit).makespan);
      EXPECT_LE(r.makespan, r.oneFOneB);
      std::vector<std::array<int64_t, 3>> units(size_t(p), {0, 1, 0});
      EXPECT_LE(mostStash(r.orders, units), int64_t(std::min(p, m)));
      EXPECT_EQ(r.memoryLimit, int64_t(std::min(p, m)));
      ++checked;
    }
  EXPECT_EQ(checked, 28);
}

TEST(ZeroBubbleAuto, KeepsTheStashWithinTheLimitItIsGiven) {
  // gpt-tiny's stash per microbatch (bytes of each pool: kept until B,
  // held until W, passed from B to W): a held-back W keeps more than a
  // forward does, so a stage may hold fewer W's back than ZB-H1's.
  int p = 4, m = 12;
  pipeline::ZeroBubbleAutoInput in{p, m};
  in.slotBytes.assign(size_t(p), {290, 224, 290});
  std::string error;
  pipeline::ZeroBubbleAutoResult wide = pipeline::zeroBubbleAuto(in, error);
  ASSERT_EQ(error, "");
  // 1F1B's first stage: p forwards (290 + 224 each) and one passed slot.
  EXPECT_EQ(wide.memoryLimit, 4 * 514 + 290);
  EXPECT_LE(mostStash(wide.orders, in.slotBytes), wide.memoryLimit);
  // A tighter limit gives a slower order that fits it.
  in.memoryLimit = 3 * 514 + 290;
  pipeline::ZeroBubbleAutoResult tight = pipeline::zeroBubbleAuto(in, error);
  ASSERT_EQ(error, "");
  EXPECT_LE(mostStash(tight.orders, in.slotBytes), in.memoryLimit);
  EXPECT_GT(tight.makespan, wide.makespan);
  // Below one microbatch's stash nothing fits, and it says so.
  in.memoryLimit = 500;
  pipeline::zeroBubbleAuto(in, error);
  EXPECT_EQ(error,
            "no zero-bubble order keeps the stash within 500 bytes a stage");
  // Costs for every chunk, or none.
  in.memoryLimit = 0;
  in.forward = {1, 1};
  pipeline::zeroBubbleAuto(in, error);
  EXPECT_EQ(error, "zb-auto needs a forward, B and W cost and the stash's "
                   "bytes for each of the 4 chunks");
}

TEST(ZeroBubbleAuto, UsesEachChunksOwnCosts) {
  // The last chunk's forward and B carry the loss and the output layer:
  // its stage is the bottleneck. zb-auto's order, priced with those costs,
  // is at least as fast as ZB-H1's and 1F1B's under them.
  int p = 8, m = 24;
  pipeline::ZeroBubbleAutoInput in{p, m};
  in.forward.assign(size_t(p), 1);
  in.backward.assign(size_t(p), 1.2);
  in.weight.assign(size_t(p), 0.6);
  in.forward.back() = 1.6;
  in.backward.back() = 1.8;
  in.transfer = 0.05;
  std::string error;
  pipeline::ZeroBubbleAutoResult r = pipeline::zeroBubbleAuto(in, error);
  ASSERT_EQ(error, "");
  sim::Costs costs;
  costs.chunkForward = in.forward;
  costs.chunkBackward = in.backward;
  costs.chunkWeight = in.weight;
  costs.transfer = in.transfer;
  EXPECT_DOUBLE_EQ(runPosted(r.orders, p, m, costs).makespan, r.makespan);
  EXPECT_LE(r.makespan,
            runPosted(pipeline::scheduleOrders(ScheduleKind::ZeroBubbleH1, p, 1,
                                               m),
                      p, m, costs)
                .makespan);
  EXPECT_LT(r.makespan, r.oneFOneB);
  // The bottleneck stage's work: 24 microbatches of 1.6 + 1.8 + 0.6.
  EXPECT_GE(r.makespan, 24 * 4.0);
}

TEST(ZeroBubbleAuto, StashBytesCountEachPoolsMostAtOnce) {
  // Pools: kept until B (10 bytes), held until W (20), passed B to W (40).
  // Two forwards before the first B: two slots kept and held; one B
  // passed at a time: one passed slot.
  std::vector<std::array<int64_t, 3>> bytes = {{10, 20, 40}};
  EXPECT_EQ(pipeline::stashBytes(
                parseOrder("F0.0 F1.0 B0.0 W0.0 B1.0 W1.0"), bytes),
            2 * 10 + 2 * 20 + 40);
  // W's held back: the passed pool holds two.
  EXPECT_EQ(pipeline::stashBytes(
                parseOrder("F0.0 B0.0 F1.0 B1.0 W0.0 W1.0"), bytes),
            10 + 2 * 20 + 2 * 40);
  // Bytes from pass options can be anything: the sum saturates.
  int64_t most = std::numeric_limits<int64_t>::max();
  std::vector<std::array<int64_t, 3>> huge = {{most / 2 + 1, 0, 0}};
  EXPECT_EQ(pipeline::stashBytes(
                parseOrder("F0.0 F1.0 B0.0 W0.0 B1.0 W1.0"), huge),
            most);
  pipeline::ZeroBubbleAutoInput in{2, 4};
  in.slotBytes.assign(2, {most / 2 + 1, most / 2 + 1, most / 2 + 1});
  in.memoryLimit = most;
  std::string error;
  EXPECT_FALSE(pipeline::zeroBubbleAuto(in, error).orders.empty());
  EXPECT_EQ(error, "");
  in.slotBytes[1][2] = -1;
  pipeline::zeroBubbleAuto(in, error);
  EXPECT_EQ(error, "zb-auto's stash bytes must be at least 0, got -1");
  in.slotBytes[1][2] = 0;
  in.microbatches = 1 << 16;
  in.stages = 8;
  in.slotBytes.assign(8, {0, 1, 0});
  pipeline::zeroBubbleAuto(in, error);
  EXPECT_EQ(error, "zb-auto searches at most 262144 stage-microbatches (p x "
                   "m), and this layout has 524288: name zb-h1 or 1f1b");
}

TEST(ZeroBubbleAuto, HoldingFewerWeightsBackTradesBubbleForMemory) {
  // Between 1F1B with each W after its B (k = 0) and ZB-H1 (k = p - 1),
  // stage r holds min(r, k) W's back: at unit costs, p = 8, m = 24, the
  // bubble falls as k grows, the most any stage keeps in flight stays
  // p (1F1B's), the passed pool's slots grow with k, and no order can
  // hang where sends block.
  int p = 8, m = 24;
  auto oneFOneB = pipeline::scheduleOrders(ScheduleKind::OneFOneB, p, 1, m);
  auto holdingNone = pipeline::zeroBubbleH1Holding(p, m, 0);
  for (int s = 0; s < p; ++s) {
    std::vector<sim::Work> withWeights;
    for (const sim::Work &w : oneFOneB[size_t(s)]) {
      withWeights.push_back(w);
      if (w.phase == sim::Phase::Backward)
        withWeights.push_back({sim::Phase::Weight, w.chunk, w.microbatch});
    }
    EXPECT_EQ(holdingNone[size_t(s)], withWeights) << "stage " << s;
  }
  EXPECT_EQ(pipeline::zeroBubbleH1Holding(p, m, p - 1),
            pipeline::scheduleOrders(ScheduleKind::ZeroBubbleH1, p, 1, m));
  std::vector<std::array<int64_t, 3>> passed(size_t(p), {0, 0, 1});
  double last = 1e9;
  int64_t lastPassed = 0;
  for (int k = 0; k < p; ++k) {
    auto orders = pipeline::zeroBubbleH1Holding(p, m, k);
    sim::SimResult run = runPosted(orders, p, m, sim::unitCosts(orders));
    ASSERT_EQ(run.deadlock, "") << "k=" << k;
    EXPECT_LE(run.makespan, last) << "k=" << k;
    last = run.makespan;
    int most = 0;
    for (const auto &order : orders)
      most = std::max(most, sim::inFlight(order));
    EXPECT_EQ(most, p) << "k=" << k;
    int64_t slots = mostStash(orders, passed);
    EXPECT_EQ(slots, k + 1) << "k=" << k;
    EXPECT_GE(slots, lastPassed);
    lastPassed = slots;
  }
  // ZB-H1's bubble is a third of... its makespan is 79, 1F1B's with W
  // after B 86.
  EXPECT_EQ(last, 79);
}

TEST(ZeroBubbleSchedules, H1WithinAStashLimitHoldsBackWhatFits) {
  // gpt-tiny's middle stages' pools a microbatch (kept until B, held until
  // W, passed from B to W, bytes): a held W keeps as much as a forward in
  // flight, so the paper's ZB-H1 keeps more than 1F1B. Within 1F1B's
  // stash each stage holds back the most W's that fit, no more than r.
  int p = 8, m = 24;
  std::vector<std::array<int64_t, 3>> pools(size_t(p),
                                            {296960, 229376, 296960});
  pools[0] = {0, 526336, 16384}; // the first stage's B only receives
  pools[size_t(p - 1)] = {313344, 311296, 297472}; // and the LM head
  auto paper = pipeline::scheduleOrders(ScheduleKind::ZeroBubbleH1, p, 1, m);
  auto baseline = pipeline::zeroBubbleH1Holding(p, m, 0);
  int64_t oneFOneB = mostStash(baseline, pools);
  EXPECT_GT(mostStash(paper, pools), oneFOneB);
  std::vector<std::vector<sim::Work>> within;
  std::vector<int> held;
  ASSERT_EQ(pipeline::zeroBubbleH1Within(p, m, pools, 0, within, held), "");
  ASSERT_EQ(held.size(), size_t(p));
  EXPECT_EQ(held[0], 0);
  for (int s = 0; s < p; ++s) {
    int64_t bytes = pipeline::stashBytes(within[size_t(s)], pools);
    EXPECT_LE(bytes, oneFOneB) << "stage " << s;
    EXPECT_LE(held[size_t(s)], s);
    // The most that fit: one more would not.
    if (held[size_t(s)] < s)
      EXPECT_GT(pipeline::stashBytes(pipeline::zeroBubbleH1Holding(
                                         p, m, held[size_t(s)] + 1)[size_t(s)],
                                     pools),
                oneFOneB)
          << "stage " << s;
  }
  // Later stages keep one forward less each: they have room for more W's.
  EXPECT_EQ(held, (std::vector<int>{0, 0, 1, 2, 3, 4, 5, 5}));
  EXPECT_EQ(pipeline::describeHeld(held), "0,0,1,2,3,4,5,5");
  EXPECT_EQ(pipeline::describeHeld({0, 1, 1, 2, 2, 3, 3, 3, 2}),
            "0 to 3");
  // Between 1F1B's order (86 units, W after B) and the paper's ZB-H1 (79).
  sim::SimResult run = runPosted(within, p, m, sim::unitCosts(within));
  ASSERT_EQ(run.deadlock, "");
  EXPECT_LT(run.makespan, runPosted(baseline, p, m, sim::unitCosts(baseline))
                              .makespan);
  EXPECT_GT(run.makespan, 79);
  // With room for all of them, it is the paper's ZB-H1; below 1F1B's own
  // stash, it is refused.
  ASSERT_EQ(pipeline::zeroBubbleH1Within(p, m, pools, int64_t(1) << 40,
                                         within, held),
            "");
  EXPECT_EQ(within, paper);
  EXPECT_EQ(pipeline::zeroBubbleH1Within(p, m, pools, oneFOneB - 1, within,
                                         held),
            "ZB-H1 keeps at least " + std::to_string(oneFOneB) +
                " bytes of stash on stage 0 (1F1B's order with each W after "
                "its B), over the limit of " +
                std::to_string(oneFOneB - 1));
  EXPECT_NE(pipeline::zeroBubbleH1Within(p, m, {}, 0, within, held), "");
}

TEST(ZeroBubbleSchedules, H1WithinAnyLimitNeverDeadlocks) {
  // Each stage holding any count of W's back from 0 to r, for p up to 16
  // and m from p to 8p, posted as the executor posts them.
  int checked = 0;
  for (int p : {2, 3, 4, 8, 16})
    for (int m : {p, 3 * p, 8 * p})
      for (int64_t weight : {1, 2, 5}) {
        // Forward 2 units kept until B and 2 held, W's passed `weight`.
        std::vector<std::array<int64_t, 3>> pools(size_t(p), {2, 2, weight});
        std::vector<std::vector<sim::Work>> orders;
        std::vector<int> held;
        ASSERT_EQ(pipeline::zeroBubbleH1Within(p, m, pools, 0, orders, held),
                  "");
        sim::SimResult run = runPosted(orders, p, m, sim::unitCosts(orders));
        ASSERT_EQ(run.deadlock, "") << "p=" << p << " m=" << m;
        ++checked;
      }
  EXPECT_EQ(checked, 45);
}

namespace {

/// ZB-V's orders: two chunks a stage in a V.
std::vector<std::vector<sim::Work>>
zeroBubbleV(int p, int m, std::vector<std::vector<bool>> *points = nullptr) {
  return pipeline::scheduleOrders(ScheduleKind::ZeroBubbleV, p, 2, m, points);
}

} // namespace

TEST(ZeroBubbleV, ChunksLieInAV) {
  // Chunk c on stage c, then 2p-1-c: the first stage holds the first chunk
  // and the last, the last stage the turn from chunk p-1 to p.
  EXPECT_EQ(sim::stageOf(sim::Placement::V, 0, 4), 0);
  EXPECT_EQ(sim::stageOf(sim::Placement::V, 3, 4), 3);
  EXPECT_EQ(sim::stageOf(sim::Placement::V, 4, 4), 3);
  EXPECT_EQ(sim::stageOf(sim::Placement::V, 7, 4), 0);
  EXPECT_EQ(sim::stageOf(sim::Placement::Looped, 7, 4), 3);
  auto orders = zeroBubbleV(4, 8);
  for (int s = 0; s < 4; ++s)
    for (const sim::Work &w : orders[size_t(s)])
      EXPECT_TRUE(w.chunk == s || w.chunk == 7 - s) << sim::describe(w);
  // Stage 0 fills the V with its first chunk's forwards (2p-1 of them),
  // then starts the second chunk's with the first B and W it can run.
  EXPECT_EQ(text({orders[0].begin(), orders[0].begin() + 10}),
            "F0.0 F1.0 F2.0 F3.0 F4.0 F5.0 F6.0 F0.7 B0.7 W0.7");
  EXPECT_EQ(pipeline::checkSchedule(ScheduleKind::ZeroBubbleV, 4, 1, 8),
            "--pipeline-schedule zb-v runs two chunks a stage in a V, but "
            "there are 1: set --num-layers-per-virtual-pipeline-stage to half "
            "of each stage's layers");
}

TEST(ZeroBubbleV, NoneDeadlocksUpToSixteenStages) {
  // p up to 16, m from p to 8p (and fewer than p), on the clock and posted
  // on the runtime's transfer streams with sends that wait for their
  // receive. (On one stream both ways, or one per direction, every m > p
  // hung: between two stages, activations of the first chunk and gradients
  // of the second go the same way, in different orders at the two ends.)
  int checked = 0;
  for (int p = 1; p <= 16; ++p)
    for (int m = 1; m <= 8 * p; m += (m < p ? 1 : std::max(1, p / 4))) {
      std::vector<std::vector<bool>> points;
      auto all = zeroBubbleV(p, m, &points);
      sim::Costs unit = sim::unitCosts(all);
      sim::SimResult run = sim::simulate(all, 2 * p, m, unit, sim::Placement::V);
      ASSERT_EQ(run.deadlock, "") << "p=" << p << " m=" << m;
      // The groups matched per stream, then run on one clock with the
      // works and stash slots they wait for.
      ASSERT_EQ(sim::checkTransferGroups(all, points, 2 * p, sim::Placement::V),
                "")
          << "p=" << p << " m=" << m;
      ASSERT_EQ(sim::simulateTransfers(all, points, 2 * p, m, unit,
                                       sim::Placement::V)
                    .deadlock,
                "")
          << "p=" << p << " m=" << m;
      ++checked;
    }
  EXPECT_GT(checked, 400);
}

TEST(ZeroBubbleV, TheIssuesTargetsAtEightStagesAndTwentyFourMicrobatches) {
  // Unit costs (a chunk's F, B and W half a stage's), p=8, m=24: on its
  // data dependencies no stage idles between its first work and its last
  // (the paper's measure), and the iteration is shorter than ZB-H1's.
  // Posted as the runtime posts it, receives wait for their stash slot and
  // forwards for the stage after to take the output they overwrite: 3
  // units more, 4.2% of each stage's span idle, still shorter than ZB-H1
  // (79 units either way).
  int p = 8, m = 24;
  std::vector<std::vector<bool>> points;
  auto orders = zeroBubbleV(p, m, &points);
  sim::Costs unit = sim::unitCosts(orders);
  sim::SimResult plain = sim::simulate(orders, 2 * p, m, unit, sim::Placement::V);
  EXPECT_LE(plain.bubbleWithinStagesFraction(), 0.02);
  EXPECT_EQ(plain.makespan, 75.5);
  sim::SimResult posted = sim::simulateTransfers(orders, points, 2 * p, m, unit,
                                                 sim::Placement::V);
  ASSERT_EQ(posted.deadlock, "");
  EXPECT_EQ(posted.makespan, 78.5);
  EXPECT_NEAR(posted.bubbleWithinStagesFraction(), 0.042, 0.001);
  EXPECT_EQ(unitRun(ScheduleKind::ZeroBubbleH1, p, m).makespan, 79);
  // Stage 0 holds at most 2p chunks' forwards at once (its first chunk's
  // 2p-1 while the V fills, and one of its second): each chunk half a
  // stage's layers, as much as 1F1B's p whole microbatches.
  EXPECT_EQ(sim::inFlight(orders[0]), 2 * p);
  EXPECT_EQ(mostInFlight(ScheduleKind::OneFOneB, p, m), p);
}

TEST(ZeroBubbleV, TheFirstStageNeverHoldsAnotherFirstChunkForward) {
  // Stage 0 runs its first chunk's W (that chunk's whole backward: it
  // sends no gradient, so its B is empty) before that chunk's next
  // forward: it holds at most 2p - 1 of its forwards, never 2p beside the
  // loss chunk's, whose slot is larger (the stash cannot move a slot to
  // make room). The steady state once ran F, B, W of the first chunk in
  // that order and held 2p of them from each forward to the W after it.
  for (int p = 2; p <= 16; p *= 2)
    for (int m : {p, 3 * p, 8 * p}) {
      auto orders = zeroBubbleV(p, m);
      int held = 0, most = 0;
      for (const sim::Work &w : orders[0])
        if (w.chunk == 0 && w.phase == sim::Phase::Forward)
          most = std::max(most, ++held);
        else if (w.chunk == 0 && w.phase == sim::Phase::Weight)
          --held;
      EXPECT_EQ(most, std::min(m, 2 * p - 1)) << "p=" << p << " m=" << m;
    }
}

namespace {

/// The most a stage's stash holds at once running `order`: each work's
/// slots taken before its own are freed (compiler/StashSlots.h), summed.
int64_t runningStash(const std::vector<sim::Work> &order,
                     const std::vector<std::array<int64_t, 3>> &bytes,
                     size_t upTo = SIZE_MAX) {
  int64_t live = 0, most = 0;
  for (size_t i = 0; i < order.size() && i < upTo; ++i)
    for (const pipeline::StashMove &move : pipeline::stashMoves(
             order[i].phase, order[i].chunk, order[i].microbatch, true)) {
      int64_t b = bytes[size_t(order[i].chunk)][size_t(move.key.second)];
      if (move.does == pipeline::StashMove::Does::Take)
        most = std::max(most, live += b);
      else if (move.does == pipeline::StashMove::Does::Free)
        live -= b;
    }
  return most;
}

/// Where `order`'s last forward is, plus one.
size_t pastLastForward(const std::vector<sim::Work> &order) {
  size_t past = 0;
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].phase == sim::Phase::Forward)
      past = i + 1;
  return past;
}

/// gpt-tiny's pools under ZB-V with t2 and sequence parallelism, two
/// layers a chunk (bytes a microbatch: kept until B, held until W, passed
/// from B to W; B writes over what it has read, so the forward's slot is
/// held until W): what B passes W weighs a third of a forward's slot.
std::vector<std::array<int64_t, 3>> sequenceParallelPools(int p) {
  std::vector<std::array<int64_t, 3>> pools(size_t(2 * p),
                                            {0, 295936, 107008});
  pools[0] = {0, 295936, 8192};               // the first chunk's B is empty
  pools[size_t(2 * p - 1)] = {0, 353280, 107008}; // and the loss chunk
  return pools;
}

} // namespace

TEST(ZeroBubbleV, WithinAStashLimitRunsCoolDownWsEarly) {
  // ZB-V's cool-down runs B's back to back and holds their W's for its
  // holes; each B adds what it passes W, so the last stage (the V's turn,
  // 2p - 1 B's held at the end) kept most at its very end: 2.82 MB
  // against the 2.47 MB of its warm-up. Within its own most up to its
  // last forward, it runs the oldest waiting W before the B that would go
  // over, and no stage keeps more than before its cool-down.
  int p = 4, m = 16;
  auto pools = sequenceParallelPools(p);
  auto plain = zeroBubbleV(p, m);
  EXPECT_EQ(runningStash(plain[3], pools), 2820608);
  EXPECT_EQ(runningStash(plain[3], pools, pastLastForward(plain[3])), 2474496);
  std::vector<std::vector<sim::Work>> within;
  std::vector<int> early;
  ASSERT_EQ(pipeline::zeroBubbleVWithin(p, m, pools, 0, within, early), "");
  EXPECT_EQ(early, (std::vector<int>{0, 0, 0, 1}));
  for (int s = 0; s < p; ++s) {
    const auto &order = within[size_t(s)];
    EXPECT_EQ(runningStash(order, pools),
              runningStash(plain[size_t(s)], pools,
                           pastLastForward(plain[size_t(s)])))
        << "stage " << s;
    // The same works, each W after its B, the F's and B's in ZB-V's order.
    std::vector<sim::Work> notW, plainNotW;
    for (const auto &w : order)
      if (w.phase != sim::Phase::Weight)
        notW.push_back(w);
    for (const auto &w : plain[size_t(s)])
      if (w.phase != sim::Phase::Weight)
        plainNotW.push_back(w);
    EXPECT_EQ(notW, plainNotW) << "stage " << s;
    EXPECT_EQ(order.size(), plain[size_t(s)].size());
  }
  EXPECT_EQ(text({within[3].end() - 12, within[3].end()}),
            "B13.3 W12.3 B14.4 B14.3 B15.4 B15.3 W13.4 W14.4 W15.4 W13.3 "
            "W14.3 W15.3");
  // It cannot hang, and the W's it runs early cost the turn's holes.
  sim::Costs unit = sim::unitCosts(within);
  sim::SimResult run = sim::simulateTransfers(
      within, sim::exchangeBeforeEachWork(within), 2 * p, m, unit,
      sim::Placement::V);
  ASSERT_EQ(run.deadlock, "");
  sim::SimResult before = sim::simulateTransfers(
      plain, sim::exchangeBeforeEachWork(plain), 2 * p, m, unit,
      sim::Placement::V);
  EXPECT_GE(run.makespan, before.makespan);
  EXPECT_LE(run.makespan, before.makespan + 1);
  // Where a B passes W nothing (memory in microbatches in flight), and
  // with room for everything, it is ZB-V's own order.
  std::vector<std::array<int64_t, 3>> units(size_t(2 * p), {0, 1, 0});
  ASSERT_EQ(pipeline::zeroBubbleVWithin(p, m, units, 0, within, early), "");
  EXPECT_EQ(within, plain);
  ASSERT_EQ(pipeline::zeroBubbleVWithin(p, m, pools, int64_t(1) << 40, within,
                                        early),
            "");
  EXPECT_EQ(within, plain);
  EXPECT_EQ(early, (std::vector<int>{0, 0, 0, 0}));
  // A limit is refused only where no order of the stage's works keeps
  // within it: the least is each W right after its B (a W only frees).
  // ZB-V's steady state runs each W so already, so that is what a stage
  // keeps up to its last forward, or more where the cool-down's B passes
  // W more than a forward keeps: the floor, not the warm-up, is checked.
  auto least = pipeline::zeroBubbleVEachWAfterItsB(p, m);
  int64_t floor = 0;
  for (int s = 0; s < p; ++s)
    floor = std::max(floor, runningStash(least[size_t(s)], pools));
  EXPECT_EQ(floor, 2531840); // stage 0, as up to its last forward
  ASSERT_EQ(pipeline::zeroBubbleVWithin(p, m, pools, floor, within, early),
            "");
  for (int s = 0; s < p; ++s)
    EXPECT_LE(runningStash(within[size_t(s)], pools), floor) << "stage " << s;
  {
    // m = p, each B passing W three times what a forward keeps: the last
    // stage keeps 8 up to its last forward, but its cool-down's B's keep
    // 11 however early their W's run; a limit of 10 is refused (it was
    // taken, and 11 kept).
    std::vector<std::array<int64_t, 3>> heavyPass(8, {0, 1, 3});
    auto fewLeast = pipeline::zeroBubbleVEachWAfterItsB(4, 4);
    EXPECT_EQ(runningStash(fewLeast[3], heavyPass), 11);
    EXPECT_EQ(runningStash(zeroBubbleV(4, 4)[3], heavyPass,
                           pastLastForward(zeroBubbleV(4, 4)[3])),
              8);
    EXPECT_EQ(pipeline::zeroBubbleVWithin(4, 4, heavyPass, 10, within, early),
              "ZB-V keeps at least 11 bytes of stash on stage 3 (its order "
              "with each W right after its B), over the limit of 10");
    ASSERT_EQ(pipeline::zeroBubbleVWithin(4, 4, heavyPass, 11, within, early),
              "");
    EXPECT_EQ(runningStash(within[3], heavyPass), 11);
  }
  EXPECT_EQ(pipeline::zeroBubbleVWithin(p, m, pools, floor - 1, within, early),
            "ZB-V keeps at least 2531840 bytes of stash on stage 0 (its "
            "order with each W right after its B), over the limit of "
            "2531839");
  // Bad input is said.
  EXPECT_EQ(pipeline::zeroBubbleVWithin(p, m, units, -1, within, early),
            "ZB-V's stash limit must be at least 0 (0: its own up to the "
            "cool-down), got -1");
  EXPECT_EQ(pipeline::zeroBubbleVWithin(p, m, {{0, 1, 0}}, 0, within, early),
            "ZB-V within a stash limit needs the stash's bytes for each of "
            "the 8 chunks, got 1");
  units[5][2] = -3;
  EXPECT_EQ(pipeline::zeroBubbleVWithin(p, m, units, 0, within, early),
            "ZB-V's stash bytes must be at least 0, got -3");
}

TEST(ZeroBubbleV, WithinAnyLimitNeverDeadlocks) {
  // Under its own limit and with room for everything, for p up to 16 and
  // m from p to 8p (and fewer), posted on the runtime's transfer streams:
  // a W early waits on nothing but its own B.
  int checked = 0;
  for (int p : {1, 2, 3, 4, 8, 16})
    for (int m : {std::max(1, p / 2), p, 3 * p, 8 * p})
      for (int64_t passed : {0, 1, 3})
        for (int64_t limit : {int64_t(0), int64_t(1) << 40}) {
          std::vector<std::array<int64_t, 3>> pools(size_t(2 * p),
                                                    {1, 2, passed});
          std::vector<std::vector<sim::Work>> orders;
          std::vector<int> early;
          ASSERT_EQ(
              pipeline::zeroBubbleVWithin(p, m, pools, limit, orders, early),
              "");
          sim::Costs unit = sim::unitCosts(orders);
          ASSERT_EQ(sim::simulate(orders, 2 * p, m, unit, sim::Placement::V)
                        .deadlock,
                    "")
              << "p=" << p << " m=" << m;
          ASSERT_EQ(sim::simulateTransfers(
                        orders, sim::exchangeBeforeEachWork(orders), 2 * p, m,
                        unit, sim::Placement::V)
                        .deadlock,
                    "")
              << "p=" << p << " m=" << m;
          ++checked;
        }
  EXPECT_EQ(checked, 144);
  // And the probe's order, each W right after its B.
  for (int p : {1, 2, 4, 16})
    for (int m : {p, 3 * p}) {
      auto orders = pipeline::zeroBubbleVEachWAfterItsB(p, m);
      for (const auto &order : orders)
        for (size_t i = 0; i < order.size(); ++i)
          if (order[i].phase == sim::Phase::Backward)
            EXPECT_EQ(order.at(i + 1),
                      (sim::Work{sim::Phase::Weight, order[i].chunk,
                                 order[i].microbatch}));
      ASSERT_EQ(sim::simulateTransfers(orders,
                                       sim::exchangeBeforeEachWork(orders),
                                       2 * p, m, sim::unitCosts(orders),
                                       sim::Placement::V)
                    .deadlock,
                "")
          << "p=" << p << " m=" << m;
    }
}
