//===- Sharding.cpp - tensor parallelism's shardings, for the rules -------===//
#include "compiler/rules/Sharding.h"
#include "compiler/Mesh.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphInterfaces.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {

namespace {

constexpr StringLiteral kGrid = kMeshName;
constexpr int16_t kTpAxes[] = {kTensorAxis};

int64_t product(ArrayRef<int64_t> dims) {
  int64_t p = 1;
  for (int64_t d : dims)
    p *= d;
  return p;
}

} // namespace

Sharding ShardingState::get(Value v) {
  if (auto param = v.getDefiningOp<ParamOp>()) {
    auto it = params.find(param.getName());
    return it == params.end() ? Sharding::replicated() : it->second;
  }
  auto it = shardings.find(v);
  return it == shardings.end() ? Sharding::replicated() : it->second;
}

bool ShardingState::isUndecidedParam(Value v) {
  auto param = v.getDefiningOp<ParamOp>();
  return param && !params.count(param.getName());
}

void ShardingState::decide(Value param, Sharding s) {
  params[param.getDefiningOp<ParamOp>().getName()] = s;
}

Sharding ShardingState::streamSharding(Value v) {
  auto type = cast<RankedTensorType>(v.getType());
  if (sp && type.getRank() >= 3)
    return Sharding::split(1);
  return Sharding::replicated();
}

Value ShardingState::allReduce(Location loc, Type type, Value v, bool max) {
  Value r = shard::AllReduceOp::create(
      b, loc, type, kGrid, ArrayRef<int16_t>(kTpAxes), v,
      max ? shard::ReductionKind::Max : shard::ReductionKind::Sum);
  set(r, Sharding::replicated());
  return r;
}

InFlightDiagnostic ShardingState::error(Operation *op) {
  InFlightDiagnostic diag = op->emitError();
  diag << "tensor parallelism (size " << tp << "): ";
  return diag;
}

std::optional<int64_t> dimThroughReshape(RankedTensorType in, int64_t dim,
                                         RankedTensorType out) {
  // Splitting dimension `dim` into blocks cuts the row-major elements into
  // the same pieces as splitting output dimension e when both have the
  // same leading product and the same block of trailing elements. Where
  // dimensions of size 1 make several such (one sample: [1, s, h] to [1,
  // s, heads, d]), the one as long as `dim`.
  int64_t prefix = product(in.getShape().take_front(dim));
  int64_t block = product(in.getShape().drop_front(dim));
  std::optional<int64_t> found;
  for (int64_t e = 0; e < out.getRank(); ++e)
    if (product(out.getShape().take_front(e)) == prefix &&
        product(out.getShape().drop_front(e)) == block &&
        (!found || out.getDimSize(e) == in.getDimSize(dim)))
      found = e;
  return found;
}

std::optional<int64_t> ShardingState::mapThroughReshape(RankedTensorType in,
                                                        int64_t dim,
                                                        RankedTensorType out,
                                                        std::string &why) {
  std::optional<int64_t> e = dimThroughReshape(in, dim, out);
  if (!e) {
    why = "it regroups the split dimension " + std::to_string(dim) +
          " so that no dimension of " + describe(out) +
          " holds the same blocks";
    return std::nullopt;
  }
  if (out.getDimSize(*e) % tp != 0) {
    why = "its dimension " + std::to_string(*e) + " (" +
          std::to_string(out.getDimSize(*e)) +
          ") is not divisible by tensor-parallel size " + std::to_string(tp);
    return std::nullopt;
  }
  return e;
}

FailureOr<Value> ShardingState::convert(Value v, Sharding to,
                                        Operation *before) {
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
  placeInLayerOf(result.getDefiningOp(), before);
  set(result, to);
  converted[v].push_back({to, result});
  return result;
}

LogicalResult ShardingState::convertOperand(Operation *user, unsigned index,
                                            Sharding to) {
  FailureOr<Value> value = convert(user->getOperand(index), to, user);
  if (failed(value))
    return failure();
  user->setOperand(index, *value);
  return success();
}

void SplitPlanner::follow(Value value, int64_t dim) {
  if (depth > 64)
    return;
  ++depth;
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (forwardEnd && forwardEnd->isBeforeInBlock(user))
      continue; // the backward pass
    if (auto rule = dyn_cast<Shardable>(user))
      rule.planSplit(use, dim, *this);
  }
  --depth;
}

void ShardingState::placeInLayerOf(Operation *created, Operation *consumer) {
  auto tag = graph::backwardLayer(consumer->getContext());
  if (IntegerAttr layer = tag.getAttr(consumer))
    tag.setAttr(created, layer);
}

void SplitPlanner::wantLastDimension(OpOperand &use, int64_t dim) {
  int64_t last = cast<RankedTensorType>(use.get().getType()).getRank() - 1;
  if (use.getOperandNumber() == 0 && (dim == last || dim < 0))
    want(Need::Required);
}

void SplitPlanner::block(Operation *op, std::string reason) {
  if (!blocked) {
    blocked = op;
    why = std::move(reason);
  }
}

} // namespace strata
