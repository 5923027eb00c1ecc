//===- Optimizer.cpp - accumulators, the gradient norm, AdamW -------------===//
//
// The training step's own ops, after autodiff: no gradients.
//
//===----------------------------------------------------------------------===//
#include "compiler/rules/Rule.h"

using namespace mlir;
using namespace strata::graph;

namespace strata {

void OpRules<AccumulateGradOp>::attach(MLIRContext &) {}
void OpRules<GradOp>::attach(MLIRContext &) {}
void OpRules<SumSquaresOp>::attach(MLIRContext &) {}
void OpRules<ClipCoefficientOp>::attach(MLIRContext &) {}
void OpRules<AdamWOp>::attach(MLIRContext &) {}

} // namespace strata
