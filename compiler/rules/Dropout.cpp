//===- Dropout.cpp - dropout ----------------------------------------------===//
//
// Gradient: dropout is linear for its mask, and the mask is a function of
// the keys, the site and the element: the gradient is the same dropout of
// the output's gradient.
//
// Sharding: as Megatron drops out, after a partial sum is reduced (the
// stream's sharding: replicated, or split along the sequence with
// sequence parallelism); any split but the batch's is carried, and the op
// records it (dist.split_dim, dist.global_shape) for its lowering, which
// draws each element by its index in the unsplit tensor.
//
// Lowering: one launch; the rank's share of the split dimension starts at
// its tensor-parallel coordinate times the share.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Dropout.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult dropoutGradient(DropoutOp dropout, GradientBuilder &g,
                              ArrayRef<Value> dys) {
  g.contribute(dropout.getInput(),
               DropoutOp::create(g.builder(), dropout.getLoc(), dys.front(),
                                 dropout.getKeys(),
                                 dropout.getRate().convertToDouble(),
                                 int64_t(dropout.getSite())),
               dropout.getLoc());
  return success();
}

LogicalResult dropoutSharding(DropoutOp dropout, ShardingState &st) {
  Sharding s = st.get(dropout.getInput());
  if (s.isPartial() || s.isSplit(0)) {
    Sharding to = s.isPartial() ? st.streamSharding(dropout.getInput())
                                : Sharding::replicated();
    if (failed(st.convertOperand(dropout, 0, to)))
      return failure();
    s = st.get(dropout.getInput());
  }
  if (!st.get(dropout.getKeys()).isReplicated() &&
      failed(st.convertOperand(dropout, 1, Sharding::replicated())))
    return failure();
  recordDropoutSplit(dropout, s, dropout.getResult().getType(), st.builder());
  st.set(dropout, s);
  return success();
}

/// Planning: the split is carried as it is, but the batch's.
void dropoutSplit(DropoutOp dropout, OpOperand &use, int64_t dim,
                  SplitPlanner &planner) {
  if (use.getOperandNumber() != 0)
    return;
  planner.follow(dropout.getResult(), dim == 0 ? -1 : dim);
}

LogicalResult dropoutLowering(DropoutOp dropout, Lowering &l) {
  launchDropout(l, dropout, dropout.getResult().getType(),
                l.operand(dropout.getInput()), l.operand(dropout.getKeys()),
                l.result(dropout), dropout.getRate().convertToDouble(),
                int64_t(dropout.getSite()));
  return success();
}

} // namespace

void recordDropoutSplit(Operation *op, Sharding s, RankedTensorType global,
                        OpBuilder &b) {
  if (!s.isSplit())
    return;
  dist::splitDim(b.getContext()).setAttr(op, b.getI64IntegerAttr(s.dim));
  dist::globalShape(b.getContext())
      .setAttr(op, b.getDenseI64ArrayAttr(global.getShape()));
}

exec::LaunchOp launchDropout(Lowering &l, Operation *op, RankedTensorType local,
                             exec::BufferOp x, exec::BufferOp keys,
                             exec::BufferOp y, double rate, int64_t site) {
  int64_t dim = 0, size = 0;
  MLIRContext *context = op->getContext();
  if (IntegerAttr split = dist::splitDim(context).getAttr(op)) {
    dim = split.getInt();
    if (DenseI64ArrayAttr global = dist::globalShape(context).getAttr(op))
      size = global[dim];
  }
  exec::LaunchOp launched =
      l.launch(op->getLoc(), kernel::Dropout{.x = x,
                                             .keys = keys,
                                             .y = y,
                                             .rate = rate,
                                             .site = site,
                                             .split_dim = dim,
                                             .split_offset = 0,
                                             .split_size = size});
  if (dim > 0)
    l.perRank(launched, "split_offset", kTensorAxis, local.getDimSize(dim));
  return launched;
}

namespace {

/// Dropout's mask follows each element's index in the whole sample, which
/// a rank's two chunks do not keep: not split yet.
LogicalResult dropoutContext(DropoutOp dropout, ContextState &state) {
  if (state.dim(dropout.getInput()) < 0)
    return success();
  return state.error(dropout)
         << "dropout is not split along the sequence yet: set its rate to 0";
}
} // namespace

void OpRules<DropoutOp>::attach(MLIRContext &context) {
  attachContext<DropoutOp, dropoutContext>(context);
  attachGradient<DropoutOp, dropoutGradient>(context);
  attachSharding<DropoutOp, dropoutSharding, dropoutSplit>(context);
  attachLowering<DropoutOp, dropoutLowering>(context);
}

} // namespace strata
