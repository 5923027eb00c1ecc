//===- Pointwise.cpp - elementwise arithmetic and activations -------------===//
//
// Gradients (the right operand of add, sub and mul may broadcast over
// leading dimensions: its gradient is summed down to its shape):
//   a + b:  da = dy, db = dy            a - b:  da = dy, db = -dy
//   a * b:  da = dy * b, db = dy * a    s * a:  da = s * dy
//   gelu, silu: their own backward ops (graph.gelu_grad, silu_grad)
//
// Sharding: add and sub are linear in both operands jointly (two partial
// sums stay partial), mul in each separately (partial times replicated
// stays partial); otherwise the right operand follows the left, and a
// partial side becomes the stream's sharding (the residual add). A sum of
// scalars (the gradient norm's) stays partial, a replicated term counted on
// the first rank only, so that the total is all-reduced once. Activations
// need whole values: a partial input is all-reduced first.
//
// Lowering: a launch each (a bias add or GELU a gemm absorbed is done by
// then, Matmul.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult addGradient(AddOp add, GradientBuilder &g, ArrayRef<Value> dys) {
  Location loc = add.getLoc();
  g.contribute(add.getLhs(), dys.front(), loc);
  g.contribute(add.getRhs(), g.sumTo(dys.front(), add.getRhs().getType(), loc),
               loc);
  return success();
}

LogicalResult subGradient(SubOp sub, GradientBuilder &g, ArrayRef<Value> dys) {
  Location loc = sub.getLoc();
  g.contribute(sub.getLhs(), dys.front(), loc);
  Value summed = g.sumTo(dys.front(), sub.getRhs().getType(), loc);
  g.contribute(sub.getRhs(),
               ScaleOp::create(g.builder(), loc, summed,
                               g.builder().getF64FloatAttr(-1.0)),
               loc);
  return success();
}

LogicalResult mulGradient(MulOp mul, GradientBuilder &g, ArrayRef<Value> dys) {
  OpBuilder &b = g.builder();
  Location loc = mul.getLoc();
  Value lhs = mul.getLhs(), rhs = mul.getRhs(), dy = dys.front();
  g.contribute(lhs, MulOp::create(b, loc, lhs.getType(), dy, rhs), loc);
  Value full = MulOp::create(b, loc, lhs.getType(), dy, lhs);
  g.contribute(rhs, g.sumTo(full, rhs.getType(), loc), loc);
  return success();
}

LogicalResult scaleGradient(ScaleOp scale, GradientBuilder &g,
                            ArrayRef<Value> dys) {
  g.contribute(scale.getInput(),
               ScaleOp::create(g.builder(), scale.getLoc(), dys.front(),
                               scale.getFactorAttr()),
               scale.getLoc());
  return success();
}

LogicalResult geluGradient(GeluOp gelu, GradientBuilder &g,
                           ArrayRef<Value> dys) {
  g.contribute(gelu.getInput(),
               GeluGradOp::create(g.builder(), gelu.getLoc(), gelu.getInput(),
                                  dys.front(), gelu.getTanh()),
               gelu.getLoc());
  return success();
}

LogicalResult siluGradient(SiluOp silu, GradientBuilder &g,
                           ArrayRef<Value> dys) {
  g.contribute(silu.getInput(),
               SiluGradOp::create(g.builder(), silu.getLoc(), silu.getInput(),
                                  dys.front()),
               silu.getLoc());
  return success();
}

/// add and sub (linear in both operands jointly), mul (in each
/// separately). The right operand may broadcast over leading dimensions.
LogicalResult broadcastSharding(Operation *op, bool linearInBoth,
                                ShardingState &st) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  int64_t offset = cast<RankedTensorType>(lhs.getType()).getRank() -
                   cast<RankedTensorType>(rhs.getType()).getRank();
  // The rhs sharding that matches an lhs sharding.
  auto matching = [&](Sharding l) {
    if (l.isSplit() && l.dim >= offset)
      return Sharding::split(l.dim - offset);
    return Sharding::replicated();
  };
  if (st.isUndecidedParam(rhs)) {
    if (st.get(lhs).isPartial() &&
        failed(st.convertOperand(op, 0, st.streamSharding(lhs))))
      return failure();
    st.decide(rhs, matching(st.get(op->getOperand(0))));
  }
  Sharding l = st.get(op->getOperand(0)), r = st.get(op->getOperand(1));
  if (linearInBoth && l.isPartial() && r.isPartial()) {
    st.set(op->getResult(0), Sharding::partial());
    return success();
  }
  if (!linearInBoth && (l.isPartial() != r.isPartial()) &&
      (l.isReplicated() || r.isReplicated())) {
    // P·R stays partial: the product is linear in the partial factor.
    st.set(op->getResult(0), Sharding::partial());
    return success();
  }
  // A partial side becomes the stream's sharding (the residual add).
  if (l.isPartial()) {
    Sharding to = r.isSplit() && r.dim + offset >= 0
                      ? Sharding::split(r.dim + offset)
                      : st.streamSharding(lhs);
    if (failed(st.convertOperand(op, 0, to)))
      return failure();
  }
  l = st.get(op->getOperand(0));
  r = st.get(op->getOperand(1));
  if (r.isPartial() || r != matching(l)) {
    // The rhs follows the lhs when it can be sliced or reduced to it; an
    // lhs split on a dimension the rhs does not have needs nothing.
    Sharding target = matching(l);
    if (r.isSplit() && target.isReplicated() && l.isReplicated()) {
      // A split rhs against a replicated lhs: slice the lhs instead.
      if (failed(st.convertOperand(op, 0, Sharding::split(r.dim + offset))))
        return failure();
      l = st.get(op->getOperand(0));
      target = matching(l);
    }
    if (st.get(op->getOperand(1)) != target &&
        failed(st.convertOperand(op, 1, target)))
      return failure();
  }
  st.set(op->getResult(0), st.get(op->getOperand(0)));
  return success();
}

