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
// in blocks of 128 cost more than the product (docs/design.md). The loss is
// the whole-vocabulary one; the vocabulary-parallel loss (tensor
// parallelism) is left as it is.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphOps.h"

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
  graph::MatmulOp product;           // logits = x · W (Wᵀ)
  graph::CrossEntropyWithGradOp loss; // loss, dlogits
  graph::MatmulOp inputGrad;          // dx = dlogits · Wᵀ (W)
  graph::MatmulWeightGradOp weightGrad;
  graph::AccumulateGradOp accumulate;
};

/// The output layer around `loss`, or nullopt where its logits are not a
/// parameter's product read by the loss alone, or their gradient is read by
/// anything but the layer's two gradient products.
std::optional<OutputLayer> outputLayerOf(graph::CrossEntropyWithGradOp loss) {
  OutputLayer found;
  found.loss = loss;
  found.product = loss.getLogits().getDefiningOp<graph::MatmulOp>();
  if (!found.product || !found.product.getResult().hasOneUse() ||
      strata::dist::vocabParallel(loss->getContext()).getAttr(loss))
    return std::nullopt;
  StringRef weight = paramName(found.product.getRhs());
  if (weight.empty())
    return std::nullopt;
  bool transposed = found.product.getTransposeB();
  for (Operation *user : loss.getLogitsGrad().getUsers()) {
    if (auto product = dyn_cast<graph::MatmulOp>(user);
        product && !found.inputGrad &&
        product.getLhs() == loss.getLogitsGrad() &&
        paramName(product.getRhs()) == weight &&
        product.getTransposeB() != transposed) {
      found.inputGrad = product;
      continue;
    }
    if (auto grad = dyn_cast<graph::MatmulWeightGradOp>(user);
        grad && !found.weightGrad && grad.getGrad() == loss.getLogitsGrad() &&
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
    SmallVector<graph::CrossEntropyWithGradOp> losses;
    getOperation().walk(
        [&](graph::CrossEntropyWithGradOp op) { losses.push_back(op); });
    int64_t fused = 0;
    for (graph::CrossEntropyWithGradOp loss : losses) {
      std::optional<OutputLayer> layer = outputLayerOf(loss);
      if (!layer)
        continue;
      OpBuilder b(loss);
      auto op = graph::LinearCrossEntropyWithGradOp::create(
          b, loss.getLoc(), loss.getLoss().getType(),
          layer->product.getLhs().getType(), layer->product.getLhs(),
          layer->product.getRhs(), loss.getLabels(), loss.getGrad(),
          b.getStringAttr(paramName(layer->product.getRhs())),
          layer->product.getTransposeB() ? b.getUnitAttr() : UnitAttr(),
          b.getI64IntegerAttr(blockColumns), loss.getVocabSizeAttr());
      layer->inputGrad.getResult().replaceAllUsesWith(op.getInputGrad());
      loss.getLoss().replaceAllUsesWith(op.getLoss());
      layer->accumulate->erase();
      layer->weightGrad->erase();
      layer->inputGrad->erase();
      loss->erase();
      layer->product->erase();
      ++fused;
    }
    // Asked for and not done would leave the logits whole unnoticed.
    if (fused == 0) {
      // At the module's place, not on it: the module is not the culprit.
      mlir::emitError(getOperation().getLoc())
          << "--loss-vocab-block: no output layer to compute in blocks (a "
             "parameter's product read only by the loss, whose gradient only "
             "the layer's two gradient products read; the vocabulary-parallel "
             "loss of tensor parallelism is not one)";
      signalPassFailure();
    }
  }
};

} // namespace
