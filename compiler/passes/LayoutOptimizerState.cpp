//===- LayoutOptimizerState.cpp - each stage's buckets --------------------===//
//
// Every parameter, gradient and optimizer state of a pipeline stage lives in
// flat regions, in buckets: Megatron's, each reduced over the data-parallel
// ranks as one collective (and with the distributed optimizer, each rank
// owning 1/dp of every bucket). This pass decides the buckets and writes
// them on the stage's dist.schedule as `dist.buckets`, in layout order; the
// exec lowering lays the regions out from it.
//
// The rules:
// - per chunk of the stage, parameters in reverse first-use order (the
//   order the backward produces their gradients), whole parameters up to
//   about `bucket_elements` (dist.reduce_gradients) each; the buckets are
//   laid out in forward order, each with its members in forward order;
// - gradients another collective must finish before the data-parallel sum
//   go in one last bucket (chunk -1): partial sums over tensor-parallel
//   ranks (a norm weight under sequence parallelism), then parameters tied
//   across stages (the tied embedding).
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "compiler/passes/LowerToExec.h"

#include "llvm/ADT/StringSet.h"

namespace strata {
#define GEN_PASS_DEF_LAYOUTOPTIMIZERSTATE
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

struct Member {
  StringRef name;
  int64_t chunk, elements;
};

/// The stage's buckets: (chunk, member names) in layout order.
SmallVector<std::pair<int64_t, SmallVector<StringRef>>>
bucketsOf(ArrayRef<Member> params, const lower_to_exec::OptimizerFacts &facts) {
  auto partial = [&](StringRef name) {
    return facts.params.lookup(name).partialOverTp;
  };
  auto tied = [&](StringRef name) {
    return !facts.params.lookup(name).tiedStages.empty();
  };
  auto special = [&](StringRef name) { return partial(name) || tied(name); };
  SmallVector<std::pair<int64_t, SmallVector<StringRef>>> buckets;
  int64_t chunks = 0;
  for (const Member &p : params)
    chunks = std::max(chunks, p.chunk + 1);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    SmallVector<SmallVector<StringRef>> chunkBuckets;
    int64_t size = 0;
    for (const Member &p : llvm::reverse(params)) {
      if (p.chunk != chunk || special(p.name))
        continue;
      if (chunkBuckets.empty() || size >= facts.bucketElements) {
        chunkBuckets.emplace_back();
        size = 0;
      }
      chunkBuckets.back().push_back(p.name); // in reverse: turned below
      size += p.elements;
    }
    for (auto &bucket : llvm::reverse(chunkBuckets)) {
      std::reverse(bucket.begin(), bucket.end());
      buckets.push_back({chunk, bucket});
    }
  }
  SmallVector<StringRef> last;
  for (const Member &p : params)
    if (partial(p.name) && !tied(p.name))
      last.push_back(p.name);
  for (const Member &p : params)
    if (tied(p.name))
      last.push_back(p.name);
  if (!last.empty())
    buckets.push_back({-1, last});
  return buckets;
}

struct LayoutOptimizerStatePass
    : strata::impl::LayoutOptimizerStateBase<LayoutOptimizerStatePass> {
  using LayoutOptimizerStateBase::LayoutOptimizerStateBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto optimizer =
        module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer);
    if (!optimizer) {
      module.emitError() << "the optimizer-state layout needs @optimizer: "
                            "run --strata-optimizer first";
      return signalPassFailure();
    }
    FailureOr<lower_to_exec::OptimizerFacts> facts =
        lower_to_exec::readOptimizerFacts(optimizer);
    if (failed(facts))
      return signalPassFailure();
    int64_t stages = meshAxis(module, kPipelineAxis);
    Builder b(module.getContext());
    for (auto schedule : module.getOps<dist::ScheduleOp>()) {
      int64_t stage = int64_t(schedule.getStage());
      // Parameters in first-use order, with the stage's chunk (its index
      // among the stage's chunks) that first uses them.
      SmallVector<Member> params;
      llvm::StringSet<> seen;
      for (func::FuncOp function :
           lower_to_exec::stageFunctions(module, stage)) {
        int64_t chunk = 0;
        if (IntegerAttr attr =
                dist::chunk(function.getContext()).getAttr(function))
          chunk = attr.getInt() / stages;
        function.walk([&](graph::ParamOp param) {
          if (seen.insert(param.getName()).second)
            params.push_back(
                {param.getName(), chunk, param.getType().getNumElements()});
        });
      }
      SmallVector<Attribute> buckets;
      for (auto &[chunk, members] : bucketsOf(params, *facts))
        buckets.push_back(b.getDictionaryAttr(
            {b.getNamedAttr("chunk", b.getI64IntegerAttr(chunk)),
             b.getNamedAttr("params", b.getStrArrayAttr(members))}));
      dist::buckets(module.getContext())
          .setAttr(schedule, b.getArrayAttr(buckets));
    }
  }
};

} // namespace
