//===- Attention.cpp - attention and rotary positions ---------------------===//
//
// Gradients: attention's backward recomputes the probabilities from the
// forward's row log-sum-exp (the flash-attention contract) and gives the
// query's, key's and value's gradients at once; a rotation's gradient is
// the rotation by the opposite angle.
//
// Sharding: attention splits its heads. Queries split with their weight;
// keys and values split with them when their heads divide, else stay
// replicated and each rank's query heads read the kv heads they belong to
// (`group_size`, `dist.query_heads_split`), their gradients then partial.
// The row log-sum-exp splits its heads (dimension 1) with the queries.
// Rope's angles depend on position and pair: the sequence and the head
// dimension must be whole, the heads may split.
//
// Lowering: a launch each. With the query heads split and the kv heads
// replicated, the launch reads the kv head of each local query head from
// the rank's first query head (a per-rank offset); the log-sum-exp stays
// f32 in bf16 mode.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult ropeGradient(RopeOp rope, GradientBuilder &g,
                           ArrayRef<Value> dys) {
  OpBuilder &b = g.builder();
  g.contribute(rope.getInput(),
               RopeOp::create(b, rope.getLoc(), rope.getType(), dys.front(),
                              rope.getBaseAttr(),
                              rope.getInverse() ? UnitAttr() : b.getUnitAttr()),
               rope.getLoc());
  return success();
}

LogicalResult attentionGradient(AttentionOp attention, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  Location loc = attention.getLoc();
  auto grad = AttentionGradOp::create(
      g.builder(), loc, attention.getQuery().getType(),
      attention.getKey().getType(), attention.getValue().getType(),
      attention.getQuery(), attention.getKey(), attention.getValue(),
      attention.getResult(), attention.getLse(), dys.front(),
      attention.getCausalAttr(), attention.getGroupSizeAttr());
  g.contribute(attention.getQuery(), grad.getQueryGrad(), loc);
  g.contribute(attention.getKey(), grad.getKeyGrad(), loc);
  g.contribute(attention.getValue(), grad.getValueGrad(), loc);
  return success();
}

LogicalResult ropeSharding(RopeOp rope, ShardingState &st) {
  Sharding s = st.get(rope.getInput());
  if (s.isPartial() && rope.getInverse()) {
    st.set(rope, s); // linear: the gradient may stay partial
    return success();
  }
  if (s.isPartial() || s.isSplit(1) || s.isSplit(3)) {
    if (failed(st.convertOperand(rope, 0, Sharding::replicated())))
      return failure();
    s = Sharding::replicated();
  }
  st.set(rope, s);
  return success();
}

/// Operands: q, k, v (and output, lse, grad when backward).
LogicalResult attentionSharding(Operation *op, bool backward,
                                ShardingState &st) {
  unsigned count = op->getNumOperands();
  auto isLse = [&](unsigned i) {
    return backward && op->getOperand(i) == cast<AttentionGradOp>(op).getLse();
  };
  auto lseOf = [](Sharding q) {
    return q.isSplit() ? Sharding::split(1) : Sharding::replicated();
  };
  for (unsigned i = 0; i < count; ++i)
    if (st.get(op->getOperand(i)).isPartial() &&
        failed(st.convertOperand(op, i, Sharding::replicated())))
      return failure();
  for (unsigned i = 0; i < count; ++i) {
    Sharding s = st.get(op->getOperand(i));
    if (!isLse(i) && s.isSplit() && s.dim != 2 &&
        failed(st.convertOperand(op, i, Sharding::replicated())))
      return failure();
  }
  Sharding q = st.get(op->getOperand(0)), k = st.get(op->getOperand(1)),
           v = st.get(op->getOperand(2));
  if (k != v && failed(st.convertOperand(op, 2, k)))
    return failure();
  if (q.isReplicated() && k.isSplit() &&
      (failed(st.convertOperand(op, 1, Sharding::replicated())) ||
       failed(st.convertOperand(op, 2, Sharding::replicated()))))
    return failure();
  k = st.get(op->getOperand(1));
  if (backward) {
    for (unsigned i = 3; i < count; ++i) {
      Sharding expected = isLse(i) ? lseOf(q) : q;
      if (st.get(op->getOperand(i)) != expected &&
          failed(st.convertOperand(op, i, expected)))
        return failure();
    }
  }
  if (q.isSplit() && k.isReplicated()) {
    // Each rank's query heads read the replicated kv heads they belong to.
    auto query = cast<RankedTensorType>(op->getOperand(0).getType());
    auto key = cast<RankedTensorType>(op->getOperand(1).getType());
    OpBuilder &b = st.builder();
    op->setAttr("group_size",
                b.getI64IntegerAttr(query.getDimSize(2) / key.getDimSize(2)));
    dist::queryHeadsSplit(b.getContext()).setAttr(op, b.getUnitAttr());
  }
  st.set(op->getResult(0), q);
  if (!backward)
    st.set(op->getResult(1), lseOf(q));
  if (backward) {
    // A replicated kv head's gradient sums over the ranks' query heads.
    Sharding kv = k.isReplicated() && q.isSplit() ? Sharding::partial() : k;
    st.set(op->getResult(1), kv);
    st.set(op->getResult(2), kv);
  }
  return success();
}

