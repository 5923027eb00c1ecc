//===- Embedding.cpp - table lookups and their gradient -------------------===//
//
// Gradient: the rows looked up receive the output's gradient, scattered
// and summed by token id (graph.embedding_grad); token ids have none.
//
// Sharding: a table split along its vocabulary (decided by planning)
// makes the lookup vocabulary-parallel, each rank's sum partial (rows
// outside its range are zero); its gradient is the table's, split alike.
//
// Lowering: a vocabulary-parallel table's rows start at the rank's share
// of the vocabulary (a per-rank offset); the gradient goes straight into
// the table's accumulator when that is its only use.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult embeddingGradient(EmbeddingOp embedding, GradientBuilder &g,
                                ArrayRef<Value> dys) {
  Location loc = embedding.getLoc();
  g.contribute(embedding.getTable(),
               EmbeddingGradOp::create(g.builder(), loc,
                                       embedding.getTable().getType(),
                                       dys.front(), embedding.getIds()),
               loc);
  return success();
}

LogicalResult embeddingSharding(EmbeddingOp embedding, ShardingState &st) {
  if (st.isUndecidedParam(embedding.getTable()))
    st.decide(embedding.getTable(), Sharding::replicated());
  Sharding table = st.get(embedding.getTable());
  if (table.isSplit(0)) {
    dist::vocabParallel(embedding.getContext())
        .setAttr(embedding, st.builder().getUnitAttr());
    st.set(embedding, Sharding::partial()); // rows outside a rank's range: 0
  } else if (table.isReplicated()) {
    st.set(embedding, Sharding::replicated());
  } else {
    return st.error(embedding) << "an embedding table splits its rows only";
  }
  return success();
}

LogicalResult embeddingGradSharding(EmbeddingGradOp grad, ShardingState &st) {
  // Its result is the table's gradient: shard it as the table.
  auto sink = llvm::find_if(grad->getUsers(), [](Operation *user) {
    return isa<AccumulateGradOp>(user);
  });
  Sharding table = Sharding::replicated();
  if (sink != grad->getUsers().end())
    table = st.paramSharding(cast<AccumulateGradOp>(*sink).getName());
  Sharding dy = st.get(grad.getGrad());
  if (table.isSplit(0)) {
    if (!dy.isReplicated() &&
        failed(st.convertOperand(grad, 0, Sharding::replicated())))
      return failure();
    dist::vocabParallel(grad.getContext())
        .setAttr(grad, st.builder().getUnitAttr());
    st.set(grad, table);
    return success();
  }
  int64_t last = grad.getGrad().getType().getRank() - 1;
  if (dy.isSplit(last) &&
      failed(st.convertOperand(grad, 0, Sharding::replicated())))
    return failure();
  dy = st.get(grad.getGrad());
  st.set(grad,
         dy.isReplicated() ? Sharding::replicated() : Sharding::partial());
  return success();
}

LogicalResult embeddingLowering(EmbeddingOp embedding, Lowering &l) {
  exec::LaunchOp launched =
      l.launch(embedding.getLoc(),
               kernel::EmbeddingFwd{.table = l.operand(embedding.getTable()),
                                    .ids = l.operand(embedding.getIds()),
                                    .y = l.result(embedding),
                                    .vocab_offset = 0});
  // A vocabulary-parallel table: the rank's rows start at its share.
  if (dist::vocabParallel(embedding.getContext()).isAttrPresent(embedding))
    l.perRank(launched, "vocab_offset", kTensorAxis,
              embedding.getTable().getType().getDimSize(0));
  return success();
}

LogicalResult embeddingGradLowering(EmbeddingGradOp grad, Lowering &l) {
  auto [target, accumulate] = l.gradientTarget(grad);
  exec::LaunchOp launched = l.launch(
      grad.getLoc(), kernel::EmbeddingBwd{.dy = l.operand(grad.getGrad()),
                                          .ids = l.operand(grad.getIds()),
                                          .dtable = target,
                                          .vocab_offset = 0,
                                          .accumulate = accumulate});
  if (dist::vocabParallel(grad.getContext()).isAttrPresent(grad))
    l.perRank(launched, "vocab_offset", kTensorAxis,
              grad.getType().getDimSize(0));
  return success();
}

/// A token's row of the table: the result runs along the ids' sequence.
LogicalResult embeddingContext(EmbeddingOp embedding, ContextState &state) {
  if (state.dim(embedding.getTable()) >= 0)
    return state.error(embedding) << "the table runs along the sequence";
  if (int64_t d = state.dim(embedding.getIds()); d >= 0)
    state.set(embedding.getResult(), d);
  return success();
}

} // namespace

void OpRules<EmbeddingOp>::attach(MLIRContext &context) {
  attachContext<EmbeddingOp, embeddingContext>(context);
  attachGradient<EmbeddingOp, embeddingGradient>(context);
  attachSharding<EmbeddingOp, embeddingSharding>(context);
  attachLowering<EmbeddingOp, embeddingLowering>(context);
}
// Backward only: no gradient of its own.
void OpRules<EmbeddingGradOp>::attach(MLIRContext &context) {
  attachContext<EmbeddingGradOp, contextSumsOverTokens<EmbeddingGradOp>>(
      context);
  attachSharding<EmbeddingGradOp, embeddingGradSharding>(context);
  attachLowering<EmbeddingGradOp, embeddingGradLowering>(context);
}

} // namespace strata
