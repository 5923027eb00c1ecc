//===- Loss.cpp - the cross-entropy, whole or vocabulary-parallel ---------===//
//
// Gradient: softmax minus the one-hot target, scaled by the loss's
// gradient (graph.cross_entropy_grad). The fused and vocabulary-parallel
// forms are made after autodiff (FuseLoss, TensorParallel) and have none.
//
// Sharding: logits split along the vocabulary (a column-parallel output
// layer) make the loss vocabulary-parallel: three row statistics (the max,
// the target's logit, the sum of exponentials), each all-reduced, and the
// loss from them; its gradient reads the same statistics. Other logits are
// made whole first.
//
// Lowering: a launch each; `vocab_size` leaves padding columns out. The
// vocabulary-parallel ones start the rank's columns at its share of the
// (padded) vocabulary (a per-rank offset), and keep their row statistics in
// f32 in bf16 mode, as Megatron's vocabulary-parallel cross-entropy does.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

/// The real vocabulary: `vocab_size` where an op has it (optional on the
/// single-device loss ops, required on the statistics), else the columns.
int64_t realVocab(std::optional<uint64_t> size, int64_t columns) {
  return size ? int64_t(*size) : columns;
}
int64_t realVocab(uint64_t size, int64_t) { return int64_t(size); }

/// The logits' columns (their last dimension) and the real vocabulary
/// among them.
template <typename Op> std::pair<int64_t, int64_t> vocabOf(Op op) {
  int64_t columns =
      cast<RankedTensorType>(op.getLogits().getType()).getShape().back();
  return {columns, realVocab(op.getVocabSize(), columns)};
}

LogicalResult crossEntropyGradient(CrossEntropyOp loss, GradientBuilder &g,
                                   ArrayRef<Value> dys) {
  g.contribute(loss.getLogits(),
               CrossEntropyGradOp::create(g.builder(), loss.getLoc(),
                                          loss.getLogits().getType(),
                                          loss.getLogits(), loss.getLabels(),
                                          dys.front(), loss.getVocabSizeAttr()),
               loss.getLoc());
  return success();
}

