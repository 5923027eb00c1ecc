//===- ZeroBubblePricing.cpp - zb-auto's costs from the cost model --------===//
#include "tools/strata-compile/ZeroBubblePricing.h"
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

std::string priceZeroBubble(mlir::ModuleOp module, Level from,
                            const runtime::ClusterSpec &spec,
                            CompileOptions &options, std::string &said,
                            bool verify) {
  // The probe: the same programs (the backward cut in two), ZB-H1's order.
  CompileOptions probeOptions = options;
  probeOptions.pipelineSchedule = "zb-h1";
  probeOptions.zeroBubble = {};
  mlir::OwningOpRef<mlir::ModuleOp> probe = module.clone();
  std::string error;
  mlir::ScopedDiagnosticHandler capture(
      module.getContext(), [&](mlir::Diagnostic &d) {
        if (error.empty())
          error = d.str();
        return mlir::success();
      });
  auto refused = [&](const char *what) {
    return std::string("pricing zb-auto's work with a ZB-H1 probe: ") + what +
           (error.empty() ? "" : ": " + error);
  };
  mlir::PassManager pm(module.getContext());
  buildPipeline(pm, probeOptions, from, Level::Exec);
  pm.enableVerifier(verify);
  if (mlir::failed(pm.run(*probe)))
    return refused("the compiler refused it");
  if (options.target == Target::Cuda &&
      mlir::failed(codegen::compileGeneratedCode(*probe)))
    return refused("NVRTC refused its kernels");
  std::vector<uint8_t> bytes;
  if (mlir::failed(writePlan(*probe, bytes)))
    return refused("its plan could not be written");
  runtime::Plan plan;
  if (std::string why = runtime::predict::loadForPrediction(bytes, false, plan);
      !why.empty())
    return refused(why.c_str());
  runtime::predict::Prediction prediction;
  if (std::string why = runtime::predict::predictIteration(
          plan, spec, runtime::predict::PredictOptions(), prediction);
      !why.empty())
    return refused(why.c_str());

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
