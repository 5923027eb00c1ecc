//===- GraphTrainOps.td - backward and optimizer ops ------*- tablegen -*-===//
//
// What the autodiff and optimizer passes write: the gradient of each forward
// op (a VJP rule per op, in compiler/passes/Autodiff.cpp), the sinks that add
// a parameter's gradient into its accumulator, and the AdamW update.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_GRAPH_TRAIN_OPS_TD
#define STRATA_GRAPH_TRAIN_OPS_TD

//===----------------------------------------------------------------------===//
// Arithmetic the rules need
//===----------------------------------------------------------------------===//

def Graph_ConstantOp : Graph_Op<"constant", [Pure]> {
  let summary = "a tensor filled with one value (the loss gradient's seed)";
  let arguments = (ins F64Attr:$value);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$value attr-dict `:` type($result)";
}

def Graph_ScaleOp : Graph_Op<"scale", [Pure, SameOperandsAndResultType]> {
  let summary = "x times a constant";
  let arguments = (ins Graph_FloatTensor:$input, F64Attr:$factor);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `,` $factor attr-dict `:` type($input)";
}

def Graph_SumToOp : Graph_Op<"sum_to", [Pure]> {
  let summary = "sum over leading dimensions down to a suffix shape";
  let description = [{
    The adjoint of the broadcast in add, sub and mul: [b, s, h] sums to [h]
    for a bias, to [s, h] for a position table.
  }];
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_AddPositionsOp : Graph_Op<"add_positions",
    [Pure, AllTypesMatch<["input", "result"]>]> {
  let summary = "a table over the sequence's places added at a "
                "context-parallel rank's rows";
  let description = [{
    Context parallelism (--strata-context-parallel) makes it of an add of a
    learned position table ([seq, hidden] to [batch, seq, hidden]): each
    rank holds two of the sequence's 2 x `context_parallel` chunks
    (runtime/plan/ContextPositions.h), so its rows read the table at their
    places in the whole sequence. The table's first dimension is the
    sequence, `context_parallel` times the input's (the dimension the table's
    trailing dimensions leave).
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$table,
                   I64Attr:$context_parallel);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $table attr-dict `:` type($input) `,` type($table)
  }];
  let hasVerifier = 1;
}

