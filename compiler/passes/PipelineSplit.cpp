//===- PipelineSplit.cpp - the step cut into pipeline chunks --------------===//
//
// Cuts @microbatch at layer boundaries into p·v chunks, chunk c for stage
// c mod p, and makes each chunk two functions that a stage runs per
// microbatch: @forward_c (receive the activations entering the chunk, run
// its layers, send what leaves it; the last chunk reports the loss) and
// @backward_c (receive the gradient of what left, run the chunk's backward
// ops, send the gradient of what entered). Forward ops belong to the layer
// their position between boundaries says; backward ops carry the layer in
// `graph.backward_layer` (autodiff writes it). Parameters, inputs and constants
// are cloned wherever they are used.
//
// A forward value that a backward op needs is either stashed (returned by
// @forward_c, an argument of @backward_c, kept per microbatch in flight) or
// recomputed in @backward_c just before its first use, by the policy:
// views always recomputed; with `recompute=selective` attention too; with
// `recompute=full` everything but each layer's input (Megatron's full,
// uniform recomputation of one layer at a time) and the fused loss's
// gradient. Recomputation is lazy: what no backward op reads (a layer's
// output, which the next layer's stashed input holds, and the collectives
// that make it) is not run again, unless `whole-layers` asks for each
// layer's whole forward first, as Megatron's checkpointing runs it.
//
// With `split-weights` (the zero-bubble schedules) each backward is cut
// in two: @backward_c keeps the ops that the gradient it sends to the chunk
// before depends on (B: each matmul's input gradient, the norms' and
// attention's, the collectives on that path), and @weight_c the rest (W:
// each weight's gradient, bias sums, the accumulation into the gradient
// buffers), which no later chunk waits for. What W reads of B's values
// (the output gradient of a matmul, a norm's weight gradient that its
// fused backward computed beside the input's), and of the forward values
// B holds, @backward_c returns and @weight_c takes, as @forward_c's stash
// is @backward_c's; an output gradient B gathered over the sequence
// (sequence parallelism) W gathers again from the share B had, which is
// all B passes of it. The first chunk sends nothing: all of its backward
// is W.
//
// A parameter used on several stages (a tied embedding) gets a
// dist.tie_gradients in @optimizer, and the gradient norm sums over the
// pipeline axis.
//
//===----------------------------------------------------------------------===//
#include "compiler/Layout.h"
#include "compiler/Mesh.h"
#include "compiler/Passes.h"
#include "compiler/StepFunctions.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <set>

namespace strata {
#define GEN_PASS_DEF_PIPELINESPLIT
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;
namespace graph = strata::graph;

namespace {

/// Ops cloned into every function that uses them: no inputs, cheap.
bool isFree(Operation *op) {
  return isa<graph::ParamOp, graph::InputOp, graph::ConstantOp>(op);
}

/// `value` of a free op, cloned at the top of `entry` under `map`.
Value cloneFree(OpBuilder &b, Block *entry, IRMapping &map, Value value) {
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(entry);
  Operation *clone = b.clone(*value.getDefiningOp(), map);
  return clone->getResult(cast<OpResult>(value).getResultNumber());
}

/// Ops that only rename bytes (no kernel): never worth stashing.
bool isView(Operation *op) {
  return isa<graph::ReshapeOp, graph::LayerBoundaryOp>(op);
}

/// Where each layer's chunk starts: chunk c holds layers
/// [start[c], start[c + 1]).
struct ChunkLayout {
  std::vector<int64_t> start;
  int64_t chunks() const { return int64_t(start.size()) - 1; }
  /// The chunk of layer `layer`; -1 (embedding) is the first chunk's, L
  /// (final norm, output layer, loss) the last's.
  int64_t chunkOf(int64_t layer) const {
    for (int64_t c = 0; c < chunks(); ++c)
      if (layer < start[c + 1])
        return c;
    return chunks() - 1;
  }
};

class Splitter {
public:
  Splitter(ModuleOp module, func::FuncOp step, const ChunkLayout &layout,
           Recompute recompute, bool wholeLayers, bool splitWeights)
      : module(module), step(step), layout(layout), recompute(recompute),
        wholeLayers(wholeLayers), splitWeights(splitWeights),
        b(module.getContext()), backwardLayer(module.getContext()) {}

