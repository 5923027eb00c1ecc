//===- LowerToExec.cpp - the scheduled step as buffers and kernels --------===//
//
// Builds one exec.rank from @microbatch, @optimizer and the dist.schedule:
// a buffer per tensor, a kernel per op, a program per function. The kernel
// names and their argument conventions are the runtime's (runtime/exec/
// KernelTable.cpp checks them when a plan loads).
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/exec/ExecDialect.h"
#include "dialects/graph/GraphOps.h"

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

struct ParamBuffers {
  exec::BufferOp value, master, grad, expAvg, expAvgSq;
};

class Lowering {
public:
  Lowering(ModuleOp module, exec::RankOp rank, bool bf16)
      : module(module), b(module.getContext()), bf16(bf16) {
    bufferBuilder.setInsertionPointToEnd(&rank.getBody().front());
    programBuilder.setInsertionPointToEnd(&rank.getBody().front());
  }

  LogicalResult lowerFunction(func::FuncOp func);
  LogicalResult lowerSchedule(dist::ScheduleOp schedule);

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
                            exec::Arena arena, exec::BufferOp aliasOf = {}) {
    FlatSymbolRefAttr alias;
    if (aliasOf) {
      if (auto root = aliasOf.getAliasAttr())
        alias = root;
      else
        alias = FlatSymbolRefAttr::get(aliasOf.getSymNameAttr());
    }
    return exec::BufferOp::create(
        bufferBuilder, module.getLoc(), b.getStringAttr(name),
        TypeAttr::get(type), exec::ArenaAttr::get(ctx(), arena),
        b.getI64IntegerAttr(-1), alias);
  }
  exec::BufferOp temporary(Value value, exec::Arena arena) {
    exec::BufferOp buffer =
        makeBuffer("t" + std::to_string(counter++), storageType(value.getType()),
                   arena);
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

  ParamBuffers &paramBuffers(graph::ParamOp param);
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
  int64_t counter = 0;
  llvm::DenseMap<Value, exec::BufferOp> buffers;
  llvm::StringMap<ParamBuffers> params;
  llvm::StringMap<exec::BufferOp> inputs;
  llvm::DenseSet<Operation *> fused; // accumulate_grads done by a producer
};

ParamBuffers &Lowering::paramBuffers(graph::ParamOp param) {
  auto [it, inserted] = params.try_emplace(param.getName());
  ParamBuffers &p = it->second;
  if (!inserted)
    return p;
  std::string name = param.getName().str();
  auto persistent = exec::Arena::Persistent;
  RankedTensorType f32 = asF32(param.getType());
  RankedTensorType stored = storageType(param.getType());
  p.value = makeBuffer("param:" + name, stored, persistent);
  if (stored != f32)
    p.master = makeBuffer("master:" + name, f32, persistent);
  p.grad = makeBuffer("grad:" + name, f32, persistent);
  p.expAvg = makeBuffer("exp_avg:" + name, f32, persistent);
  p.expAvgSq = makeBuffer("exp_avg_sq:" + name, f32, persistent);

  auto shape = param.getType().getShape();
  SmallVector<int64_t> zeros(shape.size(), 0);
  double std = param.getStd() ? param.getStd()->convertToDouble() : 0.0;
  auto sym = [](exec::BufferOp buffer) {
    return buffer ? FlatSymbolRefAttr::get(buffer.getSymNameAttr())
                  : FlatSymbolRefAttr();
  };
  exec::ParamOp::create(
      bufferBuilder, param.getLoc(), param.getNameAttr(), sym(p.value),
      sym(p.master), sym(p.grad), sym(p.expAvg), sym(p.expAvgSq),
      b.getDenseI64ArrayAttr(shape), b.getDenseI64ArrayAttr(zeros),
      b.getStringAttr(graph::stringifyInitKind(param.getInit())),
      b.getF64FloatAttr(std),
      // Megatron decays matrices only: not biases or norm weights.
      shape.size() >= 2 ? b.getUnitAttr() : UnitAttr());
  return p;
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
    buffers[param] = paramBuffers(param).value;
    return success();
  }
  if (auto in = dyn_cast<graph::InputOp>(op)) {
    buffers[in] = input(in);
    return success();
  }
  if (auto grad = dyn_cast<graph::GradOp>(op)) {
    auto it = params.find(grad.getName());
    if (it == params.end())
      return op->emitOpError() << "reads the gradient of '" << grad.getName()
                               << "', which no program uses";
    buffers[grad] = it->second.grad;
    return success();
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
    kernel(loc, "embedding_fwd",
           {bufferOf(embedding.getTable()), bufferOf(embedding.getIds())},
           {out(embedding)});
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
  if (auto attention = dyn_cast<graph::AttentionOp>(op)) {
    kernel(loc, "attention_fwd",
           {bufferOf(attention.getQuery()), bufferOf(attention.getKey()),
            bufferOf(attention.getValue())},
           {out(attention)},
           {attr("causal", b.getBoolAttr(attention.getCausal()))});
    return success();
  }
  if (auto grad = dyn_cast<graph::AttentionGradOp>(op)) {
    kernel(loc, "attention_bwd",
           {bufferOf(grad.getQuery()), bufferOf(grad.getKey()),
            bufferOf(grad.getValue()), bufferOf(grad.getOutput()),
            bufferOf(grad.getGrad())},
           {out(grad.getQueryGrad()), out(grad.getKeyGrad()),
            out(grad.getValueGrad())},
           {attr("causal", b.getBoolAttr(grad.getCausal()))});
    return success();
  }
  if (auto loss = dyn_cast<graph::CrossEntropyOp>(op)) {
    kernel(loc, "cross_entropy_fwd",
           {bufferOf(loss.getLogits()), bufferOf(loss.getLabels())},
           {out(loss)});
    return success();
  }
  if (auto grad = dyn_cast<graph::CrossEntropyGradOp>(op)) {
    kernel(loc, "cross_entropy_bwd",
           {bufferOf(grad.getLogits()), bufferOf(grad.getLabels()),
            bufferOf(grad.getGrad())},
           {out(grad)});
    return success();
  }
  if (auto grad = dyn_cast<graph::EmbeddingGradOp>(op)) {
    exec::BufferOp target = fusedAccumulator(grad);
    bool accumulate = static_cast<bool>(target);
    if (!target)
      target = out(grad);
    kernel(loc, "embedding_bwd",
           {bufferOf(grad.getGrad()), bufferOf(grad.getIds())}, {target},
           {attr("accumulate", b.getBoolAttr(accumulate))});
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
    SmallVector<exec::BufferOp> outs = {p.value, p.expAvg, p.expAvgSq};
    if (p.master)
      outs.push_back(p.master);
    kernel(loc, "adamw",
           {bufferOf(adam.getGrad()), bufferOf(adam.getCoefficient())}, outs,
           {attr("weight_decay", b.getBoolAttr(adam.getWeightDecay()))});
    // The accumulator starts the next iteration at zero.
    kernel(loc, "fill", {}, {p.grad}, {attr("value", b.getF64FloatAttr(0))});
    return success();
  }
  return op->emitOpError() << "has no lowering to exec";
}

