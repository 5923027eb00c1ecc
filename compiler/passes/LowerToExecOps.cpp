//===- LowerToExecOps.cpp - each op of the step as kernels ----------------===//
//
// The op-by-op half of --strata-lower-to-exec: a graph, dist or shard op of
// one rank's function becomes exec.kernel instructions over buffers, with
// the rank-dependent arguments (vocabulary and head offsets, peers, who
// keeps a replicated term) filled in from the rank's coordinates.
//
//===----------------------------------------------------------------------===//
#include "compiler/passes/LowerToExec.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

namespace strata::lower_to_exec {

static int64_t rowsOf(RankedTensorType type) {
  return type.getNumElements() / type.getShape().back();
}

LogicalResult Lowering::lowerOp(Operation *op) {
  Location loc = op->getLoc();
  auto attr = [&](StringRef name, Attribute value) {
    return b.getNamedAttr(name, value);
  };
  auto out = [&](Value value) {
    return temporary(value, exec::Arena::Workspace);
  };

  if (auto param = dyn_cast<graph::ParamOp>(op)) {
    buffers[param] = params[param.getName()].value;
    return success();
  }
  if (auto in = dyn_cast<graph::InputOp>(op)) {
    buffers[in] = input(in);
    return success();
  }
  if (auto grad = dyn_cast<graph::GradOp>(op)) {
    auto it = params.find(grad.getName());
    if (it == params.end()) {
      // Another pipeline stage holds it: what reads it is skipped here.
      if (coords.ppSize > 1)
        return success();
      return op->emitOpError() << "reads the gradient of '" << grad.getName()
                               << "', which no program uses";
    }
    buffers[grad] = it->second.grad;
    return success();
  }
  if (auto recv = dyn_cast<dist::RecvOp>(op)) {
    int64_t chunk = static_cast<int64_t>(recv.getChunk());
    kernel(loc, "recv", {}, {out(recv)},
           {rankAttr("peer", coords.onStage(chunk % coords.ppSize)),
            rankAttr("channel", static_cast<int64_t>(recv.getChannel()))});
    return success();
  }
  if (auto send = dyn_cast<dist::SendOp>(op)) {
    int64_t chunk = static_cast<int64_t>(send.getChunk());
    kernel(loc, "send", {bufferOf(send.getValue())}, {},
           {rankAttr("peer", coords.onStage(chunk % coords.ppSize)),
            rankAttr("channel", static_cast<int64_t>(send.getChannel()))});
    return success();
  }
  if (auto loss = dyn_cast<dist::LossOp>(op)) {
    exec::BufferOp buffer = makeBuffer(
        "output:loss", storageType(loss.getValue().getType()),
        exec::Arena::Persistent);
    kernel(loc, "copy", {bufferOf(loss.getValue())}, {buffer});
    exec::IoOp::create(bufferBuilder, loc, b.getStringAttr("loss"),
                       FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
    return success();
  }
  if (auto tie = dyn_cast<dist::TieGradientsOp>(op)) {
    auto it = params.find(tie.getName());
    if (it == params.end())
      return success(); // not on this stage
    kernel(loc, "all_reduce", {it->second.grad}, {it->second.grad},
           {attr("axes", b.getDenseI64ArrayAttr({kPipelineAxis})),
            rankAttr("reduction", 0),
            attr("stages", tie.getStagesAttr())});
    return success();
  }
  // On a pipeline stage, the optimizer's ops for parameters other stages
  // hold: a sum of squares counts zero, the rest do nothing here.
  if (coords.ppSize > 1 &&
      llvm::any_of(op->getOperands(), [&](Value v) { return !bufferOf(v); })) {
    if (isa<graph::SumSquaresOp>(op)) {
      kernel(loc, "fill", {}, {out(op->getResult(0))},
             {attr("value", b.getF64FloatAttr(0))});
      return success();
    }
    if (isa<shard::AllReduceOp, graph::AdamWOp>(op))
      return success();
    return op->emitOpError() << "reads a value this pipeline stage does not "
                                "compute";
  }
  if (isa<graph::ReshapeOp>(op)) {
    view(op->getResult(0), bufferOf(op->getOperand(0)));
    return success();
  }
  if (auto boundary = dyn_cast<graph::LayerBoundaryOp>(op)) {
    for (auto [input, result] :
         llvm::zip(boundary.getInputs(), boundary.getResults()))
      buffers[result] = bufferOf(input);
    return success();
  }
  if (auto constant = dyn_cast<graph::ConstantOp>(op)) {
    kernel(loc, "fill", {}, {out(constant)},
           {attr("value", constant.getValueAttr())});
    return success();
  }
  if (auto embedding = dyn_cast<graph::EmbeddingOp>(op)) {
    SmallVector<NamedAttribute> attrs;
    if (op->hasAttr("dist.vocab_parallel"))
      attrs.push_back(rankAttr(
          "vocab_offset",
          tpOffset(embedding.getTable().getType().getDimSize(0))));
    kernel(loc, "embedding_fwd",
           {bufferOf(embedding.getTable()), bufferOf(embedding.getIds())},
           {out(embedding)}, attrs);
    return success();
  }
  if (auto matmul = dyn_cast<graph::MatmulOp>(op)) {
    auto rhs = matmul.getRhs().getType();
    bool tb = matmul.getTransposeB();
    int64_t k = matmul.getLhs().getType().getShape().back();
    int64_t n = rhs.getDimSize(tb ? 0 : 1);
    gemm(loc, bufferOf(matmul.getLhs()), bufferOf(matmul.getRhs()),
         out(matmul), rowsOf(matmul.getLhs().getType()), n, k, false, tb,
         false);
    return success();
  }
  if (auto wgrad = dyn_cast<graph::MatmulWeightGradOp>(op)) {
    // lhs [M, K], grad [M, N]: dW = lhsᵀ·grad [K, N], or gradᵀ·lhs [N, K].
    auto lhs = wgrad.getLhs().getType();
    int64_t rows = rowsOf(lhs), k = lhs.getShape().back();
    int64_t n = wgrad.getGrad().getType().getShape().back();
    auto [target, accumulate] = gradientTarget(wgrad);
    if (wgrad.getTransposeResult())
      gemm(loc, bufferOf(wgrad.getGrad()), bufferOf(wgrad.getLhs()), target,
           n, k, rows, true, false, accumulate);
    else
      gemm(loc, bufferOf(wgrad.getLhs()), bufferOf(wgrad.getGrad()), target,
           k, n, rows, true, false, accumulate);
    return success();
  }
  if (isa<graph::AddOp, graph::SubOp, graph::MulOp>(op)) {
    StringRef name = isa<graph::AddOp>(op)   ? "add"
                     : isa<graph::SubOp>(op) ? "sub"
                                             : "mul";
    kernel(loc, name,
           {bufferOf(op->getOperand(0)), bufferOf(op->getOperand(1))},
           {out(op->getResult(0))});
    return success();
  }
  if (auto scale = dyn_cast<graph::ScaleOp>(op)) {
    kernel(loc, "scale", {bufferOf(scale.getInput())}, {out(scale)},
           {attr("factor", scale.getFactorAttr())});
    return success();
  }
  if (auto sum = dyn_cast<graph::SumToOp>(op)) {
    auto [target, accumulate] = gradientTarget(sum);
    kernel(loc, "sum_to", {bufferOf(sum.getInput())}, {target},
           {attr("accumulate", b.getBoolAttr(accumulate))});
    return success();
  }
  if (isa<graph::GeluOp, graph::SiluOp>(op)) {
    kernel(loc, isa<graph::GeluOp>(op) ? "gelu_fwd" : "silu_fwd",
           {bufferOf(op->getOperand(0))}, {out(op->getResult(0))});
    return success();
  }
  if (isa<graph::GeluGradOp, graph::SiluGradOp>(op)) {
    kernel(loc, isa<graph::GeluGradOp>(op) ? "gelu_bwd" : "silu_bwd",
           {bufferOf(op->getOperand(0)), bufferOf(op->getOperand(1))},
           {out(op->getResult(0))});
    return success();
  }
  if (auto norm = dyn_cast<graph::LayerNormOp>(op)) {
    kernel(loc, "layer_norm_fwd",
           {bufferOf(norm.getInput()), bufferOf(norm.getWeight()),
            bufferOf(norm.getBias())},
           {out(norm)}, {attr("epsilon", norm.getEpsilonAttr())});
    return success();
  }
  if (auto norm = dyn_cast<graph::LayerNormGradOp>(op)) {
    kernel(loc, "layer_norm_bwd",
           {bufferOf(norm.getInput()), bufferOf(norm.getWeight()),
            bufferOf(norm.getGrad())},
           {out(norm.getInputGrad()), out(norm.getWeightGrad()),
            out(norm.getBiasGrad())},
           {attr("epsilon", norm.getEpsilonAttr())});
    return success();
  }
  if (auto norm = dyn_cast<graph::RmsNormOp>(op)) {
    kernel(loc, "rms_norm_fwd",
           {bufferOf(norm.getInput()), bufferOf(norm.getWeight())},
           {out(norm)}, {attr("epsilon", norm.getEpsilonAttr())});
    return success();
  }
  if (auto norm = dyn_cast<graph::RmsNormGradOp>(op)) {
    kernel(loc, "rms_norm_bwd",
           {bufferOf(norm.getInput()), bufferOf(norm.getWeight()),
            bufferOf(norm.getGrad())},
           {out(norm.getInputGrad()), out(norm.getWeightGrad())},
           {attr("epsilon", norm.getEpsilonAttr())});
    return success();
  }
  if (auto transpose = dyn_cast<graph::TransposeOp>(op)) {
    kernel(loc, "transpose", {bufferOf(transpose.getInput())},
           {out(transpose)},
           {attr("permutation", transpose.getPermutationAttr())});
    return success();
  }
  if (auto rope = dyn_cast<graph::RopeOp>(op)) {
    kernel(loc, "rope", {bufferOf(rope.getInput())}, {out(rope)},
           {attr("base", rope.getBaseAttr()),
            attr("inverse", b.getBoolAttr(rope.getInverse()))});
    return success();
  }
  if (isa<graph::AttentionOp, graph::AttentionGradOp>(op)) {
    // Query heads split and kv heads replicated: the rank's first head.
    SmallVector<NamedAttribute> attrs = {
        attr("causal", b.getBoolAttr(op->hasAttr("causal")))};
    if (auto group = op->getAttrOfType<IntegerAttr>("group_size")) {
      int64_t heads =
          cast<RankedTensorType>(op->getOperand(0).getType()).getDimSize(2);
      attrs.push_back(rankAttr("group_size", group.getInt()));
      attrs.push_back(rankAttr("query_head_offset",
                               op->hasAttr("dist.query_heads_split")
                                   ? tpOffset(heads)
                                   : 0));
    }
    SmallVector<exec::BufferOp> ins, outs;
    for (Value operand : op->getOperands())
      ins.push_back(bufferOf(operand));
    for (Value result : op->getResults())
      outs.push_back(out(result));
    kernel(loc, isa<graph::AttentionOp>(op) ? "attention_fwd"
                                            : "attention_bwd",
           ins, outs, attrs);
    return success();
  }
  if (isa<graph::CrossEntropyOp, graph::CrossEntropyGradOp>(op)) {
    SmallVector<NamedAttribute> attrs;
    if (auto vocab = op->getAttrOfType<IntegerAttr>("vocab_size"))
      attrs.push_back(rankAttr("vocab_size", vocab.getInt()));
    SmallVector<exec::BufferOp> ins;
    for (Value operand : op->getOperands())
      ins.push_back(bufferOf(operand));
    kernel(loc, isa<graph::CrossEntropyOp>(op) ? "cross_entropy_fwd"
                                               : "cross_entropy_bwd",
           ins, {out(op->getResult(0))}, attrs);
    return success();
  }
  if (isa<graph::LogitsMaxOp, graph::LogitsTargetOp, graph::LogitsSumExpOp,
          graph::CrossEntropyFromStatsOp, graph::CrossEntropyGradFromStatsOp>(
          op)) {
    // The vocabulary-parallel loss: this rank's columns start at its
    // share of the (padded) vocabulary.
    SmallVector<NamedAttribute> attrs;
    if (auto vocab = op->getAttrOfType<IntegerAttr>("vocab_size")) {
      int64_t columns =
          cast<RankedTensorType>(op->getOperand(0).getType()).getShape().back();
      attrs.push_back(rankAttr("vocab_size", vocab.getInt()));
      attrs.push_back(rankAttr("vocab_offset",
                               op->hasAttr("dist.vocab_parallel")
                                   ? tpOffset(columns)
                                   : 0));
    }
    StringRef name = isa<graph::LogitsMaxOp>(op)      ? "logits_max"
                     : isa<graph::LogitsTargetOp>(op) ? "logits_target"
                     : isa<graph::LogitsSumExpOp>(op) ? "logits_sum_exp"
                     : isa<graph::CrossEntropyFromStatsOp>(op)
                         ? "cross_entropy_from_stats"
                         : "cross_entropy_grad_from_stats";
    SmallVector<exec::BufferOp> ins;
    for (Value operand : op->getOperands())
      ins.push_back(bufferOf(operand));
    // The row statistics stay f32 in bf16 mode, as Megatron's
    // vocabulary-parallel cross-entropy computes them in fp32.
    bool statistic =
        isa<graph::LogitsMaxOp, graph::LogitsTargetOp, graph::LogitsSumExpOp>(
            op);
    kernel(loc, name, ins,
           {temporary(op->getResult(0), exec::Arena::Workspace, statistic)},
           attrs);
    return success();
  }
  if (isa<shard::AllReduceOp, shard::AllGatherOp, shard::ReduceScatterOp>(
          op)) {
    SmallVector<NamedAttribute> attrs;
    SmallVector<int64_t> axes;
    for (int16_t axis :
         op->getAttrOfType<DenseI16ArrayAttr>("grid_axes").asArrayRef())
      axes.push_back(axis);
    attrs.push_back(attr("axes", b.getDenseI64ArrayAttr(axes)));
    StringRef name;
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op);
        reduce && reduce.getInput().getDefiningOp<graph::GradOp>()) {
      // A gradient accumulator of partial sums is reduced in place, so
      // that everything reading the accumulator after sees the sum.
      exec::BufferOp accumulator = bufferOf(reduce.getInput());
      buffers[reduce.getResult()] = accumulator;
      attrs.push_back(rankAttr("reduction", 0));
      kernel(loc, "all_reduce", {accumulator}, {accumulator}, attrs);
      return success();
    }
    if (auto reduce = dyn_cast<shard::AllReduceOp>(op)) {
      name = "all_reduce";
      attrs.push_back(rankAttr(
          "reduction", reduce.getReduction() == shard::ReductionKind::Max));
    } else if (auto gather = dyn_cast<shard::AllGatherOp>(op)) {
      name = "all_gather";
      attrs.push_back(rankAttr("dim", gather.getGatherAxis().getSExtValue()));
    } else {
      name = "reduce_scatter";
      attrs.push_back(rankAttr(
          "dim",
          cast<shard::ReduceScatterOp>(op).getScatterAxis().getSExtValue()));
    }
    // A collective keeps its operand's dtype (f32 statistics stay f32).
    exec::BufferOp input = bufferOf(op->getOperand(0));
    bool f32 = input.getTensorType().getElementType().isF32();
    kernel(loc, name, {input},
           {temporary(op->getResult(0), exec::Arena::Workspace, f32)}, attrs);
    return success();
  }
  if (auto slice = dyn_cast<shard::AllSliceOp>(op)) {
    kernel(loc, "slice", {bufferOf(slice.getInput())}, {out(slice)},
           {rankAttr("dim", slice.getSliceAxis().getSExtValue()),
            rankAttr("part", coords.tp), rankAttr("parts", coords.tpSize)});
    return success();
  }
  if (auto keep = dyn_cast<dist::KeepOnFirstOp>(op)) {
    if (coords.tp == 0)
      kernel(loc, "copy", {bufferOf(keep.getInput())}, {out(keep)});
    else
      kernel(loc, "fill", {}, {out(keep)},
             {attr("value", b.getF64FloatAttr(0))});
    return success();
  }
  if (auto reduce = dyn_cast<dist::ReduceGradientsOp>(op)) {
    SmallVector<int64_t> axes = {kDataAxis};
    auto axesAttr = attr("axes", b.getDenseI64ArrayAttr(axes));
    if (distributedOptimizer) {
      exec::BufferOp mine = regionView("grads@" + std::to_string(coords.dp),
                                       gradRegion,
                                       coords.dp * shardElements,
                                       shardElements);
      kernel(loc, "reduce_scatter", {gradRegion}, {mine},
             {axesAttr, rankAttr("dim", 0)});
      return success();
    }
    // Buckets of whole parameters, about bucket_elements each.
    int64_t begin = 0, bucket = 0;
    auto flush = [&](int64_t end) {
      if (end <= begin)
        return;
      exec::BufferOp view = regionView("bucket:" + std::to_string(bucket++),
                                       gradRegion, begin, end - begin);
      kernel(loc, "all_reduce", {view}, {view},
             {axesAttr, rankAttr("reduction", 0)});
      begin = end;
    };
    for (const std::string &name : paramOrder) {
      ParamBuffers &p = params[name];
      int64_t end = p.flatOffset + p.grad.getTensorType().getNumElements();
      if (end - begin >= bucketElements)
        flush(end);
    }
    flush(flatElements);
    return success();
  }
  if (auto grad = dyn_cast<graph::EmbeddingGradOp>(op)) {
    auto [target, accumulate] = gradientTarget(grad);
    SmallVector<NamedAttribute> attrs = {
        attr("accumulate", b.getBoolAttr(accumulate))};
    if (op->hasAttr("dist.vocab_parallel"))
      attrs.push_back(
          rankAttr("vocab_offset", tpOffset(grad.getType().getDimSize(0))));
    kernel(loc, "embedding_bwd",
           {bufferOf(grad.getGrad()), bufferOf(grad.getIds())}, {target},
           attrs);
    return success();
  }
  if (auto sink = dyn_cast<graph::AccumulateGradOp>(op)) {
    if (fused.contains(op))
      return success();
    auto it = params.find(sink.getName());
    if (it == params.end())
      return op->emitOpError() << "accumulates into '" << sink.getName()
                               << "', which is not a parameter";
    kernel(loc, "accumulate", {bufferOf(sink.getGrad())}, {it->second.grad});
    return success();
  }
  if (auto squares = dyn_cast<graph::SumSquaresOp>(op)) {
    // A gradient read straight from its accumulator (or after reducing the
    // accumulator in place).
    Value input = squares.getInput();
    if (auto reduce = input.getDefiningOp<shard::AllReduceOp>())
      input = reduce.getInput();
    auto grad = input.getDefiningOp<graph::GradOp>();
    if (grad) {
      // A tied parameter's gradient counts once: on the first stage of
      // those that share it.
      auto tied = tiedStages.find(grad.getName());
      if (tied != tiedStages.end() && tied->second.front() != coords.pp) {
        kernel(loc, "fill", {}, {out(squares)},
               {attr("value", b.getF64FloatAttr(0))});
        return success();
      }
    }
    if (distributedOptimizer && grad) {
      // Only this rank's part of the reduced gradient is valid.
      ParamBuffers &p = params[grad.getName()];
      if (p.owned)
        kernel(loc, "sum_squares", {p.owned->grad}, {out(squares)});
      else
        kernel(loc, "fill", {}, {out(squares)},
               {attr("value", b.getF64FloatAttr(0))});
      return success();
    }
    kernel(loc, "sum_squares", {bufferOf(squares.getInput())},
           {out(squares)});
    return success();
  }
  if (auto clip = dyn_cast<graph::ClipCoefficientOp>(op)) {
    kernel(loc, "clip_coefficient", {bufferOf(clip.getSumSquares())},
           {out(clip.getNorm()), out(clip.getCoefficient())});
    return success();
  }
  if (auto adam = dyn_cast<graph::AdamWOp>(op)) {
    auto it = params.find(adam.getName());
    if (it == params.end())
      return op->emitOpError() << "updates '" << adam.getName()
                               << "', which is not a parameter";
    ParamBuffers &p = it->second;
    auto decay = attr("weight_decay", b.getBoolAttr(adam.getWeightDecay()));
    if (distributedOptimizer) {
      if (!p.owned)
        return success(); // another data-parallel rank updates it
      const Segment &seg = *p.owned;
      SmallVector<exec::BufferOp> outs = {seg.value, seg.expAvg, seg.expAvgSq};
      if (seg.master)
        outs.push_back(seg.master);
      kernel(loc, "adamw", {seg.grad, bufferOf(adam.getCoefficient())}, outs,
             {decay});
      return success();
    }
    SmallVector<exec::BufferOp> outs = {p.value, p.expAvg, p.expAvgSq};
    if (p.master)
      outs.push_back(p.master);
    kernel(loc, "adamw",
           {bufferOf(adam.getGrad()), bufferOf(adam.getCoefficient())}, outs,
           {decay});
    return success();
  }
  return op->emitOpError() << "has no lowering to exec";
}

} // namespace strata::lower_to_exec
