//===- GraphOps.cpp - ops of the graph dialect ----------------------------===//
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>
#include <cstdio>

using namespace mlir;
using namespace strata::graph;

#include "dialects/graph/GraphEnums.cpp.inc"

#define GET_OP_CLASSES
#include "dialects/graph/GraphOps.cpp.inc"

/// A number as a person writes it: 0.5, 1e-05.
static std::string formatNumber(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

/// Verifies an op whose result type its shape rule determines.
static LogicalResult checkInferred(Operation *op,
                                   FailureOr<RankedTensorType> inferred) {
  if (failed(inferred))
    return failure();
  Type actual = op->getResult(0).getType();
  if (*inferred != actual)
    return op->emitOpError()
           << "result " << describe(actual) << " does not match the inferred "
           << describe(*inferred);
  return success();
}

LogicalResult ParamOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  bool normal = getInit() == InitKind::Normal;
  if (normal != getStd().has_value())
    return emitOpError() << (normal ? "normal initialization needs a std"
                                    : "only normal initialization takes a std");
  if (normal) {
    double std = getStd()->convertToDouble();
    if (!(std::isfinite(std) && std > 0))
      return emitOpError() << "std must be positive and finite, got "
                           << formatNumber(std);
  }
  if (getType().getNumElements() == 0)
    return emitOpError() << "has no elements: " << describe(getType());
  return success();
}

LogicalResult InputOp::verify() {
  if (getName().empty())
    return emitOpError() << "needs a non-empty name";
  return success();
}

LogicalResult EmbeddingOp::verify() {
  return checkInferred(*this, inferEmbeddingType([&] { return emitOpError(); },
                                                 getTable().getType(),
                                                 getIds().getType()));
}

LogicalResult MatmulOp::verify() {
  return checkInferred(
      *this, inferMatmulType([&] { return emitOpError(); }, getLhs().getType(),
                             getRhs().getType(), getTransposeB()));
}

#define STRATA_BROADCAST_VERIFIER(OP)                                          \
  LogicalResult OP::verify() {                                                 \
    return checkInferred(                                                      \
        *this, inferBroadcastType([&] { return emitOpError(); },               \
                                  getLhs().getType(), getRhs().getType()));    \
  }
STRATA_BROADCAST_VERIFIER(AddOp)
STRATA_BROADCAST_VERIFIER(SubOp)
STRATA_BROADCAST_VERIFIER(MulOp)
#undef STRATA_BROADCAST_VERIFIER

LogicalResult LayerNormOp::verify() {
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "epsilon must be positive";
  return checkInferred(
      *this, inferNormType([&] { return emitOpError(); }, getInput().getType(),
                           getWeight().getType(), getBias().getType()));
}

LogicalResult RmsNormOp::verify() {
  if (!(getEpsilon().convertToDouble() > 0))
    return emitOpError() << "epsilon must be positive";
  return checkInferred(*this, inferNormType([&] { return emitOpError(); },
                                            getInput().getType(),
                                            getWeight().getType(), Type()));
}

LogicalResult ReshapeOp::verify() {
  return checkInferred(*this, inferReshapeType([&] { return emitOpError(); },
                                               getInput().getType(),
                                               getType().getShape()));
}

LogicalResult TransposeOp::verify() {
  return checkInferred(*this, inferTransposeType([&] { return emitOpError(); },
                                                 getInput().getType(),
                                                 getPermutation()));
}

LogicalResult RopeOp::verify() {
  if (!(getBase().convertToDouble() > 1))
    return emitOpError() << "base must be greater than 1, got "
                         << formatNumber(getBase().convertToDouble());
  return checkInferred(*this,
                       inferRopeType([&] { return emitOpError(); }, getType()));
}

/// Unfused attention's batched gemms step over one head of q, k and v
/// at a time: as many kv heads as query heads, none shared.
template <typename Op> static LogicalResult checkUnfusedHeads(Op op) {
  int64_t heads = cast<RankedTensorType>(op.getQuery().getType()).getDimSize(2);
  int64_t kvHeads = cast<RankedTensorType>(op.getKey().getType()).getDimSize(2);
  if (heads == kvHeads && !op.getGroupSize())
    return success();
  return op.emitOpError()
         << "unfused attention needs as many key/value heads as query heads, "
            "got "
         << kvHeads << " key/value heads for " << heads
         << " query heads (grouped-query attention runs fused)";
}

