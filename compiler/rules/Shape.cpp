//===- Shape.cpp - reshape, transpose and sums to a broadcast shape -------===//
//
// Gradients: a reshape's is the gradient reshaped back; a transpose's is
// the gradient transposed by the inverse permutation.
//
// Sharding: a split passes through a reshape when some output dimension
// holds the same blocks (else the input is gathered first) and through a
// transpose to where its dimension moves; summing a broadcast operand's
// gradient over a split leading dimension makes it partial.
//
// Lowering: a reshape is a view of its input's buffer; a transpose a
// launch; a bias gradient is summed in the epilogue of the weight gradient
// beside it when both accumulate (Matmul.cpp), else a launch.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"
#include "dialects/graph/GraphShapes.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult reshapeGradient(ReshapeOp reshape, GradientBuilder &g,
                              ArrayRef<Value> dys) {
  g.contribute(reshape.getInput(),
               ReshapeOp::create(g.builder(), reshape.getLoc(),
                                 reshape.getInput().getType(), dys.front()),
               reshape.getLoc());
  return success();
}

LogicalResult transposeGradient(TransposeOp transpose, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  ArrayRef<int64_t> perm = transpose.getPermutation();
  SmallVector<int64_t> inverse(perm.size());
  for (auto [i, p] : llvm::enumerate(perm))
    inverse[p] = i;
  g.contribute(transpose.getInput(),
               TransposeOp::create(g.builder(), transpose.getLoc(),
                                   transpose.getInput().getType(), dys.front(),
                                   g.builder().getDenseI64ArrayAttr(inverse)),
               transpose.getLoc());
  return success();
}

LogicalResult reshapeSharding(ReshapeOp reshape, ShardingState &st) {
  Sharding s = st.get(reshape.getInput());
  if (s.isSplit()) {
    std::string why;
    auto mapped = st.mapThroughReshape(reshape.getInput().getType(), s.dim,
                                       reshape.getType(), why);
    if (!mapped) {
      if (failed(st.convertOperand(reshape, 0, Sharding::replicated())))
        return failure();
      s = Sharding::replicated();
    } else {
      s = Sharding::split(*mapped);
    }
  }
  st.set(reshape, s);
  return success();
}

LogicalResult transposeSharding(TransposeOp transpose, ShardingState &st) {
  Sharding s = st.get(transpose.getInput());
  if (s.isSplit()) {
    auto perm = transpose.getPermutation();
    for (int64_t e = 0; e < int64_t(perm.size()); ++e)
      if (perm[e] == s.dim)
        s = Sharding::split(e);
  }
  st.set(transpose, s);
  return success();
}

LogicalResult sumToSharding(SumToOp sum, ShardingState &st) {
  Sharding s = st.get(sum.getInput());
  int64_t offset = sum.getInput().getType().getRank() - sum.getType().getRank();
  if (s.isSplit())
    s = s.dim < offset ? Sharding::partial() : Sharding::split(s.dim - offset);
  st.set(sum, s);
  return success();
}

/// Planning: through a reshape when an output dimension holds the same
/// blocks; through a transpose to where the dimension moves.
void reshapeSplit(ReshapeOp reshape, OpOperand &use, int64_t dim,
                  SplitPlanner &planner) {
  std::optional<int64_t> mapped;
  if (dim >= 0) {
    std::string why;
    mapped = planner.state.mapThroughReshape(
        cast<RankedTensorType>(use.get().getType()), dim, reshape.getType(),
        why);
    if (!mapped)
      planner.block(reshape, "the reshape to " + describe(reshape.getType()) +
                                 " cannot carry the split: " + why);
  }
  planner.follow(reshape, mapped ? *mapped : -1);
}

void transposeSplit(TransposeOp transpose, OpOperand &, int64_t dim,
                    SplitPlanner &planner) {
  auto perm = transpose.getPermutation();
  int64_t moved = -1;
  for (int64_t e = 0; e < int64_t(perm.size()); ++e)
    if (perm[e] == dim)
      moved = e;
  planner.follow(transpose, moved);
}

LogicalResult reshapeLowering(ReshapeOp reshape, Lowering &l) {
  l.view(reshape, l.operand(reshape.getInput()));
  return success();
}

