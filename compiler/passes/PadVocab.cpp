//===- PadVocab.cpp - vocabularies that split evenly ----------------------===//
//
// The vocabulary is padded as Megatron pads it, always: to the next
// multiple of make-vocab-size-divisible-by · tp (GPT-2's 50257 becomes
// 50304 on one rank, 50432 on eight), so that shapes, and checkpoints,
// agree with Megatron's whatever the layout. The embedding tables and
// the output layer grow padding rows or columns, and the cross-entropy
// learns the real vocabulary size, leaving the padding out of its softmax,
// so the loss is the unpadded model's. Runs on the forward model, before
// autodiff, so that the backward follows.
//
//===----------------------------------------------------------------------===//
#include "compiler/Passes.h"
#include "dialects/dist/DistDialect.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "mlir/IR/Builders.h"

namespace strata {
#define GEN_PASS_DEF_PADVOCAB
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata::graph;

namespace {

struct PadVocabPass : strata::impl::PadVocabBase<PadVocabPass> {
  using PadVocabBase::PadVocabBase;

  int64_t padded(int64_t size) const {
    int64_t multiple = divisibleBy * tensorParallel;
    return (size + multiple - 1) / multiple * multiple;
  }
  bool needsPadding(int64_t size) const { return padded(size) != size; }
  /// Without padding the ranks cannot split it at all.
  bool mustPad(int64_t size) const { return size % tensorParallel != 0; }

  /// Pads dimension `dim` of a parameter; returns false if it had been
  /// padded already.
  bool padParam(ParamOp param, int64_t dim) {
    if (strata::dist::realShape(param.getContext()).isAttrPresent(param))
      return false;
    RankedTensorType type = param.getType();
    SmallVector<int64_t> shape(type.getShape());
    strata::dist::realShape(param.getContext())
        .setAttr(param, DenseI64ArrayAttr::get(param.getContext(), shape));
    shape[dim] = padded(shape[dim]);
    param.getResult().setType(
        RankedTensorType::get(shape, type.getElementType()));
    return true;
  }

  void runOnOperation() override {
    if (tensorParallel < 1 || divisibleBy < 1) {
      getOperation().emitError()
          << "tensor-parallel and divisible-by must be positive";
      return signalPassFailure();
    }
    auto model = getOperation().lookupSymbol<func::FuncOp>("model");
    if (!model)
      return;
    WalkResult result = model.walk([&](Operation *op) -> WalkResult {
      if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
        auto table = embedding.getTable().getDefiningOp<ParamOp>();
        if (table && needsPadding(table.getType().getDimSize(0)))
          padParam(table, 0);
        return WalkResult::advance();
      }
      auto loss = dyn_cast<CrossEntropyOp>(op);
      if (!loss)
        return WalkResult::advance();
      int64_t vocab = loss.getLogits().getType().getShape().back();
      if (!needsPadding(vocab))
        return WalkResult::advance();
      auto matmul = loss.getLogits().getDefiningOp<MatmulOp>();
      auto weight =
          matmul ? matmul.getRhs().getDefiningOp<ParamOp>() : ParamOp();
      if (!weight && !mustPad(vocab))
        return WalkResult::advance(); // splits as it is; nothing to pad
      if (!weight)
        return loss.emitError()
               << "the vocabulary " << vocab
               << " does not split across tensor-parallel size "
               << int64_t(tensorParallel) // (an Option streams as nothing)
               << ", and the logits do not come straight from a matmul with "
                  "a parameter, whose columns could be padded";
      padParam(weight, matmul.getTransposeB() ? 0 : 1);
      auto type = inferMatmulType(
          [&] { return matmul.emitOpError(); }, matmul.getLhs().getType(),
          matmul.getRhs().getType(), matmul.getTransposeB());
      if (failed(type))
        return WalkResult::interrupt();
      matmul.getResult().setType(*type);
      loss.setVocabSizeAttr(
          IntegerAttr::get(IntegerType::get(loss.getContext(), 64), vocab));
      return WalkResult::advance();
    });
    if (result.wasInterrupted())
      signalPassFailure();
  }
};

} // namespace
