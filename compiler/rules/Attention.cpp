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
#include "compiler/rules/Dropout.h"
#include "dialects/graph/GraphShapes.h"

#include <cmath>

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
      attention.getResult(), attention.getSaved(), dys.front(),
      attention.getKeys(), attention.getCausalAttr(),
      attention.getGroupSizeAttr(), attention.getUnfusedAttr(),
      attention.getDropoutAttr(), attention.getDropoutSiteAttr());
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

/// Operands: q, k, v (and output, saved, grad when backward). What the
/// forward saves (the row log-sum-exp, or unfused the probabilities) is
/// [batch, heads, ...]: it splits its heads, dimension 1, with the queries.
LogicalResult attentionSharding(Operation *op, bool backward,
                                ShardingState &st) {
  // The dropout keys, last when there, are the samples': replicated.
  Value keys = backward ? cast<AttentionGradOp>(op).getKeys()
                        : cast<AttentionOp>(op).getKeys();
  unsigned count = op->getNumOperands() - (keys ? 1 : 0);
  if (keys && !st.get(keys).isReplicated() &&
      failed(st.convertOperand(op, count, Sharding::replicated())))
    return failure();
  auto isLse = [&](unsigned i) {
    return backward &&
           op->getOperand(i) == cast<AttentionGradOp>(op).getSaved();
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
  if (keys) {
    // The probabilities' heads split with the queries': each rank draws
    // its share of the mask at its offset.
    recordDropoutSplit(
        op, lseOf(q),
        attentionSavedType(cast<RankedTensorType>(op->getOperand(0).getType()),
                           cast<RankedTensorType>(op->getOperand(1).getType()),
                           /*unfused=*/true),
        st.builder());
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

/// The context-parallel size an op was split for (0: none).
int64_t contextOf(Operation *op) {
  auto context = dist::contextPositions(op->getContext()).getAttr(op);
  return context ? context.getInt() : 0;
}

LogicalResult ropeLowering(RopeOp rope, Lowering &l) {
  exec::LaunchOp launched = l.launch(
      rope.getLoc(), kernel::Rope{.x = l.operand(rope.getInput()),
                                  .y = l.result(rope),
                                  .base = rope.getBase().convertToDouble(),
                                  .inverse = rope.getInverse(),
                                  .context_parallel = contextOf(rope),
                                  .context_rank = 0});
  l.perRank(launched, "context_rank", kContextAxis, 1);
  return success();
}

/// Context parallelism: the keys and values of every context-parallel
/// rank, gathered along the sequence in rank order (the attention kernels
/// mask by each row's place in the sequence).
exec::BufferOp gatheredOverContext(Location loc, Value part, int64_t context,
                                   Lowering &l) {
  auto type = cast<RankedTensorType>(part.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[1] *= context;
  exec::BufferOp whole =
      l.scratch(RankedTensorType::get(shape, type.getElementType()));
  l.contextCollective(loc, exec::CollectiveKind::AllGather, l.operand(part),
                      whole, /*dim=*/1);
  return whole;
}

/// An attention launch's per-rank arguments: its first query head (with
/// the query heads split over tensor ranks, `firstStride` a rank) and its
/// context-parallel rank.
void placeOnRank(exec::LaunchOp launched, int64_t firstStride, Lowering &l) {
  if (firstStride)
    l.perRank(launched, "query_head_offset", kTensorAxis, firstStride);
  l.perRank(launched, "context_rank", kContextAxis, 1);
}

/// Whether context parallelism passes attention's keys and values around
/// its ranks (the ring, --cp-comm-type p2p) rather than gathering them.
bool contextRing(Operation *op) {
  return dist::contextRing(op->getContext()).isAttrPresent(op);
}

/// The ring's exchanges, on the context stream beside the compute
/// stream's attention (and apart from the communication stream's gradient
/// reductions, which would hold them up). A group of shifts starts where
/// the compute stream has issued all it has so far (`issued`, which the
/// context stream waits for: what a shift writes may be memory the
/// compute stream's earlier work has done with) and records where it
/// lands (`landed`, which the compute stream waits for before it reads
/// what came). Memory planning reads the same two fences
/// (PlanMemory.cpp).
class RingExchange {
public:
  RingExchange(Location loc, Lowering &l)
      : loc(loc), l(l), issued(l.freshEvent("ring-issued")) {}

  /// Starts a group of shifts after what the compute stream has issued.
  void begin() {
    l.record(loc, issued, exec::Stream::Compute);
    l.wait(loc, issued, exec::Stream::Context);
  }
  /// `held` shifted to the next cp rank, the previous one's received into
  /// `into` (a new buffer when null).
  exec::BufferOp shift(exec::BufferOp held, exec::BufferOp into = nullptr) {
    if (!into)
      into = l.scratch(held.getTensorType());
    l.contextShiftBeside(loc, held, into);
    return into;
  }
  /// The next step's keys and values: `k` and `v` shifted in one group
  /// that `landed` marks.
  std::pair<exec::BufferOp, exec::BufferOp>
  passOn(exec::BufferOp k, exec::BufferOp v, exec::EventOp landed) {
    begin();
    exec::BufferOp kNext = shift(k), vNext = shift(v);
    end(landed);
    return {kNext, vNext};
  }
  /// Ends the group: `landed` marks where its shifts are done.
  void end(exec::EventOp landed) {
    l.record(loc, landed, exec::Stream::Context);
  }
  /// Holds the compute stream until the group `landed` marks is done.
  void await(exec::EventOp landed) {
    l.wait(loc, landed, exec::Stream::Compute);
  }
  exec::EventOp event(StringRef what) { return l.freshEvent(what); }

private:
  Location loc;
  Lowering &l;
  exec::EventOp issued;
};

/// A rank's running sums over the ring's steps (the merged output, the
/// query gradient): f32, so that a bf16 plan rounds each once, at the end,
/// not at every step; they never travel. (The key and value gradients'
/// sums travel in the plan's type, as Transformer Engine's ring, which
/// Megatron runs, passes them: f32 would add half again to the backward's
/// ring traffic.)
/// `from` is the first step's part; in a bf16 plan the sum is an f32 copy
/// of it, else `from` itself.
exec::BufferOp ringSum(exec::BufferOp from, Location loc, Lowering &l) {
  RankedTensorType type = from.getTensorType();
  if (type.getElementType().isF32())
    return from;
  exec::BufferOp sum = l.scratchF32(type);
  l.launch(loc, kernel::Copy{.x = from, .y = sum});
  return sum;
}
/// The ring's sum `sum` into the result `into`: rounded to bf16 in a bf16
/// plan (ringSum's), nothing where they are one buffer.
void ringResult(exec::BufferOp sum, exec::BufferOp into, Location loc,
                Lowering &l) {
  if (sum != into)
    l.launch(loc, kernel::Copy{.x = sum, .y = into});
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

/// --attention-backend unfused, per sample, each gemm batched over the
/// heads where q, k and v lie ([batch, seq, heads, dim]: head h of a sample
/// `dim` elements after head h - 1, its rows heads·dim apart) and over the
/// scores, probabilities and their gradients ([batch, heads, seq, keys]).
/// As many kv heads as query heads (the ops' verifier).
struct UnfusedAttention {
  Lowering &l;
  Operation *op;
  Location loc;
  int64_t batch, seq, heads, dim, keys;
  RankedTensorType probsType; // the probabilities, on this rank

  // Dropout of the probabilities: its rate (0: none), site and the
  // samples' keys.
  double rate = 0;
  int64_t site = 0;
  exec::BufferOp sampleKeys;

  template <typename Op>
  UnfusedAttention(Op op, Lowering &l) : l(l), op(op), loc(op.getLoc()) {
    auto q = cast<RankedTensorType>(op.getQuery().getType());
    batch = q.getDimSize(0);
    seq = q.getDimSize(1);
    heads = q.getDimSize(2);
    dim = q.getDimSize(3);
    keys = cast<RankedTensorType>(op.getKey().getType()).getDimSize(1);
    probsType = cast<RankedTensorType>(op.getSaved().getType());
    if (std::optional<APFloat> dropout = op.getDropout()) {
      rate = dropout->convertToDouble();
      site = int64_t(*op.getDropoutSite());
      sampleKeys = l.operand(op.getKeys());
    }
  }
  /// `of` (probabilities or their gradient) dropped out into a scratch
  /// buffer like it: the forward's mask, the same whenever drawn.
  exec::BufferOp dropout(exec::BufferOp of) {
    exec::BufferOp out = l.scratch(probsType);
    launchDropout(l, op, probsType, of, sampleKeys, out, rate, site);
    return out;
  }
  double scale() const { return runtime::attentionScale(dim); }
  /// Sample `i` of a head-major tensor (q, k, v, o and their gradients).
  exec::BufferOp headsOf(exec::BufferOp of, int64_t rows, int64_t i) {
    return l.slice(of, i * rows * heads * dim, rows * heads * dim);
  }
  /// Sample `i` of the scores, the probabilities or their gradients.
  exec::BufferOp scores(exec::BufferOp of, int64_t i) {
    return l.slice(of, i * heads * seq * keys, heads * seq * keys);
  }
  /// The leading dimension and batch stride of a head of a head-major
  /// tensor.
  void headMajor(int64_t &ld, int64_t &stride) const {
    ld = heads * dim;
    stride = dim;
  }
  /// D = alpha · op(A)·op(B) for every sample, batched over its heads;
  /// `a`, `b`, `d` pick sample i's views.
  template <typename A, typename B, typename D>
  void perSample(Lowering::StridedGemm g, A a, B b, D d) {
    g.batch = heads;
    for (int64_t i = 0; i < batch; ++i)
      l.gemm(loc, a(i), b(i), d(i), g);
  }
  /// Scores [s, keys] = scale · q·kᵀ; out [s, dim] = P·v.
  void forward(exec::BufferOp q, exec::BufferOp k, exec::BufferOp v,
               exec::BufferOp probs, exec::BufferOp out, bool causal) {
    exec::BufferOp scoresBuffer = l.scratch(probsType);
    Lowering::StridedGemm s{.m = seq,
                            .n = keys,
                            .k = dim,
                            .transposeB = true,
                            .ldd = keys,
                            .strideD = seq * keys,
                            .alpha = scale()};
    headMajor(s.lda, s.strideA);
    headMajor(s.ldb, s.strideB);
    perSample(
        s, [&](int64_t i) { return headsOf(q, seq, i); },
        [&](int64_t i) { return headsOf(k, keys, i); },
        [&](int64_t i) { return scores(scoresBuffer, i); });
    l.launch(loc, kernel::SoftmaxFwd{
                      .x = scoresBuffer, .y = probs, .causal = causal});
    exec::BufferOp read = rate > 0 ? dropout(probs) : probs;
    Lowering::StridedGemm o{
        .m = seq, .n = dim, .k = keys, .lda = keys, .strideA = seq * keys};
    headMajor(o.ldb, o.strideB);
    headMajor(o.ldd, o.strideD);
    perSample(
        o, [&](int64_t i) { return scores(read, i); },
        [&](int64_t i) { return headsOf(v, keys, i); },
        [&](int64_t i) { return headsOf(out, seq, i); });
  }
  /// dv = Pᵀ·dout; dP = dout·vᵀ; dS = softmax's backward;
  /// dq = scale·dS·k; dk = scale·dSᵀ·q. With dropout, P dropped out again
  /// for dv and dP dropped out by the same mask before the softmax's
  /// backward.
  void backward(exec::BufferOp q, exec::BufferOp k, exec::BufferOp v,
                exec::BufferOp probs, exec::BufferOp dout, exec::BufferOp dq,
                exec::BufferOp dk, exec::BufferOp dv) {
    auto sample = [&](exec::BufferOp of, int64_t rows) {
      return [=, this](int64_t i) { return headsOf(of, rows, i); };
    };
    auto scoresOf = [&](exec::BufferOp of) {
      return [=, this](int64_t i) { return scores(of, i); };
    };
    Lowering::StridedGemm pt{.m = keys,
                             .n = dim,
                             .k = seq,
                             .transposeA = true,
                             .lda = keys,
                             .strideA = seq * keys};
    headMajor(pt.ldb, pt.strideB);
    headMajor(pt.ldd, pt.strideD);
    exec::BufferOp read = rate > 0 ? dropout(probs) : probs;
    perSample(pt, scoresOf(read), sample(dout, seq), sample(dv, keys));
    exec::BufferOp dprobs = l.scratch(probsType),
                   dscores = l.scratch(probsType);
    Lowering::StridedGemm dp{.m = seq,
                             .n = keys,
                             .k = dim,
                             .transposeB = true,
                             .ldd = keys,
                             .strideD = seq * keys};
    headMajor(dp.lda, dp.strideA);
    headMajor(dp.ldb, dp.strideB);
    perSample(dp, sample(dout, seq), sample(v, keys), scoresOf(dprobs));
    if (rate > 0)
      dprobs = dropout(dprobs);
    l.launch(loc, kernel::SoftmaxBwd{.y = probs, .dy = dprobs, .dx = dscores});
    Lowering::StridedGemm ds{.m = seq,
                             .n = dim,
                             .k = keys,
                             .lda = keys,
                             .strideA = seq * keys,
                             .alpha = scale()};
    headMajor(ds.ldb, ds.strideB);
    headMajor(ds.ldd, ds.strideD);
    perSample(ds, scoresOf(dscores), sample(k, keys), sample(dq, seq));
    Lowering::StridedGemm dst{.m = keys,
                              .n = dim,
                              .k = seq,
                              .transposeA = true,
                              .lda = keys,
                              .strideA = seq * keys,
                              .alpha = scale()};
    headMajor(dst.ldb, dst.strideB);
    headMajor(dst.ldd, dst.strideD);
    perSample(dst, scoresOf(dscores), sample(q, seq), sample(dk, keys));
  }
};

/// The ring's forward: at step s the rank's queries meet rank (i - s) mod
/// c's keys and values, which the previous step shifted in; the next
/// step's travel on the context stream while this step's attention
/// runs. Each later step's output merges into the first's by the rows'
/// log-sum-exps, in f32 (ringSum).
LogicalResult ringAttention(AttentionOp attention, int64_t context,
                            int64_t group, int64_t firstStride, Lowering &l) {
  Location loc = attention.getLoc();
  exec::BufferOp q = l.operand(attention.getQuery()),
                 k = l.operand(attention.getKey()),
                 v = l.operand(attention.getValue()),
                 o = l.result(attention.getResult()),
                 lse = l.result(attention.getSaved(), /*keepF32=*/true);
  RingExchange ring(loc, l);
  exec::EventOp landed = ring.event("ring-keys");
  exec::BufferOp merged; // the steps' output so far
  for (int64_t step = 0; step < context; ++step) {
    bool more = step + 1 < context;
    auto [kNext, vNext] = more ? ring.passOn(k, v, landed)
                               : std::pair<exec::BufferOp, exec::BufferOp>();
    exec::BufferOp oStep = step ? l.scratch(o.getTensorType()) : o,
                   lseStep = step ? l.scratchF32(lse.getTensorType()) : lse;
    exec::LaunchOp launched =
        l.launch(loc, kernel::AttentionFwd{.q = q,
                                           .k = k,
                                           .v = v,
                                           .o = oStep,
                                           .lse = lseStep,
                                           .causal = attention.getCausal(),
                                           .group_size = group,
                                           .query_head_offset = 0,
                                           .context_parallel = context,
                                           .context_rank = 0,
                                           .ring_step = step});
    placeOnRank(launched, firstStride, l);
    if (step)
      l.launch(loc, kernel::AttentionMerge{.o_step = oStep,
                                           .lse_step = lseStep,
                                           .o = merged,
                                           .lse = lse});
    else
      merged = ringSum(o, loc, l);
    if (more)
      ring.await(landed);
    k = kNext;
    v = vNext;
  }
  ringResult(merged, o, loc, l);
  return success();
}

/// The ring's backward: each step as the forward's, with the merged output
/// and log-sum-exp; the steps' query gradients summed, and the keys' and
/// values' gradients summed as they travel with them (each rank adds its
/// part to the sums the previous rank shifted in), shifted once more after
/// the last step to reach their own rank; the query gradient sums in f32
/// (ringSum). The next step's keys and values, and the sums a step made,
/// travel while the next step's attention runs.
LogicalResult ringAttentionGrad(AttentionGradOp grad, int64_t context,
                                int64_t group, int64_t firstStride,
                                Lowering &l) {
  Location loc = grad.getLoc();
  exec::BufferOp q = l.operand(grad.getQuery()), k = l.operand(grad.getKey()),
                 v = l.operand(grad.getValue()),
                 o = l.operand(grad.getOutput()),
                 lse = l.operand(grad.getSaved()),
                 dout = l.operand(grad.getGrad()),
                 dq = l.result(grad.getQueryGrad()),
                 dk = l.result(grad.getKeyGrad()),
                 dv = l.result(grad.getValueGrad());
  RingExchange ring(loc, l);
  exec::EventOp keysLanded = ring.event("ring-keys"),
                sumsLanded = ring.event("ring-sums");
  exec::BufferOp dqSum;        // the steps' query gradient so far
  exec::BufferOp dkSum, dvSum; // the sums that travel, this step's rank's
  for (int64_t step = 0; step < context; ++step) {
    bool more = step + 1 < context;
    auto [kNext, vNext] = more ? ring.passOn(k, v, keysLanded)
                               : std::pair<exec::BufferOp, exec::BufferOp>();
    exec::BufferOp dqStep = step ? l.scratch(dq.getTensorType()) : dq,
                   dkStep = l.scratch(dk.getTensorType()),
                   dvStep = l.scratch(dv.getTensorType());
    exec::LaunchOp launched =
        l.launch(loc, kernel::AttentionBwd{.q = q,
                                           .k = k,
                                           .v = v,
                                           .o = o,
                                           .lse = lse,
                                           .dout = dout,
                                           .dq = dqStep,
                                           .dk = dkStep,
                                           .dv = dvStep,
                                           .causal = grad.getCausal(),
                                           .group_size = group,
                                           .query_head_offset = 0,
                                           .context_parallel = context,
                                           .context_rank = 0,
                                           .ring_step = step});
    placeOnRank(launched, firstStride, l);
    if (step) {
      ring.await(sumsLanded); // the previous step's sums have come
      l.launch(loc, kernel::Accumulate{.x = dqStep, .y = dqSum});
      l.launch(loc, kernel::Accumulate{.x = dkStep, .y = dkSum});
      l.launch(loc, kernel::Accumulate{.x = dvStep, .y = dvSum});
    } else {
      dqSum = ringSum(dq, loc, l);
      dkSum = dkStep;
      dvSum = dvStep;
    }
    ring.begin();
    dkSum = ring.shift(dkSum, more ? nullptr : dk);
    dvSum = ring.shift(dvSum, more ? nullptr : dv);
    ring.end(sumsLanded);
    if (more)
      ring.await(keysLanded);
    k = kNext;
    v = vNext;
  }
  ringResult(dqSum, dq, loc, l);
  ring.await(sumsLanded); // the sums are home in dk and dv
  return success();
}

LogicalResult attentionLowering(AttentionOp attention, Lowering &l) {
  if (attention.getDropout() && !attention.getUnfused())
    return attention.emitOpError()
           << "drops out, which only its unfused form does: run "
              "--strata-unfuse-attention";
  if (attention.getUnfused()) {
    UnfusedAttention unfused(attention, l);
    exec::BufferOp probs = l.result(attention.getSaved());
    unfused.forward(l.operand(attention.getQuery()),
                    l.operand(attention.getKey()),
                    l.operand(attention.getValue()), probs,
                    l.result(attention.getResult()), attention.getCausal());
    return success();
  }
  auto [group, firstStride] = headGrouping(attention);
  int64_t context = contextOf(attention);
  Location loc = attention.getLoc();
  if (context && contextRing(attention))
    return ringAttention(attention, context, group, firstStride, l);
  exec::LaunchOp launched = l.launch(
      loc,
      kernel::AttentionFwd{
          .q = l.operand(attention.getQuery()),
          .k = context
                   ? gatheredOverContext(loc, attention.getKey(), context, l)
                   : l.operand(attention.getKey()),
          .v = context
                   ? gatheredOverContext(loc, attention.getValue(), context, l)
                   : l.operand(attention.getValue()),
          .o = l.result(attention.getResult()),
          .lse = l.result(attention.getSaved(), /*keepF32=*/true),
          .causal = attention.getCausal(),
          .group_size = group,
          .query_head_offset = 0,
          .context_parallel = context,
          .context_rank = 0});
  placeOnRank(launched, firstStride, l);
  return success();
}

LogicalResult attentionGradLowering(AttentionGradOp grad, Lowering &l) {
  if (grad.getUnfused()) {
    UnfusedAttention unfused(grad, l);
    unfused.backward(l.operand(grad.getQuery()), l.operand(grad.getKey()),
                     l.operand(grad.getValue()), l.operand(grad.getSaved()),
                     l.operand(grad.getGrad()), l.result(grad.getQueryGrad()),
                     l.result(grad.getKeyGrad()),
                     l.result(grad.getValueGrad()));
    return success();
  }
  auto [group, firstStride] = headGrouping(grad);
  int64_t context = contextOf(grad);
  Location loc = grad.getLoc();
  if (context && contextRing(grad))
    return ringAttentionGrad(grad, context, group, firstStride, l);
  // With context parallelism the keys and values are gathered again (not
  // kept from the forward: c times a rank's), and the gradients of the
  // gathered ones, each rank's part of every rank's, reduce-scattered
  // back.
  exec::BufferOp dk = l.result(grad.getKeyGrad()),
                 dv = l.result(grad.getValueGrad());
  exec::BufferOp k = l.operand(grad.getKey()), v = l.operand(grad.getValue());
  exec::BufferOp dkWhole = dk, dvWhole = dv;
  if (context) {
    k = gatheredOverContext(loc, grad.getKey(), context, l);
    v = gatheredOverContext(loc, grad.getValue(), context, l);
    dkWhole = l.scratch(k.getTensorType());
    dvWhole = l.scratch(v.getTensorType());
  }
  exec::LaunchOp launched =
      l.launch(loc, kernel::AttentionBwd{.q = l.operand(grad.getQuery()),
                                         .k = k,
                                         .v = v,
                                         .o = l.operand(grad.getOutput()),
                                         .lse = l.operand(grad.getSaved()),
                                         .dout = l.operand(grad.getGrad()),
                                         .dq = l.result(grad.getQueryGrad()),
                                         .dk = dkWhole,
                                         .dv = dvWhole,
                                         .causal = grad.getCausal(),
                                         .group_size = group,
                                         .query_head_offset = 0,
                                         .context_parallel = context,
                                         .context_rank = 0});
  placeOnRank(launched, firstStride, l);
  if (context) {
    l.contextCollective(loc, exec::CollectiveKind::ReduceScatter, dkWhole, dk,
                        /*dim=*/1);
    l.contextCollective(loc, exec::CollectiveKind::ReduceScatter, dvWhole, dv,
                        /*dim=*/1);
  }
  return success();
}

/// Rotary angles follow each token's place in the whole sequence.
LogicalResult ropeContext(RopeOp rope, ContextState &state) {
  int64_t d = state.dim(rope.getInput());
  if (d < 0)
    return success();
  if (d != 1)
    return state.error(rope) << "its sequence is dimension " << d
                             << ", not 1 ([batch, seq, heads, dim])";
  state.set(rope.getResult(), d);
  state.markPositions(rope);
  return success();
}

/// The rank's queries attend to every rank's keys: its lowering exchanges
/// them, gathered or around the ring. Its log-sum-exp per query row runs
/// along the sequence too.
template <typename Op>
LogicalResult attentionOperandsContext(Op op, ContextState &state) {
  for (Value operand : {op.getQuery(), op.getKey(), op.getValue()})
    if (state.dim(operand) != 1)
      return state.error(op) << "its queries, keys and values must run "
                                "along the sequence as [batch, seq, heads, "
                                "dim]";
  if (op.getUnfused())
    return state.error(op) << "unfused attention (dropout in it, or "
                              "--attention-backend unfused) is not split "
                              "along the sequence";
  state.markPositions(op);
  if (state.usesRing())
    dist::contextRing(op->getContext())
        .setAttr(op, UnitAttr::get(op->getContext()));
  return success();
}

LogicalResult attentionContext(AttentionOp attention, ContextState &state) {
  if (failed(attentionOperandsContext(attention, state)))
    return failure();
  state.set(attention.getResult(), 1);
  state.set(attention.getSaved(), 2); // [batch, heads, seq]
  return success();
}

LogicalResult attentionGradContext(AttentionGradOp grad, ContextState &state) {
  if (failed(attentionOperandsContext(grad, state)))
    return failure();
  for (Value result : grad.getResults())
    state.set(result, 1);
  return success();
}

} // namespace

void OpRules<RopeOp>::attach(MLIRContext &context) {
  attachContext<RopeOp, ropeContext>(context);
  attachGradient<RopeOp, ropeGradient>(context);
  attachSharding<RopeOp, ropeSharding, ropeSplit>(context);
  attachLowering<RopeOp, ropeLowering>(context);
}
void OpRules<AttentionOp>::attach(MLIRContext &context) {
  attachContext<AttentionOp, attentionContext>(context);
  attachGradient<AttentionOp, attentionGradient>(context);
  attachSharding<AttentionOp, forwardAttentionSharding, attentionSplit>(
      context);
  attachLowering<AttentionOp, attentionLowering>(context);
}
// Backward only: no gradient of its own.
void OpRules<AttentionGradOp>::attach(MLIRContext &context) {
  attachContext<AttentionGradOp, attentionGradContext>(context);
  attachSharding<AttentionGradOp, backwardAttentionSharding>(context);
  attachLowering<AttentionGradOp, attentionGradLowering>(context);
}

} // namespace strata
