//===- TensorParallel.cpp - shard the training step across tp ranks -------===//
//
// Megatron-LM's tensor parallelism, derived rather than written per layer.
// Every tensor of the step (forward, backward and optimizer alike) gets a
// sharding over the tp axis of the mesh:
//
//   replicated   every rank holds all of it
//   split(d)     rank r holds the r-th of tp equal blocks of dimension d
//   partial      every rank holds a summand; the tensor is their sum
//
// Planning seeds parameter shardings: an embedding table splits its
// vocabulary; a matmul weight splits its output columns ("column parallel")
// when its output flows, through elementwise ops, reshapes, rope and
// attention, into a consumer that wants it split — another matmul (which
// then becomes "row parallel"), the loss (vocabulary-parallel), or a query
// (heads split); key/value weights split only when their heads divide.
// Propagation then visits the ops in program order; each op's rule takes its
// operands' shardings, picks the shardings of any parameter met for the
// first time (a bias split like its activation, a row-parallel weight), and
// converts an operand whose sharding does not fit by inserting a collective
// (shard.all_reduce, all_gather, reduce_scatter) or a local slice. Nothing
// here knows transformer blocks by name: GPT's layout (two all-reduces per
// layer forward and two backward) and a SwiGLU / grouped-query model's both
// come from the op rules.
//
// With sequence parallelism, activations that would be all-reduced into the
// replicated residual stream are reduce-scattered along the sequence instead,
// and gathered again before a column-parallel matmul.
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"

namespace strata {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

constexpr StringLiteral kGrid = strata::kMeshName;
constexpr int16_t kTpAxes[] = {strata::kTensorAxis};

struct Sharding {
  enum class Kind : uint8_t { Replicated, Split, Partial };
  Kind kind = Kind::Replicated;
  int64_t dim = -1;

  static Sharding replicated() { return {}; }
  static Sharding split(int64_t d) { return {Kind::Split, d}; }
  static Sharding partial() { return {Kind::Partial, -1}; }
  bool isReplicated() const { return kind == Kind::Replicated; }
  bool isSplit() const { return kind == Kind::Split; }
  bool isPartial() const { return kind == Kind::Partial; }
  bool isSplit(int64_t d) const { return isSplit() && dim == d; }
  bool operator==(const Sharding &o) const {
    return kind == o.kind && dim == o.dim;
  }
  bool operator!=(const Sharding &o) const { return !(*this == o); }
};

/// What a column split of a matmul's output is for, found by following the
/// output forward.
enum class Need { None, Optional, Required };

struct Trace {
  Need need = Need::None;
  bool forLoss = false;         // required by the loss: the vocabulary
  Operation *blocked = nullptr; // an op the split cannot pass
  std::string why;
};

bool isBackwardOnly(Operation *op) {
  return isa<GeluGradOp, SiluGradOp, LayerNormGradOp, RmsNormGradOp,
             AttentionGradOp, CrossEntropyGradOp, MatmulWeightGradOp,
             EmbeddingGradOp, AccumulateGradOp, SumToOp>(op);
}

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

class Partitioner {
public:
  Partitioner(ModuleOp module, int64_t tp, bool sequenceParallel)
      : module(module), tp(tp), sp(sequenceParallel), b(module.getContext()) {}

  LogicalResult run();

private:
  // Planning.
  LogicalResult plan(func::FuncOp func);
  void trace(Value value, int64_t dim, Trace &out, int depth);
  std::optional<int64_t> mapThroughReshape(RankedTensorType in, int64_t dim,
                                           RankedTensorType out,
                                           std::string &why);

  // Propagation.
  LogicalResult propagate(func::FuncOp func);
  LogicalResult rule(Operation *op);
  LogicalResult ruleBroadcast(Operation *op, bool linearInBoth);
  LogicalResult ruleMatmul(MatmulOp op);
  LogicalResult ruleWeightGrad(MatmulWeightGradOp op);
  LogicalResult ruleAttention(Operation *op, bool backward);
  LogicalResult ruleLoss(CrossEntropyOp op);
  LogicalResult ruleLossGrad(CrossEntropyGradOp op);
  LogicalResult ruleNorm(Operation *op, bool backward);

  // Shardings.
  bool isUndecidedParam(Value v) {
    auto param = v.getDefiningOp<ParamOp>();
    return param && !params.count(param.getName());
  }
  Sharding get(Value v) {
    if (auto param = v.getDefiningOp<ParamOp>()) {
      auto it = params.find(param.getName());
      return it == params.end() ? Sharding::replicated() : it->second;
    }
    auto it = shardings.find(v);
    return it == shardings.end() ? Sharding::replicated() : it->second;
  }
  void decide(Value param, Sharding s) {
    params[param.getDefiningOp<ParamOp>().getName()] = s;
  }
  void set(Value v, Sharding s) { shardings[v] = s; }

  /// Where a P or R activation goes when it must become whole: the
  /// replicated stream, or its sequence split with sequence parallelism.
  Sharding streamSharding(Value v) {
    auto type = cast<RankedTensorType>(v.getType());
    if (sp && type.getRank() >= 3)
      return Sharding::split(1);
    return Sharding::replicated();
  }

