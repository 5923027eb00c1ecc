//===- VerifyModel.cpp - whole-model rules --------------------------------===//
#include "compiler/Passes.h"
#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

#include "llvm/ADT/StringMap.h"

namespace strata {
#define GEN_PASS_DEF_VERIFYMODEL
#include "compiler/Passes.h.inc"
} // namespace strata

using namespace mlir;
using namespace strata;

namespace {

/// Every embedding table has a row for every id the loss scores: the
/// vocabulary is the loss's (its real size, before any padding). A
/// shorter table trained, embedding ids past its rows as zeros.
LogicalResult verifyVocabulary(func::FuncOp func) {
  int64_t vocabulary = 0;
  func.walk([&](graph::CrossEntropyOp loss) {
    auto logits = cast<RankedTensorType>(loss.getLogits().getType());
    int64_t real = loss.getVocabSize() ? int64_t(*loss.getVocabSize())
                                       : logits.getShape().back();
    vocabulary = std::max(vocabulary, real);
  });
  WalkResult walk = func.walk([&](graph::EmbeddingOp embedding) {
    auto table = cast<RankedTensorType>(embedding.getTable().getType());
    int64_t rows = table.getShape().front();
    if (vocabulary == 0 || rows >= vocabulary || ShapedType::isDynamic(rows))
      return WalkResult::advance();
    std::string name = "its table";
    if (auto param = embedding.getTable().getDefiningOp<graph::ParamOp>())
      name = "'" + param.getName().str() + "'";
    embedding.emitError() << "the embedding table " << name << " has " << rows
                          << " rows, but the loss scores a vocabulary of "
                          << vocabulary << ": ids " << rows << " to "
                          << vocabulary - 1
                          << " would embed as rows that do not exist";
    return WalkResult::interrupt();
  });
  return failure(walk.wasInterrupted());
}

LogicalResult verifyModelFunction(func::FuncOp func) {
  auto results = func.getFunctionType().getResults();
  auto scalar = RankedTensorType::get({}, Float32Type::get(func.getContext()));
  if (results.size() != 1 || results[0] != scalar)
    return func.emitError() << "a model returns one value, the f32 loss "
                               "tensor<f32>";

  llvm::StringMap<Operation *> names;
  SmallVector<graph::LayerBoundaryOp> boundaries;
  WalkResult walk = func.walk([&](Operation *op) -> WalkResult {
    StringRef name;
    if (auto param = dyn_cast<graph::ParamOp>(op))
      name = param.getName();
    else if (auto input = dyn_cast<graph::InputOp>(op))
      name = input.getName();
    else if (auto boundary = dyn_cast<graph::LayerBoundaryOp>(op))
      boundaries.push_back(boundary);
    if (name.empty())
      return WalkResult::advance();
    auto [it, inserted] = names.try_emplace(name, op);
    if (!inserted) {
      InFlightDiagnostic diag = op->emitError()
                                << "'" << name << "' is declared twice";
      diag.attachNote(it->second->getLoc()) << "first declared here";
      return WalkResult::interrupt();
    }
    if (op->use_empty())
      return op->emitError() << "'" << name << "' is never used";
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  for (auto [i, boundary] : llvm::enumerate(boundaries)) {
    if (boundary.getIndex() != static_cast<int64_t>(i))
      return boundary.emitError()
             << "layer boundary " << boundary.getIndex() << " found where " << i
             << " was expected: boundaries are numbered 0..L in order";
    if (i > 0 && boundary.getInputs().getTypes() !=
                     boundaries[i - 1].getInputs().getTypes())
      return boundary.emitError()
             << "layer boundary " << i
             << " carries other types than the boundary before it: every "
                "layer of the repeated block must have the same interface";
  }
  if (boundaries.size() == 1)
    return boundaries[0].emitError()
           << "a model with layers has at least two boundaries: one "
              "entering the first layer and one leaving the last";
  return verifyVocabulary(func);
}

struct VerifyModelPass : strata::impl::VerifyModelBase<VerifyModelPass> {
  void runOnOperation() override {
    auto funcs = llvm::to_vector(getOperation().getOps<func::FuncOp>());
    if (funcs.size() != 1) {
      getOperation().emitError()
          << "a model module holds exactly one function, found "
          << funcs.size();
      return signalPassFailure();
    }
    if (failed(verifyModelFunction(funcs.front())))
      signalPassFailure();
  }
};

} // namespace
