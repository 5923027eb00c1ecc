//===- LowerOptimizer.cpp - flat regions, buckets, the optimizer ----------===//
//
// The part of --strata-lower-to-exec that sees a stage's parameters whole.
// Every gradient, parameter and optimizer state lives in flat regions, laid
// out in the buckets --strata-layout-optimizer-state chose (dist.buckets on
// the stage's schedule), each reduced over the data-parallel ranks as one
// collective, each padded to a multiple of dp so that every rank owns an
// equal part. The last bucket's gradients (partial sums over
// tensor-parallel ranks, a tied embedding's two stages) are finished by
// collectives of their own first.
//
// The optimizer is then a fixed handful of instructions whatever the
// parameter count: one sum of squares over the segments counted,
// the norm's all-reduce, the clipping coefficient, one multi-tensor AdamW
// over the segments it updates, one fill that zeroes the gradients. The
// graph-level @optimizer (per parameter, as autodiff and the parallel
// passes wrote it) is read for what it says of each parameter: decay, a
// partial gradient, counted once over tensor-parallel ranks, tied.
//
// Each bucket's data-parallel reduction (and with the distributed
// optimizer its parameters' all-gather after the update) is an instruction
// of the optimizer marked with the bucket's number (exec.bucket);
// --strata-overlap-communication may move it beside the backward (or the
// next forward), as Megatron's --overlap-grad-reduce and
// --overlap-param-gather do.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/LowerToExec.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "runtime/plan/IoNames.h"
#include "llvm/ADT/StringSet.h"

namespace strata::lower_to_exec {

FailureOr<OptimizerFacts> readOptimizerFacts(func::FuncOp optimizer) {
  OptimizerFacts facts;
  // The parameter whose gradient a value derives from in the norm's chain:
  // graph.grad, or the in-place all-reduce of one.
  auto gradName = [](Value v) -> std::optional<StringRef> {
    if (auto reduce = v.getDefiningOp<shard::AllReduceOp>())
      v = reduce.getInput();
    if (auto grad = v.getDefiningOp<graph::GradOp>())
      return grad.getName();
    return std::nullopt;
  };
  WalkResult result = optimizer.walk([&](Operation *op) -> WalkResult {
    if (auto adam = dyn_cast<graph::AdamWOp>(op)) {
      facts.params[adam.getName()].decay = adam.getWeightDecay();
    } else if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      auto grad = reduce.getInput().getDefiningOp<graph::GradOp>();
      if (grad) {
        if (meshAxes(reduce.getGridAxesAttr()) != SmallVector<int64_t>{0})
          return reduce.emitOpError()
                 << "reduces a gradient over axes other than tp: the flat "
                    "optimizer does not know it";
        facts.params[grad.getName()].partialOverTp = true;
      } else {
        facts.normAxes = meshAxes(reduce.getGridAxesAttr()); // the norm's
      }
    } else if (auto keep = dyn_cast<dist::KeepOnFirstOp>(op)) {
      auto squares = keep.getInput().getDefiningOp<graph::SumSquaresOp>();
      std::optional<StringRef> name =
          squares ? gradName(squares.getInput()) : std::nullopt;
      if (!name)
        return keep.emitOpError() << "keeps on its first rank something "
                                     "other than a gradient's squares";
      facts.params[*name].countOnFirstTp = true;
    } else if (auto tie = dyn_cast<dist::TieGradientsOp>(op)) {
      facts.params[tie.getName()].tiedStages =
          SmallVector<int64_t>(tie.getStages().begin(), tie.getStages().end());
    } else if (auto reduce = dyn_cast<dist::ReduceGradientsOp>(op)) {
      facts.reductionAxes.assign(reduce.getGridAxes().begin(),
                                 reduce.getGridAxes().end());
      facts.distributedOptimizer = reduce.getDistributedOptimizer();
      facts.bucketElements = int64_t(reduce.getBucketElements());
    } else if (auto squares = dyn_cast<graph::SumSquaresOp>(op)) {
      if (!gradName(squares.getInput()))
        return squares.emitOpError()
               << "sums the squares of something other than a gradient";
    } else if (!isa<graph::GradOp, graph::AddOp, graph::ClipCoefficientOp,
                    func::ReturnOp, func::FuncOp>(op)) {
      return op->emitOpError() << "in @optimizer is not something the flat "
                                  "optimizer knows";
    }
    return WalkResult::advance();
  });
  if (result.wasInterrupted())
    return failure();
  return facts;
}

