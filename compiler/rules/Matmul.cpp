//===- Matmul.cpp - matrix products and their weight gradients ------------===//
//
// Gradient of y = x · w (w transposed with `transpose_b`):
//   dx = dy · wᵀ   a matmul with the transpose flipped
//   dw = xᵀ · dy   graph.matmul_weight_grad, summed over every row of x
//
// Sharding (Megatron's linears): a weight split along its output columns
// (decided by planning) makes the matmul column parallel, its output split
// along the last dimension; a weight split along its rows against an input
// split the same way makes it row parallel, its output partial. The
// weight gradient follows: split as the weight, or partial when both its
// operands split their rows alike.
//
// Lowering: one gemm, with the epilogue --strata-fuse-epilogues marked: a
// linear layer's bias, and an exact GELU after it; a weight gradient writes
// straight into its accumulator, and sums the bias gradient beside it in
// its epilogue (the sum_to and its accumulation absorbed).
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/FuseEpilogues.h"
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult matmulGradient(MatmulOp matmul, GradientBuilder &g,
                             ArrayRef<Value> dys) {
  OpBuilder &b = g.builder();
  Location loc = matmul.getLoc();
  Value dy = dys.front();
  bool transposeB = matmul.getTransposeB();
  g.contribute(matmul.getLhs(),
               MatmulOp::create(b, loc, matmul.getLhs().getType(), dy,
                                matmul.getRhs(),
                                transposeB ? UnitAttr() : b.getUnitAttr()),
               loc);
  g.contribute(matmul.getRhs(),
               MatmulWeightGradOp::create(
                   b, loc, matmul.getRhs().getType(), matmul.getLhs(), dy,
                   transposeB ? b.getUnitAttr() : UnitAttr()),
               loc);
  return success();
}

