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
  // What autodiff records for the passes after it, declared once (a
  // generated helper, GraphDialect::<Name>AttrHelper, wrapped in
  // GraphDialect.h).
  let discardableAttrs = (ins
    // On each backward op: the layer of the forward op it differentiates
    // (-1 before the first layer boundary, L after the last). The
    // pipeline split reads it to put a backward op in its layer's chunk.
    "::mlir::IntegerAttr":$backward_layer
  );
}

class Graph_Op<string mnemonic, list<Trait> traits = []>
    : Op<Graph_Dialect, mnemonic, traits>;

#endif // STRATA_GRAPH_DIALECT_TD
