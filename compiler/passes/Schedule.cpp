//===- Schedule.cpp - the order of one training iteration -----------------===//
//
// Without pipeline chunks, a stage runs @microbatch once per microbatch
// (each adds its gradients into the accumulators) and then @optimizer.
// With them (--strata-pipeline-split), each stage runs its chunks'
// @forward_c and @backward_c per microbatch in the order of a pipeline
// schedule (compiler/PipelineSchedules.h), then @optimizer; with each
// backward cut in two (split-weights), @weight_c too, under a zero-bubble
// schedule. A step that
// starts a new exchange point is marked `exchange`: there the stage posts
// its pending sends and the next receives as one group, as Megatron does.
// The order is run on a clock first (runtime/sim), and its exchange groups
// against sends that wait to be matched (NCCL's): a schedule whose sends
// and receives could wait on each other forever is an error, not a hang at
// run time.
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "compiler/PipelineSchedules.h"
#include "compiler/ZeroBubbleAuto.h"
#include "runtime/schedule/TransferGroups.h"
#include "compiler/StepFunctions.h"
#include "dialects/dist/DistDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_SCHEDULE
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct SchedulePass : strata::impl::ScheduleBase<SchedulePass> {
  using ScheduleBase::ScheduleBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (!module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer)) {
      module.emitError() << "no @optimizer function to schedule: run "
                            "--strata-optimizer first";
      return signalPassFailure();
    }
    if (microbatches < 1) {
      module.emitError() << "microbatches must be at least 1, got "
                         << static_cast<int64_t>(microbatches);
      return signalPassFailure();
    }
    // Costs are zb-auto's; stash bytes, their limit and an order chosen
    // already zb-auto's, zb-h1's and zb-v's: given for any other schedule
    // (or none), they would be silently ignored.
    bool costed = !forwardCosts.empty() || !backwardCosts.empty() ||
                  !weightCosts.empty() || transferCost != 0;
    bool stashed =
        !stashBytes.empty() || maxStashBytes != 0 || !chosenOrder.empty();
    bool measured = pipelineSchedule == "zb-h1" || pipelineSchedule == "zb-v";
    if ((costed || stashed) && pipelineSchedule != "zb-auto" &&
        !(measured && !costed)) {
      module.emitError() << (costed ? "costs are zb-auto's"
                                    : "stash bytes, their limit and an "
                                      "order chosen already are zb-auto's, "
                                      "zb-h1's and zb-v's")
                         << ", but the schedule is "
                         << (pipelineSchedule.empty()
                                 ? std::string("not named")
                                 : std::string(pipelineSchedule));
      return signalPassFailure();
    }
    if (module.lookupSymbol<func::FuncOp>(strata::step::kMicrobatch)) {
      if (!pipelineSchedule.empty()) {
        module.emitError() << "--pipeline-schedule " << pipelineSchedule
                           << " needs pipeline chunks: run "
                              "--strata-pipeline-split first";
        return signalPassFailure();
      }
      return scheduleSteps(module);
    }
    int64_t chunks = 0;
    while (module.lookupSymbol<func::FuncOp>(strata::step::forwardOf(chunks)))
      ++chunks;
    if (chunks == 0) {
      module.emitError() << "no @microbatch or @forward_0 to schedule: run "
                            "--strata-autodiff (and --strata-pipeline-split) "
                            "first";
      return signalPassFailure();
    }
    if (failed(schedulePipeline(module, chunks)))
      return signalPassFailure();
  }

  void scheduleSteps(ModuleOp module) {
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    auto schedule = dist::ScheduleOp::create(b, loc, b.getI64IntegerAttr(0),
                                             b.getI64IntegerAttr(microbatches),
                                             /*kind=*/StringAttr());
    b.setInsertionPointToEnd(&schedule.getBody().emplaceBlock());
    for (int64_t mb = 0; mb < microbatches; ++mb)
      dist::StepOp::create(
          b, loc,
          FlatSymbolRefAttr::get(b.getContext(), strata::step::kMicrobatch),
          b.getI64IntegerAttr(mb), /*exchange=*/UnitAttr());
    dist::StepOp::create(
        b, loc,
        FlatSymbolRefAttr::get(b.getContext(), strata::step::kOptimizer),
        IntegerAttr(), /*exchange=*/UnitAttr());
  }

  /// The order strata-compile chose already (having searched to say what
  /// it chose), checked as any order is and for its W's.
  FailureOr<std::vector<std::vector<sim::Work>>>
  givenOrder(ModuleOp module, int p, int chunks, int m,
             sim::Placement placement) {
    std::vector<std::vector<sim::Work>> orders;
    if (std::string error = pipeline::unflattenOrders(
            {chosenOrder.begin(), chosenOrder.end()}, p, orders);
        !error.empty())
      return module.emitError() << error;
    if (std::string wrong = sim::simulate(orders, chunks, m,
                                          sim::unitCosts(orders), placement)
                                .deadlock;
        !wrong.empty())
      return module.emitError() << "the order given is not a schedule: "
                                << wrong;
    // The zero-bubble schedules cut the backward: every B has its W (the
    // simulator asks for them only once an order has one).
    if (!sim::holdsWeights(orders))
      return module.emitError()
             << "the order given runs no W, but each backward is cut in "
                "two: every B needs its W";
    return orders;
  }

  /// zb-auto's order from the options' costs and stash bytes, if given.
  FailureOr<std::vector<std::vector<sim::Work>>>
  zeroBubbleAuto(ModuleOp module, int p, int m) {
    pipeline::ZeroBubbleAutoInput input;
    std::string error = pipeline::zeroBubbleInput(
        p, m, {forwardCosts.begin(), forwardCosts.end()},
        {backwardCosts.begin(), backwardCosts.end()},
        {weightCosts.begin(), weightCosts.end()}, transferCost,
        {stashBytes.begin(), stashBytes.end()}, maxStashBytes, input);
    pipeline::ZeroBubbleAutoResult result;
    if (error.empty())
      result = pipeline::zeroBubbleAuto(input, error);
    if (!error.empty())
      return module.emitError() << error;
    return std::move(result.orders);
  }

  /// ZB-H1 with each stage holding back what the stash limit allows, or
  /// ZB-V running a waiting W early wherever the stash would pass it,
  /// where the stash's bytes are given; the paper's order where not.
  FailureOr<std::vector<std::vector<sim::Work>>>
  withinStash(ModuleOp module, pipeline::ScheduleKind kind, int p, int m) {
    bool v = kind == pipeline::ScheduleKind::ZeroBubbleV;
    if (stashBytes.empty() && maxStashBytes == 0)
      return pipeline::scheduleOrders(kind, p, v ? 2 : 1, m);
    std::vector<std::array<int64_t, 3>> slotBytes;
    if (std::string error = pipeline::stashBytesByChunk(
            {stashBytes.begin(), stashBytes.end()}, slotBytes);
        !error.empty())
      return module.emitError() << error;
    std::vector<std::vector<sim::Work>> orders;
    std::vector<int> moved; // W's held back (ZB-H1) or run early (ZB-V)
    if (std::string error =
            v ? pipeline::zeroBubbleVWithin(p, m, slotBytes, maxStashBytes,
                                            orders, moved)
              : pipeline::zeroBubbleH1Within(p, m, slotBytes, maxStashBytes,
                                             orders, moved);
        !error.empty())
      return module.emitError() << error;
    return orders;
  }

  LogicalResult schedulePipeline(ModuleOp module, int64_t chunks) {
    int64_t p = meshAxis(module, kPipelineAxis);
    if (chunks % p != 0)
      return module.emitError() << chunks
                                << " pipeline chunks do not go "
                                   "evenly on "
                                << p << " stages";
    int v = int(chunks / p), m = int(microbatches);
    pipeline::ScheduleKind kind = v > 1 ? pipeline::ScheduleKind::Interleaved
                                        : pipeline::ScheduleKind::OneFOneB;
    if (!pipelineSchedule.empty()) {
      auto parsed = pipeline::parseSchedule(pipelineSchedule);
      if (!parsed)
        return module.emitError()
               << "--pipeline-schedule must be " << sim::scheduleFlagList()
               << ", got '" << pipelineSchedule << "'";
      kind = *parsed;
    }
    // A backward cut in two (@backward_c and @weight_c) runs under the
    // zero-bubble schedules and a whole one under the others: any other
    // pairing would drop the weights' gradients or call what is not there.
    bool cut =
        bool(module.lookupSymbol<func::FuncOp>(strata::step::weightOf(0)));
    if (cut != sim::cutsBackward(kind))
      return module.emitError()
             << "the " << pipeline::scheduleName(kind) << " schedule runs "
             << (cut ? "each backward whole, but it is cut into @backward_c "
                       "and @weight_c (--strata-pipeline-split "
                       "split-weights): name a zero-bubble schedule"
                     : "each backward cut in two, but it is whole: run "
                       "--strata-pipeline-split split-weights");
    // The chunks must live where the schedule expects them: a V's orders
    // on looped chunks would send to the wrong stages, and the reverse.
    sim::Placement placement = sim::placementOf(kind);
    if (placement != chunkPlacement(module))
      return module.emitError()
             << "the " << pipeline::scheduleName(kind) << " schedule runs "
             << (placement == sim::Placement::V
                     ? "two chunks a stage in a V, but the chunks are looped: "
                       "run --strata-pipeline-split placement=v"
                     : "looped chunks, but they are in a V "
                       "(--strata-pipeline-split placement=v): name zb-v");
    if (std::string error = pipeline::checkSchedule(kind, int(p), v, m);
        !error.empty())
      return module.emitError() << error;
    std::vector<std::vector<bool>> exchange;
    std::vector<std::vector<sim::Work>> orders;
    // zb-auto's, zb-h1's and zb-v's orders depend on the plan's costs and
    // stash, given here (or chosen already); the others are fixed.
    if (kind == pipeline::ScheduleKind::ZeroBubbleAuto ||
        kind == pipeline::ScheduleKind::ZeroBubbleH1 ||
        kind == pipeline::ScheduleKind::ZeroBubbleV) {
      FailureOr<std::vector<std::vector<sim::Work>>> chosen =
          !chosenOrder.empty()
              ? givenOrder(module, int(p), int(chunks), m, placement)
          : kind == pipeline::ScheduleKind::ZeroBubbleAuto
              ? zeroBubbleAuto(module, int(p), m)
              : withinStash(module, kind, int(p), m);
      if (failed(chosen))
        return failure();
      orders = std::move(*chosen);
      exchange = sim::exchangeBeforeEachWork(orders);
    } else {
      orders = pipeline::scheduleOrders(kind, int(p), v, m, &exchange);
    }
    // Posted as the executor posts them, with sends that wait for their
    // receive (NCCL's): the groups on each transfer stream, and the works
    // and stash slots they wait for, on one clock. (It runs the data
    // dependencies first; a hang there is said as such.)
    sim::Costs unit = sim::unitCosts(orders);
    if (std::string stuck = sim::simulateTransfers(orders, exchange,
                                                   int(chunks), m, unit,
                                                   placement)
                                .deadlock;
        !stuck.empty()) {
      std::string plain =
          sim::simulate(orders, int(chunks), m, unit, placement).deadlock;
      if (!plain.empty())
        return module.emitError() << "the " << pipeline::scheduleName(kind)
                                  << " schedule would deadlock: " << plain;
      return module.emitError()
             << "the " << pipeline::scheduleName(kind)
             << " schedule would deadlock where sends wait to be received "
                "(NCCL): "
             << stuck;
    }

    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    Location loc = module.getLoc();
    for (int64_t stage = 0; stage < p; ++stage) {
      auto schedule = dist::ScheduleOp::create(
          b, loc, b.getI64IntegerAttr(stage), b.getI64IntegerAttr(m),
          b.getStringAttr(pipeline::scheduleName(kind)));
      OpBuilder steps(module.getContext());
      steps.setInsertionPointToEnd(&schedule.getBody().emplaceBlock());
      for (auto [work, point] : llvm::zip(orders[stage], exchange[stage])) {
        std::string name = work.phase == sim::Phase::Forward
                               ? strata::step::forwardOf(work.chunk)
                           : work.phase == sim::Phase::Backward
                               ? strata::step::backwardOf(work.chunk)
                               : strata::step::weightOf(work.chunk);
        dist::StepOp::create(steps, loc,
                             FlatSymbolRefAttr::get(b.getContext(), name),
                             steps.getI64IntegerAttr(work.microbatch),
                             point ? steps.getUnitAttr() : UnitAttr());
      }
      // The last sends go out before the optimizer, whose collectives
      // (a tied embedding's, the norm's) the peers reach only after them.
      dist::StepOp::create(
          steps, loc,
          FlatSymbolRefAttr::get(b.getContext(), strata::step::kOptimizer),
          IntegerAttr(), /*exchange=*/steps.getUnitAttr());
    }
    return success();
  }
};

} // namespace