LogicalResult Lowering::layoutParameters(ArrayRef<func::FuncOp> functions,
                                         dist::ScheduleOp schedule) {
  // Parameters in first-use order, with the chunk that first uses them.
  SmallVector<graph::ParamOp> ops;
  for (func::FuncOp function : functions) {
    int64_t chunk = 0;
    if (IntegerAttr attr = dist::chunk(function.getContext()).getAttr(function))
      chunk = attr.getInt() / coords.ppSize;
    function.walk([&](graph::ParamOp param) {
      auto [it, fresh] = params.try_emplace(param.getName());
      if (!fresh)
        return;
      it->second.chunk = chunk;
      it->second.elements = param.getType().getNumElements();
      ops.push_back(param);
    });
  }
  // The buckets --strata-layout-optimizer-state chose, in layout order;
  // each parameter of the stage in exactly one.
  ArrayAttr layout = dist::buckets(ctx()).getAttr(schedule);
  if (!layout)
    return schedule.emitOpError()
           << "has no dist.buckets: run --strata-layout-optimizer-state "
              "before the lowering";
  SmallVector<SmallVector<graph::ParamOp>> members;
  llvm::StringMap<graph::ParamOp> byName;
  for (graph::ParamOp param : ops)
    byName[param.getName()] = param;
  llvm::StringSet<> placed;
  for (Attribute entry : layout) {
    auto bucket = dyn_cast<DictionaryAttr>(entry);
    auto chunk = bucket ? bucket.getAs<IntegerAttr>("chunk") : IntegerAttr();
    auto names = bucket ? bucket.getAs<ArrayAttr>("params") : ArrayAttr();
    if (!chunk || !names)
      return schedule.emitOpError()
             << "has a dist.buckets entry that is not {chunk, params}";
    SmallVector<graph::ParamOp> &list = members.emplace_back();
    for (Attribute name : names) {
      auto text = dyn_cast<StringAttr>(name);
      graph::ParamOp param = text ? byName.lookup(text) : graph::ParamOp();
      if (!param || !placed.insert(text).second)
        return schedule.emitOpError()
               << "lays out " << name
               << (param ? " twice" : ", which is no parameter of the stage");
      list.push_back(param);
    }
    buckets.emplace_back().chunk = chunk.getInt();
  }
  for (graph::ParamOp param : ops)
    if (!placed.contains(param.getName()))
      return schedule.emitOpError()
             << "lays out no bucket for parameter '" << param.getName() << "'";

  // Offsets: each bucket padded to a multiple of the ranks that reduce it
  // (dp, and cp with context parallelism), so that every rank owns an
  // equal part of it.
  int64_t parts = reducingRanks();
  for (auto [bucket, list] : llvm::zip(buckets, members)) {
    bucket.begin = flatElements;
    int64_t size = 0;
    for (graph::ParamOp param : list) {
      ParamBuffers &p = params[param.getName()];
      p.flatOffset = flatElements + size;
      p.bucket = &bucket - buckets.data();
      size += p.elements;
      paramOrder.push_back(param.getName().str());
    }
    bucket.size = (size + parts - 1) / parts * parts;
    bucket.part = opt.distributedOptimizer ? bucket.size / parts : bucket.size;
    bucket.stateBegin = stateElements;
    stateElements += bucket.part;
    flatElements += bucket.size;
  }

  Type valueType = bf16 ? Type(BFloat16Type::get(ctx())) : b.getF32Type();
  int64_t flat = std::max<int64_t>(flatElements, 1);
  paramRegion =
      persistent("params", RankedTensorType::get({flat}, valueType), false);
  gradRegion =
      persistent("grads", RankedTensorType::get({flat}, b.getF32Type()), true);
  auto stateType = RankedTensorType::get({std::max<int64_t>(stateElements, 1)},
                                         b.getF32Type());
  expAvgRegion = persistent("exp_avg", stateType, true);
  expAvgSqRegion = persistent("exp_avg_sq", stateType, true);
  if (bf16)
    masterRegion = persistent("master", stateType, false);
  hyperBuffer = persistent(
      runtime::io_names::kHyper,
      RankedTensorType::get({runtime::kHyperSlots}, b.getF32Type()), false);
  exec::IoOp::create(declarations, module.getLoc(),
                     b.getStringAttr(runtime::io_names::kHyper),
                     FlatSymbolRefAttr::get(hyperBuffer.getSymNameAttr()));
  for (Bucket &bucket : buckets) {
    std::string index = std::to_string(&bucket - buckets.data());
    bucket.grads =
        regionView("bucket:" + index, gradRegion, bucket.begin, bucket.size);
    if (opt.distributedOptimizer && parts > 1) {
      bucket.params = regionView("bucket-params:" + index, paramRegion,
                                 bucket.begin, bucket.size);
      // A rank's own part: the block of its place among the reducing
      // ranks.
      auto own = [&](StringRef name, exec::BufferOp region) {
        exec::BufferOp view =
            regionView(name, region, bucket.begin, bucket.part);
        int64_t bytes =
            exec::elementBytes(region.getTensorType().getElementType());
        view.setPerRankAttr(
            b.getDenseI64ArrayAttr(perRankTerms(ownPart(bucket.part * bytes))));
        return view;
      };
      bucket.ownGrads = own("own:" + index, gradRegion);
      bucket.ownParams = own("own-params:" + index, paramRegion);
    }
  }

  for (graph::ParamOp param : ops) {
    ParamBuffers &p = params[param.getName()];
    std::string name = param.getName().str();
    RankedTensorType local = param.getType();
    RankedTensorType stored = storageType(local);
    p.value = makeBuffer(
        "param:" + name, stored, exec::Arena::Persistent, paramRegion,
        p.flatOffset * exec::elementBytes(stored.getElementType()));
    RankedTensorType grad = asF32(local);
    p.grad =
        makeBuffer("grad:" + name, grad, exec::Arena::Persistent, gradRegion,
                   p.flatOffset * exec::elementBytes(grad.getElementType()));
    // Which part of the global tensor a rank holds: a tensor-parallel
    // split is the rank's coordinate's slice along `split_dim`.
    SmallVector<int64_t> global(local.getShape());
    IntegerAttr splitDim;
    if (IntegerAttr dim = dist::splitDim(ctx()).getAttr(param))
      splitDim = b.getI64IntegerAttr(dim.getInt());
    if (DenseI64ArrayAttr shape = dist::globalShape(ctx()).getAttr(param))
      global.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
    SmallVector<int64_t> padded = global;
    if (DenseI64ArrayAttr real = dist::realShape(ctx()).getAttr(param))
      global.assign(real.asArrayRef().begin(), real.asArrayRef().end());
    double std = param.getStd() ? param.getStd()->convertToDouble() : 0.0;
    exec::ParamOp::create(
        declarations, param.getLoc(), param.getNameAttr(),
        FlatSymbolRefAttr::get(p.value.getSymNameAttr()),
        FlatSymbolRefAttr::get(p.grad.getSymNameAttr()),
        b.getDenseI64ArrayAttr(global), b.getDenseI64ArrayAttr(padded),
        splitDim, b.getStringAttr(graph::stringifyInitKind(param.getInit())),
        b.getF64FloatAttr(std));
  }
  return success();
}