  LogicalResult run();

private:
  struct Chunk {
    func::FuncOp forward, backward;
    IRMapping forwardMap, backwardMap;
    Block *forwardEntry = nullptr, *backwardEntry = nullptr;
    // Values entering the chunk (forward) and gradients entering it from
    // the chunk after (backward), in channel order.
    llvm::SetVector<Value> inputs, gradInputs;
    SmallVector<Value> stash; // original forward values, @backward args
    // With split-weights: @weight_c, its ops (W), and what it takes from
    // @backward_c (B's values, returned by it in this order).
    func::FuncOp weight;
    IRMapping weightMap;
    Block *weightEntry = nullptr;
    llvm::DenseSet<Operation *> weightOps;
    SmallVector<Value> weightStash;
  };

  LogicalResult classify();
  LogicalResult buildForward(int64_t c);
  LogicalResult buildBackward(int64_t c);
  void classifyWeights(int64_t c);
  LogicalResult buildWeight(int64_t c);
  FailureOr<Value> weightValue(int64_t c, Value value, Location useLoc);
  FailureOr<Value> forwardValue(int64_t c, Value value, Location useLoc);
  FailureOr<Value> backwardForwardValue(int64_t c, Value value,
                                        Location useLoc);
  bool shouldStash(Operation *def) const;
  LogicalResult recomputeLayer(int64_t c, int64_t layer, Location loc);
  void tieGradients();

