//===- Rule.h - what a family file attaches its rules with ------*- C++ -*-===//
//
// A family file writes each rule as a plain function of the op and attaches
// it with one line; the interface's external-model boilerplate is here.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_RULE_H
#define STRATA_COMPILER_RULES_RULE_H

#include "compiler/passes/LowerToExec.h"
#include "compiler/rules/GradientBuilder.h"
#include "compiler/rules/OpRules.h"
#include "compiler/rules/Sharding.h"
#include "dialects/graph/GraphInterfaces.h"

namespace strata {

// The exec lowering's state and kernel builders, as every family file
// names them.
using lower_to_exec::Lowering;
namespace kernel = lower_to_exec::kernel;

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

/// A sharding rule: the op and tensor parallelism's state.
template <typename Op>
using ShardingRule = mlir::LogicalResult (*)(Op, ShardingState &);
/// Where a split reaching operand `use` goes (planning).
template <typename Op>
using SplitRule = void (*)(Op, mlir::OpOperand &, int64_t, SplitPlanner &);

template <typename Op, ShardingRule<Op> Rule, SplitRule<Op> Split>
struct ShardingModel
    : graph::Shardable::ExternalModel<ShardingModel<Op, Rule, Split>, Op> {
  mlir::LogicalResult propagateSharding(mlir::Operation *op,
                                        ShardingState &state) const {
    return Rule(mlir::cast<Op>(op), state);
  }
  void planSplit(mlir::Operation *op, mlir::OpOperand &use, int64_t dim,
                 SplitPlanner &planner) const {
    if constexpr (Split != nullptr)
      Split(mlir::cast<Op>(op), use, dim, planner);
  }
};

/// Attaches `Rule` as `Op`'s sharding, and `Split` as where a split goes
/// through it when planning (none: it stops there).
template <typename Op, ShardingRule<Op> Rule, SplitRule<Op> Split = nullptr>
void attachSharding(mlir::MLIRContext &context) {
  Op::template attachInterface<ShardingModel<Op, Rule, Split>>(context);
}

/// A lowering rule: the op and the exec lowering of its stage.
template <typename Op>
using LoweringRule = mlir::LogicalResult (*)(Op, lower_to_exec::Lowering &);

template <typename Op, LoweringRule<Op> Rule>
struct LoweringModel
    : graph::ExecLowerable::ExternalModel<LoweringModel<Op, Rule>, Op> {
  mlir::LogicalResult lowerToExec(mlir::Operation *op,
                                  lower_to_exec::Lowering &lowering) const {
    return Rule(mlir::cast<Op>(op), lowering);
  }
};

/// Attaches `Rule` as `Op`'s lowering to exec.
template <typename Op, LoweringRule<Op> Rule>
void attachLowering(mlir::MLIRContext &context) {
  Op::template attachInterface<LoweringModel<Op, Rule>>(context);
}

} // namespace strata

#endif