  /// Replaces operand `index` of `user` by `to`-sharded copy of it.
  LogicalResult convertOperand(Operation *user, unsigned index, Sharding to);
  FailureOr<Value> convert(Value v, Sharding to, Operation *before);

  // Types.
  LogicalResult localize(func::FuncOp func);
  FailureOr<RankedTensorType> localType(Value v, Operation *where);

  InFlightDiagnostic error(Operation *op) {
    InFlightDiagnostic diag = op->emitError();
    diag << "tensor parallelism (size " << tp << "): ";
    return diag;
  }

  ModuleOp module;
  int64_t tp;
  bool sp;
  OpBuilder b;
  Operation *forwardEnd = nullptr; // the loss seed: backward ops follow
  llvm::DenseMap<Value, Sharding> shardings;
  llvm::StringMap<Sharding> params;
  llvm::StringSet<> partialGrads; // accumulators of partial sums
  llvm::DenseMap<Value, SmallVector<std::pair<Sharding, Value>, 2>> converted;
  struct LossStats {
    Value max, sumExp;
  };
  llvm::DenseMap<Value, LossStats> lossStats; // by logits
};

//===----------------------------------------------------------------------===//
// Planning: which matmul weights split their columns
//===----------------------------------------------------------------------===//

std::optional<int64_t> Partitioner::mapThroughReshape(RankedTensorType in,
                                                      int64_t dim,
                                                      RankedTensorType out,
                                                      std::string &why) {
  // Splitting dimension `dim` into tp blocks cuts the row-major elements
  // into the same pieces as splitting output dimension e when both have the
  // same leading product and the same block of trailing elements.
  int64_t prefix = product(in.getShape().take_front(dim));
  int64_t block = product(in.getShape().drop_front(dim));
  for (int64_t e = 0; e < out.getRank(); ++e) {
    if (product(out.getShape().take_front(e)) != prefix)
      continue;
    if (product(out.getShape().drop_front(e)) != block)
      continue;
    if (out.getDimSize(e) % tp != 0) {
      why = "its dimension " + std::to_string(e) + " (" +
            std::to_string(out.getDimSize(e)) +
            ") is not divisible by tensor-parallel size " + std::to_string(tp);
      return std::nullopt;
    }
    return e;
  }
  why = "it regroups the split dimension " + std::to_string(dim) +
        " so that no dimension of " + describe(out) + " holds the same blocks";
  return std::nullopt;
}

/// Follows `value`, split along `dim`, forward through the ops that could
/// carry the split. Past an op that cannot (`dim` is then -1), it goes on
/// only to learn whether the split was required beyond it.
void Partitioner::trace(Value value, int64_t dim, Trace &out, int depth) {
  if (depth > 64)
    return;
  auto blockedBy = [&](Operation *op, std::string why) {
    if (!out.blocked) {
      out.blocked = op;
      out.why = std::move(why);
    }
  };
  auto want = [&](Need need) {
    if (need > out.need)
      out.need = need;
  };
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (isBackwardOnly(user) ||
        (forwardEnd && forwardEnd->isBeforeInBlock(user)))
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    int64_t last = type.getRank() - 1;
    (void)last;
    if (isa<AddOp, SubOp>(user)) {
      Value other = user->getOperand(1 - use.getOperandNumber());
      // A bias or table parameter follows the split; another activation is
      // the residual stream, where the split would have to end.
      if (other.getDefiningOp<ParamOp>())
        trace(user->getResult(0), dim, out, depth + 1);
    } else if (isa<MulOp, GeluOp, SiluOp, ScaleOp>(user)) {
      trace(user->getResult(0), dim, out, depth + 1);
    } else if (auto rope = dyn_cast<RopeOp>(user)) {
      if (dim == 3)
        blockedBy(user, "rope rotates pairs within a head");
      trace(rope, dim == 3 ? -1 : dim, out, depth + 1);
    } else if (auto reshape = dyn_cast<ReshapeOp>(user)) {
      std::string why;
      std::optional<int64_t> mapped;
      if (dim >= 0) {
        mapped = mapThroughReshape(type, dim, reshape.getType(), why);
        if (!mapped)
          blockedBy(user, "the reshape to " + describe(reshape.getType()) +
                              " cannot carry the split: " + why);
      }
      trace(reshape, mapped ? *mapped : -1, out, depth + 1);
    } else if (auto transpose = dyn_cast<TransposeOp>(user)) {
      auto perm = transpose.getPermutation();
      int64_t moved = -1;
      for (int64_t e = 0; e < int64_t(perm.size()); ++e)
        if (perm[e] == dim)
          moved = e;
      trace(transpose, moved, out, depth + 1);
    } else if (isa<AttentionOp>(user)) {
      if (dim >= 0 && dim != 2)
        blockedBy(user, "attention splits heads only");
      want(use.getOperandNumber() == 0 ? Need::Required : Need::Optional);
    } else if (auto matmul = dyn_cast<MatmulOp>(user)) {
      if (use.getOperandNumber() == 0 && (dim == last || dim < 0))
        want(Need::Required);
    } else if (isa<CrossEntropyOp>(user)) {
      if (use.getOperandNumber() == 0 && (dim == last || dim < 0)) {
        want(Need::Required);
        out.forLoss = true;
      }
    }
  }
}