/// Attention drops out with a rate in (0, 1), a site and the samples'
/// keys, all three or none.
template <typename Op> static LogicalResult checkAttentionDropout(Op op) {
  std::optional<APFloat> rate = op.getDropout();
  bool some = rate || op.getDropoutSite() || op.getKeys();
  bool all = rate && op.getDropoutSite() && op.getKeys();
  if (some && !all)
    return op.emitOpError()
           << "drops out with a rate, a site and the samples' keys together";
  if (rate && !(rate->convertToDouble() > 0 && rate->convertToDouble() < 1))
    return op.emitOpError()
           << "dropout must be in (0, 1), got " << rate->convertToDouble();
  if (all && cast<RankedTensorType>(op.getKeys().getType()).getDimSize(0) !=
                 cast<RankedTensorType>(op.getQuery().getType()).getDimSize(0))
    return op.emitOpError() << "needs a dropout key per sample";
  return success();
}

LogicalResult AttentionOp::verify() {
  auto output = inferAttentionType(
      [&] { return emitOpError(); }, getQuery().getType(), getKey().getType(),
      getValue().getType(), getCausal(), getGroupSize());
  if (failed(checkInferred(*this, output)))
    return failure();
  RankedTensorType saved = attentionSavedType(
      *output, cast<RankedTensorType>(getKey().getType()), getUnfused());
  if (getSaved().getType() != saved)
    return emitOpError() << (getUnfused() ? "the probabilities"
                                          : "the log-sum-exp")
                         << " must be " << describe(saved) << ", got "
                         << describe(getSaved().getType());
  if (getUnfused() && failed(checkUnfusedHeads(*this)))
    return failure();
  return checkAttentionDropout(*this);
}

LogicalResult DropoutOp::verify() {
  auto input = cast<RankedTensorType>(getInput().getType());
  auto keys = cast<RankedTensorType>(getKeys().getType());
  if (getResult().getType() != input)
    return emitOpError() << "the result must be the input's type "
                         << describe(input);
  if (input.getRank() < 1 || keys.getRank() != 1 ||
      keys.getDimSize(0) != input.getDimSize(0))
    return emitOpError() << "needs a key per sample: keys " << describe(keys)
                         << " for the input " << describe(input);
  double rate = getRate().convertToDouble();
  if (!(rate >= 0 && rate < 1))
    return emitOpError() << "rate must be in [0, 1), got " << rate;
  return success();
}

LogicalResult CrossEntropyOp::verify() {
  return checkInferred(*this,
                       inferCrossEntropyType([&] { return emitOpError(); },
                                             getLogits().getType(),
                                             getLabels().getType()));
}

LogicalResult LayerBoundaryOp::verify() {
  if (getInputs().empty())
    return emitOpError() << "must carry at least one value into the layer";
  if (static_cast<int64_t>(getIndex()) < 0)
    return emitOpError() << "index must be >= 0, got "
                         << static_cast<int64_t>(getIndex());
  return success();
}

LogicalResult LayerBoundaryOp::inferReturnTypes(
    MLIRContext *, std::optional<Location>, ValueRange operands, DictionaryAttr,
    OpaqueProperties, RegionRange, SmallVectorImpl<Type> &inferred) {
  llvm::append_range(inferred, operands.getTypes());
  return success();
}

//===----------------------------------------------------------------------===//
// Backward ops: each result has the type of the primal value it is the
// gradient of.
//===----------------------------------------------------------------------===//

static LogicalResult expectType(Operation *op, Value value, Type expected,
                                StringRef role) {
  if (value.getType() == expected)
    return success();
  return op->emitOpError() << role << " must be " << describe(expected)
                           << ", got " << describe(value.getType());
}

LogicalResult SumToOp::verify() {
  ArrayRef<int64_t> from = getInput().getType().getShape();
  ArrayRef<int64_t> to = getType().getShape();
  if (to.size() > from.size() || from.take_back(to.size()) != to ||
      getInput().getType().getElementType() != getType().getElementType())
    return emitOpError() << describe(getType()) << " is not a suffix of "
                         << describe(getInput().getType());
  return success();
}

/// A table over the sequence's places against a context-parallel rank's
/// rows `rows`: [places, ...] with places `context` times the rows' length
/// at the dimension the table's trailing dimensions leave.
static LogicalResult verifyPositions(Operation *op, RankedTensorType rows,
                                     RankedTensorType table, int64_t context) {
  int64_t seqDim = rows.getRank() - table.getRank();
  if (context < 1 || table.getRank() < 1 || seqDim < 0 ||
      rows.getShape().drop_front(seqDim + 1) !=
          table.getShape().drop_front(1) ||
      rows.getDimSize(seqDim) * context != table.getDimSize(0) ||
      rows.getElementType() != table.getElementType())
    return op->emitOpError()
           << describe(table) << " is not a table of the places of " << context
           << " ranks' " << describe(rows) << " rows";
  return success();
}

