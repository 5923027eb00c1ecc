//===- GraphOps.td - ops of the graph dialect -------------*- tablegen -*-===//
//
// Forward ops: what a model file says. Each op's shape rule lives in
// GraphShapes.cpp, shared by the verifiers and the frontend so that a model
// file and hand-written IR get the same message for the same mistake.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_GRAPH_OPS_TD
#define STRATA_GRAPH_OPS_TD

include "dialects/graph/GraphDialect.td"
include "mlir/IR/EnumAttr.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Graph_FloatTensor : RankedTensorOf<[F32, BF16]>;
def Graph_IdTensor : RankedTensorOf<[I32]>;
def Graph_F32Tensor : RankedTensorOf<[F32]>;
def Graph_Scalar : 0DTensorOf<[F32]> {
  let builderCall =
      "::mlir::RankedTensorType::get({}, $_builder.getF32Type())";
}

def Graph_InitKind : I32EnumAttr<"InitKind", "how a parameter is initialized", [
    I32EnumAttrCase<"Normal", 0, "normal">,
    I32EnumAttrCase<"Zeros", 1, "zeros">,
    I32EnumAttrCase<"Ones", 2, "ones">]> {
  let cppNamespace = "::strata::graph";
}

//===----------------------------------------------------------------------===//
// Sources
//===----------------------------------------------------------------------===//