LogicalResult Lowering::lowerFunction(func::FuncOp func) {
  auto program = exec::ProgramOp::create(programBuilder, func.getLoc(),
                                         func.getSymNameAttr());
  body.setInsertionPointToEnd(&program.getBody().emplaceBlock());
  auto ret = cast<func::ReturnOp>(func.getBody().front().getTerminator());
  for (Operation &op : func.getBody().front().without_terminator())
    if (failed(lowerOp(&op)))
      return failure();
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
  OpBuilder steps(ctx());
  steps.setInsertionPointToEnd(&op.getBody().emplaceBlock());
  for (auto step : schedule.getBody().front().getOps<dist::StepOp>())
    exec::RunOp::create(steps, step.getLoc(), step.getFunctionAttr(),
                        step.getMicrobatchAttr());
  return success();
}

struct LowerToExecPass : strata::impl::LowerToExecBase<LowerToExecPass> {
  using LowerToExecBase::LowerToExecBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto microbatch = module.lookupSymbol<func::FuncOp>("microbatch");
    auto optimizer = module.lookupSymbol<func::FuncOp>("optimizer");
    auto schedules = llvm::to_vector(module.getOps<dist::ScheduleOp>());
    if (!microbatch || !optimizer || schedules.size() != 1) {
      module.emitError() << "lowering needs @microbatch, @optimizer and one "
                            "dist.schedule: run --strata-autodiff, "
                            "--strata-optimizer and --strata-schedule first";
      return signalPassFailure();
    }
    OpBuilder b(module.getBodyRegion());
    b.setInsertionPointToEnd(module.getBody());
    auto rank = exec::RankOp::create(b, module.getLoc(), b.getI64IntegerAttr(0),
                                     IntegerAttr(), IntegerAttr());
    rank.getBody().emplaceBlock();
    Lowering lowering(module, rank, bf16);
    if (failed(lowering.lowerFunction(microbatch)) ||
        failed(lowering.lowerFunction(optimizer)) ||
        failed(lowering.lowerSchedule(schedules.front())))
      return signalPassFailure();
    microbatch.erase();
    optimizer.erase();
    schedules.front().erase();
    // Declarations (buffers, params, io) read first, then the programs.
    Block &block = rank.getBody().front();
    Operation *firstProgram = *block.getOps<exec::ProgramOp>().begin();
    for (Operation &op : llvm::make_early_inc_range(block))
      if (!isa<exec::ProgramOp, exec::ScheduleOp>(op))
        op.moveBefore(firstProgram);
  }
};

} // namespace