LogicalResult AddPositionsOp::verify() {
  return verifyPositions(*this, getInput().getType(), getTable().getType(),
                         int64_t(getContextParallel()));
}

LogicalResult SumPositionsOp::verify() {
  return verifyPositions(*this, getInput().getType(), getType(),
                         int64_t(getContextParallel()));
}

LogicalResult MatmulWeightGradOp::verify() {
  auto lhs = getLhs().getType(), grad = getGrad().getType();
  if (lhs.getRank() < 1 || lhs.getRank() != grad.getRank() ||
      lhs.getShape().drop_back() != grad.getShape().drop_back())
    return emitOpError() << "the rows of " << describe(lhs) << " and "
                         << describe(grad) << " differ";
  int64_t k = lhs.getShape().back(), n = grad.getShape().back();
  SmallVector<int64_t> shape = getTransposeResult()
                                   ? SmallVector<int64_t>{n, k}
                                   : SmallVector<int64_t>{k, n};
  return expectType(*this, getResult(),
                    RankedTensorType::get(shape, lhs.getElementType()),
                    "the result");
}

LogicalResult EmbeddingGradOp::verify() {
  auto grad = getGrad().getType(), table = getType();
  auto ids = getIds().getType();
  if (table.getRank() != 2 || grad.getShape().drop_back() != ids.getShape() ||
      grad.getShape().back() != table.getDimSize(1))
    return emitOpError() << "the gradient " << describe(grad)
                         << " does not match ids " << describe(ids)
                         << " and table " << describe(table);
  return success();
}

LogicalResult LayerNormGradOp::verify() {
  if (failed(inferNormType([&] { return emitOpError(); }, getInput().getType(),
                           getWeight().getType(), Type())))
    return failure();
  if (failed(expectType(*this, getGrad(), getInput().getType(), "the grad")) ||
      failed(expectType(*this, getInputGrad(), getInput().getType(),
                        "the input gradient")) ||
      failed(expectType(*this, getWeightGrad(), getWeight().getType(),
                        "the weight gradient")))
    return failure();
  return expectType(*this, getBiasGrad(), getWeight().getType(),
                    "the bias gradient");
}

LogicalResult RmsNormGradOp::verify() {
  if (failed(inferNormType([&] { return emitOpError(); }, getInput().getType(),
                           getWeight().getType(), Type())))
    return failure();
  if (failed(expectType(*this, getGrad(), getInput().getType(), "the grad")) ||
      failed(expectType(*this, getInputGrad(), getInput().getType(),
                        "the input gradient")))
    return failure();
  return expectType(*this, getWeightGrad(), getWeight().getType(),
                    "the weight gradient");
}

LogicalResult AttentionGradOp::verify() {
  auto output = inferAttentionType(
      [&] { return emitOpError(); }, getQuery().getType(), getKey().getType(),
      getValue().getType(), getCausal(), getGroupSize());
  if (failed(output))
    return failure();
  if (failed(expectType(*this, getOutput(), *output, "the output")) ||
      failed(expectType(
          *this, getSaved(),
          attentionSavedType(*output,
                             cast<RankedTensorType>(getKey().getType()),
                             getUnfused()),
          getUnfused() ? "the probabilities" : "the log-sum-exp")) ||
      (getUnfused() && failed(checkUnfusedHeads(*this))) ||
      failed(checkAttentionDropout(*this)) ||
      failed(expectType(*this, getGrad(), *output, "the grad")) ||
      failed(expectType(*this, getQueryGrad(), getQuery().getType(),
                        "the query gradient")) ||
      failed(expectType(*this, getKeyGrad(), getKey().getType(),
                        "the key gradient")))
    return failure();
  return expectType(*this, getValueGrad(), getValue().getType(),
                    "the value gradient");
}

LogicalResult CrossEntropyGradOp::verify() {
  if (failed(inferCrossEntropyType([&] { return emitOpError(); },
                                   getLogits().getType(),
                                   getLabels().getType())))
    return failure();
  return expectType(*this, getResult(), getLogits().getType(), "the result");
}

LogicalResult CrossEntropyWithGradOp::verify() {
  // The loss is result 0, as checkInferred reads.
  if (failed(checkInferred(*this,
                           inferCrossEntropyType([&] { return emitOpError(); },
                                                 getLogits().getType(),
                                                 getLabels().getType()))))
    return failure();
  return expectType(*this, getLogitsGrad(), getLogits().getType(),
                    "the logits' gradient");
}

