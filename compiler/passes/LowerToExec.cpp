//===- LowerToExec.cpp - the scheduled step as buffers and kernels --------===//
//
// Builds one exec.rank per rank of @mesh from the step's functions
// (@microbatch, or a pipeline stage's @forward_c and @backward_c),
// @optimizer and the stage's dist.schedule: a buffer per tensor, a kernel
// per op, a program per function. The functions are SPMD; what differs by
// rank is filled in here from the rank's coordinates (tp fastest, then dp,
// then pp): a shard's offset into its global tensor, a vocabulary range,
// the first query head, who keeps a replicated value in a partial sum,
// which part of the gradients a distributed optimizer owns, which chunks
// and parameters a pipeline stage holds and the peers it sends to. The
// kernel names and their argument conventions are the runtime's
// (runtime/exec/KernelTable.cpp checks them when a plan loads).
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"

namespace strata {
#define GEN_PASS_DEF_LOWERTOEXEC
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
namespace graph = strata::graph;

namespace {

/// Where this rank sits in the mesh.
struct RankCoords {
  int64_t rank = 0, tp = 0, dp = 0, pp = 0;
  int64_t tpSize = 1, dpSize = 1, ppSize = 1;
  /// The world rank at the same tp and dp on pipeline stage `stage`.
  int64_t onStage(int64_t stage) const {
    return tp + tpSize * (dp + dpSize * stage);
  }
};

/// The part of a parameter a distributed optimizer rank owns: elements
/// [begin, begin + length) of the local parameter.
struct Segment {
  int64_t begin = 0, length = 0;
  exec::BufferOp grad, value, expAvg, expAvgSq, master;
};

struct ParamBuffers {
  exec::BufferOp value, master, grad, expAvg, expAvgSq;
  int64_t flatOffset = 0; // elements into the flat regions
  std::optional<Segment> owned; // with the distributed optimizer
};

class Lowering {
public:
  Lowering(ModuleOp module, exec::RankOp rank, bool bf16, RankCoords coords,
           dist::ReduceGradientsOp reduce)
      : module(module), b(module.getContext()), bf16(bf16), coords(coords),
        distributedOptimizer(reduce && reduce.getDistributedOptimizer()),
        bucketElements(reduce ? int64_t(reduce.getBucketElements()) : 0) {
    bufferBuilder.setInsertionPointToEnd(&rank.getBody().front());
    programBuilder.setInsertionPointToEnd(&rank.getBody().front());
  }

  /// Lays out every parameter's value and gradient in two flat regions (in
  /// parameter order), so that buckets and a distributed optimizer's shares
  /// are contiguous, and declares the optimizer state.
  void layoutParameters(ArrayRef<func::FuncOp> functions);
  LogicalResult lowerFunction(func::FuncOp func);
  LogicalResult lowerSchedule(dist::ScheduleOp schedule);
  /// The stages that share each tied parameter (dist.tie_gradients).
  void noteTiedParameters(func::FuncOp optimizer) {
    optimizer.walk([&](dist::TieGradientsOp tie) {
      tiedStages[tie.getName()] =
          SmallVector<int64_t>(tie.getStages().begin(), tie.getStages().end());
    });
  }

private:
  MLIRContext *ctx() { return module.getContext(); }

  /// The type a tensor is stored in: bf16 for floats in bf16 mode, except
  /// scalars (loss, norms), which stay fp32.
  RankedTensorType storageType(Type type) {
    auto tensor = cast<RankedTensorType>(type);
    if (bf16 && tensor.getElementType().isF32() && tensor.getRank() > 0)
      return RankedTensorType::get(tensor.getShape(),
                                   BFloat16Type::get(ctx()));
    return tensor;
  }
  static RankedTensorType asF32(Type type) {
    auto tensor = cast<RankedTensorType>(type);
    return RankedTensorType::get(tensor.getShape(),
                                 Float32Type::get(tensor.getContext()));
  }

