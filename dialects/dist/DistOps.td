//===- DistOps.td - the dist dialect -----------------------*- tablegen -*-===//
//
// The level after parallelization: where collectives, pipeline chunks and
// the schedule live. A schedule says, per pipeline stage, the order of the
// step's functions and the microbatch each runs for.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_DIST_OPS_TD
#define STRATA_DIST_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/Interfaces/InferTypeOpInterface.td"
include "mlir/Interfaces/SideEffectInterfaces.td"

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::strata::dist";
  let summary = "Parallel layout: collectives, chunks and the schedule";
  // What the parallel passes record on graph ops and functions for the
  // passes after them, declared once (each gets a generated helper,
  // DistDialect::<Name>AttrHelper, wrapped in DistDialect.h).
  let discardableAttrs = (ins
    // On an embedding, its gradient or a loss op: its table or logits are
    // split along the vocabulary; the rank's rows start at its share.
    "::mlir::UnitAttr":$vocab_parallel,
    // On attention: the query heads are split, the kv heads replicated.
    "::mlir::UnitAttr":$query_heads_split,
    // On an op context parallelism split along the sequence that must know
    // where its tokens sit in it (rotary angles, rows of a position table,
    // causal attention over every rank's keys): the size of the
    // context-parallel group; the rank holds chunks i and 2c - 1 - i.
    "::mlir::IntegerAttr":$context_positions,
    // On context-parallel attention and its gradient: the keys and values
    // pass around the cp ranks (the ring, --cp-comm-type p2p) instead of
    // being gathered.
    "::mlir::UnitAttr":$context_ring,
    // On a split parameter: the dimension split across tp ranks, and its
    // global shape.
    "::mlir::IntegerAttr":$split_dim,
    "::mlir::DenseI64ArrayAttr":$global_shape,
    // On a parameter padded for the vocabulary: its shape before padding.
    "::mlir::DenseI64ArrayAttr":$real_shape,
    // On a pipeline chunk's function: the chunk's index.
    "::mlir::IntegerAttr":$chunk,
    // On a stage's dist.schedule: its flat layout, the buckets in order,
    // each {chunk, params} (chunk -1: the gradients other collectives
    // finish first).
    "::mlir::ArrayAttr":$buckets
  );
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_ScheduleOp : Dist_Op<"schedule", [NoTerminator, SingleBlock]> {
  let summary = "one stage's order of work in a training iteration";
  let description = [{
    `kind` names the pipeline schedule the order follows (gpipe, 1f1b,
    interleaved); none without pipeline chunks.
  }];
  let arguments = (ins I64Attr:$stage, I64Attr:$microbatches,
                   OptionalAttr<StrAttr>:$kind);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `stage` $stage `microbatches` $microbatches attr-dict-with-keyword $body
  }];
}

def Dist_StepOp : Dist_Op<"step", [HasParent<"ScheduleOp">]> {
  let summary = "run a function of the step, for a microbatch if it has one";
  let description = [{
    `exchange`: the pipeline transfers since the last exchange point are
    posted here as one group (exec.run's, which it becomes).
  }];
  let arguments = (ins FlatSymbolRefAttr:$function,
                   OptionalAttr<I64Attr>:$microbatch, UnitAttr:$exchange);
  let assemblyFormat = "$function (`microbatch` $microbatch^)? attr-dict";
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Beside upstream shard's collectives (all_reduce, all_gather,
// reduce_scatter, all_slice), which dist-level IR uses as they are.
//===----------------------------------------------------------------------===//

def Dist_KeepOnFirstOp : Dist_Op<"keep_on_first",
    [Pure, SameOperandsAndResultType]> {
  let summary = "a replicated value made a partial sum of itself";
  let description = [{
    The first rank along `grid_axes` keeps the value, the others hold zeros,
    so that summing over the axes counts it once: the gradient norm adds a
    replicated parameter's squares to the sharded parameters' partial sums
    this way, and all-reduces once.
  }];
  let arguments = (ins AnyRankedTensor:$input, FlatSymbolRefAttr:$grid,
                   DenseI16ArrayAttr:$grid_axes);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    $input `on` $grid `grid_axes` `=` $grid_axes attr-dict `:` type($input)
  }];
}

def Dist_ReduceGradientsOp : Dist_Op<"reduce_gradients"> {
  let summary = "sum every gradient accumulator over the data-parallel ranks";
  let description = [{
    Runs first in @optimizer. Without `distributed_optimizer` it all-reduces
    the accumulators in buckets of `bucket_elements`. With it, it
    reduce-scatters them: each data-parallel rank then owns 1/dp of every
    bucket (each padded to a multiple of dp, as Megatron pads them), and the optimizer
    reads and updates only what it owns — the gradient norm's sums of
    squares and AdamW's moments and master weights cover that part — before
    the updated parameters are all-gathered (ZeRO-1).
  }];
  let arguments = (ins FlatSymbolRefAttr:$grid, DenseI16ArrayAttr:$grid_axes,
                   UnitAttr:$distributed_optimizer, I64Attr:$bucket_elements);
  let assemblyFormat = "`on` $grid `grid_axes` `=` $grid_axes attr-dict";
}

//===----------------------------------------------------------------------===//
// Pipeline parallelism: the step cut into chunks (@forward_c, @backward_c),
// each a function one stage runs per microbatch.
//===----------------------------------------------------------------------===//

def Dist_SendOp : Dist_Op<"send"> {
  let summary = "send a value to the next (or previous) chunk";
  let description = [{
    The activation a forward chunk hands to the chunk after it, or the
    gradient a backward chunk hands to the chunk before it, for the
    microbatch the function runs for. `channel` pairs it with the
    dist.recv that takes it; the runtime never blocks on a send.
  }];
  let arguments = (ins AnyRankedTensor:$value, I64Attr:$chunk,
                   I64Attr:$channel);
  let assemblyFormat = [{
    $value `to` `chunk` $chunk `channel` $channel attr-dict `:` type($value)
  }];
}

def Dist_RecvOp : Dist_Op<"recv"> {
  let summary = "receive a value from the previous (or next) chunk";
  let arguments = (ins I64Attr:$chunk, I64Attr:$channel);
  let results = (outs AnyRankedTensor:$result);
  let assemblyFormat = [{
    `from` `chunk` $chunk `channel` $channel attr-dict `:` type($result)
  }];
}

def Dist_LossOp : Dist_Op<"loss"> {
  let summary = "the microbatch's loss, which the runtime reads and logs";
  let arguments = (ins 0DTensorOf<[F32]>:$value);
  let assemblyFormat = "$value attr-dict `:` type($value)";
}

def Dist_TieGradientsOp : Dist_Op<"tie_gradients"> {
  let summary = "sum a shared parameter's gradient over the stages using it";
  let description = [{
    A parameter used on several pipeline stages (GPT's word embedding: the
    input embedding on the first stage, the output layer on the last) has
    an accumulator on each. Their sum is the gradient: all-reduced over
    the pipeline axis among `stages`, as Megatron's embedding group does,
    before the optimizer reads it. The gradient norm counts it once, on
    the first of `stages`.
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$grid,
                   DenseI64ArrayAttr:$stages);
  let assemblyFormat = "$name `on` $grid `stages` `=` $stages attr-dict";
}

#endif // STRATA_DIST_OPS_TD