LogicalResult transposeLowering(TransposeOp transpose, Lowering &l) {
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  l.launch(transpose.getLoc(),
           kernel::Transpose{.x = l.operand(transpose.getInput()),
                             .y = l.result(transpose),
                             .permutation = SmallVector<int64_t>(permutation)});
  return success();
}

/// A sum_to absorbed into a weight gradient's epilogue (a bias gradient,
/// --strata-fuse-epilogues) is lowered there, not here.
LogicalResult sumToLowering(SumToOp sum, Lowering &l) {
  auto [target, accumulate] = l.gradientTarget(sum);
  l.launch(sum.getLoc(), kernel::SumTo{.x = l.operand(sum.getInput()),
                                       .y = target,
                                       .accumulate = accumulate});
  return success();
}

/// A reshape keeps the sequence where one dimension of the result holds
/// the same blocks and as many positions.
LogicalResult reshapeContext(ReshapeOp reshape, ContextState &state) {
  int64_t d = state.dim(reshape.getInput());
  if (d < 0)
    return success();
  auto in = reshape.getInput().getType(), out = reshape.getType();
  std::optional<int64_t> e = dimThroughReshape(in, d, out);
  if (!e || out.getDimSize(*e) != in.getDimSize(d))
    return state.error(reshape) << "it regroups the sequence (dimension " << d
                                << " of " << describe(in) << ")";
  state.set(reshape.getResult(), *e);
  return success();
}

LogicalResult transposeContext(TransposeOp transpose, ContextState &state) {
  int64_t d = state.dim(transpose.getInput());
  ArrayRef<int64_t> permutation = transpose.getPermutation();
  for (size_t i = 0; d >= 0 && i < permutation.size(); ++i)
    if (permutation[i] == d)
      state.set(transpose.getResult(), int64_t(i));
  return success();
}

/// A sum over the leading dimensions: over the sequence, a sum over tokens
/// (partial over the cp ranks). Keeping it, either the gradient of a
/// table over positions (a parameter's: what it adds up goes to its
/// accumulator), whose rows at the rank's chunks it gives (the rest zero):
/// sum_positions (Positions.cpp); or an activation's gradient, which runs
/// along the sequence as the activation did.
LogicalResult sumToContext(SumToOp sum, ContextState &state) {
  int64_t d = state.dim(sum.getInput());
  int64_t offset = sum.getInput().getType().getRank() - sum.getType().getRank();
  if (d < offset)
    return success();
  bool table = llvm::any_of(sum->getUsers(), [](Operation *user) {
    return isa<AccumulateGradOp>(user);
  });
  if (!table) {
    state.set(sum.getResult(), d - offset);
    return success();
  }
  if (d != offset)
    return state.error(sum) << "the gradient of a table over the sequence's "
                               "positions whose first dimension is not the "
                               "sequence";
  OpBuilder &b = state.builder();
  b.setInsertionPoint(sum);
  state.replace(sum,
                SumPositionsOp::create(b, sum.getLoc(), sum.getType(),
                                       sum.getInput(),
                                       b.getI64IntegerAttr(state.size())),
                -1);
  return success();
}

} // namespace

void OpRules<ReshapeOp>::attach(MLIRContext &context) {
  attachContext<ReshapeOp, reshapeContext>(context);
  attachGradient<ReshapeOp, reshapeGradient>(context);
  attachSharding<ReshapeOp, reshapeSharding, reshapeSplit>(context);
  attachLowering<ReshapeOp, reshapeLowering>(context);
}
void OpRules<TransposeOp>::attach(MLIRContext &context) {
  attachContext<TransposeOp, transposeContext>(context);
  attachGradient<TransposeOp, transposeGradient>(context);
  attachSharding<TransposeOp, transposeSharding, transposeSplit>(context);
  attachLowering<TransposeOp, transposeLowering>(context);
}
// Backward only (a broadcast operand's gradient): no gradient of its own.
void OpRules<SumToOp>::attach(MLIRContext &context) {
  attachContext<SumToOp, sumToContext>(context);
  attachSharding<SumToOp, sumToSharding>(context);
  attachLowering<SumToOp, sumToLowering>(context);
}

} // namespace strata
