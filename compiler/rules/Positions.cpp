//===- Positions.cpp - a position table at a context-parallel rank's rows -===//
//
// Context parallelism (compiler/passes/ContextParallel.cpp) turns an add of
// a learned position table ([seq, hidden] to [batch, seq, hidden]) into
// add_positions, and the table's gradient (a sum over the batch) into
// sum_positions: a rank holds two of the sequence's 2c chunks, so its rows
// read and write the table at their places in the whole sequence
// (runtime/plan/ContextPositions.h).
//
// Gradient: add_positions passes its gradient to its input and
// sum_positions of it to the table.
//
// Sharding: rows summed over the tensor-parallel ranks (the vocabulary-
// parallel embedding's output) stay partial, the table added on the first
// rank only; whole rows take the whole table; rows split along the
// sequence (sequence parallelism's share) are gathered first, since the
// kernels place a rank's whole share of its chunks.
//
// Lowering: a launch each, the rank's coordinate along cp per rank.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult addPositionsGradient(AddPositionsOp add, GradientBuilder &g,
                                   ArrayRef<Value> dys) {
  Location loc = add.getLoc();
  g.contribute(add.getInput(), dys.front(), loc);
  g.contribute(add.getTable(),
               SumPositionsOp::create(g.builder(), loc,
                                      add.getTable().getType(), dys.front(),
                                      add.getContextParallelAttr()),
               loc);
  return success();
}

/// The rows' sharding across tensor-parallel ranks: partial sums (the
/// vocabulary-parallel embedding's output, before its reduction) stay so,
/// whole rows stay whole, and rows split along the sequence (a sequence
/// parallel share of the rank's chunks, whose places these kernels do not
/// know) are gathered first.
FailureOr<Sharding> rowsSharding(Operation *op, ShardingState &st) {
  Sharding s = st.get(op->getOperand(0));
  if (s.isSplit()) {
    if (failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    s = Sharding::replicated();
  }
  return s;
}

/// Rows summed over the tp ranks take the table on the first rank only
/// (dist.keep_on_first), so that the sum adds it once.
LogicalResult addPositionsSharding(AddPositionsOp add, ShardingState &st) {
  FailureOr<Sharding> rows = rowsSharding(add, st);
  if (failed(rows))
    return failure();
  if (st.isUndecidedParam(add.getTable()))
    st.decide(add.getTable(), Sharding::replicated());
  if (st.get(add.getTable()) != *rows &&
      failed(st.convertOperand(add, 1, *rows)))
    return failure();
  st.set(add, *rows);
  return success();
}

/// The table's gradient is partial where its rows' gradient is (a
/// replicated parameter's partial gradient is reduced once, in
/// @optimizer).
LogicalResult sumPositionsSharding(SumPositionsOp sum, ShardingState &st) {
  FailureOr<Sharding> rows = rowsSharding(sum, st);
  if (failed(rows))
    return failure();
  st.set(sum, *rows);
  return success();
}

/// x viewed as [before the sequence, its rows, after it]; `tableRank`
/// dimensions from the sequence on are the table's.
exec::BufferOp rowsView(Lowering &l, exec::BufferOp x, RankedTensorType type,
                        int64_t tableRank) {
  int64_t seqDim = type.getRank() - tableRank;
  int64_t before = 1, width = 1;
  for (int64_t d = 0; d < seqDim; ++d)
    before *= type.getDimSize(d);
  for (int64_t d = seqDim + 1; d < type.getRank(); ++d)
    width *= type.getDimSize(d);
  return l.shaped(x, {before, type.getDimSize(seqDim), width});
}

exec::BufferOp tableView(Lowering &l, exec::BufferOp table,
                         RankedTensorType type) {
  return l.shaped(
      table, {type.getDimSize(0), type.getNumElements() / type.getDimSize(0)});
}

LogicalResult addPositionsLowering(AddPositionsOp add, Lowering &l) {
  auto x = add.getInput().getType();
  auto table = add.getTable().getType();
  exec::LaunchOp launched = l.launch(
      add.getLoc(),
      kernel::AddPositions{
          .x = rowsView(l, l.operand(add.getInput()), x, table.getRank()),
          .table = tableView(l, l.operand(add.getTable()), table),
          .z = rowsView(l, l.result(add), x, table.getRank()),
          .context_parallel = int64_t(add.getContextParallel()),
          .context_rank = 0});
  l.perRank(launched, "context_rank", kContextAxis, 1);
  return success();
}

LogicalResult sumPositionsLowering(SumPositionsOp sum, Lowering &l) {
  auto [target, accumulate] = l.gradientTarget(sum);
  auto x = sum.getInput().getType();
  auto table = sum.getType();
  exec::LaunchOp launched = l.launch(
      sum.getLoc(),
      kernel::SumPositions{
          .x = rowsView(l, l.operand(sum.getInput()), x, table.getRank()),
          .y = tableView(l, target, table),
          .accumulate = accumulate,
          .context_parallel = int64_t(sum.getContextParallel()),
          .context_rank = 0});
  l.perRank(launched, "context_rank", kContextAxis, 1);
  return success();
}

} // namespace

void OpRules<AddPositionsOp>::attach(MLIRContext &context) {
  attachGradient<AddPositionsOp, addPositionsGradient>(context);
  attachSharding<AddPositionsOp, addPositionsSharding>(context);
  attachContext<AddPositionsOp, contextLikeInput<AddPositionsOp>>(context);
  attachLowering<AddPositionsOp, addPositionsLowering>(context);
}
void OpRules<SumPositionsOp>::attach(MLIRContext &context) {
  attachSharding<SumPositionsOp, sumPositionsSharding>(context);
  attachContext<SumPositionsOp, contextSumsOverTokens<SumPositionsOp>>(context);
  attachLowering<SumPositionsOp, sumPositionsLowering>(context);
}

} // namespace strata