LogicalResult matmulSharding(MatmulOp op, ShardingState &st) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  int64_t last = op.getType().getRank() - 1;
  int64_t kDim = op.getTransposeB() ? 1 : 0, nDim = 1 - kDim;
  if (st.isUndecidedParam(rhs))
    st.decide(rhs, st.get(lhs).isSplit(last) ? Sharding::split(kDim)
                                             : Sharding::replicated());
  Sharding l = st.get(lhs), r = st.get(rhs);
  if (l.isPartial()) {
    if (r.isReplicated()) {
      st.set(op, Sharding::partial());
      return success();
    }
    if (failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    l = Sharding::replicated();
  }
  // The batch or sequence split of the lhs carries through a replicated
  // weight; with a split weight the lhs must be whole first.
  if (l.isSplit() && l.dim != last) {
    if (r.isReplicated()) {
      st.set(op, l);
      return success();
    }
    if (failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    l = Sharding::replicated();
  }
  if (l.isReplicated() && r.isReplicated()) {
    st.set(op, Sharding::replicated());
  } else if (l.isReplicated() && r.isSplit(nDim)) {
    st.set(op, Sharding::split(last)); // column parallel
  } else if (l.isSplit(last) && r.isSplit(kDim)) {
    st.set(op, Sharding::partial()); // row parallel
  } else if (l.isSplit(last) && r.isReplicated()) {
    if (failed(st.convertOperand(op, 1, Sharding::split(kDim))))
      return failure();
    st.set(op, Sharding::partial());
  } else if (l.isReplicated() && r.isSplit(kDim)) {
    if (failed(st.convertOperand(op, 0, Sharding::split(last))))
      return failure();
    st.set(op, Sharding::partial());
  } else {
    return st.error(op) << "no rule for this matmul's operand shardings";
  }
  return success();
}

LogicalResult weightGradSharding(MatmulWeightGradOp op, ShardingState &st) {
  // lhs [..., K], grad [..., N] -> [K, N] (or [N, K] transposed).
  int64_t last = op.getLhs().getType().getRank() - 1;
  bool transposed = op.getTransposeResult();
  int64_t kDim = transposed ? 1 : 0, nDim = 1 - kDim;
  Sharding l = st.get(op.getLhs()), g = st.get(op.getGrad());
  if (l.isPartial() && g.isPartial()) {
    if (failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    l = Sharding::replicated();
  }
  if (l.isPartial() || g.isPartial()) {
    Sharding other = l.isPartial() ? g : l;
    if (!other.isReplicated() &&
        failed(st.convertOperand(op, l.isPartial() ? 1 : 0,
                                 Sharding::replicated())))
      return failure();
    st.set(op, Sharding::partial());
    return success();
  }
  // Rows split the same way: each rank sums its rows, a partial result.
  if (l.isSplit() && g.isSplit() && l.dim == g.dim && l.dim != last) {
    st.set(op, Sharding::partial());
    return success();
  }
  // A row split on one side only: make that side whole.
  if (l.isSplit() && l.dim != last &&
      failed(st.convertOperand(op, 0, Sharding::replicated())))
    return failure();
  if (g.isSplit() && g.dim != last &&
      failed(st.convertOperand(op, 1, Sharding::replicated())))
    return failure();
  l = st.get(op.getLhs());
  g = st.get(op.getGrad());
  if (l.isSplit(last) && g.isSplit(last) &&
      failed(st.convertOperand(op, 1, Sharding::replicated())))
    return failure();
  g = st.get(op.getGrad());
  if (l.isReplicated() && g.isReplicated())
    st.set(op, Sharding::replicated());
  else if (l.isReplicated() && g.isSplit(last))
    st.set(op, Sharding::split(nDim));
  else if (l.isSplit(last) && g.isReplicated())
    st.set(op, Sharding::split(kDim));
  else
    return st.error(op) << "no rule for this weight gradient's shardings";
  return success();
}

/// Planning: a matmul needs its input split along the last dimension (it
/// becomes row parallel) and carries nothing on.
void matmulSplit(MatmulOp, OpOperand &use, int64_t dim, SplitPlanner &planner) {
  planner.wantLastDimension(use, dim);
}

int64_t rowsOf(RankedTensorType type) {
  return type.getNumElements() / type.getShape().back();
}

/// The epilogue --strata-fuse-epilogues marked on `op`.
std::optional<exec::Epilogue> epilogueOf(Operation *op) {
  StringAttr kind = exec::epilogue(op->getContext()).getAttr(op);
  return kind ? exec::symbolizeEpilogue(kind.getValue()) : exec::Epilogue::None;
}

/// `op` if it is marked absorbed, else null.
template <typename Op> Op ifAbsorbed(Op op) {
  return op && exec::absorbed(op->getContext()).isAttrPresent(op) ? op : Op();
}

/// The sum_to marked absorbed among `value`'s users, if any.
SumToOp absorbedSumOf(Value value) {
  for (Operation *user : value.getUsers())
    if (auto sum = ifAbsorbed(dyn_cast<SumToOp>(user)))
      return sum;
  return {};
}

LogicalResult matmulLowering(MatmulOp matmul, Lowering &l) {
  auto rhs = matmul.getRhs().getType();
  bool tb = matmul.getTransposeB();
  int64_t k = matmul.getLhs().getType().getShape().back();
  int64_t n = rhs.getDimSize(tb ? 0 : 1);
  // The bias add, and the GELU after it, that the epilogue absorbs: only
  // where the shape is one the epilogue computes exactly.
  std::optional<exec::Epilogue> kind = epilogueOf(matmul);
  if (!kind || kind == exec::Epilogue::BiasGrad)
    return matmul.emitOpError() << "is marked with an epilogue a product's "
                                   "gemm cannot have";
  AddOp biasAdd;
  GeluOp gelu;
  if (kind == exec::Epilogue::Bias || kind == exec::Epilogue::GeluBias)
    biasAdd = ifAbsorbed(epilogues::biasAddOf(matmul));
  if (biasAdd && kind == exec::Epilogue::GeluBias)
    gelu = ifAbsorbed(epilogues::exactGeluOf(biasAdd));
  if (kind != exec::Epilogue::None &&
      (!biasAdd || (kind == exec::Epilogue::GeluBias && !gelu)))
    return matmul.emitOpError()
           << "is marked with a gemm epilogue whose bias add or GELU is not "
              "one it computes, absorbed";
  exec::BufferOp pre = biasAdd ? l.result(biasAdd) : l.result(matmul);
  exec::GemmOp g =
      l.gemm(matmul.getLoc(), l.operand(matmul.getLhs()),
             l.operand(matmul.getRhs()), gelu ? l.result(gelu) : pre,
             rowsOf(matmul.getLhs().getType()), n, k, false, tb, false);
  if (biasAdd) {
    l.absorb(biasAdd);
    g.setBiasAttr(
        FlatSymbolRefAttr::get(l.operand(biasAdd.getRhs()).getSymNameAttr()));
    g.setEpilogue(exec::Epilogue::Bias);
  }
  if (gelu) {
    l.absorb(gelu);
    g.setAuxAttr(FlatSymbolRefAttr::get(pre.getSymNameAttr()));
    g.setEpilogue(exec::Epilogue::GeluBias);
  }
  return success();
}

LogicalResult weightGradLowering(MatmulWeightGradOp wgrad, Lowering &l) {
  // lhs [M, K], grad [M, N]: dW = lhsᵀ·grad [K, N], or gradᵀ·lhs [N, K].
  Location loc = wgrad.getLoc();
  auto lhs = wgrad.getLhs().getType();
  int64_t rows = rowsOf(lhs), k = lhs.getShape().back();
  int64_t n = wgrad.getGrad().getType().getShape().back();
  std::optional<exec::Epilogue> kind = epilogueOf(wgrad);
  if (kind != exec::Epilogue::None &&
      (kind != exec::Epilogue::BiasGrad || wgrad.getTransposeResult()))
    return wgrad.emitOpError() << "is marked with an epilogue its gemm "
                                  "cannot have";
  auto [target, accumulate] = l.gradientTarget(wgrad);
  if (wgrad.getTransposeResult()) {
    l.gemm(loc, l.operand(wgrad.getGrad()), l.operand(wgrad.getLhs()), target,
           n, k, rows, true, false, accumulate);
    return success();
  }
  exec::GemmOp g =
      l.gemm(loc, l.operand(wgrad.getLhs()), l.operand(wgrad.getGrad()), target,
             k, n, rows, true, false, accumulate);
  if (kind == exec::Epilogue::BiasGrad) {
    // The bias gradient beside it: the column sums of op(B) = dy, into
    // its accumulator (beta 1, like the weight's).
    SumToOp sum = absorbedSumOf(wgrad.getGrad());
    Lowering::GradientTarget bias =
        sum && epilogues::weightGradBeside(sum) == wgrad
            ? l.gradientTarget(sum)
            : Lowering::GradientTarget();
    if (!bias.accumulate)
      return wgrad.emitOpError()
             << "is marked to sum a bias gradient beside it that is not one "
                "its gemm computes, accumulating into a parameter";
    l.absorb(sum);
    g.setBiasAttr(FlatSymbolRefAttr::get(bias.buffer.getSymNameAttr()));
    g.setEpilogue(exec::Epilogue::BiasGrad);
  }
  return success();
}

/// Rows of the activation times a weight: the rows keep their sequence.
LogicalResult matmulContext(MatmulOp matmul, ContextState &state) {
  if (state.dim(matmul.getRhs()) >= 0)
    return state.error(matmul)
           << "its right operand runs along the sequence (attention written "
              "out by hand cannot be split; use attention())";
  int64_t d = state.dim(matmul.getLhs());
  if (d < 0)
    return success();
  if (d == matmul.getLhs().getType().getRank() - 1)
    return state.error(matmul) << "it sums over the sequence";
  state.set(matmul.getResult(), d);
  return success();
}

} // namespace

void OpRules<MatmulOp>::attach(MLIRContext &context) {
  attachContext<MatmulOp, matmulContext>(context);
  attachGradient<MatmulOp, matmulGradient>(context);
  attachSharding<MatmulOp, matmulSharding, matmulSplit>(context);
  attachLowering<MatmulOp, matmulLowering>(context);
}
// Backward only: no gradient of its own.
void OpRules<MatmulWeightGradOp>::attach(MLIRContext &context) {
  attachContext<MatmulWeightGradOp, contextSumsOverTokens<MatmulWeightGradOp>>(
      context);
  attachSharding<MatmulWeightGradOp, weightGradSharding>(context);
  attachLowering<MatmulWeightGradOp, weightGradLowering>(context);
}

} // namespace strata
