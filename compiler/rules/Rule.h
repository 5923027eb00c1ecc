//===- Rule.h - what a family file attaches its rules with ------*- C++ -*-===//
//
// A family file writes each rule as a plain function of the op and attaches
// it with one line; the interface's external-model boilerplate is here.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_RULE_H
#define STRATA_COMPILER_RULES_RULE_H

#include "compiler/rules/GradientBuilder.h"
#include "compiler/rules/OpRules.h"
#include "dialects/graph/GraphInterfaces.h"

namespace strata {

/// A gradient rule: the op, the builder, the gradient of each result.
template <typename Op>
using GradientRule = mlir::LogicalResult (*)(Op, GradientBuilder &,
                                             mlir::ArrayRef<mlir::Value>);

template <typename Op, GradientRule<Op> Rule>
struct GradientModel
    : graph::Differentiable::ExternalModel<GradientModel<Op, Rule>, Op> {
  mlir::LogicalResult
  buildGradient(mlir::Operation *op, GradientBuilder &gradients,
                mlir::ArrayRef<mlir::Value> resultGrads) const {
    return Rule(mlir::cast<Op>(op), gradients, resultGrads);
  }
};

/// Attaches `Rule` as `Op`'s gradient.
template <typename Op, GradientRule<Op> Rule>
void attachGradient(mlir::MLIRContext &context) {
  Op::template attachInterface<GradientModel<Op, Rule>>(context);
}

} // namespace strata

#endif
