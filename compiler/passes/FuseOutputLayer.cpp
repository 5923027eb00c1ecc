//===- FuseOutputLayer.cpp - the output layer and its loss in blocks ------===//
//
// After strata-fuse-loss the forward still holds a microbatch's logits
// (rows × vocabulary) while the loss reads them, and leaves their
// gradient, as many bytes, for the backward, whose output layer reads it
// twice: for the input's gradient (B) and the weight's (W). With a vocabulary
// of 50k and a hidden size of 768 that is 65 times the layer's input, and
// under ZB-V it sits on the first stage beside p microbatches of
// activations. This pass makes the output layer's product, the fused loss
// and both gradient products one op in the forward that runs them
// `block-columns` of the vocabulary at a time: a block's logits and their
// gradient are all it holds, the input's gradient is what it leaves for
// the backward (the layer's input's size), and each block of the weight's
// gradient is added into its accumulator once. The cost: each block's
// logits are computed twice, in a first pass for the rows' statistics and
// a second for the gradients (four products of the layer's size instead of
// three). Blocks of rows would need none again but add the whole weight's
// fp32 gradient once a block, which for GPT-2's 1,024 tokens a microbatch
// in blocks of 128 cost more than the product (docs/design.md). With
// tensor parallelism the loss is vocabulary-parallel (its three row
// statistics all-reduced over the ranks, each holding a share of the
// columns): the op then takes that form's statistics and reductions too,
// marked dist.vocab_parallel, and blocks the rank's share.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_FUSEOUTPUTLAYER
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
namespace graph = strata::graph;