/// Appends a segment (begin, length, then `tag`'s fields) to `segments`,
/// merging it into the last one when they touch and carry the same tag.
static void appendSegment(SmallVectorImpl<int64_t> &segments, int64_t begin,
                          int64_t length, ArrayRef<int64_t> tag = {}) {
  if (length <= 0)
    return;
  size_t width = 2 + tag.size(), n = segments.size();
  if (n >= width) {
    int64_t *last = segments.data() + n - width;
    if (last[0] + last[1] == begin &&
        llvm::equal(tag, ArrayRef<int64_t>(last + 2, tag.size()))) {
      last[1] += length;
      return;
    }
  }
  segments.append({begin, length});
  segments.append(tag.begin(), tag.end());
}

Lowering::NormSegments Lowering::normSegments() {
  NormSegments segments;
  for (const std::string &name : paramOrder) {
    const ParamBuffers &p = params[name];
    const ParamFacts &f = opt.params.lookup(name);
    // Counted once across the ranks that hold it: a tied parameter on its
    // first stage, a replicated one on the first tensor-parallel rank (the
    // kernel's first_part). The windows keep a distributed optimizer's
    // rank to its own part, the only valid part of the reduced gradient.
    if (!f.tiedStages.empty() && f.tiedStages.front() != coords.pp)
      continue;
    appendSegment(f.countOnFirstTp ? segments.firstOnly : segments.always,
                  p.flatOffset, p.elements);
  }
  return segments;
}

