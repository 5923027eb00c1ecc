//===- Autodiff.cpp - reverse-mode gradients of the model -----------------===//
//
// Turns @model (forward and loss) into @microbatch: the same forward, then
// the backward pass, walking the forward ops in reverse and applying each
// op's vector-Jacobian product. A parameter's gradient contributions are not
// summed here: each becomes one graph.accumulate_grad into the parameter's
// fp32 accumulator, so a tied embedding (used by the embedding and the output
// layer) and successive microbatches add up where the gradient lives.
//
// Each backward op carries `strata.layer`: the layer of the forward op it
// differentiates (-1 before the first layer boundary, L after the last), so
// that pipeline stages can take the backward of the layers they hold.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"

namespace strata {
#define GEN_PASS_DEF_AUTODIFF
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

/// Builds the backward ops after the forward, before the return.
class GradientBuilder {
public:
  explicit GradientBuilder(OpBuilder &builder) : b(builder) {}

  /// The gradient flowing into `value` so far, or null if none.
  Value gradOf(Value value) const { return grads.lookup(value); }

  /// Adds `grad` to the gradient of `value`: into the accumulator when it is
  /// a parameter, else into the running sum.
  void contribute(Value value, Value grad, Location loc) {
    if (!grad)
      return;
    Operation *def = value.getDefiningOp();
    if (isa_and_nonnull<InputOp>(def))
      return; // token ids have no gradient
    if (auto param = dyn_cast_or_null<ParamOp>(def)) {
      AccumulateGradOp::create(b, loc, param.getNameAttr(), grad);
      return;
    }
    Value &sum = grads[value];
    sum = sum ? AddOp::create(b, loc, sum.getType(), sum, grad).getResult()
              : grad;
  }

  LogicalResult differentiate(Operation *op);

private:
  /// The gradient of a broadcast operand: summed down to its shape.
  Value sumTo(Value grad, Type type, Location loc) {
    if (grad.getType() == type)
      return grad;
    return SumToOp::create(b, loc, type, grad);
  }