  exec::BufferOp makeBuffer(StringRef name, RankedTensorType type,
                            exec::Arena arena, exec::BufferOp aliasOf = {},
                            int64_t viewBytes = 0, bool zeroInit = false) {
    FlatSymbolRefAttr alias;
    IntegerAttr viewOffset;
    if (aliasOf) {
      viewBytes += aliasOf.getViewOffset() ? int64_t(*aliasOf.getViewOffset())
                                           : 0;
      if (auto root = aliasOf.getAliasAttr())
        alias = root;
      else
        alias = FlatSymbolRefAttr::get(aliasOf.getSymNameAttr());
      if (viewBytes)
        viewOffset = b.getI64IntegerAttr(viewBytes);
    }
    return exec::BufferOp::create(
        bufferBuilder, module.getLoc(), b.getStringAttr(name),
        TypeAttr::get(type), exec::ArenaAttr::get(ctx(), arena),
        b.getI64IntegerAttr(-1), alias, viewOffset,
        zeroInit ? b.getUnitAttr() : UnitAttr(), IntegerAttr(),
        IntegerAttr());
  }
  static int64_t elementBytes(RankedTensorType type) {
    return type.getElementType().isBF16() ? 2 : 4;
  }
  /// A 1-D view of `elements` elements of a flat region.
  exec::BufferOp regionView(StringRef name, exec::BufferOp region,
                            int64_t begin, int64_t elements) {
    RankedTensorType type = region.getTensorType();
    return makeBuffer(name,
                      RankedTensorType::get({elements}, type.getElementType()),
                      exec::Arena::Persistent, region,
                      begin * elementBytes(type));
  }
  exec::BufferOp persistent(StringRef name, RankedTensorType type,
                            bool zeroInit) {
    return makeBuffer(name, type, exec::Arena::Persistent, {}, 0, zeroInit);
  }
  /// A rank-dependent kernel argument.
  NamedAttribute rankAttr(StringRef name, int64_t value) {
    return b.getNamedAttr(name, b.getI64IntegerAttr(value));
  }
  /// The tp index that a tensor split along tp starts at, in elements of
  /// its dimension `size` (local).
  int64_t tpOffset(int64_t localSize) { return coords.tp * localSize; }
  exec::BufferOp temporary(Value value, exec::Arena arena) {
    bool stashed = stashValues.contains(value);
    exec::BufferOp buffer =
        makeBuffer((stashed ? "s" : "t") + std::to_string(counter++),
                   storageType(value.getType()),
                   stashed ? exec::Arena::Stash : arena);
    if (stashed)
      buffer.setStashGroupAttr(b.getI64IntegerAttr(stashGroup));
    buffers[value] = buffer;
    return buffer;
  }
  exec::BufferOp view(Value value, exec::BufferOp of) {
    exec::BufferOp buffer = makeBuffer(
        "t" + std::to_string(counter++), storageType(value.getType()),
        of.getArena(), of);
    buffers[value] = buffer;
    return buffer;
  }

  exec::BufferOp input(graph::InputOp op);
  exec::BufferOp bufferOf(Value value) { return buffers.lookup(value); }

  void kernel(Location loc, StringRef name, ArrayRef<exec::BufferOp> inputs,
              ArrayRef<exec::BufferOp> outputs,
              ArrayRef<NamedAttribute> attrs = {});
  void gemm(Location loc, exec::BufferOp a, exec::BufferOp bMatrix,
            exec::BufferOp c, int64_t m, int64_t n, int64_t k,
            bool transposeA, bool transposeB, bool accumulate);

  /// The accumulator a gradient goes straight into when its only use is
  /// graph.accumulate_grad, else null.
  exec::BufferOp fusedAccumulator(Value grad);

  LogicalResult lowerOp(Operation *op);

