//===- OpRules.h - every graph op's rules, by family ------------*- C++ -*-===//
//
// Each graph op gets its rules from the file of its family, here in
// compiler/rules/: its gradient (graph::Differentiable), its sharding
// across tensor-parallel ranks (graph::Shardable) and its instructions
// (graph::ExecLowerable). The table below names every op's family once;
// `attach` attaches the op's rules to a context. Registration walks the
// dialect's generated op list, so a graph op added to GraphOps.td without a
// line here fails to compile (OpRules' static_assert), and one with a line but
// no `attach` in its family file fails to link. Which of the three rules an
// op has is its family file's to say (a backward-only op has no gradient;
// the optimizer's ops no instructions, the flat optimizer lowering them as
// a whole); a pass that meets an op without the rule it needs says so.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_RULES_OPRULES_H
#define STRATA_COMPILER_RULES_OPRULES_H

#include "dialects/graph/GraphOps.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"

namespace strata {

template <typename Op> struct OpRules {
  static_assert(sizeof(Op) == 0,
                "this graph op has no rules: name its family in "
                "compiler/rules/OpRules.h and define them in that family's "
                "file");
};

#define STRATA_OP_RULES(Op)                                                    \
  template <> struct OpRules<graph::Op> {                                      \
    static void attach(mlir::MLIRContext &context);                            \
  };

// Sources.cpp: where values come from, and the layer boundaries.
STRATA_OP_RULES(ParamOp)
STRATA_OP_RULES(InputOp)
STRATA_OP_RULES(ConstantOp)
STRATA_OP_RULES(LayerBoundaryOp)
// Embedding.cpp
STRATA_OP_RULES(EmbeddingOp)
STRATA_OP_RULES(EmbeddingGradOp)
// Matmul.cpp
STRATA_OP_RULES(MatmulOp)
STRATA_OP_RULES(MatmulWeightGradOp)
// Pointwise.cpp
STRATA_OP_RULES(AddOp)
STRATA_OP_RULES(SubOp)
STRATA_OP_RULES(MulOp)
STRATA_OP_RULES(ScaleOp)
STRATA_OP_RULES(GeluOp)
STRATA_OP_RULES(SiluOp)
STRATA_OP_RULES(DropoutOp)
STRATA_OP_RULES(GeluGradOp)
STRATA_OP_RULES(SiluGradOp)
// Norms.cpp
STRATA_OP_RULES(LayerNormOp)
STRATA_OP_RULES(RmsNormOp)
STRATA_OP_RULES(LayerNormGradOp)
STRATA_OP_RULES(RmsNormGradOp)
// Shape.cpp
STRATA_OP_RULES(ReshapeOp)
STRATA_OP_RULES(TransposeOp)
STRATA_OP_RULES(SumToOp)
// Positions.cpp: a position table at a context-parallel rank's rows.
STRATA_OP_RULES(AddPositionsOp)
STRATA_OP_RULES(SumPositionsOp)
// Attention.cpp: attention and the rotary positions of its queries and keys.
STRATA_OP_RULES(RopeOp)
STRATA_OP_RULES(AttentionOp)
STRATA_OP_RULES(AttentionGradOp)
// Loss.cpp: the cross-entropy, whole or from vocabulary-parallel statistics.
STRATA_OP_RULES(CrossEntropyOp)
STRATA_OP_RULES(CrossEntropyGradOp)
STRATA_OP_RULES(CrossEntropyWithGradOp)
STRATA_OP_RULES(LinearCrossEntropyWithGradOp)
STRATA_OP_RULES(LogitsMaxOp)
STRATA_OP_RULES(LogitsTargetOp)
STRATA_OP_RULES(LogitsSumExpOp)
STRATA_OP_RULES(CrossEntropyFromStatsOp)
STRATA_OP_RULES(CrossEntropyGradFromStatsOp)
STRATA_OP_RULES(CrossEntropyWithGradFromStatsOp)
// Optimizer.cpp: gradient accumulators, the norm, the update.
STRATA_OP_RULES(AccumulateGradOp)
STRATA_OP_RULES(GradOp)
STRATA_OP_RULES(SumSquaresOp)
STRATA_OP_RULES(ClipCoefficientOp)
STRATA_OP_RULES(AdamWOp)

#undef STRATA_OP_RULES

/// Attaches the rules of each of `Ops` (the dialect's op list).
template <typename... Ops> void attachOpRules(mlir::MLIRContext &context) {
  (OpRules<Ops>::attach(context), ...);
}

/// Attaches every graph op's rules whenever a context loads the graph
/// dialect.
void registerOpRules(mlir::DialectRegistry &registry);

} // namespace strata

#endif