  OpBuilder &b;
  llvm::DenseMap<Value, Value> grads;
};

LogicalResult GradientBuilder::differentiate(Operation *op) {
  // Ops whose results reach no loss contribute nothing.
  SmallVector<Value> resultGrads;
  bool any = false;
  for (Value result : op->getResults()) {
    resultGrads.push_back(gradOf(result));
    any |= static_cast<bool>(resultGrads.back());
  }
  if (!any)
    return success();
  Location loc = op->getLoc();
  Value dy = resultGrads.empty() ? Value() : resultGrads.front();

  if (isa<ParamOp, InputOp, ConstantOp>(op))
    return success();
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    contribute(embedding.getTable(),
               EmbeddingGradOp::create(b, loc, embedding.getTable().getType(),
                                       dy, embedding.getIds()),
               loc);
    return success();
  }
  if (auto matmul = dyn_cast<MatmulOp>(op)) {
    bool transposeB = matmul.getTransposeB();
    // d lhs = dy · rhsᵀ: a matmul with the transpose flipped.
    contribute(matmul.getLhs(),
               MatmulOp::create(b, loc, matmul.getLhs().getType(), dy,
                                matmul.getRhs(),
                                transposeB ? UnitAttr() : b.getUnitAttr()),
               loc);
    contribute(matmul.getRhs(),
               MatmulWeightGradOp::create(
                   b, loc, matmul.getRhs().getType(), matmul.getLhs(), dy,
                   transposeB ? b.getUnitAttr() : UnitAttr()),
               loc);
    return success();
  }
  if (auto add = dyn_cast<AddOp>(op)) {
    contribute(add.getLhs(), dy, loc);
    contribute(add.getRhs(), sumTo(dy, add.getRhs().getType(), loc), loc);
    return success();
  }
  if (auto sub = dyn_cast<SubOp>(op)) {
    contribute(sub.getLhs(), dy, loc);
    Value summed = sumTo(dy, sub.getRhs().getType(), loc);
    contribute(sub.getRhs(),
               ScaleOp::create(b, loc, summed, b.getF64FloatAttr(-1.0)), loc);
    return success();
  }
  if (auto mul = dyn_cast<MulOp>(op)) {
    Value lhs = mul.getLhs(), rhs = mul.getRhs();
    contribute(lhs, MulOp::create(b, loc, lhs.getType(), dy, rhs), loc);
    Value full = MulOp::create(b, loc, lhs.getType(), dy, lhs);
    contribute(rhs, sumTo(full, rhs.getType(), loc), loc);
    return success();
  }
  if (auto scale = dyn_cast<ScaleOp>(op)) {
    contribute(scale.getInput(),
               ScaleOp::create(b, loc, dy, scale.getFactorAttr()), loc);
    return success();
  }
  if (auto gelu = dyn_cast<GeluOp>(op)) {
    contribute(gelu.getInput(),
               GeluGradOp::create(b, loc, gelu.getInput(), dy, gelu.getTanh()),
               loc);
    return success();
  }
  if (auto silu = dyn_cast<SiluOp>(op)) {
    contribute(silu.getInput(), SiluGradOp::create(b, loc, silu.getInput(), dy),
               loc);
    return success();
  }
  if (auto norm = dyn_cast<LayerNormOp>(op)) {
    auto grad = LayerNormGradOp::create(
        b, loc, norm.getInput().getType(), norm.getWeight().getType(),
        norm.getBias().getType(), norm.getInput(), norm.getWeight(), dy,
        norm.getEpsilonAttr());
    contribute(norm.getInput(), grad.getInputGrad(), loc);
    contribute(norm.getWeight(), grad.getWeightGrad(), loc);
    contribute(norm.getBias(), grad.getBiasGrad(), loc);
    return success();
  }
  if (auto norm = dyn_cast<RmsNormOp>(op)) {
    auto grad = RmsNormGradOp::create(
        b, loc, norm.getInput().getType(), norm.getWeight().getType(),
        norm.getInput(), norm.getWeight(), dy, norm.getEpsilonAttr());
    contribute(norm.getInput(), grad.getInputGrad(), loc);
    contribute(norm.getWeight(), grad.getWeightGrad(), loc);
    return success();
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    contribute(reshape.getInput(),
               ReshapeOp::create(b, loc, reshape.getInput().getType(), dy),
               loc);
    return success();
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    ArrayRef<int64_t> perm = transpose.getPermutation();
    SmallVector<int64_t> inverse(perm.size());
    for (auto [i, p] : llvm::enumerate(perm))
      inverse[p] = i;
    contribute(transpose.getInput(),
               TransposeOp::create(b, loc, transpose.getInput().getType(), dy,
                                   b.getDenseI64ArrayAttr(inverse)),
               loc);
    return success();
  }
  if (auto rope = dyn_cast<RopeOp>(op)) {
    // A rotation's gradient is the rotation by the opposite angle.
    contribute(rope.getInput(),
               RopeOp::create(b, loc, rope.getType(), dy, rope.getBaseAttr(),
                              rope.getInverse() ? UnitAttr() : b.getUnitAttr()),
               loc);
    return success();
  }
  if (auto attention = dyn_cast<AttentionOp>(op)) {
    auto grad = AttentionGradOp::create(
        b, loc, attention.getQuery().getType(), attention.getKey().getType(),
        attention.getValue().getType(), attention.getQuery(),
        attention.getKey(), attention.getValue(), attention.getResult(),
        attention.getLse(), dy, attention.getCausalAttr(),
        attention.getGroupSizeAttr());
    contribute(attention.getQuery(), grad.getQueryGrad(), loc);
    contribute(attention.getKey(), grad.getKeyGrad(), loc);
    contribute(attention.getValue(), grad.getValueGrad(), loc);
    return success();
  }
  if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
    contribute(loss.getLogits(),
               CrossEntropyGradOp::create(b, loc, loss.getLogits().getType(),
                                          loss.getLogits(), loss.getLabels(),
                                          dy, loss.getVocabSizeAttr()),
               loc);
    return success();
  }
  if (auto boundary = dyn_cast<LayerBoundaryOp>(op)) {
    for (auto [input, grad] : llvm::zip(boundary.getInputs(), resultGrads))
      contribute(input, grad, loc);
    return success();
  }
  return op->emitOpError() << "has no gradient rule";
}

struct AutodiffPass : strata::impl::AutodiffBase<AutodiffPass> {
  using AutodiffBase::AutodiffBase;

  void runOnOperation() override {
    auto func = getOperation().lookupSymbol<func::FuncOp>("model");
    if (!func) {
      getOperation().emitError() << "no @model function to differentiate";
      return signalPassFailure();
    }
    auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
    Value loss = ret.getOperand(0);
    SmallVector<Operation *> forward;
    for (Operation &op : func.getBody().front().without_terminator())
      forward.push_back(&op);

    // The layer of each forward op: by its place between the boundaries.
    llvm::DenseMap<Operation *, int64_t> layerOf;
    int64_t layer = -1;
    for (Operation *op : forward) {
      if (auto boundary = dyn_cast<LayerBoundaryOp>(op))
        layer = static_cast<int64_t>(boundary.getIndex());
      layerOf[op] = layer;
    }

    OpBuilder b(ret);
    GradientBuilder gradients(b);
    auto tagSince = [&](Operation *last, int64_t layer) {
      for (Operation *op = last ? last->getNextNode()
                                : &ret->getBlock()->front();
           op != ret; op = op->getNextNode())
        op->setAttr("strata.layer", b.getI64IntegerAttr(layer));
    };
    // The seed: the gradient of the loss itself, 1/microbatches when
    // microbatch gradients are summed into one step.
    Operation *last = ret->getPrevNode();
    gradients.contribute(loss,
                         ConstantOp::create(b, ret.getLoc(), loss.getType(),
                                            b.getF64FloatAttr(lossScale)),
                         ret.getLoc());
    tagSince(last, layer);
    for (Operation *op : llvm::reverse(forward)) {
      last = ret->getPrevNode();
      if (failed(gradients.differentiate(op)))
        return signalPassFailure();
      tagSince(last, layerOf[op]);
    }
    func.setSymName("microbatch");
  }
};

} // namespace