LogicalResult forwardAttentionSharding(AttentionOp op, ShardingState &st) {
  return attentionSharding(op, /*backward=*/false, st);
}
LogicalResult backwardAttentionSharding(AttentionGradOp op, ShardingState &st) {
  return attentionSharding(op, /*backward=*/true, st);
}

/// Planning: rope cannot carry a split of the pairs it rotates.
void ropeSplit(RopeOp rope, OpOperand &, int64_t dim, SplitPlanner &planner) {
  if (dim == 3)
    planner.block(rope, "rope rotates pairs within a head");
  planner.follow(rope, dim == 3 ? -1 : dim);
}

/// Planning: attention needs its queries' heads split (its keys' and
/// values' only if they can) and splits nothing else.
void attentionSplit(AttentionOp attention, OpOperand &use, int64_t dim,
                    SplitPlanner &planner) {
  if (dim >= 0 && dim != 2)
    planner.block(attention, "attention splits heads only");
  planner.want(use.getOperandNumber() == 0 ? SplitPlanner::Need::Required
                                           : SplitPlanner::Need::Optional);
}

LogicalResult ropeLowering(RopeOp rope, Lowering &l) {
  l.launch(rope.getLoc(), kernel::Rope{.x = l.operand(rope.getInput()),
                                       .y = l.result(rope),
                                       .base = rope.getBase().convertToDouble(),
                                       .inverse = rope.getInverse()});
  return success();
}

/// The kv heads' grouping of a forward or backward attention, and the
/// per-rank stride of its first query head (0: none).
template <typename Op> std::pair<int64_t, int64_t> headGrouping(Op op) {
  int64_t heads = cast<RankedTensorType>(op.getQuery().getType()).getDimSize(2);
  int64_t kvHeads = cast<RankedTensorType>(op.getKey().getType()).getDimSize(2);
  int64_t group = heads / kvHeads, firstStride = 0;
  if (std::optional<uint64_t> size = op.getGroupSize()) {
    group = int64_t(*size);
    if (dist::queryHeadsSplit(op->getContext()).isAttrPresent(op))
      firstStride = heads;
  }
  return {group, firstStride};
}

LogicalResult attentionLowering(AttentionOp attention, Lowering &l) {
  auto [group, firstStride] = headGrouping(attention);
  exec::LaunchOp launched =
      l.launch(attention.getLoc(),
               kernel::AttentionFwd{
                   .q = l.operand(attention.getQuery()),
                   .k = l.operand(attention.getKey()),
                   .v = l.operand(attention.getValue()),
                   .o = l.result(attention.getResult()),
                   .lse = l.result(attention.getLse(), /*keepF32=*/true),
                   .causal = attention.getCausal(),
                   .group_size = group,
                   .query_head_offset = 0});
  if (firstStride)
    l.perRank(launched, "query_head_offset", kTensorAxis, firstStride);
  return success();
}

LogicalResult attentionGradLowering(AttentionGradOp grad, Lowering &l) {
  auto [group, firstStride] = headGrouping(grad);
  exec::LaunchOp launched = l.launch(
      grad.getLoc(), kernel::AttentionBwd{.q = l.operand(grad.getQuery()),
                                          .k = l.operand(grad.getKey()),
                                          .v = l.operand(grad.getValue()),
                                          .o = l.operand(grad.getOutput()),
                                          .lse = l.operand(grad.getLse()),
                                          .dout = l.operand(grad.getGrad()),
                                          .dq = l.result(grad.getQueryGrad()),
                                          .dk = l.result(grad.getKeyGrad()),
                                          .dv = l.result(grad.getValueGrad()),
                                          .causal = grad.getCausal(),
                                          .group_size = group,
                                          .query_head_offset = 0});
  if (firstStride)
    l.perRank(launched, "query_head_offset", kTensorAxis, firstStride);
  return success();
}

} // namespace

void OpRules<RopeOp>::attach(MLIRContext &context) {
  attachGradient<RopeOp, ropeGradient>(context);
  attachSharding<RopeOp, ropeSharding, ropeSplit>(context);
  attachLowering<RopeOp, ropeLowering>(context);
}
void OpRules<AttentionOp>::attach(MLIRContext &context) {
  attachGradient<AttentionOp, attentionGradient>(context);
  attachSharding<AttentionOp, forwardAttentionSharding, attentionSplit>(
      context);
  attachLowering<AttentionOp, attentionLowering>(context);
}
// Backward only: no gradient of its own.
void OpRules<AttentionGradOp>::attach(MLIRContext &context) {
  attachSharding<AttentionGradOp, backwardAttentionSharding>(context);
  attachLowering<AttentionGradOp, attentionGradLowering>(context);
}

} // namespace strata