LogicalResult crossEntropySharding(CrossEntropyOp op, ShardingState &st) {
  int64_t last = op.getLogits().getType().getRank() - 1;
  Sharding logits = st.get(op.getLogits());
  if (logits.isPartial() || (logits.isSplit() && logits.dim != last)) {
    if (failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    logits = Sharding::replicated();
  }
  if (!logits.isSplit()) {
    st.set(op, Sharding::replicated());
    return success();
  }
  // Vocabulary-parallel: three row statistics, each all-reduced.
  OpBuilder &b = st.builder();
  b.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto logitsType = op.getLogits().getType();
  auto rows =
      RankedTensorType::get(logitsType.getShape().drop_back(), b.getF32Type());
  auto vocabAttr = b.getI64IntegerAttr(vocabOf(op).second);
  auto localMax = LogitsMaxOp::create(b, loc, rows, op.getLogits(), vocabAttr);
  Value max = st.allReduce(loc, rows, localMax, /*max=*/true);
  auto localTarget = LogitsTargetOp::create(b, loc, rows, op.getLogits(),
                                            op.getLabels(), vocabAttr);
  Value target = st.allReduce(loc, rows, localTarget, /*max=*/false);
  auto localSum =
      LogitsSumExpOp::create(b, loc, rows, op.getLogits(), max, vocabAttr);
  Value sumExp = st.allReduce(loc, rows, localSum, /*max=*/false);
  for (Value reduced : {max, target, sumExp})
    ShardingState::placeInLayerOf(reduced.getDefiningOp(), op);
  for (Operation *stat : {localMax.getOperation(), localTarget.getOperation(),
                          localSum.getOperation()}) {
    dist::vocabParallel(b.getContext()).setAttr(stat, b.getUnitAttr());
    st.set(stat->getResult(0), Sharding::replicated()); // rows are whole
  }
  auto loss = CrossEntropyFromStatsOp::create(b, loc, op.getType(), max, sumExp,
                                              target);
  st.set(loss, Sharding::replicated());
  st.lossStats[op.getLogits()] = {max, sumExp};
  op.replaceAllUsesWith(loss.getResult());
  op.erase();
  return success();
}

LogicalResult crossEntropyGradSharding(CrossEntropyGradOp op,
                                       ShardingState &st) {
  if (st.get(op.getGrad()).isPartial() &&
      failed(st.convertOperand(op, 2, Sharding::replicated())))
    return failure();
  auto it = st.lossStats.find(op.getLogits());
  if (it == st.lossStats.end()) {
    Sharding logits = st.get(op.getLogits());
    if (!logits.isReplicated() &&
        failed(st.convertOperand(op, 0, Sharding::replicated())))
      return failure();
    st.set(op, Sharding::replicated());
    return success();
  }
  OpBuilder &b = st.builder();
  b.setInsertionPoint(op);
  auto grad = CrossEntropyGradFromStatsOp::create(
      b, op.getLoc(), op.getType(), op.getLogits(), op.getLabels(),
      it->second.max, it->second.sumExp, op.getGrad(),
      b.getI64IntegerAttr(vocabOf(op).second));
  dist::vocabParallel(b.getContext()).setAttr(grad, b.getUnitAttr());
  ShardingState::placeInLayerOf(grad, op);
  st.set(grad, st.get(op.getLogits()));
  op.replaceAllUsesWith(grad.getResult());
  op.erase();
  return success();
}

/// Planning: the loss needs its logits split along the vocabulary (it
/// becomes vocabulary-parallel).
void crossEntropySplit(CrossEntropyOp, OpOperand &use, int64_t dim,
                       SplitPlanner &planner) {
  planner.wantLastDimension(use, dim);
}

/// A vocabulary-parallel launch's columns start at the rank's share, of
/// `columns` a rank.
void atRankShare(Operation *op, exec::LaunchOp launched, Lowering &l,
                 int64_t columns) {
  if (dist::vocabParallel(op->getContext()).isAttrPresent(op))
    l.perRank(launched, "vocab_offset", kTensorAxis, columns);
}
template <typename Op>
void vocabularyParallel(Op op, exec::LaunchOp launched, Lowering &l) {
  atRankShare(op, launched, l, vocabOf(op).first);
}

LogicalResult crossEntropyLowering(CrossEntropyOp loss, Lowering &l) {
  l.launch(loss.getLoc(),
           kernel::CrossEntropyFwd{.logits = l.operand(loss.getLogits()),
                                   .labels = l.operand(loss.getLabels()),
                                   .loss = l.result(loss),
                                   .vocab_size = vocabOf(loss).second});
  return success();
}

LogicalResult crossEntropyGradLowering(CrossEntropyGradOp grad, Lowering &l) {
  l.launch(grad.getLoc(),
           kernel::CrossEntropyBwd{.logits = l.operand(grad.getLogits()),
                                   .labels = l.operand(grad.getLabels()),
                                   .dloss = l.operand(grad.getGrad()),
                                   .dlogits = l.result(grad),
                                   .vocab_size = vocabOf(grad).second});
  return success();
}

LogicalResult withGradLowering(CrossEntropyWithGradOp fused, Lowering &l) {
  l.launch(fused.getLoc(), kernel::CrossEntropyWithGrad{
                               .logits = l.operand(fused.getLogits()),
                               .labels = l.operand(fused.getLabels()),
                               .dloss = l.operand(fused.getGrad()),
                               .loss = l.result(fused.getLoss()),
                               .dlogits = l.result(fused.getLogitsGrad()),
                               .vocab_size = vocabOf(fused).second});
  return success();
}

/// The output layer and its loss a block of the vocabulary's columns at a
/// time, in two passes over the blocks, each computing the block's logits
/// (a gemm): the first combines each row's max and sum of exponentials and
/// picks the target's logit (the vocabulary-parallel loss's statistics,
/// over blocks instead of ranks), from which the loss follows; the second,
/// from the last block back (whose logits the first left), computes the
/// block's logits' gradient from them, adds its product with
/// the block's weights into the input's gradient (f32) and writes the
/// block's rows (or columns) of the weight's gradient into its accumulator
/// (beta 1), each once. One block-sized buffer serves every block, the
/// gradient written over the logits.
/// Vocabulary-parallel (dist.vocab_parallel: the weight is the rank's share
/// of the columns), the first pass's statistics are the rank's, and
/// between the passes the max is all-reduced, each rank's sum moved to it
/// (sum_exp_rescale) and all-reduced, and the target's logit all-reduced;
/// the input's gradient is the rank's part, which the reduction after the
/// op adds up.
LogicalResult linearLossLowering(LinearCrossEntropyWithGradOp op, Lowering &l) {
  auto inputType = cast<RankedTensorType>(op.getInput().getType());
  auto weightType = cast<RankedTensorType>(op.getWeight().getType());
  bool tb = op.getTransposeB(); // weight [vocab, hidden], else [hidden, vocab]
  int64_t hidden = inputType.getShape().back();
  int64_t vocab = weightType.getDimSize(tb ? 0 : 1);
  int64_t rows = inputType.getNumElements() / hidden;
  int64_t block = std::min<int64_t>(int64_t(op.getBlockColumns()), vocab);
  int64_t real = op.getVocabSize() ? int64_t(*op.getVocabSize()) : vocab;
  bool shared = dist::vocabParallel(op->getContext()).isAttrPresent(op);
  int64_t ranks = shared ? l.tensorParallelSize() : 1;
  if (real > vocab * ranks)
    return op.emitOpError() << "has vocab_size " << real << " for " << vocab
                            << " columns" << (shared ? " a rank" : "");
  // A rank's share goes in blocks of one width, the most that divides it
  // up to the one asked for: each block then starts at a multiple of its
  // width in the whole vocabulary, as a plan's check of a shard asks.
  if (shared)
    while (vocab % block != 0)
      --block;
  lower_to_exec::ParamBuffers *param = l.paramBuffers(op.getWeightName());
  if (!param)
    return op.emitOpError() << "adds into '" << op.getWeightName()
                            << "', which is not a parameter";
  Location loc = op.getLoc();
  exec::BufferOp input = l.rows(l.operand(op.getInput()), 0, rows);
  exec::BufferOp weight = l.operand(op.getWeight());
  exec::BufferOp labels = l.operand(op.getLabels());
  exec::BufferOp seed = l.operand(op.getGrad());
  exec::BufferOp loss = l.result(op.getLoss());
  exec::BufferOp inputGrad = l.result(op.getInputGrad());
  Type element = inputType.getElementType();
  // A block's logits' gradient is written over its logits: the gradient
  // kernel reads each logit before it writes that element's gradient (the
  // same thread, the same place), and nothing reads the logits after it.
  exec::BufferOp logits =
      l.scratch(RankedTensorType::get({rows, block}, element));
  auto f32 = [&](ArrayRef<int64_t> shape) {
    return l.scratchF32(RankedTensorType::get(shape, element));
  };
  exec::BufferOp max = f32({rows}), sum = f32({rows}), target = f32({rows});
  exec::BufferOp targetPart =
      block < (shared ? vocab : real) ? f32({rows}) : exec::BufferOp();
  // The input's gradient adds up over blocks in f32, then takes its type.
  bool narrow = inputGrad.getTensorType().getElementType() !=
                Float32Type::get(op.getContext());
  exec::BufferOp inputGradSum =
      narrow ? f32({rows, hidden}) : l.rows(inputGrad, 0, rows);

  // Each block's views, made once: its part of the weight and of the
  // weight's gradient (rows of a [vocab, hidden] table, or columns of a
  // [hidden, vocab] head, strided), and of the two logits buffers. Blocks
  // wholly in the padding add nothing (their logits are left out, their
  // gradient is zero): they are not computed, except where the columns
  // are the rank's share (where the padding lies depends on the rank; its
  // kernels leave it out).
  struct Block {
    int64_t first, count;
    exec::BufferOp weight, grad, z; // z: its logits, then their gradient
  };
  SmallVector<Block> blocks;
  for (int64_t c0 = 0; c0 < (shared ? vocab : real); c0 += block) {
    int64_t count = std::min(block, vocab - c0);
    auto part = [&](exec::BufferOp of) {
      return tb ? l.rows(of, c0, count)
                : l.slice(of, c0, (hidden - 1) * vocab + count);
    };
    auto narrowed = [&](exec::BufferOp of) {
      return count == block ? of : l.shaped(of, {rows, count});
    };
    blocks.push_back(
        {c0, count, part(weight), part(param->grad), narrowed(logits)});
  }
  // z = x · W_blockᵀ (tb) or x · W[:, block].
  auto blockLogits = [&](const Block &k) {
    if (tb)
      l.gemm(loc, input, k.weight, k.z, rows, k.count, hidden, false, true,
             false);
    else
      l.gemm(loc, input, k.weight, k.z,
             {.m = rows,
              .n = k.count,
              .k = hidden,
              .lda = hidden,
              .ldb = vocab,
              .ldd = k.count});
  };
  auto atRank = [&](exec::LaunchOp launched) {
    atRankShare(op, launched, l, vocab);
  };
  for (const Block &k : blocks) {
    bool first = k.first == 0;
    blockLogits(k);
    atRank(l.launch(loc, kernel::LogitsMaxSum{.logits = k.z,
                                              .max = max,
                                              .sum = sum,
                                              .vocab_size = real,
                                              .vocab_offset = k.first,
                                              .accumulate = !first}));
    atRank(l.launch(loc,
                    kernel::LogitsTarget{.logits = k.z,
                                         .labels = labels,
                                         .target = first ? target : targetPart,
                                         .vocab_size = real,
                                         .vocab_offset = k.first}));
    if (!first)
      l.launch(loc, kernel::Accumulate{.x = targetPart, .y = target});
  }
  if (shared) {
    // The rows' statistics over every rank's columns.
    exec::BufferOp rankMax = max, rankSum = sum, rankTarget = target;
    exec::BufferOp moved = f32({rows});
    max = f32({rows});
    sum = f32({rows});
    target = f32({rows});
    l.tensorAllReduce(loc, rankMax, max, /*max=*/true);
    l.launch(loc, kernel::SumExpRescale{.local_max = rankMax,
                                        .local_sum = rankSum,
                                        .max = max,
                                        .sum = moved});
    l.tensorAllReduce(loc, moved, sum, /*max=*/false);
    l.tensorAllReduce(loc, rankTarget, target, /*max=*/false);
  }
  l.launch(loc, kernel::CrossEntropyFromStats{
                    .max = max, .sum = sum, .target = target, .loss = loss});
  // Backwards over the blocks: the last one's logits are still there from
  // the first pass.
  for (const Block &k : llvm::reverse(blocks)) {
    bool adds = &k != &blocks.back(); // into what the blocks before wrote
    if (adds)
      blockLogits(k);
    atRank(l.launch(
        loc, kernel::CrossEntropyGradFromStats{.logits = k.z,
                                               .labels = labels,
                                               .max = max,
                                               .sum = sum,
                                               .dloss = seed,
                                               .dlogits = k.z,
                                               .vocab_size = real,
                                               .vocab_offset = k.first}));
    if (tb) {
      // dx (+)= dz · W_block; dW[block] += dzᵀ · x.
      l.gemm(loc, k.z, k.weight, inputGradSum, rows, hidden, k.count, false,
             false, adds);
      l.gemm(loc, k.z, input, k.grad, k.count, hidden, rows, true, false, true);
    } else {
      // dx (+)= dz · W[:, block]ᵀ; dW[:, block] += xᵀ · dz.
      l.gemm(loc, k.z, k.weight, inputGradSum,
             {.m = rows,
              .n = hidden,
              .k = k.count,
              .transposeB = true,
              .lda = k.count,
              .ldb = vocab,
              .ldd = hidden,
              .accumulate = adds});
      l.gemm(loc, input, k.z, k.grad,
             {.m = hidden,
              .n = k.count,
              .k = rows,
              .transposeA = true,
              .lda = hidden,
              .ldb = k.count,
              .ldd = vocab,
              .accumulate = true});
    }
  }
  if (narrow)
    l.launch(loc, kernel::Copy{.x = inputGradSum, .y = inputGrad});
  return success();
}

LogicalResult logitsMaxLowering(LogitsMaxOp op, Lowering &l) {
  exec::LaunchOp launched = l.launch(
      op.getLoc(), kernel::LogitsMax{.logits = l.operand(op.getLogits()),
                                     .max = l.result(op, /*keepF32=*/true),
                                     .vocab_size = vocabOf(op).second});
  vocabularyParallel(op, launched, l);
  return success();
}

LogicalResult logitsTargetLowering(LogitsTargetOp op, Lowering &l) {
  exec::LaunchOp launched =
      l.launch(op.getLoc(),
               kernel::LogitsTarget{.logits = l.operand(op.getLogits()),
                                    .labels = l.operand(op.getLabels()),
                                    .target = l.result(op, /*keepF32=*/true),
                                    .vocab_size = vocabOf(op).second});
  vocabularyParallel(op, launched, l);
  return success();
}

LogicalResult logitsSumExpLowering(LogitsSumExpOp op, Lowering &l) {
  exec::LaunchOp launched = l.launch(
      op.getLoc(), kernel::LogitsSumExp{.logits = l.operand(op.getLogits()),
                                        .max = l.operand(op.getMax()),
                                        .sum = l.result(op, /*keepF32=*/true),
                                        .vocab_size = vocabOf(op).second});
  vocabularyParallel(op, launched, l);
  return success();
}

LogicalResult fromStatsLowering(CrossEntropyFromStatsOp op, Lowering &l) {
  l.launch(op.getLoc(),
           kernel::CrossEntropyFromStats{.max = l.operand(op.getMax()),
                                         .sum = l.operand(op.getSumExp()),
                                         .target = l.operand(op.getTarget()),
                                         .loss = l.result(op)});
  return success();
}

LogicalResult gradFromStatsLowering(CrossEntropyGradFromStatsOp op,
                                    Lowering &l) {
  exec::LaunchOp launched = l.launch(
      op.getLoc(),
      kernel::CrossEntropyGradFromStats{.logits = l.operand(op.getLogits()),
                                        .labels = l.operand(op.getLabels()),
                                        .max = l.operand(op.getMax()),
                                        .sum = l.operand(op.getSumExp()),
                                        .dloss = l.operand(op.getGrad()),
                                        .dlogits = l.result(op),
                                        .vocab_size = vocabOf(op).second});
  vocabularyParallel(op, launched, l);
  return success();
}

LogicalResult withGradFromStatsLowering(CrossEntropyWithGradFromStatsOp fused,
                                        Lowering &l) {
  exec::LaunchOp launched =
      l.launch(fused.getLoc(), kernel::CrossEntropyWithGradFromStats{
                                   .logits = l.operand(fused.getLogits()),
                                   .labels = l.operand(fused.getLabels()),
                                   .max = l.operand(fused.getMax()),
                                   .sum = l.operand(fused.getSumExp()),
                                   .target = l.operand(fused.getTarget()),
                                   .dloss = l.operand(fused.getGrad()),
                                   .loss = l.result(fused.getLoss()),
                                   .dlogits = l.result(fused.getLogitsGrad()),
                                   .vocab_size = vocabOf(fused).second});
  vocabularyParallel(fused, launched, l);
  return success();
}

} // namespace