LogicalResult addSharding(AddOp add, ShardingState &st) {
  if (add.getType().getRank() == 0) {
    // Sums of scalars (the gradient norm) stay partial: a replicated term
    // is counted once, on the first rank, and the total all-reduced once.
    Sharding l = st.get(add.getLhs()), r = st.get(add.getRhs());
    if (l.isPartial() || r.isPartial()) {
      if (l.isReplicated() &&
          failed(st.convertOperand(add, 0, Sharding::partial())))
        return failure();
      if (r.isReplicated() &&
          failed(st.convertOperand(add, 1, Sharding::partial())))
        return failure();
      st.set(add, Sharding::partial());
      return success();
    }
  }
  return broadcastSharding(add, /*linearInBoth=*/true, st);
}

LogicalResult subSharding(SubOp sub, ShardingState &st) {
  return broadcastSharding(sub, /*linearInBoth=*/true, st);
}

LogicalResult mulSharding(MulOp mul, ShardingState &st) {
  return broadcastSharding(mul, /*linearInBoth=*/false, st);
}

LogicalResult scaleSharding(ScaleOp scale, ShardingState &st) {
  st.set(scale, st.get(scale.getInput()));
  return success();
}

template <typename Op>
LogicalResult activationSharding(Op op, ShardingState &st) {
  if (st.get(op->getOperand(0)).isPartial() &&
      failed(st.convertOperand(op, 0, Sharding::replicated())))
    return failure();
  st.set(op->getResult(0), st.get(op->getOperand(0)));
  return success();
}

/// (input, grad): the gradient follows the input.
template <typename Op>
LogicalResult activationGradSharding(Op op, ShardingState &st) {
  Sharding x = st.get(op->getOperand(0));
  if (x.isPartial() && failed(st.convertOperand(op, 0, Sharding::replicated())))
    return failure();
  x = st.get(op->getOperand(0));
  if (st.get(op->getOperand(1)) != x && failed(st.convertOperand(op, 1, x)))
    return failure();
  st.set(op->getResult(0), x);
  return success();
}

/// Planning: a bias or table parameter added follows the split; another
/// activation is the residual stream, where the split would have to end.
template <typename Op>
void biasSplit(Op op, OpOperand &use, int64_t dim, SplitPlanner &planner) {
  Value other = op->getOperand(1 - use.getOperandNumber());
  if (other.getDefiningOp<ParamOp>())
    planner.follow(op->getResult(0), dim);
}

/// Planning: an elementwise op carries the split as it is.
template <typename Op>
void pointwiseSplit(Op op, OpOperand &, int64_t dim, SplitPlanner &planner) {
  planner.follow(op->getResult(0), dim);
}

/// add, sub and mul: one launch of their kernel, y broadcast over x's rows.
template <typename Op, typename Kernel>
LogicalResult binaryLowering(Op op, Lowering &l) {
  l.launch(op.getLoc(), Kernel{.x = l.operand(op.getLhs()),
                               .y = l.operand(op.getRhs()),
                               .z = l.result(op)});
  return success();
}

LogicalResult scaleLowering(ScaleOp scale, Lowering &l) {
  l.launch(scale.getLoc(),
           kernel::Scale{.x = l.operand(scale.getInput()),
                         .y = l.result(scale),
                         .factor = scale.getFactor().convertToDouble()});
  return success();
}

LogicalResult geluLowering(GeluOp gelu, Lowering &l) {
  if (gelu.getTanh())
    l.launch(gelu.getLoc(), kernel::GeluTanhFwd{.x = l.operand(gelu.getInput()),
                                                .y = l.result(gelu)});
  else
    l.launch(gelu.getLoc(), kernel::GeluFwd{.x = l.operand(gelu.getInput()),
                                            .y = l.result(gelu)});
  return success();
}

LogicalResult siluLowering(SiluOp silu, Lowering &l) {
  l.launch(silu.getLoc(), kernel::SiluFwd{.x = l.operand(silu.getInput()),
                                          .y = l.result(silu)});
  return success();
}

LogicalResult geluGradLowering(GeluGradOp grad, Lowering &l) {
  if (grad.getTanh())
    l.launch(grad.getLoc(), kernel::GeluTanhBwd{.x = l.operand(grad.getInput()),
                                                .dy = l.operand(grad.getGrad()),
                                                .dx = l.result(grad)});
  else
    l.launch(grad.getLoc(), kernel::GeluBwd{.x = l.operand(grad.getInput()),
                                            .dy = l.operand(grad.getGrad()),
                                            .dx = l.result(grad)});
  return success();
}