  ModuleOp module;
  func::FuncOp step;
  const ChunkLayout &layout;
  Recompute recompute;
  bool wholeLayers;
  bool splitWeights;
  OpBuilder b;
  // Autodiff's tag: an op with it is a backward op, of that layer.
  graph::GraphDialect::BackwardLayerAttrHelper backwardLayer;
  SmallVector<Operation *> forwardOps, backwardOps;
  llvm::DenseMap<Operation *, int64_t> chunkOf;
  // Each layer's forward ops, in order (-1: the embedding; the last
  // boundary's index: the final norm and the loss).
  llvm::DenseMap<int64_t, SmallVector<Operation *>> forwardOpsOfLayer;
  llvm::DenseSet<Value> layerInputs; // boundary operands: full keeps them
  std::vector<Chunk> chunks;
  int64_t nextChannel = 0;
  llvm::DenseMap<Value, int64_t> channelOf;
};

LogicalResult Splitter::classify() {
  int64_t layer = -1;
  bool backward = false;
  for (Operation &op : step.getBody().front().without_terminator()) {
    if (IntegerAttr tag = backwardLayer.getAttr(&op)) {
      backward = true;
      backwardOps.push_back(&op);
      chunkOf[&op] = layout.chunkOf(tag.getInt());
      continue;
    }
    if (backward && !isFree(&op))
      return op.emitOpError()
             << "comes after the backward ops began but has no "
                "graph.backward_layer: "
                "pipeline splitting needs every backward op tagged (run "
                "--strata-autodiff)";
    if (auto boundary = dyn_cast<graph::LayerBoundaryOp>(op)) {
      layer = static_cast<int64_t>(boundary.getIndex());
      for (Value input : boundary.getInputs())
        layerInputs.insert(input);
    }
    forwardOpsOfLayer[layer].push_back(&op);
    forwardOps.push_back(&op);
    chunkOf[&op] = layout.chunkOf(layer);
  }
  return success();
}

/// A forward value as @forward_c sees it: computed there, cloned (free
/// ops), or received (a value the chunk before computed).
FailureOr<Value> Splitter::forwardValue(int64_t c, Value value,
                                        Location useLoc) {
  Chunk &chunk = chunks[c];
  if (Value mapped = chunk.forwardMap.lookupOrNull(value))
    return mapped;
  Operation *def = value.getDefiningOp();
  if (def && isFree(def))
    return cloneFree(b, chunk.forwardEntry, chunk.forwardMap, value);
  int64_t from = def ? chunkOf.lookup(def) : -1;
  if (from != c - 1)
    return emitError(useLoc)
           << "uses a value computed in pipeline chunk " << from
           << " from chunk " << c
           << ": only the values entering a layer boundary may cross "
              "between chunks";
  // Received at the top of the chunk, in the order first used.
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(chunk.forwardEntry);
  for (Operation &op : *chunk.forwardEntry)
    if (isa<dist::RecvOp>(op))
      b.setInsertionPointAfter(&op);
  int64_t channel = nextChannel++;
  channelOf[value] = channel;
  chunk.inputs.insert(value);
  Value received = dist::RecvOp::create(b, value.getLoc(), value.getType(),
                                        b.getI64IntegerAttr(c - 1),
                                        b.getI64IntegerAttr(channel));
  chunk.forwardMap.map(value, received);
  return received;
}

LogicalResult Splitter::buildForward(int64_t c) {
  Chunk &chunk = chunks[c];
  for (Operation *op : forwardOps) {
    if (chunkOf.lookup(op) != c || isFree(op))
      continue;
    for (Value operand : op->getOperands())
      if (failed(forwardValue(c, operand, op->getLoc())))
        return failure();
    b.setInsertionPointToEnd(chunk.forwardEntry);
    b.clone(*op, chunk.forwardMap);
  }
  return success();
}

bool Splitter::shouldStash(Operation *def) const {
  if (isView(def))
    return false;
  // The fused loss's gradient is kept, as Megatron's fused cross-entropy
  // keeps its softmax, under any policy: recomputing it would run the
  // whole loss again (its all-reduces too) in the backward, and the last
  // stage's backward follows its forward at once. The output layer in
  // blocks adds into a gradient as it goes: run again, it would add twice.
  if (isa<graph::CrossEntropyWithGradOp, graph::CrossEntropyWithGradFromStatsOp,
          graph::LinearCrossEntropyWithGradOp>(def))
    return true;
  if (recompute == Recompute::Selective && isa<graph::AttentionOp>(def))
    return false;
  if (recompute == Recompute::Full)
    return llvm::any_of(def->getResults(),
                        [&](Value v) { return layerInputs.contains(v); });
  return true;
}

/// A forward value as @backward_c sees it: stashed by @forward_c (an
/// argument), or recomputed here from what is.
FailureOr<Value> Splitter::backwardForwardValue(int64_t c, Value value,
                                                Location useLoc) {
  Chunk &chunk = chunks[c];
  if (Value mapped = chunk.backwardMap.lookupOrNull(value))
    return mapped;
  Operation *def = value.getDefiningOp();
  if (def && isFree(def))
    return cloneFree(b, chunk.backwardEntry, chunk.backwardMap, value);
  int64_t home = def ? chunkOf.lookup(def) : -1;
  bool entering = home == c - 1 && chunk.inputs.contains(value);
  if (home != c && !entering)
    return emitError(useLoc) << "the backward of pipeline chunk " << c
                             << " uses a forward value of chunk " << home;
  if (entering || shouldStash(def)) {
    chunk.stash.push_back(value);
    Value argument =
        chunk.backwardEntry->addArgument(value.getType(), value.getLoc());
    chunk.backwardMap.map(value, argument);
    return argument;
  }
  // Recompute: its operands first, then the op, where it is first needed.
  for (Value operand : def->getOperands())
    if (failed(backwardForwardValue(c, operand, useLoc)))
      return failure();
  Operation *clone = b.clone(*def, chunk.backwardMap);
  return clone->getResult(cast<OpResult>(value).getResultNumber());
}

/// Runs layer `layer`'s forward ops of chunk `c` again where the backward
/// is, in order: what they read is stashed or recomputed as usual; a value
/// the backward already holds (the layer's output, stashed as the next
/// layer's input) keeps what it holds, and its recomputation is left
/// unread, as Megatron's checkpointing leaves it.
LogicalResult Splitter::recomputeLayer(int64_t c, int64_t layer, Location loc) {
  Chunk &chunk = chunks[c];
  auto ops = forwardOpsOfLayer.find(layer);
  if (ops == forwardOpsOfLayer.end())
    return success();
  // A layer's ops are all in its chunk, `c`.
  for (Operation *op : ops->second) {
    if (isFree(op) || isView(op) || op->getNumResults() == 0)
      continue;
    if (llvm::all_of(op->getResults(), [&](Value v) {
          return chunk.backwardMap.contains(v) &&
                 !llvm::is_contained(chunk.stash, v);
        }))
      continue; // recomputed already
    for (Value operand : op->getOperands())
      if (failed(backwardForwardValue(c, operand, loc)))
        return failure();
    SmallVector<std::pair<Value, Value>> held;
    for (Value result : op->getResults())
      if (Value mapped = chunk.backwardMap.lookupOrNull(result))
        held.push_back({result, mapped});
    b.clone(*op, chunk.backwardMap);
    for (auto [result, mapped] : held)
      chunk.backwardMap.map(result, mapped);
  }
  return success();
}

LogicalResult Splitter::buildBackward(int64_t c) {
  Chunk &chunk = chunks[c];
  // Gradients from the chunk after: received first, in channel order.
  b.setInsertionPointToStart(chunk.backwardEntry);
  for (Value grad : chunk.gradInputs) {
    Value received = dist::RecvOp::create(b, grad.getLoc(), grad.getType(),
                                          b.getI64IntegerAttr(c + 1),
                                          b.getI64IntegerAttr(channelOf[grad]));
    chunk.backwardMap.map(grad, received);
  }
  int64_t recomputed = -2; // the layer whose forward ran again last
  for (Operation *op : backwardOps) {
    if (chunkOf.lookup(op) != c || chunk.weightOps.contains(op))
      continue;
    b.setInsertionPointToEnd(chunk.backwardEntry);
    int64_t layer = backwardLayer.getAttr(op).getInt();
    // Layers 0 .. start.back() - 1 are the transformer's: the embedding
    // and the loss are not checkpointed, as in Megatron.
    if (wholeLayers && layer >= 0 && layer < layout.start.back() &&
        layer != recomputed) {
      recomputed = layer;
      if (failed(recomputeLayer(c, layer, op->getLoc())))
        return failure();
    }
    for (Value operand : op->getOperands()) {
      if (chunk.backwardMap.contains(operand))
        continue;
      Operation *def = operand.getDefiningOp();
      // Gradients of this chunk are mapped as their ops are cloned, and
      // those from the chunk after were received: what is left is forward.
      if (def && !backwardLayer.isAttrPresent(def)) {
        if (failed(backwardForwardValue(c, operand, op->getLoc())))
          return failure();
        continue;
      }
      return op->emitOpError()
             << "in the backward of pipeline chunk " << c
             << " uses a gradient no earlier op of the chunk computes";
    }
    b.clone(*op, chunk.backwardMap);
  }
  return success();
}

/// B is what the gradients chunk c sends depend on, within chunk c's
/// backward; the rest of it is W.
void Splitter::classifyWeights(int64_t c) {
  Chunk &chunk = chunks[c];
  llvm::DenseSet<Operation *> inputGradient;
  SmallVector<Operation *> work;
  auto reach = [&](Value value) {
    Operation *def = value.getDefiningOp();
    if (def && backwardLayer.isAttrPresent(def) && chunkOf.lookup(def) == c &&
        inputGradient.insert(def).second)
      work.push_back(def);
  };
  if (c > 0)
    for (Value grad : chunks[c - 1].gradInputs)
      reach(grad);
  while (!work.empty())
    for (Value operand : work.pop_back_val()->getOperands())
      reach(operand);
  for (Operation *op : backwardOps)
    if (chunkOf.lookup(op) == c && !inputGradient.contains(op))
      chunk.weightOps.insert(op);
}

/// A value as @weight_c sees it: computed by an earlier W op, cloned (free
/// ops and views of what W has), or taken from @backward_c: a gradient B
/// computed or received, or a forward value as B holds it (stashed, or
/// recomputed at B's end).
FailureOr<Value> Splitter::weightValue(int64_t c, Value value,
                                       Location useLoc) {
  Chunk &chunk = chunks[c];
  if (Value mapped = chunk.weightMap.lookupOrNull(value))
    return mapped;
  Operation *def = value.getDefiningOp();
  if (def && isFree(def))
    return cloneFree(b, chunk.weightEntry, chunk.weightMap, value);
  Value held = chunk.backwardMap.lookupOrNull(value);
  if (def && isView(def)) {
    // A view renames bytes: made again here from what it views, even where
    // B made it too (B's stash holds computed values, never views).
    for (Value operand : def->getOperands())
      if (failed(weightValue(c, operand, useLoc)))
        return failure();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(chunk.weightEntry);
    Operation *clone = b.clone(*def, chunk.weightMap);
    return clone->getResult(cast<OpResult>(value).getResultNumber());
  }
  // A gradient B gathered over the sequence (sequence parallelism: a
  // row-parallel product's output gradient, which W multiplies by the
  // product's input) W gathers again from the part B had: B passes it 1/t
  // of the bytes, which a W held back keeps, for one all-gather more.
  if (auto gather = dyn_cast_or_null<shard::AllGatherOp>(def);
      gather && held && backwardLayer.isAttrPresent(def) &&
      chunkOf.lookup(def) == c) {
    if (failed(weightValue(c, gather->getOperand(0), useLoc)))
      return failure();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(chunk.weightEntry);
    return b.clone(*def, chunk.weightMap)->getResult(0);
  }
  if (!held) {
    if (def && backwardLayer.isAttrPresent(def))
      return emitError(useLoc)
             << "in the weight gradients of pipeline chunk " << c
             << " uses a gradient that neither B nor an earlier W op "
                "computes";
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(chunk.backwardEntry);
    FailureOr<Value> forward = backwardForwardValue(c, value, useLoc);
    if (failed(forward))
      return failure();
    held = *forward;
  }
  chunk.weightStash.push_back(held);
  Value argument =
      chunk.weightEntry->addArgument(value.getType(), value.getLoc());
  chunk.weightMap.map(value, argument);
  return argument;
}

/// @weight_c: chunk c's W ops in order, what they read of B taken as
/// arguments (@backward_c returns them).
LogicalResult Splitter::buildWeight(int64_t c) {
  Chunk &chunk = chunks[c];
  for (Operation *op : backwardOps) {
    if (chunkOf.lookup(op) != c || !chunk.weightOps.contains(op))
      continue;
    for (Value operand : op->getOperands())
      if (failed(weightValue(c, operand, op->getLoc())))
        return failure();
    b.setInsertionPointToEnd(chunk.weightEntry);
    b.clone(*op, chunk.weightMap);
  }
  return success();
}

void Splitter::tieGradients() {
  int64_t stages = meshAxis(module, kPipelineAxis);
  auto optimizer = module.lookupSymbol<func::FuncOp>(strata::step::kOptimizer);
  if (stages == 1 || !optimizer)
    return; // one stage holds everything
  // The stages whose functions name each parameter.
  llvm::MapVector<StringRef, std::set<int64_t>> users;
  for (int64_t c = 0; c < int64_t(chunks.size()); ++c)
    for (func::FuncOp f :
         {chunks[c].forward, chunks[c].backward, chunks[c].weight}) {
      if (!f)
        continue;
      f.walk([&](Operation *op) {
        if (auto param = dyn_cast<graph::ParamOp>(op))
          users[param.getName()].insert(stageOfChunk(module, c));
        else if (auto sink = dyn_cast<graph::AccumulateGradOp>(op))
          users[sink.getName()].insert(stageOfChunk(module, c));
      });
    }
  b.setInsertionPointToStart(&optimizer.getBody().front());
  auto grid = FlatSymbolRefAttr::get(b.getContext(), kMeshName);
  for (auto &[name, on] : users) {
    if (on.size() < 2)
      continue;
    SmallVector<int64_t> list(on.begin(), on.end());
    dist::TieGradientsOp::create(b, optimizer.getLoc(), b.getStringAttr(name),
                                 grid, b.getDenseI64ArrayAttr(list));
  }
  // Each stage's sums of squares cover its own parameters.
  sumGradientNormOver(optimizer, kPipelineAxis);
}

LogicalResult Splitter::run() {
  if (failed(classify()))
    return failure();
  int64_t count = layout.chunks();
  chunks.resize(count);
  OpBuilder top(module.getBodyRegion());
  top.setInsertionPoint(step);
  Location loc = step.getLoc();
  auto makeFunction = [&](const std::string &name, int64_t c, func::FuncOp &f,
                          Block *&entry) {
    f = func::FuncOp::create(top, loc, name, top.getFunctionType({}, {}));
    dist::chunk(f.getContext()).setAttr(f, top.getI64IntegerAttr(c));
    entry = f.addEntryBlock();
  };
  for (int64_t c = 0; c < count; ++c) {
    Chunk &chunk = chunks[c];
    makeFunction(strata::step::forwardOf(c), c, chunk.forward,
                 chunk.forwardEntry);
    makeFunction(strata::step::backwardOf(c), c, chunk.backward,
                 chunk.backwardEntry);
    if (splitWeights)
      makeFunction(strata::step::weightOf(c), c, chunk.weight,
                   chunk.weightEntry);
  }

  // Forward, chunk by chunk: what a chunk receives, the one before sends.
  for (int64_t c = 0; c < count; ++c)
    if (failed(buildForward(c)))
      return failure();
  auto ret = cast<func::ReturnOp>(step.getBody().front().getTerminator());
  Value loss = ret.getOperand(0);
  if (!loss.getDefiningOp() ||
      chunkOf.lookup(loss.getDefiningOp()) != count - 1)
    return ret.emitOpError()
           << "returns a loss the last chunk does not compute";
  for (int64_t c = 0; c < count; ++c) {
    Chunk &chunk = chunks[c];
    b.setInsertionPointToEnd(chunk.forwardEntry);
    if (c + 1 < count)
      for (Value value : chunks[c + 1].inputs)
        dist::SendOp::create(b, value.getLoc(), chunk.forwardMap.lookup(value),
                             b.getI64IntegerAttr(c + 1),
                             b.getI64IntegerAttr(channelOf[value]));
    if (c + 1 == count)
      dist::LossOp::create(b, ret.getLoc(), chunk.forwardMap.lookup(loss));
  }

  // Gradients crossing backward: computed in chunk c + 1, used in chunk c.
  for (Operation *op : backwardOps) {
    int64_t c = chunkOf.lookup(op);
    for (Value operand : op->getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (!def || !backwardLayer.isAttrPresent(def))
        continue;
      int64_t from = chunkOf.lookup(def);
      if (from == c)
        continue;
      if (from != c + 1)
        return op->emitOpError()
               << "in the backward of pipeline chunk " << c
               << " uses a gradient chunk " << from << " computes";
      if (chunks[c].gradInputs.insert(operand))
        channelOf[operand] = nextChannel++;
    }
  }
  for (int64_t c = count; c-- > 0;) {
    if (splitWeights)
      classifyWeights(c);
    if (failed(buildBackward(c)))
      return failure();
    if (c > 0) {
      b.setInsertionPointToEnd(chunks[c].backwardEntry);
      for (Value grad : chunks[c - 1].gradInputs)
        dist::SendOp::create(
            b, grad.getLoc(), chunks[c].backwardMap.lookup(grad),
            b.getI64IntegerAttr(c - 1), b.getI64IntegerAttr(channelOf[grad]));
    }
    if (splitWeights && failed(buildWeight(c)))
      return failure();
  }

  // @forward_c returns the stash, which @backward_c takes.
  for (Chunk &chunk : chunks) {
    SmallVector<Value> results;
    SmallVector<Type> types;
    for (Value value : chunk.stash) {
      results.push_back(chunk.forwardMap.lookup(value));
      types.push_back(value.getType());
    }
    b.setInsertionPointToEnd(chunk.forwardEntry);
    func::ReturnOp::create(b, loc, results);
    chunk.forward.setFunctionType(b.getFunctionType({}, types));
    // @backward_c returns what @weight_c takes of it.
    SmallVector<Type> weightTypes;
    for (Value value : chunk.weightStash)
      weightTypes.push_back(value.getType());
    b.setInsertionPointToEnd(chunk.backwardEntry);
    func::ReturnOp::create(b, loc, chunk.weightStash);
    chunk.backward.setFunctionType(b.getFunctionType(types, weightTypes));
    if (chunk.weight) {
      b.setInsertionPointToEnd(chunk.weightEntry);
      func::ReturnOp::create(b, loc);
      chunk.weight.setFunctionType(b.getFunctionType(weightTypes, {}));
    }
  }
  tieGradients();
  step.erase();
  return success();
}

struct PipelineSplitPass : strata::impl::PipelineSplitBase<PipelineSplitPass> {
  using PipelineSplitBase::PipelineSplitBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto step = module.lookupSymbol<func::FuncOp>(strata::step::kMicrobatch);
    if (!step) {
      module.emitError() << "no @microbatch to split: run --strata-autodiff "
                            "first";
      return signalPassFailure();
    }
    std::optional<Recompute> kind = parseRecompute(recompute);
    if (!kind) {
      module.emitError() << "recompute must be none, full or selective, got '"
                         << recompute << "'";
      return signalPassFailure();
    }
    FailureOr<ChunkLayout> layout = chunkLayout(module, step);
    if (failed(layout))
      return signalPassFailure();
    if (placement != "looped" && placement != "v") {
      module.emitError() << "placement must be looped or v, got '"
                         << placement << "'";
      return signalPassFailure();
    }
    bool vShape = placement == "v";
    if (vShape && layout->chunks() != 2 * stages) {
      module.emitError()
          << "the V placement (zb-v) runs two chunks a stage, but the layers "
             "make "
          << layout->chunks() << " chunks on " << static_cast<int64_t>(stages)
          << " stages: set --num-layers-per-virtual-pipeline-stage to half "
             "of each stage's layers";
      return signalPassFailure();
    }
    ensureMesh(module);
    setMeshAxis(module, kPipelineAxis, stages);
    setChunkPlacement(module,
                      vShape ? sim::Placement::V : sim::Placement::Looped);
    if (wholeLayers && *kind != Recompute::Full) {
      module.emitError() << "whole-layers recomputes with recompute=full, got '"
                         << recompute << "'";
      return signalPassFailure();
    }
    Splitter splitter(module, step, *layout, *kind, wholeLayers, splitWeights);
    if (failed(splitter.run()))
      return signalPassFailure();
  }

