//===- GraphDialect.td - the graph dialect ----------------*- tablegen -*-===//
//
// The first level of strata's IR: what a model computes on one device, with
// global shapes, before any parallel pass.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_GRAPH_DIALECT_TD
#define STRATA_GRAPH_DIALECT_TD

include "mlir/IR/OpBase.td"

def Graph_Dialect : Dialect {
  let name = "graph";
  let cppNamespace = "::strata::graph";
  let summary = "Single-device tensor ops of a transformer training step";
  let description = [{
    Primitive tensor ops over builtin ranked tensors (f32, bf16; i32 token
    ids): parameters, inputs, embedding, matmul, elementwise arithmetic and
    activations, normalizations, reshape and transpose, rotary positions,
    attention and the cross-entropy loss. `graph.layer_boundary` marks the
    cuts between the layers of the model's repeated block, where pipeline
    stages may later be cut. Shapes are global: what one device would hold if
    it held the whole model.
  }];
  let dependentDialects = ["::mlir::func::FuncDialect"];
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // STRATA_GRAPH_DIALECT_TD
