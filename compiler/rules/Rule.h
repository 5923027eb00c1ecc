//===- Rule.h - what a family file attaches its rules with ------*- C++ -*-===//
//
// A family file writes each rule as a plain function of the op and attaches
// it with one line; the interface's external-model boilerplate is here.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_RULE_H
#define STRATA_COMPILER_RULES_RULE_H

#include "compiler/passes/LowerToExec.h"
#include "compiler/rules/Context.h"
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

/// A context-parallel rule: the op and the sequence dimensions so far.
template <typename Op>
using ContextRule = mlir::LogicalResult (*)(Op, ContextState &);

template <typename Op, ContextRule<Op> Rule>
struct ContextModel
    : graph::ContextSplittable::ExternalModel<ContextModel<Op, Rule>, Op> {
  mlir::LogicalResult splitContext(mlir::Operation *op,
                                   ContextState &state) const {
    return Rule(mlir::cast<Op>(op), state);
  }
};

/// Attaches `Rule` as `Op`'s split along the sequence.
template <typename Op, ContextRule<Op> Rule>
void attachContext(mlir::MLIRContext &context) {
  Op::template attachInterface<ContextModel<Op, Rule>>(context);
}

/// Context rules every family shares: results shaped like operand 0 carry
/// its sequence (ops that work token by token); results with none
/// (sources, the optimizer's values); no split at all, with why.
template <typename Op>
mlir::LogicalResult contextLikeInput(Op op, ContextState &state) {
  return state.likeOperand(op, 0);
}
template <typename Op>
mlir::LogicalResult contextNone(Op op, ContextState &state) {
  for (mlir::Value operand : op->getOperands())
    if (state.dim(operand) >= 0)
      return state.error(op) << "takes a value that runs along the sequence "
                                "where it expects none";
  return mlir::success();
}

/// Results that sum over tokens (weight gradients): none runs along the
/// sequence, each rank holding its tokens' part of the sum.
template <typename Op>
mlir::LogicalResult contextSumsOverTokens(Op, ContextState &) {
  return mlir::success();
}
/// Ops the passes after context parallelism make (the fused loss, its
/// statistics): the step it splits has none.
template <typename Op>
mlir::LogicalResult contextMadeAfter(Op op, ContextState &state) {
  return state.error(op) << "is made after context parallelism splits the "
                            "step: give the step as autodiff leaves it";
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
