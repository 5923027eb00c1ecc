//===- Loss.cpp - the cross-entropy, whole or vocabulary-parallel ---------===//
//
// Gradient: softmax minus the one-hot target, scaled by the loss's
// gradient (graph.cross_entropy_grad). The fused and vocabulary-parallel
// forms are made after autodiff (FuseLoss, TensorParallel) and have none.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {
namespace {

LogicalResult crossEntropyGradient(CrossEntropyOp loss, GradientBuilder &g,
                                   ArrayRef<Value> dys) {
  g.contribute(loss.getLogits(),
               CrossEntropyGradOp::create(g.builder(), loss.getLoc(),
                                          loss.getLogits().getType(),
                                          loss.getLogits(), loss.getLabels(),
                                          dys.front(), loss.getVocabSizeAttr()),
               loss.getLoc());
  return success();
}

} // namespace

void OpRules<CrossEntropyOp>::attach(MLIRContext &context) {
  attachGradient<CrossEntropyOp, crossEntropyGradient>(context);
}
// Made after autodiff, or backward only: no gradients of their own.
void OpRules<CrossEntropyGradOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyWithGradOp>::attach(MLIRContext &) {}
void OpRules<LogitsMaxOp>::attach(MLIRContext &) {}
void OpRules<LogitsTargetOp>::attach(MLIRContext &) {}
void OpRules<LogitsSumExpOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyFromStatsOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyGradFromStatsOp>::attach(MLIRContext &) {}
void OpRules<CrossEntropyWithGradFromStatsOp>::attach(MLIRContext &) {}

} // namespace strata