  ModuleOp module;
  OpBuilder b;
  OpBuilder bufferBuilder{module.getContext()};
  OpBuilder programBuilder{module.getContext()};
  OpBuilder body{module.getContext()};
  bool bf16;
  RankCoords coords;
  bool distributedOptimizer;
  int64_t bucketElements;
  exec::BufferOp paramRegion, gradRegion;
  int64_t flatElements = 0, shardElements = 0;
  SmallVector<std::string> paramOrder;
  int64_t counter = 0;
  llvm::DenseMap<Value, exec::BufferOp> buffers;
  llvm::StringMap<ParamBuffers> params;
  llvm::StringMap<exec::BufferOp> inputs;
  llvm::DenseSet<Operation *> fused; // accumulate_grads done by a producer
  // Pipeline chunks: the values @forward_c returns live in the stash, in
  // group `stashGroup` (the chunk's index on its stage); @backward_c's
  // arguments are the same buffers.
  llvm::DenseSet<Value> stashValues;
  int64_t stashGroup = -1;
  llvm::DenseMap<int64_t, SmallVector<exec::BufferOp>> chunkStash;
  llvm::StringMap<SmallVector<int64_t>> tiedStages;
};

void Lowering::layoutParameters(ArrayRef<func::FuncOp> functions) {
  SmallVector<graph::ParamOp> ops;
  for (func::FuncOp function : functions)
    function.walk([&](graph::ParamOp param) {
      if (params.count(param.getName()))
        return;
      params[param.getName()].flatOffset = flatElements;
      flatElements += param.getType().getNumElements();
      paramOrder.push_back(param.getName().str());
      ops.push_back(param);
    });
  // The regions split evenly across data-parallel ranks.
  flatElements = (flatElements + coords.dpSize - 1) / coords.dpSize *
                 coords.dpSize;
  shardElements = flatElements / coords.dpSize;
  int64_t shardBegin = coords.dp * shardElements;
  Type valueType = bf16 ? Type(BFloat16Type::get(ctx())) : b.getF32Type();
  paramRegion = persistent(
      "params", RankedTensorType::get({flatElements}, valueType), false);
  gradRegion = persistent(
      "grads", RankedTensorType::get({flatElements}, b.getF32Type()), true);
  exec::BufferOp expAvgRegion, expAvgSqRegion, masterRegion;
  if (distributedOptimizer) {
    auto shardType = RankedTensorType::get({shardElements}, b.getF32Type());
    expAvgRegion = persistent("exp_avg", shardType, true);
    expAvgSqRegion = persistent("exp_avg_sq", shardType, true);
    if (bf16)
      masterRegion = persistent("master", shardType, false);
  }

  for (graph::ParamOp param : ops) {
    ParamBuffers &p = params[param.getName()];
    std::string name = param.getName().str();
    RankedTensorType local = param.getType();
    RankedTensorType stored = storageType(local);
    int64_t count = local.getNumElements();
    p.value = makeBuffer("param:" + name, stored, exec::Arena::Persistent,
                         paramRegion, p.flatOffset * elementBytes(stored));
    p.grad = makeBuffer("grad:" + name, asF32(local), exec::Arena::Persistent,
                        gradRegion, p.flatOffset * 4);
    SmallVector<Attribute> masters;
    SmallVector<int64_t> masterOffsets;
    if (!distributedOptimizer) {
      p.expAvg = persistent("exp_avg:" + name, asF32(local), true);
      p.expAvgSq = persistent("exp_avg_sq:" + name, asF32(local), true);
      if (stored != asF32(local)) {
        p.master = persistent("master:" + name, asF32(local), false);
        masters.push_back(FlatSymbolRefAttr::get(p.master.getSymNameAttr()));
        masterOffsets.push_back(0);
      }
    } else {
      // This rank owns flat elements [shardBegin, shardBegin + shard).
      int64_t begin = std::max(p.flatOffset, shardBegin);
      int64_t end = std::min(p.flatOffset + count, shardBegin + shardElements);
      if (begin < end) {
        Segment seg;
        seg.begin = begin - p.flatOffset;
        seg.length = end - begin;
        std::string suffix = name + "@" + std::to_string(seg.begin);
        seg.grad = regionView("grad:" + suffix, gradRegion, begin, seg.length);
        seg.value =
            regionView("param:" + suffix, paramRegion, begin, seg.length);
        seg.expAvg = regionView("exp_avg:" + suffix, expAvgRegion,
                                begin - shardBegin, seg.length);
        seg.expAvgSq = regionView("exp_avg_sq:" + suffix, expAvgSqRegion,
                                  begin - shardBegin, seg.length);
        if (masterRegion) {
          seg.master = regionView("master:" + suffix, masterRegion,
                                  begin - shardBegin, seg.length);
          masters.push_back(
              FlatSymbolRefAttr::get(seg.master.getSymNameAttr()));
          masterOffsets.push_back(seg.begin);
        }
        p.owned = seg;
      }
    }

    // Where this rank's part sits in the global tensor.
    SmallVector<int64_t> global(local.getShape());
    SmallVector<int64_t> offset(local.getRank(), 0);
    if (auto dim = param->getAttrOfType<IntegerAttr>("dist.split_dim"))
      offset[dim.getInt()] = tpOffset(local.getDimSize(dim.getInt()));
    if (auto shape = param->getAttrOfType<DenseI64ArrayAttr>("dist.global_shape"))
      global.assign(shape.asArrayRef().begin(), shape.asArrayRef().end());
    if (auto real = param->getAttrOfType<DenseI64ArrayAttr>("dist.real_shape"))
      global.assign(real.asArrayRef().begin(), real.asArrayRef().end());
    double std = param.getStd() ? param.getStd()->convertToDouble() : 0.0;
    exec::ParamOp::create(
        bufferBuilder, param.getLoc(), param.getNameAttr(),
        FlatSymbolRefAttr::get(p.value.getSymNameAttr()),
        FlatSymbolRefAttr::get(p.grad.getSymNameAttr()),
        b.getArrayAttr(masters), b.getDenseI64ArrayAttr(masterOffsets),
        b.getDenseI64ArrayAttr(global), b.getDenseI64ArrayAttr(offset),
        b.getStringAttr(graph::stringifyInitKind(param.getInit())),
        b.getF64FloatAttr(std));
  }
}

exec::BufferOp Lowering::input(graph::InputOp op) {
  auto [it, inserted] = inputs.try_emplace(op.getName());
  if (inserted) {
    it->second = makeBuffer("input:" + op.getName().str(), op.getType(),
                            exec::Arena::Persistent);
    exec::IoOp::create(bufferBuilder, op.getLoc(), op.getNameAttr(),
                       FlatSymbolRefAttr::get(it->second.getSymNameAttr()));
  }
  return it->second;
}

void Lowering::kernel(Location loc, StringRef name,
                      ArrayRef<exec::BufferOp> ins,
                      ArrayRef<exec::BufferOp> outs,
                      ArrayRef<NamedAttribute> attrs) {
  auto refs = [&](ArrayRef<exec::BufferOp> list) {
    SmallVector<Attribute> out;
    for (exec::BufferOp buffer : list)
      out.push_back(FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
    return b.getArrayAttr(out);
  };
  auto op = exec::KernelOp::create(body, loc, b.getStringAttr(name), refs(ins),
                                   refs(outs));
  for (NamedAttribute attr : attrs)
    op->setAttr(attr.getName(), attr.getValue());
}

void Lowering::gemm(Location loc, exec::BufferOp a, exec::BufferOp bMatrix,
                    exec::BufferOp c, int64_t m, int64_t n, int64_t k,
                    bool transposeA, bool transposeB, bool accumulate) {
  kernel(loc, "gemm", {a, bMatrix}, {c},
         {b.getNamedAttr("m", b.getI64IntegerAttr(m)),
          b.getNamedAttr("n", b.getI64IntegerAttr(n)),
          b.getNamedAttr("k", b.getI64IntegerAttr(k)),
          b.getNamedAttr("transpose_a", b.getBoolAttr(transposeA)),
          b.getNamedAttr("transpose_b", b.getBoolAttr(transposeB)),
          b.getNamedAttr("accumulate", b.getBoolAttr(accumulate))});
}

exec::BufferOp Lowering::fusedAccumulator(Value grad) {
  if (!grad.hasOneUse())
    return {};
  auto sink = dyn_cast<graph::AccumulateGradOp>(*grad.getUsers().begin());
  if (!sink)
    return {};
  auto it = params.find(sink.getName());
  if (it == params.end())
    return {};
  fused.insert(sink);
  buffers[grad] = it->second.grad;
  return it->second.grad;
}

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
    exec::BufferOp target = fusedAccumulator(wgrad);
    bool accumulate = static_cast<bool>(target);
    if (!target)
      target = out(wgrad);
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
    exec::BufferOp target = fusedAccumulator(sum);
    bool accumulate = static_cast<bool>(target);
    if (!target)
      target = out(sum);
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
    kernel(loc, name, ins, {out(op->getResult(0))}, attrs);
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
    kernel(loc, name, {bufferOf(op->getOperand(0))}, {out(op->getResult(0))},
           attrs);
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
    exec::BufferOp target = fusedAccumulator(grad);
    bool accumulate = static_cast<bool>(target);
    if (!target)
      target = out(grad);
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

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  auto chunkAttr = func->getAttrOfType<IntegerAttr>("dist.chunk");
  bool forward = chunkAttr && func.getSymName().starts_with("forward_");
  StringRef phase = !chunkAttr ? func.getSymName()
                    : forward  ? StringRef("forward")
                               : StringRef("backward");
  auto program = exec::ProgramOp::create(
      programBuilder, func.getLoc(), func.getSymNameAttr(),
      b.getStringAttr(phase), chunkAttr);
  body.setInsertionPointToEnd(&program.getBody().emplaceBlock());
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  if (chunkAttr) {
    // A chunk's forward leaves its results in the stash for the backward
    // of the same microbatch, which takes them as arguments.
    int64_t chunk = chunkAttr.getInt();
    stashGroup = chunk / coords.ppSize;
    stashValues.clear();
    if (forward)
      stashValues.insert(ret.getOperands().begin(), ret.getOperands().end());
    else
      for (auto [argument, buffer] :
           llvm::zip_equal(func.getArguments(), chunkStash[chunk]))
        buffers[argument] = buffer;
    for (Operation &op : func.getBody().front().without_terminator())
      if (failed(lowerOp(&op)))
        return failure();
    if (forward)
      for (Value value : ret.getOperands()) {
        exec::BufferOp buffer = bufferOf(value);
        if (!buffer || buffer.getArena() != exec::Arena::Stash)
          return ret.emitOpError()
                 << "returns a value that cannot be stashed (a view, a "
                    "parameter or an input): only computed activations are";
        chunkStash[chunk].push_back(buffer);
      }
    stashValues.clear();
    return success();
  }
  for (Operation &op : func.getBody().front().without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
  if (func.getSymName() == "optimizer") {
    // The accumulators start the next iteration at zero; a distributed
    // optimizer's ranks share their updated parts.
    kernel(func.getLoc(), "fill", {}, {gradRegion},
           {b.getNamedAttr("value", b.getF64FloatAttr(0))});
    if (distributedOptimizer) {
      exec::BufferOp mine = regionView("params@" + std::to_string(coords.dp),
                                       paramRegion, coords.dp * shardElements,
                                       shardElements);
      kernel(func.getLoc(), "all_gather", {mine}, {paramRegion},
             {b.getNamedAttr("axes", b.getDenseI64ArrayAttr({kDataAxis})),
              rankAttr("dim", 0)});
    }
  }
  // The returned scalar (the loss, the gradient norm) is copied to a
  // persistent buffer the runtime reads after the program.
  StringRef output = func.getSymName() == "microbatch" ? "loss" : "grad_norm";
  Value result = ret.getOperand(0);
  exec::BufferOp buffer = makeBuffer(("output:" + output).str(),
                                     storageType(result.getType()),
                                     exec::Arena::Persistent);
  kernel(ret.getLoc(), "copy", {bufferOf(result)}, {buffer});
  exec::IoOp::create(bufferBuilder, ret.getLoc(), b.getStringAttr(output),
                     FlatSymbolRefAttr::get(buffer.getSymNameAttr()));
  return success();
}

LogicalResult Lowering::lowerSchedule(dist::ScheduleOp schedule) {
  auto op = exec::ScheduleOp::create(programBuilder, schedule.getLoc());
  if (auto kind = schedule->getAttrOfType<StringAttr>("kind"))
    op->setAttr("kind", kind);
  OpBuilder steps(ctx());
  steps.setInsertionPointToEnd(&op.getBody().emplaceBlock());
  // Stash slots: a chunk's forward takes the lowest free slot of its
  // chunk, and its backward for the same microbatch frees it.
  std::map<int64_t, std::vector<bool>> busy;            // by chunk
  std::map<std::pair<int64_t, int64_t>, int64_t> slotOf; // (chunk, mb)
  SmallVector<int64_t> slots(std::max<int64_t>(chunkStash.size(), 0), 0);
  for (auto step : schedule.getBody().front().getOps<dist::StepOp>()) {
    auto function = module.lookupSymbol<func::FuncOp>(step.getFunction());
    auto chunkAttr = function->getAttrOfType<IntegerAttr>("dist.chunk");
    IntegerAttr slotAttr;
    if (chunkAttr) {
      if (!step.getMicrobatch())
        return step.emitOpError() << "runs a chunk without a microbatch";
      int64_t chunk = chunkAttr.getInt(), mb = int64_t(*step.getMicrobatch());
      int64_t slot;
      if (step.getFunction().starts_with("forward_")) {
        std::vector<bool> &used = busy[chunk];
        slot = std::find(used.begin(), used.end(), false) - used.begin();
        if (slot == int64_t(used.size()))
          used.push_back(false);
        used[slot] = true;
        slotOf[{chunk, mb}] = slot;
        int64_t group = chunk / coords.ppSize;
        if (int64_t(slots.size()) <= group)
          slots.resize(group + 1, 0);
        slots[group] = std::max(slots[group], slot + 1);
      } else {
        auto it = slotOf.find({chunk, mb});
        if (it == slotOf.end())
          return step.emitOpError() << "runs the backward of chunk " << chunk
                                    << " for microbatch " << mb
                                    << " before its forward";
        slot = it->second;
        busy[chunk][slot] = false;
        slotOf.erase(it);
      }
      slotAttr = b.getI64IntegerAttr(slot);
    }
    exec::RunOp::create(steps, step.getLoc(), step.getFunctionAttr(),
                        step.getMicrobatchAttr(), slotAttr);
  }
  if (!slots.empty())
    op->getParentOfType<exec::RankOp>().setStashSlotsAttr(
        b.getDenseI64ArrayAttr(slots));
  return success();
}

struct LowerToExecPass : strata::impl::LowerToExecBase<LowerToExecPass> {
  using LowerToExecBase::LowerToExecBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto microbatch = module.lookupSymbol<func::FuncOp>("microbatch");
    auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer");
    SmallVector<func::FuncOp> chunks; // @forward_c, @backward_c by chunk
    for (int64_t c = 0;; ++c) {
      auto forward =
          module.lookupSymbol<func::FuncOp>("forward_" + std::to_string(c));
      auto backward =
          module.lookupSymbol<func::FuncOp>("backward_" + std::to_string(c));
      if (!forward || !backward)
        break;
      chunks.append({forward, backward});
    }
    RankCoords coords;
    coords.tpSize = meshAxis(module, kTensorAxis);
    coords.dpSize = meshAxis(module, kDataAxis);
    coords.ppSize = meshAxis(module, kPipelineAxis);
    std::map<int64_t, dist::ScheduleOp> schedules;
    for (auto schedule : module.getOps<dist::ScheduleOp>())
      schedules[int64_t(schedule.getStage())] = schedule;
    if ((!microbatch && chunks.empty()) || !optimizer ||
        int64_t(schedules.size()) != coords.ppSize) {
      module.emitError() << "lowering needs @microbatch (or pipeline "
                            "chunks), @optimizer and a dist.schedule per "
                            "pipeline stage: run --strata-autodiff, "
                            "--strata-optimizer and --strata-schedule first";
      return signalPassFailure();
    }
    dist::ReduceGradientsOp reduce;
    optimizer.walk([&](dist::ReduceGradientsOp op) { reduce = op; });
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    int64_t world = coords.tpSize * coords.dpSize * coords.ppSize;
    for (int64_t rank = 0; rank < world; ++rank) {
      coords.rank = rank;
      coords.tp = rank % coords.tpSize;
      coords.dp = rank / coords.tpSize % coords.dpSize;
      coords.pp = rank / (coords.tpSize * coords.dpSize);
      auto op = exec::RankOp::create(b, module.getLoc(),
                                     b.getI64IntegerAttr(rank), IntegerAttr(),
                                     IntegerAttr(), IntegerAttr(),
                                     DenseI64ArrayAttr());
      op.getBody().emplaceBlock();
      // This stage's functions: its chunks, forward then backward each.
      SmallVector<func::FuncOp> functions;
      if (microbatch)
        functions.push_back(microbatch);
      for (size_t i = 0; i < chunks.size(); ++i)
        if (int64_t(i / 2) % coords.ppSize == coords.pp)
          functions.push_back(chunks[i]);
      Lowering lowering(module, op, bf16, coords, reduce);
      lowering.layoutParameters(functions);
      lowering.noteTiedParameters(optimizer);
      for (func::FuncOp function : functions)
        if (failed(lowering.lowerFunction(function)))
          return signalPassFailure();
      if (failed(lowering.lowerFunction(optimizer)) ||
          failed(lowering.lowerSchedule(schedules[coords.pp])))
        return signalPassFailure();
      // Declarations (buffers, params, io) read first, then the programs.
      Block &block = op.getBody().front();
      Operation *firstProgram = *block.getOps<exec::ProgramOp>().begin();
      for (Operation &child : llvm::make_early_inc_range(llvm::make_range(
               firstProgram->getIterator(), block.end())))
        if (!isa<exec::ProgramOp, exec::ScheduleOp>(child))
          child.moveBefore(firstProgram);
    }
    if (microbatch)
      microbatch.erase();
    for (func::FuncOp function : chunks)
      function.erase();
    optimizer.erase();
    for (auto &entry : schedules)
      entry.second.erase();
    if (auto grid = module.lookupSymbol<shard::GridOp>(kMeshName))
      grid.erase();
  }
};

} // namespace