namespace {

/// The name of the parameter `value` is, or "".
StringRef paramName(Value value) {
  auto param = value.getDefiningOp<graph::ParamOp>();
  return param ? param.getName() : StringRef();
}

/// The ops the fused op replaces, found from the loss.
struct OutputLayer {
  graph::MatmulOp product;  // logits = x · W (Wᵀ)
  Operation *loss;          // the fused loss: loss, dlogits
  Value labels, seed, lossValue, logitsGrad;
  std::optional<uint64_t> vocabSize;
  bool vocabParallel = false;
  /// The vocabulary-parallel loss's statistics and their all-reduces.
  SmallVector<Operation *> statistics;
  graph::MatmulOp inputGrad; // dx = dlogits · Wᵀ (W)
  graph::MatmulWeightGradOp weightGrad;
  graph::AccumulateGradOp accumulate;
};

/// The all-reduce `value` is, of a statistic of type `Stat` of `logits`,
/// or null.
template <typename Stat>
std::pair<Stat, Operation *> reducedStat(Value value, Value logits) {
  auto reduce = value.getDefiningOp<shard::AllReduceOp>();
  if (!reduce)
    return {};
  auto stat = reduce->getOperand(0).getDefiningOp<Stat>();
  if (!stat || stat.getLogits() != logits || !stat->hasOneUse())
    return {};
  return {stat, reduce};
}

/// The vocabulary-parallel loss's statistics of `loss`'s logits, each
/// all-reduced, read by nothing else (the max by the sum's statistic
/// too), into `found`; false where they are not so.
bool vocabParallelStatistics(graph::CrossEntropyWithGradFromStatsOp loss,
                             OutputLayer &found) {
  Value logits = loss.getLogits();
  auto [max, maxReduce] = reducedStat<graph::LogitsMaxOp>(loss.getMax(), logits);
  auto [target, targetReduce] =
      reducedStat<graph::LogitsTargetOp>(loss.getTarget(), logits);
  auto [sum, sumReduce] =
      reducedStat<graph::LogitsSumExpOp>(loss.getSumExp(), logits);
  if (!max || !target || !sum || sum.getMax() != loss.getMax() ||
      target.getLabels() != loss.getLabels() ||
      !targetReduce->hasOneUse() || !sumReduce->hasOneUse() ||
      llvm::any_of(maxReduce->getUsers(), [&](Operation *user) {
        return user != loss.getOperation() && user != sum.getOperation();
      }))
    return false;
  // Erased in this order: each before what it reads.
  found.statistics = {sumReduce, sum, targetReduce, target, maxReduce, max};
  return true;
}

/// The output layer around a fused loss (whole, or vocabulary-parallel
/// from its all-reduced statistics), or nullopt where its logits are not a
/// parameter's product read by the loss alone (and its statistics), or
/// their gradient is read by anything but the layer's two gradient
/// products.
std::optional<OutputLayer> outputLayerOf(Operation *lossOp) {
  OutputLayer found;
  found.loss = lossOp;
  found.vocabParallel = bool(
      strata::dist::vocabParallel(lossOp->getContext()).getAttr(lossOp));
  Value logits;
  // What both forms of the fused loss have.
  auto take = [&](auto loss) {
    logits = loss.getLogits();
    found.labels = loss.getLabels();
    found.seed = loss.getGrad();
    found.lossValue = loss.getLoss();
    found.logitsGrad = loss.getLogitsGrad();
    found.vocabSize = loss.getVocabSize();
  };
  if (auto whole = dyn_cast<graph::CrossEntropyWithGradOp>(lossOp)) {
    if (found.vocabParallel)
      return std::nullopt;
    take(whole);
  } else {
    auto shared = cast<graph::CrossEntropyWithGradFromStatsOp>(lossOp);
    if (!found.vocabParallel || !vocabParallelStatistics(shared, found))
      return std::nullopt;
    take(shared);
  }
  found.product = logits.getDefiningOp<graph::MatmulOp>();
  // The logits' readers: the loss, and its statistics where it has them.
  size_t readers = 1 + found.statistics.size() / 2;
  if (!found.product ||
      size_t(std::distance(logits.use_begin(), logits.use_end())) != readers)
    return std::nullopt;
  StringRef weight = paramName(found.product.getRhs());
  if (weight.empty())
    return std::nullopt;
  bool transposed = found.product.getTransposeB();
  for (Operation *user : found.logitsGrad.getUsers()) {
    if (auto product = dyn_cast<graph::MatmulOp>(user);
        product && !found.inputGrad && product.getLhs() == found.logitsGrad &&
        paramName(product.getRhs()) == weight &&
        product.getTransposeB() != transposed) {
      found.inputGrad = product;
      continue;
    }
    if (auto grad = dyn_cast<graph::MatmulWeightGradOp>(user);
        grad && !found.weightGrad && grad.getGrad() == found.logitsGrad &&
        grad.getLhs() == found.product.getLhs() &&
        grad.getTransposeResult() == transposed && grad->hasOneUse()) {
      auto sink = dyn_cast<graph::AccumulateGradOp>(*grad->getUsers().begin());
      if (sink && sink.getName() == weight) {
        found.weightGrad = grad;
        found.accumulate = sink;
        continue;
      }
    }
    return std::nullopt;
  }
  if (!found.inputGrad || !found.weightGrad)
    return std::nullopt;
  return found;
}

struct FuseOutputLayerPass
    : strata::impl::FuseOutputLayerBase<FuseOutputLayerPass> {
  using FuseOutputLayerBase::FuseOutputLayerBase;

  void runOnOperation() override {
    if (blockColumns <= 0)
      return;
    SmallVector<Operation *> losses;
    getOperation().walk([&](Operation *op) {
      if (isa<graph::CrossEntropyWithGradOp,
              graph::CrossEntropyWithGradFromStatsOp>(op))
        losses.push_back(op);
    });
    int64_t fused = 0;
    for (Operation *loss : losses) {
      std::optional<OutputLayer> layer = outputLayerOf(loss);
      if (!layer)
        continue;
      OpBuilder b(loss);
      auto op = graph::LinearCrossEntropyWithGradOp::create(
          b, loss->getLoc(), layer->lossValue.getType(),
          layer->product.getLhs().getType(), layer->product.getLhs(),
          layer->product.getRhs(), layer->labels, layer->seed,
          b.getStringAttr(paramName(layer->product.getRhs())),
          layer->product.getTransposeB() ? b.getUnitAttr() : UnitAttr(),
          b.getI64IntegerAttr(blockColumns),
          layer->vocabSize ? b.getI64IntegerAttr(int64_t(*layer->vocabSize))
                           : IntegerAttr());
      // Its columns are the rank's share; its input's gradient a partial
      // sum, which the all-reduce (or reduce-scatter) after it still adds.
      if (layer->vocabParallel)
        strata::dist::vocabParallel(b.getContext()).setAttr(op, b.getUnitAttr());
      layer->inputGrad.getResult().replaceAllUsesWith(op.getInputGrad());
      layer->lossValue.replaceAllUsesWith(op.getLoss());
      layer->accumulate->erase();
      layer->weightGrad->erase();
      layer->inputGrad->erase();
      loss->erase();
      for (Operation *stat : layer->statistics)
        stat->erase();
      layer->product->erase();
      ++fused;
    }
    // Asked for and not done would leave the logits whole unnoticed.
    if (fused == 0) {
      // At the module's place, not on it: the module is not the culprit.
      mlir::emitError(getOperation().getLoc())
          << "--loss-vocab-block: no output layer to compute in blocks (a "
             "parameter's product read only by the loss and its statistics, "
             "whose gradient only the layer's two gradient products read)";
      signalPassFailure();
    }
  }
};

} // namespace