void OpRules<CrossEntropyOp>::attach(MLIRContext &context) {
  attachContext<CrossEntropyOp, contextSumsOverTokens<CrossEntropyOp>>(context);
  attachGradient<CrossEntropyOp, crossEntropyGradient>(context);
  attachSharding<CrossEntropyOp, crossEntropySharding, crossEntropySplit>(
      context);
  attachLowering<CrossEntropyOp, crossEntropyLowering>(context);
}
// Backward only: no gradient of its own.
void OpRules<CrossEntropyGradOp>::attach(MLIRContext &context) {
  attachContext<CrossEntropyGradOp, contextLikeInput<CrossEntropyGradOp>>(
      context);
  attachSharding<CrossEntropyGradOp, crossEntropyGradSharding>(context);
  attachLowering<CrossEntropyGradOp, crossEntropyGradLowering>(context);
}
// Made by tensor parallelism's loss rule (the statistics, with their
// shardings) or after it (FuseLoss): no gradient or sharding rule, only
// their instructions.
void OpRules<CrossEntropyWithGradOp>::attach(MLIRContext &context) {
  attachContext<CrossEntropyWithGradOp,
                contextMadeAfter<CrossEntropyWithGradOp>>(context);
  attachLowering<CrossEntropyWithGradOp, withGradLowering>(context);
}
// Made by strata-fuse-output-layer, after autodiff and the layouts: only
// its instructions.
void OpRules<LinearCrossEntropyWithGradOp>::attach(MLIRContext &context) {
  attachContext<LinearCrossEntropyWithGradOp,
                contextMadeAfter<LinearCrossEntropyWithGradOp>>(context);
  attachLowering<LinearCrossEntropyWithGradOp, linearLossLowering>(context);
}
void OpRules<LogitsMaxOp>::attach(MLIRContext &context) {
  attachContext<LogitsMaxOp, contextMadeAfter<LogitsMaxOp>>(context);
  attachLowering<LogitsMaxOp, logitsMaxLowering>(context);
}
void OpRules<LogitsTargetOp>::attach(MLIRContext &context) {
  attachContext<LogitsTargetOp, contextMadeAfter<LogitsTargetOp>>(context);
  attachLowering<LogitsTargetOp, logitsTargetLowering>(context);
}
void OpRules<LogitsSumExpOp>::attach(MLIRContext &context) {
  attachContext<LogitsSumExpOp, contextMadeAfter<LogitsSumExpOp>>(context);
  attachLowering<LogitsSumExpOp, logitsSumExpLowering>(context);
}
void OpRules<CrossEntropyFromStatsOp>::attach(MLIRContext &context) {
  attachContext<CrossEntropyFromStatsOp,
                contextMadeAfter<CrossEntropyFromStatsOp>>(context);
  attachLowering<CrossEntropyFromStatsOp, fromStatsLowering>(context);
}
void OpRules<CrossEntropyGradFromStatsOp>::attach(MLIRContext &context) {
  attachContext<CrossEntropyGradFromStatsOp,
                contextMadeAfter<CrossEntropyGradFromStatsOp>>(context);
  attachLowering<CrossEntropyGradFromStatsOp, gradFromStatsLowering>(context);
}
void OpRules<CrossEntropyWithGradFromStatsOp>::attach(MLIRContext &context) {
  attachContext<CrossEntropyWithGradFromStatsOp,
                contextMadeAfter<CrossEntropyWithGradFromStatsOp>>(context);
  attachLowering<CrossEntropyWithGradFromStatsOp, withGradFromStatsLowering>(
      context);
}

} // namespace strata