def Graph_ParamOp : Graph_Op<"param", [Pure]> {
  let summary = "a trainable parameter, its global shape and initializer";
  let description = [{
    `normal(std)` draws from N(0, std^2); `zeros` and `ones` fill. The
    initial value is defined on the global tensor from the run's seed, so
    every parallel layout starts from the same weights.

    ```mlir
    %wte = graph.param "wte" normal(2.000000e-02) : tensor<512x64xf32>
    %g = graph.param "ln_f.weight" ones : tensor<64xf32>
    ```
  }];
  let arguments = (ins StrAttr:$name, Graph_InitKind:$init,
                   OptionalAttr<F64Attr>:$std);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $name $init (`(` $std^ `)`)? attr-dict `:` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_InputOp : Graph_Op<"input", [Pure]> {
  let summary = "a batch input: token ids or labels";
  let description = [{
    ```mlir
    %tokens = graph.input "tokens" : tensor<2x16xi32>
    ```
  }];
  let arguments = (ins StrAttr:$name);
  let results = (outs Graph_IdTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Compute
//===----------------------------------------------------------------------===//

def Graph_EmbeddingOp : Graph_Op<"embedding", [Pure]> {
  let summary = "rows of a table gathered by id";
  let description = [{
    `table` is [vocab, hidden]; the result has the shape of `ids` followed
    by hidden.
  }];
  let arguments = (ins Graph_FloatTensor:$table, Graph_IdTensor:$ids);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $table `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_MatmulOp : Graph_Op<"matmul", [Pure]> {
  let summary = "activation times weight: [..., m, k] x [k, n] -> [..., m, n]";
  let description = [{
    The right operand is a rank-2 weight; with `transpose_b` it is [n, k]
    (a tied output layer reuses the [vocab, hidden] embedding table so).
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs,
                   UnitAttr:$transpose_b);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Graph_BroadcastBinaryOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [Pure, AllTypesMatch<["lhs", "result"]>]> {
  let summary = what # ", the right operand broadcast over leading dimensions";
  let description = [{
    The right operand's shape equals the left's or is a suffix of it (a bias
    [hidden] or a learned position table [seq, hidden] added to [batch,
    seq, hidden]).
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$rhs);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $rhs attr-dict `:` type($lhs) `,` type($rhs)
  }];
  let hasVerifier = 1;
}

def Graph_AddOp : Graph_BroadcastBinaryOp<"add", "elementwise sum">;
def Graph_SubOp : Graph_BroadcastBinaryOp<"sub", "elementwise difference">;
def Graph_MulOp : Graph_BroadcastBinaryOp<"mul", "elementwise product">;

class Graph_UnaryOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [Pure, SameOperandsAndResultType]> {
  let summary = what;
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_GeluOp : Graph_Op<"gelu", [Pure, SameOperandsAndResultType]> {
  let summary = "GELU, x * Phi(x): exact (erf), or with `tanh` its tanh form";
  let description = [{
    Without `tanh`, torch.nn.functional.gelu (Megatron's default); with it,
    gelu(approximate='tanh'): 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))),
    GPT-2's own (Hugging Face's gelu_new, Megatron's --openai-gelu).
  }];
  let arguments = (ins Graph_FloatTensor:$input, UnitAttr:$tanh);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input (`tanh` $tanh^)? attr-dict `:` type($input)";
}
def Graph_SiluOp : Graph_UnaryOp<"silu", "x * sigmoid(x)">;

def Graph_DropoutOp : Graph_Op<"dropout", [Pure,
    AllTypesMatch<["input", "result"]>]> {
  let summary = "dropout, drawn from each sample's key";
  let description = [{
    Each element kept with probability 1 - `rate` and scaled by
    1 / (1 - rate), or zeroed. Whether is a function of the sample's key
    (`keys`, [batch] i32: the runtime's "dropout_keys" input, which the
    frontend declares for a model that drops out), the dropout's `site`
    (its place in the model) and the element's index in the unsplit
    tensor (runtime/plan/Dropout.h): every layout draws one device's mask.
    Linear in its input for a given mask: its gradient is the same op on
    the output's gradient. A negative key leaves the sample as it is.

    ```mlir
    %y = graph.dropout %x, %keys {rate = 1.000000e-01 : f64, site = 3 : i64}
        : tensor<2x16x64xf32>, tensor<2xi32>
    ```
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_IdTensor:$keys,
                   F64Attr:$rate, I64Attr:$site);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $keys attr-dict `:` type($input) `,` type($keys)
  }];
  let builders = [
    OpBuilder<(ins "::mlir::Value":$input, "::mlir::Value":$keys,
                   "double":$rate, "int64_t":$site), [{
      build($_builder, $_state, input.getType(), input, keys,
            $_builder.getF64FloatAttr(rate), $_builder.getI64IntegerAttr(site));
    }]>
  ];
  let hasVerifier = 1;
}

def Graph_LayerNormOp : Graph_Op<"layer_norm", [Pure]> {
  let summary = "LayerNorm over the last dimension, with weight and bias";
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                   Graph_FloatTensor:$bias, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight `,` $bias attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RmsNormOp : Graph_Op<"rms_norm", [Pure]> {
  let summary = "RMSNorm over the last dimension, with weight";
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                   F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $weight attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_ReshapeOp : Graph_Op<"reshape", [Pure]> {
  let summary = "the same elements in row-major order, another shape";
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_TransposeOp : Graph_Op<"transpose", [Pure]> {
  let summary = "dimensions permuted: result dim i is input dim permutation[i]";
  let arguments = (ins Graph_FloatTensor:$input,
                   DenseI64ArrayAttr:$permutation);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input $permutation attr-dict `:` type($input) `->` type($result)
  }];
  let hasVerifier = 1;
}

def Graph_RopeOp : Graph_Op<"rope", [Pure, SameOperandsAndResultType]> {
  let summary = "rotary position embedding of [batch, seq, heads, head_dim]";
  let description = [{
    Rotates the pairs (x[i], x[i + d/2]) of each head by the angle
    pos * base^(-2i/d) (the non-interleaved "rotate half" form that
    Megatron-LM and Hugging Face LLaMA use). `inverse` rotates by the
    negative angle: the rotation's transpose, and so its gradient.
  }];
  let arguments = (ins Graph_FloatTensor:$input,
                   DefaultValuedAttr<F64Attr, "10000.0">:$base,
                   UnitAttr:$inverse);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
  let hasVerifier = 1;
}

def Graph_AttentionOp : Graph_Op<"attention", [Pure]> {
  let summary = "scaled dot-product attention with grouped-query heads";
  let description = [{
    q is [batch, seq, heads, head_dim]; k and v are [batch, seq, kv_heads,
    head_dim] with heads a multiple of kv_heads: query head h reads kv head
    h / (heads / kv_heads). Scores are scaled by 1/sqrt(head_dim); `causal`
    masks the future. The result has q's shape; `saved` is what the
    backward reads besides q, k, v and the result: [batch, heads, seq] (f32),
    each query row's log-sum-exp of its scaled scores, to recompute the
    probabilities in one pass (the flash-attention contract), or with
    `unfused` the probabilities themselves, [batch, heads, seq, keys]: the
    attention computed apart, batched gemms and a softmax, as Megatron ran
    it in 2021 (--attention-backend unfused; as many kv heads as query
    heads).

    `group_size` (query heads per kv head) is set when q holds only some of
    the model's query heads and k, v all of its kv heads (tensor parallel
    with kv heads replicated): local query head i then reads kv head
    (first + i) / group_size, `first` being the rank's first query head.

    `dropout` drops out the probabilities as graph.dropout does (site
    `dropout_site`, each sample's key from `keys`); such an attention is
    computed unfused.
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                   Graph_FloatTensor:$value, Optional<Graph_IdTensor>:$keys,
                   UnitAttr:$causal, OptionalAttr<I64Attr>:$group_size,
                   UnitAttr:$unfused, OptionalAttr<F64Attr>:$dropout,
                   OptionalAttr<I64Attr>:$dropout_site);
  let results = (outs Graph_FloatTensor:$result, Graph_F32Tensor:$saved);
  let assemblyFormat = [{
    $query `,` $key `,` $value (`keys` $keys^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyOp : Graph_Op<"cross_entropy", [Pure]> {
  let summary = "softmax cross-entropy, the mean over all tokens";
  let description = [{
    `vocab_size`, when set, is the real vocabulary: logits columns at or
    beyond it are padding (added so that a vocabulary splits evenly across
    tensor-parallel ranks) and take no part in the softmax.
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$labels,
                   OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Graph_Scalar:$result);
  let assemblyFormat = [{
    $logits `,` $labels attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Structure
//===----------------------------------------------------------------------===//

def Graph_LayerBoundaryOp : Graph_Op<"layer_boundary", [Pure,
    DeclareOpInterfaceMethods<InferTypeOpInterface>]> {
  let summary = "the values that cross into layer `index` of the repeated block";
  let description = [{
    A model with L layers has boundaries 0..L: boundary i carries the
    activations entering layer i, boundary L those leaving the last layer.
    It computes nothing (results are the operands); pipeline stages are cut
    only at boundaries, so a stage always holds whole layers.
  }];
  let arguments = (ins Variadic<Graph_FloatTensor>:$inputs,
                   I64Attr:$index);
  let results = (outs Variadic<Graph_FloatTensor>:$results);
  let assemblyFormat = [{
    $index $inputs attr-dict `:` type($inputs)
  }];
  let hasVerifier = 1;
}

include "dialects/graph/GraphTrainOps.td"

#endif // STRATA_GRAPH_OPS_TD
