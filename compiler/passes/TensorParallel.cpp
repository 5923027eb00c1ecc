//===- TensorParallel.cpp - shard the training step across tp ranks -------===//
//
// Megatron-LM's tensor parallelism, derived rather than written per layer.
// Every tensor of the step (forward, backward and optimizer alike) gets a
// sharding over the tp axis of the mesh: replicated, split along a
// dimension, or partial sums (compiler/rules/Sharding.h).
//
// Planning seeds parameter shardings: an embedding table splits its
// vocabulary; a matmul weight splits its output columns ("column parallel")
// when its output flows, through elementwise ops, reshapes, rope and
// attention (each op's planSplit rule), into a consumer that wants it split —
// another matmul (which then becomes "row parallel"), the loss
// (vocabulary-parallel), or a query (heads split); key/value weights split only
// when their heads divide. Propagation then visits the ops in program order;
// each op's rule (its graph::Shardable, in the file of its family under
// compiler/rules/) takes its operands' shardings, picks the shardings of any
// parameter met for the first time (a bias split like its activation, a
// row-parallel weight), and converts an operand whose sharding does not fit by
// inserting a collective (shard.all_reduce, all_gather, reduce_scatter) or a
// local slice. Nothing here knows transformer blocks by name: GPT's layout (two
// all-reduces per layer forward and two backward) and a SwiGLU / grouped-query
// model's both come from the op rules.
//
// With sequence parallelism, activations that would be all-reduced into the
// replicated residual stream are reduce-scattered along the sequence instead,
// and gathered again before a column-parallel matmul.
//
//===----------------------------------------------------------------------===//
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "compiler/rules/Sharding.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphInterfaces.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_TENSORPARALLEL
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

using strata::Sharding;
using Need = strata::SplitPlanner::Need;

/// Tensor parallelism's state (rules/Sharding.h) and the pass's own
/// steps: planning the column splits, walking the ops, localizing types.
class Partitioner : public strata::ShardingState {
public:
  using ShardingState::ShardingState;

  LogicalResult run();

private:
  // Planning: which matmul weights split their columns.
  LogicalResult plan(func::FuncOp func);

  // Propagation: each op's rule (graph::Shardable, compiler/rules/).
  LogicalResult propagate(func::FuncOp func);
  LogicalResult rule(Operation *op);

  // Types.
  LogicalResult localize(func::FuncOp func);
  FailureOr<RankedTensorType> localType(Value v, Operation *where);

  Operation *forwardEnd = nullptr; // the loss seed: backward ops follow
};

//===----------------------------------------------------------------------===//
// Planning: which matmul weights split their columns
//===----------------------------------------------------------------------===//

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
    strata::SplitPlanner t(*this, forwardEnd);
    t.follow(matmul.getResult(), matmul.getType().getRank() - 1);
    if (t.needed == Need::None)
      continue; // decided when propagation reaches it
    auto param = matmul.getRhs().getDefiningOp<ParamOp>();
    int64_t columns = matmul.getTransposeB() ? 0 : 1;
    int64_t size = param.getType().getDimSize(columns);
    if (size % tp != 0) {
      if (t.needed == Need::Required)
        return error(&op) << "parameter '" << param.getName() << "' "
                          << describe(param.getType()) << ": dimension "
                          << columns << " (" << size
                          << ") must split across ranks, and is not "
                             "divisible by tensor-parallel size "
                          << tp;
      continue;
    }
    if (t.blocked) {
      if (t.needed == Need::Required) {
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
// Propagation
//===----------------------------------------------------------------------===//

LogicalResult Partitioner::rule(Operation *op) {
  if (isa<func::ReturnOp>(op)) {
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      if (!get(op->getOperand(i)).isReplicated() &&
          failed(convertOperand(op, i, Sharding::replicated())))
        return failure();
    return success();
  }
  auto shardable = dyn_cast<Shardable>(op);
  if (!shardable)
    return error(op) << "no sharding rule for " << op->getName();
  return shardable.propagateSharding(*this);
}

LogicalResult Partitioner::propagate(func::FuncOp func) {
  // Rules may replace the op they visit (the loss) or insert before it.
  for (Operation &op : llvm::make_early_inc_range(func.getBody().front()))
    if (failed(rule(&op)))
      return failure();
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
        strata::dist::splitDim(b.getContext())
            .setAttr(param, b.getI64IntegerAttr(s.dim));
        strata::dist::globalShape(b.getContext())
            .setAttr(param, b.getDenseI64ArrayAttr(param.getType().getShape()));
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
  auto microbatch =
      module.lookupSymbol<func::FuncOp>(strata::step::kMicrobatch);
  auto optimizer = module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer);
  if (!microbatch || !optimizer)
    return module.emitError() << "tensor parallelism partitions the training "
                                 "step: run --strata-autodiff and "
                                 "--strata-optimizer first";
  if (sp) {
    // The residual stream is [batch, seq, hidden]: the sequence must split
    // (a per-sample input, the dropout keys, has none).
    for (auto input : microbatch.getOps<InputOp>()) {
      if (input.getType().getRank() < 2)
        continue;
      int64_t seq = input.getType().getDimSize(1);
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
