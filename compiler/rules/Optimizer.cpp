//===- Optimizer.cpp - accumulators, the gradient norm, AdamW -------------===//
//
// The training step's own ops, after autodiff: no gradients.
// Sharding: an accumulator is sharded as its parameter, except that a
// replicated parameter's partial gradient (a norm weight under sequence
// parallelism) accumulates as it is and is reduced once, in @optimizer,
// as Megatron does; a split gradient's squares are partial; the norm and
// the update read whole values.
//
// Lowering: an accumulation into a parameter's accumulator is a launch
// (most are done by the gradient's own kernel writing straight into it);
// the rest is @optimizer's, lowered as one flat program (LowerOptimizer.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult accumulateSharding(AccumulateGradOp sink, ShardingState &st) {
  Sharding param = st.paramSharding(sink.getName());
  Sharding grad = st.get(sink.getGrad());
  if (param.isReplicated() && grad.isPartial()) {
    st.partialGrads.insert(sink.getName());
    return success();
  }
  if (grad != param && failed(st.convertOperand(sink, 0, param)))
    return failure();
  return success();
}

LogicalResult gradSharding(GradOp grad, ShardingState &st) {
  st.set(grad, st.partialGrads.contains(grad.getName())
                   ? Sharding::partial()
                   : st.paramSharding(grad.getName()));
  return success();
}

LogicalResult sumSquaresSharding(SumSquaresOp squares, ShardingState &st) {
  if (st.get(squares.getInput()).isPartial() &&
      failed(st.convertOperand(squares, 0, Sharding::replicated())))
    return failure();
  Sharding s = st.get(squares.getInput());
  st.set(squares,
         s.isReplicated() ? Sharding::replicated() : Sharding::partial());
  return success();
}

LogicalResult clipSharding(ClipCoefficientOp clip, ShardingState &st) {
  if (!st.get(clip.getSumSquares()).isReplicated() &&
      failed(st.convertOperand(clip, 0, Sharding::replicated())))
    return failure();
  st.set(clip.getNorm(), Sharding::replicated());
  st.set(clip.getCoefficient(), Sharding::replicated());
  return success();
}

LogicalResult adamSharding(AdamWOp adam, ShardingState &st) {
  if (st.get(adam.getGrad()).isPartial() &&
      failed(st.convertOperand(adam, 1, Sharding::replicated())))
    return failure();
  return success();
}

LogicalResult accumulateLowering(AccumulateGradOp sink, Lowering &l) {
  lower_to_exec::ParamBuffers *param = l.paramBuffers(sink.getName());
  if (!param)
    return sink.emitOpError() << "accumulates into '" << sink.getName()
                              << "', which is not a parameter";
  l.launch(sink.getLoc(), kernel::Accumulate{.x = l.operand(sink.getGrad()),
                                             .y = param->grad});
  return success();
}

} // namespace

void OpRules<AccumulateGradOp>::attach(MLIRContext &context) {
  attachContext<AccumulateGradOp, contextNone<AccumulateGradOp>>(context);
  attachSharding<AccumulateGradOp, accumulateSharding>(context);
  attachLowering<AccumulateGradOp, accumulateLowering>(context);
}
void OpRules<GradOp>::attach(MLIRContext &context) {
  attachContext<GradOp, contextNone<GradOp>>(context);
  attachSharding<GradOp, gradSharding>(context);
}
void OpRules<SumSquaresOp>::attach(MLIRContext &context) {
  attachContext<SumSquaresOp, contextNone<SumSquaresOp>>(context);
  attachSharding<SumSquaresOp, sumSquaresSharding>(context);
}
void OpRules<ClipCoefficientOp>::attach(MLIRContext &context) {
  attachContext<ClipCoefficientOp, contextNone<ClipCoefficientOp>>(context);
  attachSharding<ClipCoefficientOp, clipSharding>(context);
}
void OpRules<AdamWOp>::attach(MLIRContext &context) {
  attachContext<AdamWOp, contextNone<AdamWOp>>(context);
  attachSharding<AdamWOp, adamSharding>(context);
}

} // namespace strata