SmallVector<int64_t> Lowering::adamSegments() {
  SmallVector<int64_t> segments;
  for (const std::string &name : paramOrder)
    appendSegment(segments, params[name].flatOffset, params[name].elements,
                  {opt.params.lookup(name).decay ? 1 : 0});
  return segments;
}

SmallVector<int64_t> Lowering::windows() {
  SmallVector<int64_t> out;
  for (const Bucket &bucket : buckets)
    out.append({bucket.begin, bucket.part, bucket.stateBegin});
  return out;
}

SmallVector<int64_t> Lowering::reducingAxes() const {
  // Those with more than one rank: a group of one moves nothing.
  SmallVector<int64_t> axes;
  for (int64_t axis : opt.reductionAxes)
    if (coords.sizeOf(axis) > 1)
      axes.push_back(axis);
  return axes;
}

int64_t Lowering::reducingRanks() const {
  int64_t ranks = 1;
  for (int64_t axis : reducingAxes())
    ranks *= coords.sizeOf(axis);
  return ranks;
}

SmallVector<std::pair<int64_t, int64_t>, 2>
Lowering::ownPart(int64_t stride) const {
  // A rank's place in the reduction's group: its first axis fastest
  // (Plan::groupMembers), dp then cp.
  SmallVector<std::pair<int64_t, int64_t>, 2> terms;
  for (int64_t axis : reducingAxes()) {
    terms.push_back({axis, stride});
    stride *= coords.sizeOf(axis);
  }
  return terms;
}

void Lowering::reduceBucket(Location loc, Bucket &bucket) {
  SmallVector<int64_t> axes = reducingAxes();
  if (axes.empty())
    return;
  exec::CollectiveOp op =
      opt.distributedOptimizer
          ? collective(loc, exec::CollectiveKind::ReduceScatter, bucket.grads,
                       bucket.ownGrads, axes)
          : collective(loc, exec::CollectiveKind::AllReduceSum, bucket.grads,
                       bucket.grads, axes);
  exec::bucket(ctx()).setAttr(op,
                              b.getI64IntegerAttr(&bucket - buckets.data()));
}