LogicalResult siluGradLowering(SiluGradOp grad, Lowering &l) {
  l.launch(grad.getLoc(), kernel::SiluBwd{.x = l.operand(grad.getInput()),
                                          .dy = l.operand(grad.getGrad()),
                                          .dx = l.result(grad)});
  return success();
}

/// Elementwise with broadcasting (the right operand's shape a suffix of the
/// left's): a right operand that runs along the sequence must do so on the
/// same dimension; one that does not but spans the left's sequence
/// dimension is a table over positions (GPT's learned positions), whose
/// rows the rank reads at its chunks' places: the add becomes
/// add_positions (Positions.cpp).
template <typename Op>
LogicalResult broadcastContext(Op op, ContextState &state) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  int64_t dl = state.dim(lhs), dr = state.dim(rhs);
  int64_t offset = cast<RankedTensorType>(lhs.getType()).getRank() -
                   cast<RankedTensorType>(rhs.getType()).getRank();
  if (dl < 0 && dr < 0)
    return success();
  if (dl < 0 || (dr >= 0 && dr + offset != dl))
    return state.error(op) << "its operands run along the sequence on "
                              "different dimensions";
  if (dr < 0 && dl >= offset) {
    if (dl != offset)
      return state.error(op) << "it adds a table over the sequence's "
                                "positions whose first dimension is not "
                                "the sequence";
    if (!isa<AddOp>(op.getOperation()))
      return state.error(op)
             << "it scales by a table over the sequence's positions (only "
                "adding one, as learned positions are, is split)";
    OpBuilder &b = state.builder();
    b.setInsertionPoint(op);
    state.replace(op,
                  AddPositionsOp::create(b, op.getLoc(), lhs.getType(), lhs,
                                         rhs,
                                         b.getI64IntegerAttr(state.size())),
                  dl);
    return success();
  }
  state.set(op.getResult(), dl);
  return success();
}

} // namespace

void OpRules<AddOp>::attach(MLIRContext &context) {
  attachContext<AddOp, broadcastContext<AddOp>>(context);
  attachGradient<AddOp, addGradient>(context);
  attachSharding<AddOp, addSharding, biasSplit<AddOp>>(context);
  attachLowering<AddOp, binaryLowering<AddOp, kernel::Add>>(context);
}
void OpRules<SubOp>::attach(MLIRContext &context) {
  attachContext<SubOp, broadcastContext<SubOp>>(context);
  attachGradient<SubOp, subGradient>(context);
  attachSharding<SubOp, subSharding, biasSplit<SubOp>>(context);
  attachLowering<SubOp, binaryLowering<SubOp, kernel::Sub>>(context);
}
void OpRules<MulOp>::attach(MLIRContext &context) {
  attachContext<MulOp, broadcastContext<MulOp>>(context);
  attachGradient<MulOp, mulGradient>(context);
  attachSharding<MulOp, mulSharding, pointwiseSplit<MulOp>>(context);
  attachLowering<MulOp, binaryLowering<MulOp, kernel::Mul>>(context);
}
void OpRules<ScaleOp>::attach(MLIRContext &context) {
  attachContext<ScaleOp, contextLikeInput<ScaleOp>>(context);
  attachGradient<ScaleOp, scaleGradient>(context);
  attachSharding<ScaleOp, scaleSharding, pointwiseSplit<ScaleOp>>(context);
  attachLowering<ScaleOp, scaleLowering>(context);
}
void OpRules<GeluOp>::attach(MLIRContext &context) {
  attachContext<GeluOp, contextLikeInput<GeluOp>>(context);
  attachGradient<GeluOp, geluGradient>(context);
  attachSharding<GeluOp, activationSharding<GeluOp>, pointwiseSplit<GeluOp>>(
      context);
  attachLowering<GeluOp, geluLowering>(context);
}
void OpRules<SiluOp>::attach(MLIRContext &context) {
  attachContext<SiluOp, contextLikeInput<SiluOp>>(context);
  attachGradient<SiluOp, siluGradient>(context);
  attachSharding<SiluOp, activationSharding<SiluOp>, pointwiseSplit<SiluOp>>(
      context);
  attachLowering<SiluOp, siluLowering>(context);
}
// Backward only: no gradients of their own.
void OpRules<GeluGradOp>::attach(MLIRContext &context) {
  attachContext<GeluGradOp, contextLikeInput<GeluGradOp>>(context);
  attachSharding<GeluGradOp, activationGradSharding<GeluGradOp>>(context);
  attachLowering<GeluGradOp, geluGradLowering>(context);
}
void OpRules<SiluGradOp>::attach(MLIRContext &context) {
  attachContext<SiluGradOp, contextLikeInput<SiluGradOp>>(context);
  attachSharding<SiluGradOp, activationGradSharding<SiluGradOp>>(context);
  attachLowering<SiluGradOp, siluGradLowering>(context);
}

} // namespace strata