LogicalResult Partitioner::plan(func::FuncOp func) {
  for (Operation &op : func.getBody().front()) {
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      Value table = embedding.getTable();
      if (!isUndecidedParam(table))
        continue;
      int64_t vocab = embedding.getTable().getType().getDimSize(0);
      if (vocab % tp != 0)
        return error(&op) << "the table " << describe(table.getType())
                          << " has " << vocab
                          << " rows, not divisible by tensor-parallel size "
                          << tp << " (run --strata-pad-vocab first)";
      decide(table, Sharding::split(0));
      continue;
    }
    auto matmul = dyn_cast<MatmulOp>(op);
    if (!matmul || !isUndecidedParam(matmul.getRhs()))
      continue;
    if (forwardEnd && forwardEnd->isBeforeInBlock(&op))
      break;
    Trace t;
    int64_t last = matmul.getType().getRank() - 1;
    trace(matmul.getResult(), last, t, 0);
    if (t.need == Need::None)
      continue; // decided when propagation reaches it
    auto param = matmul.getRhs().getDefiningOp<ParamOp>();
    int64_t columns = matmul.getTransposeB() ? 0 : 1;
    int64_t size = param.getType().getDimSize(columns);
    if (size % tp != 0) {
      if (t.need == Need::Required)
        return error(&op) << "parameter '" << param.getName() << "' "
                          << describe(param.getType()) << ": dimension "
                          << columns << " (" << size
                          << ") must split across ranks, and is not "
                             "divisible by tensor-parallel size "
                          << tp;
      continue;
    }
    if (t.blocked) {
      if (t.need == Need::Required) {
        InFlightDiagnostic diag = error(t.blocked);
        diag << "the output of '" << param.getName()
             << "' must split across ranks, but " << t.why;
        diag.attachNote(op.getLoc()) << "the matmul it comes from";
        return failure();
      }
      continue; // key/value heads that do not divide: replicated
    }
    decide(matmul.getRhs(), Sharding::split(columns));
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

FailureOr<Value> Partitioner::convert(Value v, Sharding to, Operation *before) {
  Sharding from = get(v);
  if (from == to)
    return v;
  for (auto &[sharding, value] : converted[v])
    if (sharding == to)
      return value;
  b.setInsertionPoint(before);
  Location loc = before->getLoc();
  Type type = v.getType(); // global; localized at the end
  ArrayRef<int16_t> axes(kTpAxes);
  Value result;
  auto index = [](int64_t d) { return llvm::APInt(64, d); };
  if (from.isPartial() && to.isReplicated()) {
    result = shard::AllReduceOp::create(b, loc, type, kGrid, axes, v,
                                        shard::ReductionKind::Sum);
  } else if (from.isPartial() && to.isSplit()) {
    result = shard::ReduceScatterOp::create(
        b, loc, type, kGrid, axes, v, shard::ReductionKind::Sum, index(to.dim));
  } else if (from.isSplit() && to.isReplicated()) {
    result = shard::AllGatherOp::create(b, loc, type, kGrid, axes, v,
                                        index(from.dim));
  } else if (from.isReplicated() && to.isSplit()) {
    result =
        shard::AllSliceOp::create(b, loc, type, kGrid, axes, v, index(to.dim));
  } else if (from.isReplicated() && to.isPartial()) {
    result = strata::dist::KeepOnFirstOp::create(
        b, loc, type, v, FlatSymbolRefAttr::get(b.getContext(), kGrid),
        b.getDenseI16ArrayAttr(axes));
  } else if (from.isSplit() && (to.isSplit() || to.isPartial())) {
    FailureOr<Value> whole = convert(v, Sharding::replicated(), before);
    if (failed(whole))
      return failure();
    FailureOr<Value> again = convert(*whole, to, before);
    if (failed(again))
      return failure();
    converted[v].push_back({to, *again});
    return *again;
  } else {
    return error(before) << "no conversion between these shardings";
  }
  // A collective runs where its consumer runs (the pipeline stage of the
  // layer it belongs to).
  if (auto layer = before->getAttr("strata.layer"))
    result.getDefiningOp()->setAttr("strata.layer", layer);
  set(result, to);
  converted[v].push_back({to, result});
  return result;
}

LogicalResult Partitioner::convertOperand(Operation *user, unsigned index,
                                          Sharding to) {
  FailureOr<Value> value = convert(user->getOperand(index), to, user);
  if (failed(value))
    return failure();
  user->setOperand(index, *value);
  return success();
}

//===----------------------------------------------------------------------===//
// Rules
//===----------------------------------------------------------------------===//

/// add and sub (linear in both operands jointly), mul (in each separately).
/// The right operand may broadcast over leading dimensions.
LogicalResult Partitioner::ruleBroadcast(Operation *op, bool linearInBoth) {
  Value lhs = op->getOperand(0), rhs = op->getOperand(1);
  int64_t offset = cast<RankedTensorType>(lhs.getType()).getRank() -
                   cast<RankedTensorType>(rhs.getType()).getRank();
  // The rhs sharding that matches an lhs sharding.
  auto matching = [&](Sharding l) {
    if (l.isSplit() && l.dim >= offset)
      return Sharding::split(l.dim - offset);
    return Sharding::replicated();
  };
  if (isUndecidedParam(rhs)) {
    if (get(lhs).isPartial() &&
        failed(convertOperand(op, 0, streamSharding(lhs))))
      return failure();
    decide(rhs, matching(get(op->getOperand(0))));
  }
  Sharding l = get(op->getOperand(0)), r = get(op->getOperand(1));
  if (linearInBoth && l.isPartial() && r.isPartial()) {
    set(op->getResult(0), Sharding::partial());
    return success();
  }
  if (!linearInBoth && (l.isPartial() != r.isPartial()) &&
      (l.isReplicated() || r.isReplicated())) {
    // P·R stays partial: the product is linear in the partial factor.
    set(op->getResult(0), Sharding::partial());
    return success();
  }
  // A partial side becomes the stream's sharding (the residual add).
  if (l.isPartial()) {
    Sharding to = r.isSplit() && r.dim + offset >= 0
                      ? Sharding::split(r.dim + offset)
                      : streamSharding(lhs);
    if (failed(convertOperand(op, 0, to)))
      return failure();
  }
  l = get(op->getOperand(0));
  r = get(op->getOperand(1));
  if (r.isPartial() || r != matching(l)) {
    // The rhs follows the lhs when it can be sliced or reduced to it; an
    // lhs split on a dimension the rhs does not have needs nothing.
    Sharding target = matching(l);
    if (r.isSplit() && target.isReplicated() && l.isReplicated()) {
      // A split rhs against a replicated lhs: slice the lhs instead.
      if (failed(convertOperand(op, 0, Sharding::split(r.dim + offset))))
        return failure();
      l = get(op->getOperand(0));
      target = matching(l);
    }
    if (get(op->getOperand(1)) != target &&
        failed(convertOperand(op, 1, target)))
      return failure();
  }
  set(op->getResult(0), get(op->getOperand(0)));
  return success();
}

LogicalResult Partitioner::ruleMatmul(MatmulOp op) {
  Value lhs = op.getLhs(), rhs = op.getRhs();
  int64_t last = op.getType().getRank() - 1;
  int64_t kDim = op.getTransposeB() ? 1 : 0, nDim = 1 - kDim;
  if (isUndecidedParam(rhs))
    decide(rhs, get(lhs).isSplit(last) ? Sharding::split(kDim)
                                       : Sharding::replicated());
  Sharding l = get(lhs), r = get(rhs);
  if (l.isPartial()) {
    if (r.isReplicated()) {
      set(op, Sharding::partial());
      return success();
    }
    if (failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    l = Sharding::replicated();
  }
  // The batch or sequence split of the lhs carries through a replicated
  // weight; with a split weight the lhs must be whole first.
  if (l.isSplit() && l.dim != last) {
    if (r.isReplicated()) {
      set(op, l);
      return success();
    }
    if (failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    l = Sharding::replicated();
  }
  if (l.isReplicated() && r.isReplicated()) {
    set(op, Sharding::replicated());
  } else if (l.isReplicated() && r.isSplit(nDim)) {
    set(op, Sharding::split(last)); // column parallel
  } else if (l.isSplit(last) && r.isSplit(kDim)) {
    set(op, Sharding::partial()); // row parallel
  } else if (l.isSplit(last) && r.isReplicated()) {
    if (failed(convertOperand(op, 1, Sharding::split(kDim))))
      return failure();
    set(op, Sharding::partial());
  } else if (l.isReplicated() && r.isSplit(kDim)) {
    if (failed(convertOperand(op, 0, Sharding::split(last))))
      return failure();
    set(op, Sharding::partial());
  } else {
    return error(op) << "no rule for this matmul's operand shardings";
  }
  return success();
}

LogicalResult Partitioner::ruleWeightGrad(MatmulWeightGradOp op) {
  // lhs [..., K], grad [..., N] -> [K, N] (or [N, K] transposed).
  int64_t last = op.getLhs().getType().getRank() - 1;
  bool transposed = op.getTransposeResult();
  int64_t kDim = transposed ? 1 : 0, nDim = 1 - kDim;
  Sharding l = get(op.getLhs()), g = get(op.getGrad());
  if (l.isPartial() && g.isPartial()) {
    if (failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    l = Sharding::replicated();
  }
  if (l.isPartial() || g.isPartial()) {
    Sharding other = l.isPartial() ? g : l;
    if (!other.isReplicated() &&
        failed(
            convertOperand(op, l.isPartial() ? 1 : 0, Sharding::replicated())))
      return failure();
    set(op, Sharding::partial());
    return success();
  }
  // Rows split the same way: each rank sums its rows, a partial result.
  if (l.isSplit() && g.isSplit() && l.dim == g.dim && l.dim != last) {
    set(op, Sharding::partial());
    return success();
  }
  // A row split on one side only: make that side whole.
  if (l.isSplit() && l.dim != last &&
      failed(convertOperand(op, 0, Sharding::replicated())))
    return failure();
  if (g.isSplit() && g.dim != last &&
      failed(convertOperand(op, 1, Sharding::replicated())))
    return failure();
  l = get(op.getLhs());
  g = get(op.getGrad());
  if (l.isSplit(last) && g.isSplit(last) &&
      failed(convertOperand(op, 1, Sharding::replicated())))
    return failure();
  g = get(op.getGrad());
  if (l.isReplicated() && g.isReplicated())
    set(op, Sharding::replicated());
  else if (l.isReplicated() && g.isSplit(last))
    set(op, Sharding::split(nDim));
  else if (l.isSplit(last) && g.isReplicated())
    set(op, Sharding::split(kDim));
  else
    return error(op) << "no rule for this weight gradient's shardings";
  return success();
}

LogicalResult Partitioner::ruleAttention(Operation *op, bool backward) {
  // Operands: q, k, v (and output, lse, grad when backward). All
  // heads-split, or q split and k, v replicated (their heads do not
  // divide). The row log-sum-exp [b, heads, s] splits its heads (dim 1)
  // with q's.
  unsigned count = op->getNumOperands();
  auto isLse = [&](unsigned i) {
    return backward && op->getOperand(i) == cast<AttentionGradOp>(op).getLse();
  };
  auto lseOf = [](Sharding q) {
    return q.isSplit() ? Sharding::split(1) : Sharding::replicated();
  };
  for (unsigned i = 0; i < count; ++i)
    if (get(op->getOperand(i)).isPartial() &&
        failed(convertOperand(op, i, Sharding::replicated())))
      return failure();
  for (unsigned i = 0; i < count; ++i) {
    Sharding s = get(op->getOperand(i));
    if (!isLse(i) && s.isSplit() && s.dim != 2 &&
        failed(convertOperand(op, i, Sharding::replicated())))
      return failure();
  }
  Sharding q = get(op->getOperand(0)), k = get(op->getOperand(1)),
           v = get(op->getOperand(2));
  if (k != v && failed(convertOperand(op, 2, k)))
    return failure();
  if (q.isReplicated() && k.isSplit() &&
      (failed(convertOperand(op, 1, Sharding::replicated())) ||
       failed(convertOperand(op, 2, Sharding::replicated()))))
    return failure();
  k = get(op->getOperand(1));
  if (backward) {
    for (unsigned i = 3; i < count; ++i) {
      Sharding expected = isLse(i) ? lseOf(q) : q;
      if (get(op->getOperand(i)) != expected &&
          failed(convertOperand(op, i, expected)))
        return failure();
    }
  }
  if (q.isSplit() && k.isReplicated()) {
    // Each rank's query heads read the replicated kv heads they belong to.
    auto query = cast<RankedTensorType>(op->getOperand(0).getType());
    auto key = cast<RankedTensorType>(op->getOperand(1).getType());
    op->setAttr("group_size",
                b.getI64IntegerAttr(query.getDimSize(2) / key.getDimSize(2)));
    op->setAttr("dist.query_heads_split", b.getUnitAttr());
  }
  set(op->getResult(0), q);
  if (!backward)
    set(op->getResult(1), lseOf(q));
  if (backward) {
    // A replicated kv head's gradient sums over the ranks' query heads.
    Sharding kv = k.isReplicated() && q.isSplit() ? Sharding::partial() : k;
    set(op->getResult(1), kv);
    set(op->getResult(2), kv);
  }
  return success();
}

LogicalResult Partitioner::ruleLoss(CrossEntropyOp op) {
  int64_t last = op.getLogits().getType().getRank() - 1;
  Sharding logits = get(op.getLogits());
  if (logits.isPartial() || (logits.isSplit() && logits.dim != last)) {
    if (failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    logits = Sharding::replicated();
  }
  if (!logits.isSplit()) {
    set(op, Sharding::replicated());
    return success();
  }
  // Vocabulary-parallel: three row statistics, each all-reduced.
  b.setInsertionPoint(op);
  Location loc = op.getLoc();
  auto logitsType = op.getLogits().getType();
  auto rows =
      RankedTensorType::get(logitsType.getShape().drop_back(), b.getF32Type());
  int64_t vocab =
      op.getVocabSize() ? *op.getVocabSize() : logitsType.getShape().back();
  auto vocabAttr = b.getI64IntegerAttr(vocab);
  ArrayRef<int16_t> axes(kTpAxes);
  auto reduce = [&](Value v, shard::ReductionKind kind) {
    Value r = shard::AllReduceOp::create(b, loc, rows, kGrid, axes, v, kind);
    set(r, Sharding::replicated());
    return r;
  };
  auto localMax = LogitsMaxOp::create(b, loc, rows, op.getLogits(), vocabAttr);
  Value max = reduce(localMax, shard::ReductionKind::Max);
  auto localTarget = LogitsTargetOp::create(b, loc, rows, op.getLogits(),
                                            op.getLabels(), vocabAttr);
  Value target = reduce(localTarget, shard::ReductionKind::Sum);
  auto localSum =
      LogitsSumExpOp::create(b, loc, rows, op.getLogits(), max, vocabAttr);
  Value sumExp = reduce(localSum, shard::ReductionKind::Sum);
  auto layerTag = op->getAttr("strata.layer");
  for (Operation *created :
       {max.getDefiningOp(), target.getDefiningOp(), sumExp.getDefiningOp()})
    if (layerTag)
      created->setAttr("strata.layer", layerTag);
  for (Operation *stat : {localMax.getOperation(), localTarget.getOperation(),
                          localSum.getOperation()}) {
    stat->setAttr("dist.vocab_parallel", b.getUnitAttr());
    set(stat->getResult(0), Sharding::replicated()); // rows are whole
  }
  auto loss = CrossEntropyFromStatsOp::create(b, loc, op.getType(), max, sumExp,
                                              target);
  set(loss, Sharding::replicated());
  lossStats[op.getLogits()] = {max, sumExp};
  op.replaceAllUsesWith(loss.getResult());
  op.erase();
  return success();
}

LogicalResult Partitioner::ruleLossGrad(CrossEntropyGradOp op) {
  if (get(op.getGrad()).isPartial() &&
      failed(convertOperand(op, 2, Sharding::replicated())))
    return failure();
  auto it = lossStats.find(op.getLogits());
  if (it == lossStats.end()) {
    Sharding logits = get(op.getLogits());
    if (!logits.isReplicated() &&
        failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    set(op, Sharding::replicated());
    return success();
  }
  b.setInsertionPoint(op);
  int64_t vocab = op.getVocabSize()
                      ? *op.getVocabSize()
                      : op.getLogits().getType().getShape().back();
  auto grad = CrossEntropyGradFromStatsOp::create(
      b, op.getLoc(), op.getType(), op.getLogits(), op.getLabels(),
      it->second.max, it->second.sumExp, op.getGrad(),
      b.getI64IntegerAttr(vocab));
  grad->setAttr("dist.vocab_parallel", b.getUnitAttr());
  if (auto layer = op->getAttr("strata.layer"))
    grad->setAttr("strata.layer", layer);
  set(grad, get(op.getLogits()));
  op.replaceAllUsesWith(grad.getResult());
  op.erase();
  return success();
}

LogicalResult Partitioner::ruleNorm(Operation *op, bool backward) {
  // Forward: (x, weight[, bias]); backward: (x, weight, grad). Normalizes
  // the last dimension, which must be whole.
  Value x = op->getOperand(0);
  int64_t last = cast<RankedTensorType>(x.getType()).getRank() - 1;
  Sharding s = get(x);
  if (s.isPartial() || s.isSplit(last)) {
    if (failed(convertOperand(
            op, 0, s.isPartial() ? streamSharding(x) : Sharding::replicated())))
      return failure();
    s = get(op->getOperand(0));
  }
  unsigned params = backward ? 2 : op->getNumOperands();
  for (unsigned i = 1; i < params; ++i) {
    if (isUndecidedParam(op->getOperand(i)))
      decide(op->getOperand(i), Sharding::replicated());
    else if (!get(op->getOperand(i)).isReplicated() &&
             failed(convertOperand(op, i, Sharding::replicated())))
      return failure();
  }
  if (backward && get(op->getOperand(2)) != s &&
      failed(convertOperand(op, 2, s)))
    return failure();
  set(op->getResult(0), s);
  if (backward) {
    // Weight gradients sum over rows: partial when the rows are split.
    Sharding weights =
        s.isSplit() ? Sharding::partial() : Sharding::replicated();
    for (unsigned i = 1; i < op->getNumResults(); ++i)
      set(op->getResult(i), weights);
  }
  return success();
}

LogicalResult Partitioner::rule(Operation *op) {
  if (isa<InputOp, ConstantOp, ParamOp>(op))
    return success(); // inputs and constants are replicated; params decided
  if (auto grad = dyn_cast<GradOp>(op)) {
    // The accumulator's sharding: partial where replicated parameters
    // gathered partial sums.
    set(grad, partialGrads.contains(grad.getName())
                  ? Sharding::partial()
                  : params.lookup(grad.getName()));
    return success();
  }
  if (auto boundary = dyn_cast<LayerBoundaryOp>(op)) {
    // The stream crosses layers whole (or sequence-split), never partial.
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (get(op->getOperand(i)).isPartial() &&
          failed(convertOperand(op, i, streamSharding(op->getOperand(i)))))
        return failure();
    for (auto [input, result] :
         llvm::zip(boundary.getInputs(), boundary.getResults()))
      set(result, get(input));
    return success();
  }
  if (isa<AddOp, SubOp>(op))
    return ruleBroadcast(op, /*linearInBoth=*/true);
  if (isa<MulOp>(op))
    return ruleBroadcast(op, /*linearInBoth=*/false);
  if (isa<ScaleOp>(op)) {
    set(op->getResult(0), get(op->getOperand(0)));
    return success();
  }
  if (isa<GeluOp, SiluOp>(op)) {
    if (get(op->getOperand(0)).isPartial() &&
        failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    set(op->getResult(0), get(op->getOperand(0)));
    return success();
  }
  if (isa<GeluGradOp, SiluGradOp>(op)) {
    Sharding x = get(op->getOperand(0));
    if (x.isPartial() && failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    x = get(op->getOperand(0));
    if (get(op->getOperand(1)) != x && failed(convertOperand(op, 1, x)))
      return failure();
    set(op->getResult(0), x);
    return success();
  }
  if (auto reshape = dyn_cast<ReshapeOp>(op)) {
    Sharding s = get(reshape.getInput());
    if (s.isSplit()) {
      std::string why;
      auto mapped = mapThroughReshape(reshape.getInput().getType(), s.dim,
                                      reshape.getType(), why);
      if (!mapped) {
        if (failed(convertOperand(op, 0, Sharding::replicated())))
          return failure();
        s = Sharding::replicated();
      } else {
        s = Sharding::split(*mapped);
      }
    }
    set(reshape, s);
    return success();
  }
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    Sharding s = get(transpose.getInput());
    if (s.isSplit()) {
      auto perm = transpose.getPermutation();
      for (int64_t e = 0; e < int64_t(perm.size()); ++e)
        if (perm[e] == s.dim)
          s = Sharding::split(e);
    }
    set(transpose, s);
    return success();
  }
  if (auto rope = dyn_cast<RopeOp>(op)) {
    // Angles depend on the position and pair: the sequence and the head
    // dimension must be whole.
    Sharding s = get(rope.getInput());
    if (s.isPartial() && rope.getInverse()) {
      set(rope, s); // linear: the gradient may stay partial
      return success();
    }
    if (s.isPartial() || s.isSplit(1) || s.isSplit(3)) {
      if (failed(convertOperand(op, 0, Sharding::replicated())))
        return failure();
      s = Sharding::replicated();
    }
    set(rope, s);
    return success();
  }
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return ruleMatmul(matmul);
  if (auto wgrad = dyn_cast<MatmulWeightGradOp>(op))
    return ruleWeightGrad(wgrad);
  if (isa<LayerNormOp, RmsNormOp>(op))
    return ruleNorm(op, false);
  if (isa<LayerNormGradOp, RmsNormGradOp>(op))
    return ruleNorm(op, true);
  if (isa<AttentionOp>(op))
    return ruleAttention(op, false);
  if (isa<AttentionGradOp>(op))
    return ruleAttention(op, true);
  if (auto loss = dyn_cast<CrossEntropyOp>(op))
    return ruleLoss(loss);
  if (auto grad = dyn_cast<CrossEntropyGradOp>(op))
    return ruleLossGrad(grad);
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    if (isUndecidedParam(embedding.getTable()))
      decide(embedding.getTable(), Sharding::replicated());
    Sharding table = get(embedding.getTable());
    if (table.isSplit(0)) {
      embedding->setAttr("dist.vocab_parallel", b.getUnitAttr());
      set(embedding, Sharding::partial()); // rows outside a rank's range: 0
    } else if (table.isReplicated()) {
      set(embedding, Sharding::replicated());
    } else {
      return error(op) << "an embedding table splits its rows only";
    }
    return success();
  }
  if (auto grad = dyn_cast<EmbeddingGradOp>(op)) {
    // Its result is the table's gradient: shard it as the table.
    auto sink = llvm::find_if(grad->getUsers(), [](Operation *user) {
      return isa<AccumulateGradOp>(user);
    });
    Sharding table = Sharding::replicated();
    if (sink != grad->getUsers().end())
      table = params.lookup(cast<AccumulateGradOp>(*sink).getName());
    Sharding dy = get(grad.getGrad());
    if (table.isSplit(0)) {
      if (!dy.isReplicated() &&
          failed(convertOperand(op, 0, Sharding::replicated())))
        return failure();
      grad->setAttr("dist.vocab_parallel", b.getUnitAttr());
      set(grad, table);
      return success();
    }
    int64_t last = grad.getGrad().getType().getRank() - 1;
    if (dy.isSplit(last) &&
        failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    dy = get(grad.getGrad());
    set(grad, dy.isReplicated() ? Sharding::replicated() : Sharding::partial());
    return success();
  }
  if (auto sum = dyn_cast<SumToOp>(op)) {
    Sharding s = get(sum.getInput());
    int64_t offset =
        sum.getInput().getType().getRank() - sum.getType().getRank();
    if (s.isSplit())
      s = s.dim < offset ? Sharding::partial()
                         : Sharding::split(s.dim - offset);
    set(sum, s);
    return success();
  }
  if (auto sink = dyn_cast<AccumulateGradOp>(op)) {
    Sharding param = params.lookup(sink.getName());
    Sharding grad = get(sink.getGrad());
    // A replicated parameter's partial gradient (a norm weight under
    // sequence parallelism) accumulates as it is; the sum over ranks
    // happens once per iteration, in @optimizer, as Megatron does it.
    if (param.isReplicated() && grad.isPartial()) {
      partialGrads.insert(sink.getName());
      return success();
    }
    if (grad != param && failed(convertOperand(op, 0, param)))
      return failure();
    return success();
  }
  if (auto squares = dyn_cast<SumSquaresOp>(op)) {
    if (get(squares.getInput()).isPartial() &&
        failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    Sharding s = get(squares.getInput());
    set(squares,
        s.isReplicated() ? Sharding::replicated() : Sharding::partial());
    return success();
  }
  if (auto clip = dyn_cast<ClipCoefficientOp>(op)) {
    if (!get(clip.getSumSquares()).isReplicated() &&
        failed(convertOperand(op, 0, Sharding::replicated())))
      return failure();
    set(clip.getNorm(), Sharding::replicated());
    set(clip.getCoefficient(), Sharding::replicated());
    return success();
  }
  if (auto adam = dyn_cast<AdamWOp>(op)) {
    if (get(adam.getGrad()).isPartial() &&
        failed(convertOperand(op, 1, Sharding::replicated())))
      return failure();
    return success();
  }
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (!get(op->getOperand(i)).isReplicated() &&
          failed(convertOperand(op, i, Sharding::replicated())))
        return failure();
    return success();
  }
  return error(op) << "no sharding rule for " << op->getName();
}

LogicalResult Partitioner::propagate(func::FuncOp func) {
  // Sums of scalars (the gradient norm) stay partial: a replicated term is
  // counted once, on the first rank, and the total is all-reduced once.
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front())) {
    if (auto add = dyn_cast<AddOp>(op); add && add.getType().getRank() == 0) {
      Sharding l = get(add.getLhs()), r = get(add.getRhs());
      if (l.isPartial() || r.isPartial()) {
        if (l.isReplicated() &&
            failed(convertOperand(&op, 0, Sharding::partial())))
          return failure();
        if (r.isReplicated() &&
            failed(convertOperand(&op, 1, Sharding::partial())))
          return failure();
        set(add, Sharding::partial());
        continue;
      }
    }
    if (failed(rule(&op)))
      return failure();
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Local types
//===----------------------------------------------------------------------===//

FailureOr<RankedTensorType> Partitioner::localType(Value v, Operation *where) {
  auto type = cast<RankedTensorType>(v.getType());
  Sharding s = get(v);
  if (!s.isSplit())
    return type;
  SmallVector<int64_t> shape(type.getShape());
  if (shape[s.dim] % tp != 0) {
    error(where) << describe(type) << " splits dimension " << s.dim << " ("
                 << shape[s.dim]
                 << "), which is not divisible by tensor-parallel size " << tp;
    return failure();
  }
  shape[s.dim] /= tp;
  return RankedTensorType::get(shape, type.getElementType());
}

LogicalResult Partitioner::localize(func::FuncOp func) {
  for (Operation &op : func.getBody().front()) {
    if (auto param = dyn_cast<ParamOp>(op)) {
      Sharding s = get(param);
      if (s.isSplit()) {
        param->setAttr("dist.split_dim", b.getI64IntegerAttr(s.dim));
        param->setAttr("dist.global_shape",
                       b.getDenseI64ArrayAttr(param.getType().getShape()));
      }
    }
    for (Value result : op.getResults()) {
      FailureOr<RankedTensorType> local = localType(result, &op);
      if (failed(local))
        return failure();
      result.setType(*local);
    }
  }
  return success();
}

LogicalResult Partitioner::run() {
  auto microbatch = module.lookupSymbol<func::FuncOp>("microbatch");
  auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer");
  if (!microbatch || !optimizer)
    return module.emitError() << "tensor parallelism partitions the training "
                                 "step: run --strata-autodiff and "
                                 "--strata-optimizer first";
  if (sp) {
    // The residual stream is [batch, seq, hidden]: the sequence must split.
    for (auto input : microbatch.getOps<InputOp>()) {
      int64_t seq =
          input.getType().getRank() >= 2 ? input.getType().getDimSize(1) : 1;
      if (seq % tp != 0)
        return error(input)
               << "sequence parallelism splits the sequence (" << seq
               << "), which is not divisible by "
                  "tensor-parallel size "
               << tp;
    }
  }
  for (Operation &op : microbatch.getBody().front()) {
    auto constant = dyn_cast<ConstantOp>(op);
    if (constant && llvm::any_of(constant->getUsers(), [](Operation *user) {
          return isa<CrossEntropyGradOp>(user);
        })) {
      forwardEnd = constant;
      break;
    }
  }
  if (failed(plan(microbatch)) || failed(propagate(microbatch)) ||
      failed(propagate(optimizer)) || failed(localize(microbatch)) ||
      failed(localize(optimizer)))
    return failure();
  return success();
}

struct TensorParallelPass
    : strata::impl::TensorParallelBase<TensorParallelPass> {
  using TensorParallelBase::TensorParallelBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    if (size < 1) {
      module.emitError() << "tensor-parallel size must be at least 1";
      return signalPassFailure();
    }
    strata::ensureMesh(module);
    strata::setMeshAxis(module, /*axis=*/0, size);
    if (size == 1)
      return; // one rank holds everything: nothing to partition
    if (failed(Partitioner(module, size, sequenceParallel).run()))
      signalPassFailure();
  }
};

} // namespace