  /// The layers of each chunk, from the pass options; an error when they
  /// do not add up to the model's layers.
  FailureOr<ChunkLayout> chunkLayout(ModuleOp module, func::FuncOp step) {
    int64_t layers = 0;
    step.walk([&](graph::LayerBoundaryOp boundary) {
      layers = std::max<int64_t>(layers, boundary.getIndex());
    });
    auto fail = [&](const Twine &message) -> FailureOr<ChunkLayout> {
      module.emitError() << message;
      return failure();
    };
    int64_t p = stages;
    if (p < 1)
      return fail("the pipeline-parallel size must be at least 1");
    if (layers == 0 && p > 1)
      return fail("the model has no layer boundaries to cut into " + Twine(p) +
                  " pipeline stages");
    ChunkLayout layout;
    if (firstStageLayers >= 0 || lastStageLayers >= 0) {
      if (layersPerVirtualStage > 0)
        return fail("uneven first/last stage layer counts cannot be combined "
                    "with virtual pipeline stages");
      if (p < 2)
        return fail("first/last stage layer counts need a pipeline-parallel "
                    "size of at least 2");
      int64_t first = firstStageLayers >= 0 ? firstStageLayers : -1;
      int64_t last = lastStageLayers >= 0 ? lastStageLayers : -1;
      int64_t fixed = std::max<int64_t>(first, 0) + std::max<int64_t>(last, 0);
      int64_t middleStages = p - (first >= 0) - (last >= 0);
      int64_t rest = layers - fixed;
      if (rest < 0 || (middleStages == 0 && rest != 0) ||
          (middleStages > 0 && rest % middleStages != 0))
        return fail(Twine(layers) + " layers do not split into " + Twine(p) +
                    " stages with " +
                    (first >= 0 ? Twine(first) + " on the first" : Twine("")) +
                    (first >= 0 && last >= 0 ? " and " : "") +
                    (last >= 0 ? Twine(last) + " on the last" : Twine("")) +
                    ": the other stages would not hold equal whole layers");
      int64_t each = middleStages > 0 ? rest / middleStages : 0;
      layout.start.push_back(0);
      for (int64_t s = 0; s < p; ++s) {
        int64_t n = s == 0 && first >= 0      ? first
                    : s == p - 1 && last >= 0 ? last
                                              : each;
        layout.start.push_back(layout.start.back() + n);
      }
    } else {
      int64_t perChunk = layersPerVirtualStage > 0
                             ? int64_t(layersPerVirtualStage)
                             : (layers + p - 1) / p;
      if (layersPerVirtualStage > 0 &&
          (layers % perChunk != 0 || (layers / perChunk) % p != 0))
        return fail(Twine(layers) + " layers do not split into chunks of " +
                    Twine(perChunk) + " layers on " + Twine(p) +
                    " stages: the number of chunks (layers / layers per "
                    "virtual stage) must be a multiple of the "
                    "pipeline-parallel size");
      if (layersPerVirtualStage <= 0 && layers % p != 0)
        return fail(Twine(layers) + " layers do not divide among " + Twine(p) +
                    " pipeline stages: choose a size that divides them, or "
                    "give the first and last stages' layer counts "
                    "(--decoder-first-pipeline-num-layers, "
                    "--decoder-last-pipeline-num-layers)");
      int64_t count = layers == 0 ? 1 : layers / perChunk;
      for (int64_t c = 0; c <= count; ++c)
        layout.start.push_back(c * perChunk);
    }
    for (int64_t c = 0; c < layout.chunks(); ++c)
      if (layout.start[c + 1] == layout.start[c] && layers > 0)
        return fail("pipeline chunk " + Twine(c) +
                    " would hold no layers: every stage needs at least one");
    return layout;
  }
};

} // namespace
