//===- GraphInterfaces.td - per-op rules of the graph ops -*- tablegen -*-===//
//
// What the compiler's passes ask of each graph op, as interfaces rather than
// chains of casts: its gradient (autodiff), its sharding across
// tensor-parallel ranks, its split along the sequence across
// context-parallel ranks, and its instructions (the exec lowering). The
// compiler implements them per op family (compiler/rules/) and attaches
// them to every op of the dialect; a graph op without its rules fails to
// build (compiler/rules/OpRules.h).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_GRAPH_INTERFACES_TD
#define STRATA_GRAPH_INTERFACES_TD

include "mlir/IR/OpBase.td"

def Graph_Differentiable : OpInterface<"Differentiable"> {
  let cppNamespace = "::strata::graph";
  let description = [{
    A forward op's vector-Jacobian product. Given the gradients flowing
    into its results (null where none flows), it builds the gradient of
    each operand that has one and hands it to the builder, which sums
    contributions and sends a parameter's to its accumulator. Sources
    (parameters, inputs, constants) contribute nothing. Backward and
    optimizer ops have none: the step never differentiates them.
  }];
  let methods = [
    InterfaceMethod<[{
        Builds the operands' gradients from `resultGrads` (one per result,
        null where none) through `gradients`.
      }], "::mlir::LogicalResult", "buildGradient",
      (ins "::strata::GradientBuilder &":$gradients,
           "::mlir::ArrayRef<::mlir::Value>":$resultGrads)>,
  ];
}

def Graph_Shardable : OpInterface<"Shardable"> {
  let cppNamespace = "::strata::graph";
  let description = [{
    An op's tensor-parallel rule: from its operands' shardings (replicated,
    split along a dimension, or partial sums), it decides the shardings of
    parameters it meets first, converts an operand that does not fit (a
    collective or local slice inserted before it) and sets its results'.
    Planning asks it first where a column split of a matmul's output would
    go. Ops that tensor parallelism itself creates (the vocabulary-parallel
    loss's statistics) have none.
  }];
  let methods = [
    InterfaceMethod<[{
        Shards the op's results, converting operands through `state`.
      }], "::mlir::LogicalResult", "propagateSharding",
      (ins "::strata::ShardingState &":$state)>,
    InterfaceMethod<[{
        Planning, before propagation: a split of `use`'s value along `dim`
        (-1: one an op before could not carry, followed only to learn
        whether it was needed) reaches this op, which carries it on to a
        result, blocks it, or says it needs it, through `planner`. Most
        ops do none of these: the split stops there, unneeded.
      }], "void", "planSplit",
      (ins "::mlir::OpOperand &":$use, "int64_t":$dim,
           "::strata::SplitPlanner &":$planner)>,
  ];
}

def Graph_ContextSplittable : OpInterface<"ContextSplittable"> {
  let cppNamespace = "::strata::graph";
  let description = [{
    An op's context-parallel rule: each context-parallel rank holds two of
    the 2c chunks of every sample's sequence, so a value that runs along
    the sequence holds that rank's share of it. From which dimension of
    each operand is the sequence (none for parameters and sums over
    tokens), the rule sets its results', marks an op that must know where
    its tokens sit in the sequence (rotary angles, a learned position
    table, causal attention, which also needs the other ranks' keys), or
    refuses what it cannot split.
  }];
  let methods = [
    InterfaceMethod<[{
        Sets the sequence dimension of the op's results through `state`.
      }], "::mlir::LogicalResult", "splitContext",
      (ins "::strata::ContextState &":$state)>,
  ];
}

def Graph_ExecLowerable : OpInterface<"ExecLowerable"> {
  let cppNamespace = "::strata::graph";
  let description = [{
    An op's instructions in a stage's program: gemms and launches of the
    kernel catalog over buffers, the arguments that differ between the
    stage's ranks written per rank. Fusion decided here (a bias add or GELU
    into a gemm's epilogue) marks the ops it absorbs. The optimizer's ops
    are lowered as a whole instead (LowerOptimizer.cpp) and have none.
  }];
  let methods = [
    InterfaceMethod<[{
        Appends the op's instructions through `lowering`.
      }], "::mlir::LogicalResult", "lowerToExec",
      (ins "::strata::lower_to_exec::Lowering &":$lowering)>,
  ];
}

#endif // STRATA_GRAPH_INTERFACES_TD
