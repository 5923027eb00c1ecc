//===- LowerToExecOps.cpp - each op of the step as instructions -----------===//
//
// The op-by-op half of --strata-lower-to-exec: a graph, dist or shard op of
// a stage's function becomes gemms, launches of the kernel catalog and
// collectives over buffers, the arguments that differ between the stage's
// ranks (vocabulary and head offsets, who keeps a replicated term) written
// per rank, as a stride per coordinate. The optimizer's ops are lowered as
// a whole instead (LowerOptimizer.cpp).
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/LowerToExec.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace strata::lower_to_exec {

static int64_t rowsOf(RankedTensorType type) {
  return type.getNumElements() / type.getShape().back();
}

/// The bias added to a matmul's product (its only use), when a gemm's
/// epilogue can add it: a vector of the product's last dimension.
static graph::AddOp biasAddOf(graph::MatmulOp matmul) {
  if (!matmul.getResult().hasOneUse())
    return {};
  auto add = dyn_cast<graph::AddOp>(*matmul.getResult().getUsers().begin());
  if (!add || add.getLhs() != matmul.getResult())
    return {};
  auto bias = cast<RankedTensorType>(add.getRhs().getType());
  return bias.getRank() == 1 &&
                 bias.getDimSize(0) == matmul.getType().getShape().back()
             ? add
             : graph::AddOp();
}

/// An exact GELU of a biased product, which a gemm's epilogue applies too
/// (the sum, which the backward reads, is kept as well). The epilogue's
/// GELU is the erf form: a tanh one stays its own kernel.
static graph::GeluOp geluOf(graph::AddOp add) {
  for (Operation *user : add.getResult().getUsers())
    if (auto gelu = dyn_cast<graph::GeluOp>(user); gelu && !gelu.getTanh())
      return gelu;
  return {};
}

/// Whether `grad`'s only use accumulates into a parameter of `params`.
template <typename Map>
static bool accumulatesOnly(Value grad, const Map &params) {
  if (!grad.hasOneUse())
    return false;
  auto sink = dyn_cast<graph::AccumulateGradOp>(*grad.getUsers().begin());
  return sink && params.count(sink.getName());
}

/// The weight gradient beside a bias gradient: a linear layer's, from the
/// same output gradient, later in the function, both accumulating. Its gemm
/// sums the bias gradient in its epilogue (the columns of op(B) = dy).
template <typename Map>
static graph::MatmulWeightGradOp weightGradBeside(graph::SumToOp sum,
                                                  const Map &params) {
  auto type = sum.getType();
  if (type.getRank() != 1 || !accumulatesOnly(sum.getResult(), params))
    return {};
  for (Operation *user : sum.getInput().getUsers()) {
    auto wgrad = dyn_cast<graph::MatmulWeightGradOp>(user);
    if (wgrad && wgrad.getGrad() == sum.getInput() &&
        !wgrad.getTransposeResult() && wgrad->getBlock() == sum->getBlock() &&
        sum->isBeforeInBlock(wgrad) &&
        accumulatesOnly(wgrad.getResult(), params) &&
        wgrad.getGrad().getType().getShape().back() == type.getDimSize(0))
      return wgrad;
  }
  return {};
}

LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  auto out = [&](Value value) {
    return temporary(value, exec::Arena::Workspace);
  };
  auto in = [&](Value value) {
    // A parameter another op reads first (an epilogue's bias) may not have
    // been reached yet.
    if (auto param = value.getDefiningOp<graph::ParamOp>())
      return params[param.getName()].value;
    return bufferOf(value);
  };
  if (fused.contains(op))
    return success(); // done by the instruction of an op before it

  if (auto param = dyn_cast<graph::ParamOp>(op)) {
    buffers[param] = params[param.getName()].value;
    return success();
  }
  if (auto input = dyn_cast<graph::InputOp>(op)) {
    buffers[input] = this->input(input);
    return success();
  }
  if (auto loss = dyn_cast<dist::LossOp>(op)) {
    output(loc, "loss", in(loss.getValue()));
    return success();
  }
  if (isa<graph::ReshapeOp>(op)) {
    view(op->getResult(0), in(op->getOperand(0)));
    return success();
  }
  if (auto boundary = dyn_cast<graph::LayerBoundaryOp>(op)) {
    for (auto [input, result] :
         llvm::zip(boundary.getInputs(), boundary.getResults()))
      buffers[result] = in(input);
    return success();
  }
  if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
    launch(loc, kernel::Fill{.y = out(constant),
                             .value = constant.getValue().convertToDouble()});
    return success();
  }
  if (auto embedding = dyn_cast<graph::EmbeddingOp>(op)) {
    exec::LaunchOp launched =
        launch(loc, kernel::EmbeddingFwd{.table = in(embedding.getTable()),
                                         .ids = in(embedding.getIds()),
                                         .y = out(embedding),
                                         .vocab_offset = 0});
    // A vocabulary-parallel table: the rank's rows start at its share.
    if (op->hasAttr("dist.vocab_parallel"))
      perRank(launched, "vocab_offset", kTensorAxis,
              embedding.getTable().getType().getDimSize(0));
    return success();
  }
  if (auto matmul = dyn_cast<graph::MatmulOp>(op)) {
    auto rhs = matmul.getRhs().getType();
    bool tb = matmul.getTransposeB();
    int64_t k = matmul.getLhs().getType().getShape().back();
    int64_t n = rhs.getDimSize(tb ? 0 : 1);
    // A linear layer's bias, and an exact GELU after it, go into the gemm's
    // epilogue (its GELU is erf: cuBLASLt's GELU_AUX_BIAS, the tanh form,
    // is not it, so the CUDA target fuses only the bias).
    graph::AddOp biasAdd = biasAddOf(matmul);
    graph::GeluOp gelu =
        biasAdd && !biasOnlyEpilogues ? geluOf(biasAdd) : graph::GeluOp();
    exec::BufferOp pre = biasAdd ? out(biasAdd) : out(matmul);
    exec::GemmOp g = gemm(
        loc, in(matmul.getLhs()), in(matmul.getRhs()), gelu ? out(gelu) : pre,
        rowsOf(matmul.getLhs().getType()), n, k, false, tb, false);
    if (biasAdd) {
      fused.insert(biasAdd);
      g.setBiasAttr(
          FlatSymbolRefAttr::get(in(biasAdd.getRhs()).getSymNameAttr()));
      g.setEpilogue(exec::Epilogue::Bias);
    }
    if (gelu) {
      fused.insert(gelu);
      g.setAuxAttr(FlatSymbolRefAttr::get(pre.getSymNameAttr()));
      g.setEpilogue(exec::Epilogue::GeluBias);
    }
    return success();
  }
  if (auto wgrad = dyn_cast<graph::MatmulWeightGradOp>(op)) {
    // lhs [M, K], grad [M, N]: dW = lhsᵀ·grad [K, N], or gradᵀ·lhs [N, K].
    auto lhs = wgrad.getLhs().getType();
    int64_t rows = rowsOf(lhs), k = lhs.getShape().back();
    int64_t n = wgrad.getGrad().getType().getShape().back();
    auto [target, accumulate] = gradientTarget(wgrad);
    if (wgrad.getTransposeResult()) {
      gemm(loc, in(wgrad.getGrad()), in(wgrad.getLhs()), target, n, k, rows,
           true, false, accumulate);
      return success();
    }
    exec::GemmOp g = gemm(loc, in(wgrad.getLhs()), in(wgrad.getGrad()), target,
                          k, n, rows, true, false, accumulate);
    if (graph::SumToOp sum = biasBeside.lookup(wgrad)) {
      // The bias gradient beside it: the column sums of op(B) = dy, into
      // its accumulator (beta 1, like the weight's).
      exec::BufferOp bias = gradientTarget(sum).buffer;
      g.setBiasAttr(FlatSymbolRefAttr::get(bias.getSymNameAttr()));
      g.setEpilogue(exec::Epilogue::BiasGrad);
    }
    return success();
  }
  if (isa<graph::AddOp, graph::SubOp, graph::MulOp>(op)) {
    exec::BufferOp x = in(op->getOperand(0)), y = in(op->getOperand(1)),
                   z = out(op->getResult(0));
    if (isa<graph::AddOp>(op))
      launch(loc, kernel::Add{.x = x, .y = y, .z = z});
    else if (isa<graph::SubOp>(op))
      launch(loc, kernel::Sub{.x = x, .y = y, .z = z});
    else
      launch(loc, kernel::Mul{.x = x, .y = y, .z = z});
    return success();
  }
  if (auto scale = dyn_cast<graph::ScaleOp>(op)) {
    launch(loc, kernel::Scale{.x = in(scale.getInput()),
                              .y = out(scale),
                              .factor = scale.getFactor().convertToDouble()});
    return success();
  }
  if (auto sum = dyn_cast<graph::SumToOp>(op)) {
    if (auto wgrad = biasOnlyEpilogues ? graph::MatmulWeightGradOp()
                                       : weightGradBeside(sum, params)) {
      // Summed in the weight gradient's epilogue, straight into the
      // accumulator: its accumulate_grad (before the weight gradient) is
      // done there too.
      biasBeside[wgrad] = sum;
      fused.insert(*sum.getResult().getUsers().begin());
      return success();
    }
    auto [target, accumulate] = gradientTarget(sum);
    launch(loc, kernel::SumTo{.x = in(sum.getInput()),
                              .y = target,
                              .accumulate = accumulate});
    return success();
  }
  if (auto gelu = dyn_cast<graph::GeluOp>(op)) {
    if (gelu.getTanh())
      launch(loc, kernel::GeluTanhFwd{.x = in(gelu.getInput()),
                                      .y = out(gelu.getResult())});
    else
      launch(loc, kernel::GeluFwd{.x = in(gelu.getInput()),
                                  .y = out(gelu.getResult())});
    return success();
  }
  if (isa<graph::SiluOp>(op)) {
    launch(loc, kernel::SiluFwd{.x = in(op->getOperand(0)),
                                .y = out(op->getResult(0))});
    return success();
  }
  if (auto grad = dyn_cast<graph::GeluGradOp>(op)) {
    if (grad.getTanh())
      launch(loc, kernel::GeluTanhBwd{.x = in(grad.getInput()),
                                      .dy = in(grad.getGrad()),
                                      .dx = out(grad.getResult())});
    else
      launch(loc, kernel::GeluBwd{.x = in(grad.getInput()),
                                  .dy = in(grad.getGrad()),
                                  .dx = out(grad.getResult())});
    return success();
  }
  if (isa<graph::SiluGradOp>(op)) {
    launch(loc, kernel::SiluBwd{.x = in(op->getOperand(0)),
                                .dy = in(op->getOperand(1)),
                                .dx = out(op->getResult(0))});
    return success();
  }
  if (auto norm = dyn_cast<graph::LayerNormOp>(op)) {
    launch(loc, kernel::LayerNormFwd{.x = in(norm.getInput()),
                                     .weight = in(norm.getWeight()),
                                     .bias = in(norm.getBias()),
                                     .y = out(norm),
                                     .epsilon =
                                         norm.getEpsilon().convertToDouble()});
    return success();
  }
  if (auto norm = dyn_cast<graph::LayerNormGradOp>(op)) {
    launch(loc, kernel::LayerNormBwd{.x = in(norm.getInput()),
                                     .weight = in(norm.getWeight()),
                                     .dy = in(norm.getGrad()),
                                     .dx = out(norm.getInputGrad()),
                                     .dweight = out(norm.getWeightGrad()),
                                     .dbias = out(norm.getBiasGrad()),
                                     .epsilon =
                                         norm.getEpsilon().convertToDouble()});
    return success();
  }
  if (auto norm = dyn_cast<graph::RmsNormOp>(op)) {
    launch(loc,
           kernel::RmsNormFwd{.x = in(norm.getInput()),
                              .weight = in(norm.getWeight()),
                              .y = out(norm),
                              .epsilon = norm.getEpsilon().convertToDouble()});
    return success();
  }
  if (auto norm = dyn_cast<graph::RmsNormGradOp>(op)) {
    launch(loc,
           kernel::RmsNormBwd{.x = in(norm.getInput()),
                              .weight = in(norm.getWeight()),
                              .dy = in(norm.getGrad()),
                              .dx = out(norm.getInputGrad()),
                              .dweight = out(norm.getWeightGrad()),
                              .epsilon = norm.getEpsilon().convertToDouble()});
    return success();
  }
  if (auto transpose = dyn_cast<graph::TransposeOp>(op)) {
    ArrayRef<int64_t> permutation = transpose.getPermutation();
    launch(loc,
           kernel::Transpose{.x = in(transpose.getInput()),
                             .y = out(transpose),
                             .permutation = SmallVector<int64_t>(permutation)});
    return success();
  }
  if (auto rope = dyn_cast<graph::RopeOp>(op)) {
    launch(loc, kernel::Rope{.x = in(rope.getInput()),
                             .y = out(rope),
                             .base = rope.getBase().convertToDouble(),
                             .inverse = rope.getInverse()});
    return success();
  }
  if (isa<graph::AttentionOp, graph::AttentionGradOp>(op)) {
    // Query heads split and kv heads replicated: the rank's first head.
    int64_t heads =
        cast<RankedTensorType>(op->getOperand(0).getType()).getDimSize(2);
    int64_t kvHeads =
        cast<RankedTensorType>(op->getOperand(1).getType()).getDimSize(2);
    int64_t group = heads / kvHeads, firstStride = 0;
    if (auto size = op->getAttrOfType<IntegerAttr>("group_size")) {
      group = size.getInt();
      if (op->hasAttr("dist.query_heads_split"))
        firstStride = heads;
    }
    bool causal = op->hasAttr("causal");
    exec::LaunchOp launched;
    if (auto attention = dyn_cast<graph::AttentionOp>(op)) {
      launched = launch(loc, kernel::AttentionFwd{
                                 .q = in(attention.getQuery()),
                                 .k = in(attention.getKey()),
                                 .v = in(attention.getValue()),
                                 .o = out(attention.getResult()),
                                 .lse = temporary(attention.getLse(),
                                                  exec::Arena::Workspace, true),
                                 .causal = causal,
                                 .group_size = group,
                                 .query_head_offset = 0});
    } else {
      auto grad = cast<graph::AttentionGradOp>(op);
      launched =
          launch(loc, kernel::AttentionBwd{.q = in(grad.getQuery()),
                                           .k = in(grad.getKey()),
                                           .v = in(grad.getValue()),
                                           .o = in(grad.getOutput()),
                                           .lse = in(grad.getLse()),
                                           .dout = in(grad.getGrad()),
                                           .dq = out(grad.getQueryGrad()),
                                           .dk = out(grad.getKeyGrad()),
                                           .dv = out(grad.getValueGrad()),
                                           .causal = causal,
                                           .group_size = group,
                                           .query_head_offset = 0});
    }
    if (firstStride)
      perRank(launched, "query_head_offset", kTensorAxis, firstStride);
    return success();
  }
  if (isa<graph::CrossEntropyOp, graph::CrossEntropyGradOp,
          graph::CrossEntropyWithGradOp, graph::LogitsMaxOp,
          graph::LogitsTargetOp, graph::LogitsSumExpOp,
          graph::CrossEntropyFromStatsOp, graph::CrossEntropyGradFromStatsOp,
          graph::CrossEntropyWithGradFromStatsOp>(op)) {
    // Logits lead every loss op but the one from statistics (which ignores
    // these); `vocab_size` leaves padding columns out.
    int64_t columns =
        cast<RankedTensorType>(op->getOperand(0).getType()).getShape().back();
    auto vocabAttr = op->getAttrOfType<IntegerAttr>("vocab_size");
    int64_t vocab = vocabAttr ? vocabAttr.getInt() : columns;
    if (auto loss = dyn_cast<graph::CrossEntropyOp>(op)) {
      launch(loc, kernel::CrossEntropyFwd{.logits = in(loss.getLogits()),
                                          .labels = in(loss.getLabels()),
                                          .loss = out(loss),
                                          .vocab_size = vocab});
      return success();
    }
    if (isa<graph::CrossEntropyGradOp>(op)) {
      launch(loc, kernel::CrossEntropyBwd{.logits = in(op->getOperand(0)),
                                          .labels = in(op->getOperand(1)),
                                          .dloss = in(op->getOperand(2)),
                                          .dlogits = out(op->getResult(0)),
                                          .vocab_size = vocab});
      return success();
    }
    if (auto fused = dyn_cast<graph::CrossEntropyWithGradOp>(op)) {
      launch(loc,
             kernel::CrossEntropyWithGrad{.logits = in(fused.getLogits()),
                                          .labels = in(fused.getLabels()),
                                          .dloss = in(fused.getGrad()),
                                          .loss = out(fused.getLoss()),
                                          .dlogits = out(fused.getLogitsGrad()),
                                          .vocab_size = vocab});
      return success();
    }
    // The vocabulary-parallel loss: this rank's columns start at its
    // share of the (padded) vocabulary. The row statistics stay f32 in
    // bf16 mode, as Megatron's vocabulary-parallel cross-entropy computes
    // them in fp32.
    auto statistic = [&] {
      return temporary(op->getResult(0), exec::Arena::Workspace, true);
    };
    exec::LaunchOp launched;
    if (isa<graph::LogitsMaxOp>(op))
      launched = launch(loc, kernel::LogitsMax{.logits = in(op->getOperand(0)),
                                               .max = statistic(),
                                               .vocab_size = vocab});
    else if (isa<graph::LogitsTargetOp>(op))
      launched =
          launch(loc, kernel::LogitsTarget{.logits = in(op->getOperand(0)),
                                           .labels = in(op->getOperand(1)),
                                           .target = statistic(),
                                           .vocab_size = vocab});
    else if (isa<graph::LogitsSumExpOp>(op))
      launched =
          launch(loc, kernel::LogitsSumExp{.logits = in(op->getOperand(0)),
                                           .max = in(op->getOperand(1)),
                                           .sum = statistic(),
                                           .vocab_size = vocab});
    else if (isa<graph::CrossEntropyFromStatsOp>(op))
      launch(loc, kernel::CrossEntropyFromStats{.max = in(op->getOperand(0)),
                                                .sum = in(op->getOperand(1)),
                                                .target = in(op->getOperand(2)),
                                                .loss = out(op->getResult(0))});
    else if (auto fused = dyn_cast<graph::CrossEntropyWithGradFromStatsOp>(op))
      launched = launch(loc, kernel::CrossEntropyWithGradFromStats{
                                 .logits = in(fused.getLogits()),
                                 .labels = in(fused.getLabels()),
                                 .max = in(fused.getMax()),
                                 .sum = in(fused.getSumExp()),
                                 .target = in(fused.getTarget()),
                                 .dloss = in(fused.getGrad()),
                                 .loss = out(fused.getLoss()),
                                 .dlogits = out(fused.getLogitsGrad()),
                                 .vocab_size = vocab});
    else
      launched = launch(loc, kernel::CrossEntropyGradFromStats{
                                 .logits = in(op->getOperand(0)),
                                 .labels = in(op->getOperand(1)),
                                 .max = in(op->getOperand(2)),
                                 .sum = in(op->getOperand(3)),
                                 .dloss = in(op->getOperand(4)),
                                 .dlogits = out(op->getResult(0)),
                                 .vocab_size = vocab});
    if (launched && op->hasAttr("dist.vocab_parallel"))
      perRank(launched, "vocab_offset", kTensorAxis, columns);
    return success();
  }
  if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp>(op)) {
    SmallVector<int64_t> axes =
        meshAxes(op->getAttrOfType<DenseI16ArrayAttr>("grid_axes"));
    exec::BufferOp input = in(op->getOperand(0));
    // A collective keeps its operand's dtype (f32 statistics stay f32).
    bool f32 = input.getTensorType().getElementType().isF32();
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      collective(loc,
                 reduce.getReduction() == shard::ReductionKind::Max
                     ? exec::CollectiveKind::AllReduceMax
                     : exec::CollectiveKind::AllReduceSum,
                 input,
                 temporary(reduce.getResult(), exec::Arena::Workspace, f32),
                 axes);
    } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
      collective(loc, exec::CollectiveKind::AllGather, input,
                 temporary(gather.getResult(), exec::Arena::Workspace, f32),
                 axes, gather.getGatherAxis().getSExtValue());
    } else {
      auto scatter = cast<shard::ReduceScatterOp>(op);
      collective(loc, exec::CollectiveKind::ReduceScatter, input,
                 temporary(scatter.getResult(), exec::Arena::Workspace, f32),
                 axes, scatter.getScatterAxis().getSExtValue());
    }
    return success();
  }
  if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
    exec::LaunchOp launched =
        launch(loc, kernel::Slice{.x = in(slice.getInput()),
                                  .y = out(slice),
                                  .dim = slice.getSliceAxis().getSExtValue(),
                                  .part = 0,
                                  .parts = coords.tpSize});
    perRank(launched, "part", kTensorAxis, 1);
    return success();
  }
  if (auto keep = dyn_cast<dist::KeepOnFirstOp>(op)) {
    SmallVector<int64_t> axes = meshAxes(keep.getGridAxesAttr());
    if (axes.size() != 1)
      return keep.emitOpError()
             << "keeps a value on the first rank of " << axes.size()
             << " mesh axes: the lowering knows one";
    exec::LaunchOp launched = launch(
        loc, kernel::KeepOnFirst{.x = in(keep.getInput()), .y = out(keep)});
    perRank(launched, "part", axes.front(), 1);
    return success();
  }
  if (auto grad = dyn_cast<graph::EmbeddingGradOp>(op)) {
    auto [target, accumulate] = gradientTarget(grad);
    exec::LaunchOp launched =
        launch(loc, kernel::EmbeddingBwd{.dy = in(grad.getGrad()),
                                         .ids = in(grad.getIds()),
                                         .dtable = target,
                                         .vocab_offset = 0,
                                         .accumulate = accumulate});
    if (op->hasAttr("dist.vocab_parallel"))
      perRank(launched, "vocab_offset", kTensorAxis,
              grad.getType().getDimSize(0));
    return success();
  }
  if (auto sink = dyn_cast<graph::AccumulateGradOp>(op)) {
    auto it = params.find(sink.getName());
    if (it == params.end())
      return op->emitOpError() << "accumulates into '" << sink.getName()
                               << "', which is not a parameter";
    launch(loc,
           kernel::Accumulate{.x = in(sink.getGrad()), .y = it->second.grad});
    return success();
  }
  return op->emitOpError() << "has no lowering to exec";
}

} // namespace strata::lower_to_exec
