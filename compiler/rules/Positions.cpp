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
// Sharding: the rows whole across tensor-parallel ranks (a partial input
// is all-reduced first) and the table replicated; with sequence
// parallelism the rows would be a tp share of the rank's chunks, which the
// kernels do not place yet: refused.
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

/// Rows whole on every tensor-parallel rank: a partial input is summed; a
/// split one is refused.
LogicalResult wholeRows(Operation *op, ShardingState &st) {
  Sharding s = st.get(op->getOperand(0));
  if (s.isPartial()) {
    if (failed(st.convertOperand(op, 0, st.streamSharding(op->getOperand(0)))))
      return failure();
    s = st.get(op->getOperand(0));
  }
  if (!s.isReplicated())
    return st.error(op) << "a position table at a context-parallel rank's "
                           "rows needs them whole on each tensor-parallel "
                           "rank (sequence parallelism splits them: not "
                           "built yet)";
  return success();
}

LogicalResult addPositionsSharding(AddPositionsOp add, ShardingState &st) {
  if (failed(wholeRows(add, st)))
    return failure();
  if (st.isUndecidedParam(add.getTable()))
    st.decide(add.getTable(), Sharding::replicated());
  if (!st.get(add.getTable()).isReplicated() &&
      failed(st.convertOperand(add, 1, Sharding::replicated())))
    return failure();
  st.set(add, Sharding::replicated());
  return success();
}

LogicalResult sumPositionsSharding(SumPositionsOp sum, ShardingState &st) {
  if (failed(wholeRows(sum, st)))
    return failure();
  st.set(sum, Sharding::replicated());
  return success();
}

/// x viewed as [before the sequence, its rows, after it]; `tableRank`
/// dimensions from the sequence on are the table's.
exec::BufferOp rowsView(Lowering &l, exec::BufferOp x, RankedTensorType type,
                        int64_t tableRank) {
  int64_t seqDim = type.getRank() - tableRank;
  int64_t rows = type.getDimSize(seqDim);
  int64_t width = 1, before = 1;
  for (int64_t d = 0; d < type.getRank(); ++d)
    (d < seqDim   ? before
     : d > seqDim ? width
                  : rows) *= d == seqDim ? 1 : type.getDimSize(d);
  return l.shaped(x, {before, rows, width});
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