LogicalResult LinearCrossEntropyWithGradOp::verify() {
  auto input = getInput().getType(), weight = getWeight().getType();
  if (weight.getRank() != 2 || input.getRank() < 1)
    return emitOpError() << "takes a rank-2 weight and an input of rank 1 "
                            "or more";
  int64_t hidden = input.getShape().back();
  int64_t k = weight.getDimSize(getTransposeB() ? 1 : 0);
  int64_t vocab = weight.getDimSize(getTransposeB() ? 0 : 1);
  if (k != hidden)
    return emitOpError() << "multiplies an input of " << hidden
                         << " columns by a weight of " << k << " rows";
  int64_t rows = input.getNumElements() / std::max<int64_t>(hidden, 1);
  if (getLabels().getType().getNumElements() != rows)
    return emitOpError() << "has " << getLabels().getType().getNumElements()
                         << " labels for " << rows << " rows";
  // I64Attr reads unsigned: a negative value is a huge one here.
  if (int64_t block = int64_t(getBlockColumns()); block <= 0)
    return emitOpError() << "has block_columns " << block
                         << ": a block is one column or more";
  // At most the columns, or, vocabulary-parallel (the columns a rank's
  // share), the ranks' columns: the lowering, which knows how many ranks,
  // checks that.
  if (auto size = getVocabSize(); size && int64_t(*size) <= 0)
    return emitOpError() << "has vocab_size " << int64_t(*size)
                         << ": the vocabulary is one entry or more";
  return expectType(*this, getInputGrad(), input, "the input's gradient");
}

//===----------------------------------------------------------------------===//
// The loss from row statistics
//===----------------------------------------------------------------------===//

/// The per-row statistic type of logits [..., V]: f32 [...].
static RankedTensorType rowType(RankedTensorType logits) {
  return RankedTensorType::get(logits.getShape().drop_back(),
                               Float32Type::get(logits.getContext()));
}

static LogicalResult verifyRowStat(Operation *op, RankedTensorType logits,
                                   Value result, int64_t vocabSize) {
  if (logits.getRank() < 1)
    return op->emitOpError() << "the logits need a vocabulary dimension";
  if (vocabSize < 1)
    return op->emitOpError() << "vocab_size must be positive";
  return expectType(op, result, rowType(logits), "the result");
}

LogicalResult LogitsMaxOp::verify() {
  return verifyRowStat(*this, getLogits().getType(), getResult(),
                       getVocabSize());
}

LogicalResult LogitsTargetOp::verify() {
  if (getLabels().getType().getShape() !=
      getLogits().getType().getShape().drop_back())
    return emitOpError() << "the labels must be the logits' rows";
  return verifyRowStat(*this, getLogits().getType(), getResult(),
                       getVocabSize());
}

LogicalResult LogitsSumExpOp::verify() {
  if (failed(expectType(*this, getMax(), rowType(getLogits().getType()),
                        "the max")))
    return failure();
  return verifyRowStat(*this, getLogits().getType(), getResult(),
                       getVocabSize());
}

LogicalResult CrossEntropyFromStatsOp::verify() {
  auto rows = getMax().getType();
  if (!rows.getElementType().isF32())
    return emitOpError() << "statistics are f32";
  if (failed(expectType(*this, getSumExp(), rows, "the sum_exp")))
    return failure();
  return expectType(*this, getTarget(), rows, "the target");
}

LogicalResult CrossEntropyWithGradFromStatsOp::verify() {
  auto rows = rowType(getLogits().getType());
  if (getLabels().getType().getShape() != rows.getShape())
    return emitOpError() << "the labels must be the logits' rows";
  if (failed(expectType(*this, getMax(), rows, "the max")) ||
      failed(expectType(*this, getSumExp(), rows, "the sum_exp")) ||
      failed(expectType(*this, getTarget(), rows, "the target")))
    return failure();
  return expectType(*this, getLogitsGrad(), getLogits().getType(),
                    "the logits' gradient");
}

LogicalResult CrossEntropyGradFromStatsOp::verify() {
  auto rows = rowType(getLogits().getType());
  if (getLabels().getType().getShape() != rows.getShape())
    return emitOpError() << "the labels must be the logits' rows";
  if (failed(expectType(*this, getMax(), rows, "the max")) ||
      failed(expectType(*this, getSumExp(), rows, "the sum_exp")))
    return failure();
  return expectType(*this, getResult(), getLogits().getType(), "the result");
}