void Lowering::lowerOptimizer(func::FuncOp optimizer) {
  Location loc = optimizer.getLoc();
  auto program =
      exec::ProgramOp::create(programs, loc, optimizer.getSymNameAttr(),
                              exec::Phase::Optimizer, IntegerAttr());
  programByName[optimizer.getSymName()] = program;
  body.setInsertionPointToEnd(&program.getBody().emplaceBlock());
  auto scalar = RankedTensorType::get({}, b.getF32Type());
  auto f32 = [&](StringRef name) {
    return makeBuffer(name, scalar, exec::Arena::Workspace);
  };

  // The gradients that need more than the data-parallel sum.
  for (Bucket &bucket : buckets) {
    if (bucket.chunk >= 0)
      continue;
    int64_t partialBegin = -1, partialEnd = -1;
    for (const std::string &name : paramOrder) {
      const ParamBuffers &p = params[name];
      if (&buckets[p.bucket] != &bucket ||
          !opt.params.lookup(name).partialOverTp ||
          !opt.params.lookup(name).tiedStages.empty())
        continue;
      if (partialBegin < 0)
        partialBegin = p.flatOffset;
      partialEnd = p.flatOffset + p.elements;
    }
    if (partialBegin >= 0 && coords.tpSize > 1) {
      // Partial sums over tp (norm weights under sequence parallelism),
      // laid out together: one all-reduce.
      exec::BufferOp partial = regionView("partial", gradRegion, partialBegin,
                                          partialEnd - partialBegin);
      collective(loc, exec::CollectiveKind::AllReduceSum, partial, partial,
                 {kTensorAxis});
    }
    // Tied parameters by name: the stages that share them issue their
    // reductions in the same order, whatever order each first uses them in.
    SmallVector<std::string> tied;
    for (const std::string &name : paramOrder)
      if (!opt.params.lookup(name).tiedStages.empty() &&
          &buckets[params[name].bucket] == &bucket)
        tied.push_back(name);
    llvm::sort(tied);
    for (const std::string &name : tied) {
      const ParamFacts &f = opt.params.lookup(name);
      // A tied parameter's accumulators summed over the stages that hold
      // it, before the data-parallel sum (so that the distributed
      // optimizer's parts need no second reduction).
      exec::BufferOp grad = params[name].grad;
      if (f.partialOverTp && coords.tpSize > 1)
        collective(loc, exec::CollectiveKind::AllReduceSum, grad, grad,
                   {kTensorAxis});
      collective(loc, exec::CollectiveKind::AllReduceSum, grad, grad,
                 {kPipelineAxis}, 0, f.tiedStages);
    }
  }
  for (Bucket &bucket : buckets)
    reduceBucket(loc, bucket);

  // The norm over every gradient, the clipping coefficient, the update.
  exec::BufferOp sum = f32("sum_squares");
  NormSegments norm = normSegments();
  SmallVector<int64_t> owned = windows();
  exec::LaunchOp squares =
      launch(loc, kernel::SumSquares{.grads = gradRegion,
                                     .sum = sum,
                                     .segments = norm.always,
                                     .first_segments = norm.firstOnly,
                                     .windows = owned});
  perRank(squares, "first_part", kTensorAxis, 1);
  if (opt.distributedOptimizer)
    perRank(squares, "part", ownPart(1));
  if (!opt.normAxes.empty()) {
    exec::BufferOp total = f32("sum_squares_total");
    collective(loc, exec::CollectiveKind::AllReduceSum, sum, total,
               opt.normAxes);
    sum = total;
  }
  exec::BufferOp normBuffer = f32("norm"), coefficient = f32("coefficient");
  launch(loc, kernel::ClipCoefficient{.sum = sum,
                                      .hyper = hyperBuffer,
                                      .norm = normBuffer,
                                      .coefficient = coefficient});
  exec::LaunchOp adam = launch(loc, kernel::AdamW{.grads = gradRegion,
                                                  .coefficient = coefficient,
                                                  .hyper = hyperBuffer,
                                                  .params = paramRegion,
                                                  .exp_avg = expAvgRegion,
                                                  .exp_avg_sq = expAvgSqRegion,
                                                  .master = masterRegion,
                                                  .segments = adamSegments(),
                                                  .windows = owned});
  if (opt.distributedOptimizer)
    perRank(adam, "part", ownPart(1));
  // The accumulators start the next iteration at zero.
  launch(loc, kernel::Fill{.y = gradRegion, .value = 0});

  if (opt.distributedOptimizer && reducingRanks() > 1) {
    // The updated parts go to every rank that reduced them.
    SmallVector<int64_t> axes = reducingAxes();
    for (Bucket &bucket : buckets) {
      auto gather = collective(loc, exec::CollectiveKind::AllGather,
                               bucket.ownParams, bucket.params, axes);
      exec::bucket(ctx()).setAttr(
          gather, b.getI64IntegerAttr(&bucket - buckets.data()));
    }
  }
  output(loc, runtime::io_names::kGradNorm, normBuffer);
}

} // namespace strata::lower_to_exec