def Graph_SumPositionsOp : Graph_Op<"sum_positions", [Pure]> {
  let summary = "a position table's gradient from a context-parallel rank's "
                "rows";
  let description = [{
    The adjoint of add_positions: the input's rows summed over the leading
    dimensions, each at its place in the whole sequence; the table's other
    rows (other ranks' places) zero, so that summing over the ranks gives
    the whole gradient.
  }];
  let arguments = (ins Graph_FloatTensor:$input, I64Attr:$context_parallel);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Graph_MatmulWeightGradOp : Graph_Op<"matmul_weight_grad", [Pure]> {
  let summary = "the weight gradient of a matmul: lhsᵀ · grad over all rows";
  let description = [{
    lhs is [..., k] and grad [..., n], contracted over every leading
    dimension: the result is [k, n], or [n, k] with `transpose_result` (the
    gradient of a `transpose_b` weight).
  }];
  let arguments = (ins Graph_FloatTensor:$lhs, Graph_FloatTensor:$grad,
                   UnitAttr:$transpose_result);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $lhs `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_EmbeddingGradOp : Graph_Op<"embedding_grad", [Pure]> {
  let summary = "the table gradient of an embedding: rows scatter-added by id";
  let arguments = (ins Graph_FloatTensor:$grad, Graph_IdTensor:$ids);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $grad `,` $ids attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

class Graph_ActivationGradOp<string mnemonic, string what>
    : Graph_Op<mnemonic, [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = what;
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$grad);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$input `,` $grad attr-dict `:` type($input)";
}

def Graph_GeluGradOp : Graph_Op<"gelu_grad",
    [Pure, AllTypesMatch<["input", "grad", "result"]>]> {
  let summary = "grad · gelu'(input), of the tanh form with `tanh`";
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$grad,
                   UnitAttr:$tanh);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $input `,` $grad (`tanh` $tanh^)? attr-dict `:` type($input)
  }];
}
def Graph_SiluGradOp : Graph_ActivationGradOp<"silu_grad",
    "grad · silu'(input)">;

def Graph_LayerNormGradOp : Graph_Op<"layer_norm_grad", [Pure]> {
  let summary = "gradients of layer_norm: input, weight and bias";
  let description = [{
    Recomputes the mean and inverse deviation from the input rather than
    keeping them: one more pass over a row, no more memory.
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                   Graph_FloatTensor:$grad, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$input_grad,
                      Graph_FloatTensor:$weight_grad,
                      Graph_FloatTensor:$bias_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_RmsNormGradOp : Graph_Op<"rms_norm_grad", [Pure]> {
  let summary = "gradients of rms_norm: input and weight";
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                   Graph_FloatTensor:$grad, F64Attr:$epsilon);
  let results = (outs Graph_FloatTensor:$input_grad,
                      Graph_FloatTensor:$weight_grad);
  let assemblyFormat = [{
    $input `,` $weight `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_AttentionGradOp : Graph_Op<"attention_grad", [Pure]> {
  let summary = "gradients of attention: query, key and value";
  let description = [{
    Recomputes the probabilities from q, k and the forward's row
    log-sum-exp (`saved`), and needs the forward output for the softmax
    gradient; with `unfused`, `saved` is the forward's probabilities, and
    with `dropout` the forward's mask is drawn again from `keys`.
    With grouped-query heads, a kv head's gradient sums over the query
    heads that read it.
  }];
  let arguments = (ins Graph_FloatTensor:$query, Graph_FloatTensor:$key,
                   Graph_FloatTensor:$value, Graph_FloatTensor:$output,
                   Graph_F32Tensor:$saved, Graph_FloatTensor:$grad,
                   Optional<Graph_IdTensor>:$keys, UnitAttr:$causal,
                   OptionalAttr<I64Attr>:$group_size, UnitAttr:$unfused,
                   OptionalAttr<F64Attr>:$dropout,
                   OptionalAttr<I64Attr>:$dropout_site);
  let results = (outs Graph_FloatTensor:$query_grad,
                      Graph_FloatTensor:$key_grad,
                      Graph_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $saved `,` $grad
    (`keys` $keys^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyGradOp : Graph_Op<"cross_entropy_grad", [Pure]> {
  let summary = "gradient of the mean cross-entropy w.r.t. the logits";
  let description = [{
    (softmax(logits) - onehot(labels)) · grad / tokens, where grad is the
    loss's own gradient (1/microbatches when gradients accumulate).
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$labels,
                   Graph_Scalar:$grad, OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyWithGradOp
    : Graph_Op<"cross_entropy_with_grad", [Pure]> {
  let summary = "the mean cross-entropy and its gradient, in one op";
  let description = [{
    cross_entropy and cross_entropy_grad of the same logits and labels in
    one op, at the forward's place: `grad` (the loss's own gradient) is a
    constant known there, and the gradient is computed from the row
    statistics the loss needs anyway (strata-fuse-loss).
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$labels,
                   Graph_Scalar:$grad, OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Graph_Scalar:$loss, Graph_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_LinearCrossEntropyWithGradOp
    : Graph_Op<"linear_cross_entropy_with_grad"> {
  let summary = "the output layer, the loss and both their gradients, a "
                "block of the vocabulary at a time";
  let description = [{
    logits = input · weight (weightᵀ with `transpose_b`, a tied [vocab,
    hidden] table), then cross_entropy_with_grad of them, then the input's
    gradient dlogits · weightᵀ (weight with `transpose_b`) as the result
    and the weight's added into the accumulator of parameter `weight_name`
    (accumulate_grad): `block_columns` of the vocabulary at a time, so that
    no more than a block's logits and their gradient are ever held, in the
    forward (strata-fuse-output-layer). A first pass over the blocks takes
    each row's statistics (as the vocabulary-parallel loss does over
    ranks), a second their gradients, each block's logits computed in
    both. Not pure: it adds into a gradient.
  }];
  let arguments = (ins Graph_FloatTensor:$input, Graph_FloatTensor:$weight,
                   Graph_IdTensor:$labels, Graph_Scalar:$grad,
                   StrAttr:$weight_name, UnitAttr:$transpose_b,
                   I64Attr:$block_columns, OptionalAttr<I64Attr>:$vocab_size);
  let results = (outs Graph_Scalar:$loss, Graph_FloatTensor:$input_grad);
  let assemblyFormat = [{
    $weight_name `,` $input `,` $weight `,` $labels `,` $grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// The loss from row statistics: the vocabulary-parallel cross-entropy
//===----------------------------------------------------------------------===//
//
// When the logits' vocabulary is split across ranks, the loss is computed
// from three per-token statistics, each all-reduced between the steps: the
// row maximum, the target logit and the sum of exponentials (Megatron's
// three reductions). `vocab_size` is the real vocabulary: columns at or
// beyond it (padding) are left out. With the discardable `dist.vocab_parallel`
// attribute, column c of a rank's logits is vocabulary entry
// rank · columns + c.

class Graph_LogitsStatOp<string mnemonic, string what, dag extra>
    : Graph_Op<mnemonic, [Pure]> {
  let summary = what;
  let arguments = !con((ins Graph_FloatTensor:$logits), extra,
                       (ins I64Attr:$vocab_size));
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_LogitsMaxOp : Graph_LogitsStatOp<"logits_max",
    "each row's maximum logit over the valid columns (-inf if none)", (ins)>;
def Graph_LogitsTargetOp : Graph_LogitsStatOp<"logits_target",
    "each row's logit of its label, 0 where the label is another rank's",
    (ins Graph_IdTensor:$labels)>;
def Graph_LogitsSumExpOp : Graph_LogitsStatOp<"logits_sum_exp",
    "each row's sum of exp(logit - max) over the valid columns",
    (ins Graph_FloatTensor:$max)>;

def Graph_CrossEntropyFromStatsOp : Graph_Op<"cross_entropy_from_stats",
    [Pure]> {
  let summary = "mean over rows of log(sum_exp) + max - target";
  let arguments = (ins Graph_FloatTensor:$max, Graph_FloatTensor:$sum_exp,
                   Graph_FloatTensor:$target);
  let results = (outs Graph_Scalar:$result);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyGradFromStatsOp
    : Graph_Op<"cross_entropy_grad_from_stats", [Pure]> {
  let summary = "(softmax - onehot) · grad / rows, softmax from the stats";
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$labels,
                   Graph_FloatTensor:$max, Graph_FloatTensor:$sum_exp,
                   Graph_Scalar:$grad, I64Attr:$vocab_size);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Graph_CrossEntropyWithGradFromStatsOp
    : Graph_Op<"cross_entropy_with_grad_from_stats", [Pure]> {
  let summary = "the loss and its gradient from the statistics, in one op";
  let description = [{
    cross_entropy_from_stats and cross_entropy_grad_from_stats in one op at
    the forward's place, `grad` a constant (strata-fuse-loss).
  }];
  let arguments = (ins Graph_FloatTensor:$logits, Graph_IdTensor:$labels,
                   Graph_FloatTensor:$max, Graph_FloatTensor:$sum_exp,
                   Graph_FloatTensor:$target, Graph_Scalar:$grad,
                   I64Attr:$vocab_size);
  let results = (outs Graph_Scalar:$loss, Graph_FloatTensor:$logits_grad);
  let assemblyFormat = [{
    operands attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Parameter state: gradient accumulators and the optimizer
//===----------------------------------------------------------------------===//

def Graph_AccumulateGradOp : Graph_Op<"accumulate_grad"> {
  let summary = "add a gradient into a parameter's fp32 accumulator";
  let description = [{
    Each use of a parameter contributes once (a tied embedding twice), and
    microbatches add up; the optimizer step reads the sum and zeroes it.
  }];
  let arguments = (ins StrAttr:$name, Graph_FloatTensor:$grad);
  let assemblyFormat = "$name `,` $grad attr-dict `:` type($grad)";
}

def Graph_GradOp : Graph_Op<"grad"> {
  let summary = "the accumulated fp32 gradient of a parameter";
  let arguments = (ins StrAttr:$name);
  let results = (outs Graph_FloatTensor:$result);
  let assemblyFormat = "$name attr-dict `:` type($result)";
}

def Graph_SumSquaresOp : Graph_Op<"sum_squares", [Pure]> {
  let summary = "the sum of squares of all elements, in fp32";
  let arguments = (ins Graph_FloatTensor:$input);
  let results = (outs Graph_Scalar:$result);
  let assemblyFormat = "$input attr-dict `:` type($input)";
}

def Graph_ClipCoefficientOp : Graph_Op<"clip_coefficient"> {
  let summary = "the gradient norm and the factor that clips it";
  let description = [{
    norm = sqrt(sum_squares); coefficient = min(1, clip / (norm + 1e-6)),
    or 1 when the run's --clip-grad is 0 — Megatron's and torch's rule. The
    clip value is a run-time hyperparameter.
  }];
  let arguments = (ins Graph_Scalar:$sum_squares);
  let results = (outs Graph_Scalar:$norm, Graph_Scalar:$coefficient);
  let assemblyFormat = "$sum_squares attr-dict";
}

def Graph_AdamWOp : Graph_Op<"adamw"> {
  let summary = "one AdamW step of a parameter from its accumulated gradient";
  let description = [{
    g = grad · coefficient; m, v updated with the run's betas; the fp32
    master weight decays by lr·weight_decay (when `weight_decay` is set:
    matrices, not biases or norm weights, as Megatron), then moves by
    lr · m̂ / (sqrt(v̂) + eps) with bias correction. The parameter the model
    reads is the master (fp32) or its bf16 rounding. Learning rate, betas,
    eps, weight decay and the step number come from the run.
  }];
  let arguments = (ins StrAttr:$name, Graph_FloatTensor:$grad,
                   Graph_Scalar:$coefficient, UnitAttr:$weight_decay);
  let assemblyFormat = [{
    $name `,` $grad `,` $coefficient attr-dict `:` type($grad)
  }];
}

#endif // STRATA_GRAPH_TRAIN_OPS_TD
