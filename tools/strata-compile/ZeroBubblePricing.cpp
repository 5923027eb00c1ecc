//===- ZeroBubblePricing.cpp - zb-auto's costs from the cost model --------===//
#include "tools/strata-compile/ZeroBubblePricing.h"
#include "compiler/ListSchedule.h"
#include "compiler/PipelineSchedules.h"
#include "compiler/ZeroBubbleAuto.h"
#include "compiler/codegen/CompileCode.h"
#include "compiler/plan/PlanWriter.h"
#include "runtime/base/WholeFile.h"
#include "runtime/predict/Prediction.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/Support/FormatVariadic.h"

#include <algorithm>
#include <cmath>

namespace strata {

namespace {

/// The probe: `module` compiled to exec with the same programs (the
/// backward cut in two) under ZB-H1's order, stage r holding r W's back
/// (or, for zb-v, ZB-V's with each W right after its B: its chunks in a
/// V, and B's values for W written over the forward's wherever that
/// keeps least when no W waits); null and `error` said where the
/// compiler refuses it.
mlir::OwningOpRef<mlir::ModuleOp> compileProbe(mlir::ModuleOp module,
                                               Level from,
                                               const CompileOptions &options,
                                               bool verify,
                                               std::string &error) {
  CompileOptions probeOptions = options;
  probeOptions.zeroBubble = {};
  if (probeOptions.pipelineSchedule == "zb-v")
    probeOptions.zeroBubble.order =
        pipeline::flattenOrders(pipeline::zeroBubbleVEachWAfterItsB(
            int(options.pipelineParallel), int(options.microbatches())));
  else
    probeOptions.pipelineSchedule = "zb-h1";
  mlir::OwningOpRef<mlir::ModuleOp> probe = module.clone();
  std::string said;
  mlir::ScopedDiagnosticHandler capture(
      module.getContext(), [&](mlir::Diagnostic &d) {
        if (said.empty())
          said = d.str();
        return mlir::success();
      });
  mlir::PassManager pm(module.getContext());
  buildPipeline(pm, probeOptions, from, Level::Exec);
  pm.enableVerifier(verify);
  if (mlir::failed(pm.run(*probe))) {
    error = "the compiler refused it" + (said.empty() ? "" : ": " + said);
    return nullptr;
  }
  return probe;
}

} // namespace

std::string measureZeroBubbleStash(mlir::ModuleOp module, Level from,
                                   CompileOptions &options, std::string &said,
                                   bool verify) {
  std::string error;
  mlir::OwningOpRef<mlir::ModuleOp> probe =
      compileProbe(module, from, options, verify, error);
  // Refused, the layout is: the compiler's own run says why, in its words
  // (with no limit left for the Schedule pass to want bytes for).
  if (!probe) {
    options.zeroBubble.maxStashBytes = 0;
    return "";
  }
  int p = int(options.pipelineParallel), m = int(options.microbatches());
  bool v = options.pipelineSchedule == "zb-v";
  CompileOptions::ZeroBubbleCosts &zb = options.zeroBubble;
  zb.stashBytes = stashSlotBytes(*probe, p);
  if (zb.stashBytes.size() != size_t(3 * p * (v ? 2 : 1)))
    return llvm::formatv("measuring {0}'s stash with a probe: its stash "
                         "does not have three pools a chunk",
                         options.pipelineSchedule)
        .str();
  // The order, said here and written by the Schedule pass as it is.
  std::vector<std::array<int64_t, 3>> slotBytes;
  std::vector<std::vector<sim::Work>> orders;
  std::vector<int> held;
  if (std::string why = pipeline::stashBytesByChunk(zb.stashBytes, slotBytes);
      !why.empty())
    return why;
  // zb-v runs W's early, zb-h1 holds W's back, where they fit.
  if (std::string why =
          v ? pipeline::zeroBubbleVWithin(p, m, slotBytes, zb.maxStashBytes,
                                          orders, held)
            : pipeline::zeroBubbleH1Within(p, m, slotBytes, zb.maxStashBytes,
                                           orders, held);
      !why.empty())
    return why;
  zb.order = pipeline::flattenOrders(orders);
  int64_t most = 0;
  for (int s = 0; s < p; ++s)
    most = std::max(most, pipeline::stashBytes(orders[size_t(s)], slotBytes));
  if (v) {
    said = llvm::formatv("zb-v: stages run {0} W's early, "
                         "the stash at most {1} a stage (limit {2})\n",
                         pipeline::describeHeld(held), runtime::humanBytes(most),
                         zb.maxStashBytes > 0
                             ? runtime::humanBytes(zb.maxStashBytes)
                             : std::string("each stage's up to its last "
                                           "forward"))
               .str();
    return "";
  }
  std::string counts = pipeline::describeHeld(held);
  said = llvm::formatv("zb-h1: stages hold back {0} W's of the paper's "
                       "0 to {1}, the stash at most {2} a stage (limit {3})\n",
                       counts, p - 1, runtime::humanBytes(most),
                       zb.maxStashBytes > 0
                           ? runtime::humanBytes(zb.maxStashBytes)
                           : std::string("1F1B's"))
             .str();
  return "";
}

std::string priceZeroBubble(mlir::ModuleOp module, Level from,
                            const runtime::ClusterSpec &spec,
                            CompileOptions &options, std::string &said,
                            bool verify) {
  std::string error;
  auto refused = [&](const std::string &what) {
    return "pricing zb-auto's work with a ZB-H1 probe: " + what;
  };
  mlir::OwningOpRef<mlir::ModuleOp> probe =
      compileProbe(module, from, options, verify, error);
  if (!probe)
    return refused(error);
  if (options.target == Target::Cuda &&
      mlir::failed(codegen::compileGeneratedCode(*probe)))
    return refused("NVRTC refused its kernels");
  std::vector<uint8_t> bytes;
  if (mlir::failed(writePlan(*probe, bytes)))
    return refused("its plan could not be written");
  runtime::Plan plan;
  if (std::string why = runtime::predict::loadForPrediction(bytes, false, plan);
      !why.empty())
    return refused(why);
  runtime::predict::Prediction prediction;
  if (std::string why = runtime::predict::predictIteration(
          plan, spec, runtime::predict::PredictOptions(), prediction);
      !why.empty())
    return refused(why);

  int p = int(options.pipelineParallel), m = int(options.microbatches());
  sim::Costs costs = runtime::predict::pipelineWorkCosts(prediction, p);
  // An empty program still takes its launch: no cost is zero.
  constexpr double kLeast = 1e-7;
  auto atLeast = [&](std::vector<double> seconds) {
    for (double &s : seconds)
      s = std::max(s, kLeast);
    return seconds;
  };
  CompileOptions::ZeroBubbleCosts &zb = options.zeroBubble;
  zb.forward = atLeast(costs.chunkForward);
  zb.backward = atLeast(costs.chunkBackward);
  zb.weight = atLeast(costs.chunkWeight);
  zb.transfer = costs.transfer;
  zb.stashBytes = stashSlotBytes(*probe, p);
  if (zb.stashBytes.size() != size_t(3 * p))
    return refused("its stash does not have three pools a chunk");

  // What the Schedule pass will choose, said before it is written.
  pipeline::ZeroBubbleAutoInput input;
  std::string why = pipeline::zeroBubbleInput(
      p, m, zb.forward, zb.backward, zb.weight, zb.transfer, zb.stashBytes,
      zb.maxStashBytes, input);
  pipeline::ZeroBubbleAutoResult chosen;
  if (why.empty())
    chosen = pipeline::zeroBubbleAuto(input, why);
  if (!why.empty())
    return why;
  // The Schedule pass writes this order rather than search again.
  zb.order = pipeline::flattenOrders(chosen.orders);
  auto ms = [](double seconds) {
    return llvm::formatv("{0:f3}", seconds * 1e3).str();
  };
  said = llvm::formatv(
             "zb-auto on {0}: chunk 0 forward {1} ms, B {2} ms, W {3} ms; "
             "last chunk {4}/{5}/{6} ms; transfer {7} ms; chose {8} of {9} "
             "orders: pipeline {10} ms ({11}); stash at most {12} a stage "
             "(limit {13})\n",
             spec.name, ms(zb.forward.front()), ms(zb.backward.front()),
             ms(zb.weight.front()), ms(zb.forward.back()),
             ms(zb.backward.back()), ms(zb.weight.back()), ms(zb.transfer),
             chosen.chosen, chosen.candidates, ms(chosen.makespan),
             chosen.oneFOneB > 0
                 ? llvm::formatv("1F1B {0} ms, {1:f1}% less",
                                 ms(chosen.oneFOneB),
                                 100 * (1 - chosen.makespan / chosen.oneFOneB))
                       .str()
                 : std::string("1F1B's stash is over the limit"),
             runtime::humanBytes(chosen.stashBytes),
             runtime::humanBytes(chosen.memoryLimit))
             .str();
  return "";
}

} // namespace strata
