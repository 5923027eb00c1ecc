//===- Passes.td - every strata pass ----------------------*- tablegen -*-===//
#ifndef STRATA_COMPILER_PASSES_TD
#define STRATA_COMPILER_PASSES_TD

include "mlir/Pass/PassBase.td"

def VerifyModel : Pass<"strata-verify-model", "mlir::ModuleOp"> {
  let summary = "Check the whole-model rules that no single op can see";
  let description = [{
    A model is one function returning the scalar loss. Parameter and input
    names are unique; layer boundaries are numbered 0..L in program order,
    each carrying the same types; every parameter and input is used. The
    frontend guarantees these for model files; this pass holds hand-written
    IR to the same rules before any later pass relies on them.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def PadVocab : Pass<"strata-pad-vocab", "mlir::ModuleOp"> {
  let summary = "Pad the vocabulary to a multiple of divisible-by x tp";
  let description = [{
    Pads the vocabulary (the embedding tables' rows, the output layer's
    columns) to the next multiple of `divisible-by` · tensor-parallel, as
    Megatron's --make-vocab-size-divisible-by does, for every layout, so
    that shapes agree with Megatron's; whole trailing shards may hold only
    padding. Tells the cross-entropy the real size so that the padding
    stays out of the loss. A padded parameter records its real shape in
    `dist.real_shape`. Logits that do not come from a parameter's matmul
    are left alone when the ranks can split them as they are.
  }];
  let options = [
    Option<"tensorParallel", "tensor-parallel", "int64_t", "1",
           "Tensor-parallel size the vocabulary must split across">,
    Option<"divisibleBy", "divisible-by", "int64_t", "128",
           "Pad to a multiple of this times the tensor-parallel size">
  ];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def UnfuseAttention : Pass<"strata-unfuse-attention", "mlir::ModuleOp"> {
  let summary = "Compute each attention apart, as Megatron ran it in 2021";
  let description = [{
    Marks every graph.attention of the forward model `unfused`: its
    lowering writes the scaled scores with batched gemms, a softmax turns
    them into probabilities, kept for the backward in place of the row
    log-sum-exp, and a last batched gemm reads them with the values
    (strata-compile --attention-backend unfused). The plan then moves the
    bytes Megatron's baddbmm, fused scale-mask-softmax and bmm moved, which
    the simulated cluster needs to predict Megatron's runs. Attention with
    fewer key/value heads than query heads is refused. Runs before
    autodiff, so that the backward follows. With `all` false, only the
    attentions that drop out (the fused kernel draws no mask).
  }];
  let options = [
    Option<"all", "all", "bool", "true",
           "Every attention; false: those with dropout">
  ];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def Autodiff : Pass<"strata-autodiff", "mlir::ModuleOp"> {
  let summary = "Append the backward pass: @model becomes @microbatch";
  let description = [{
    Walks the forward ops of @model in reverse and applies each op's
    vector-Jacobian product, seeded with the loss's gradient `loss-scale`
    (1/microbatches when a step sums microbatch gradients, as Megatron
    divides each microbatch's loss). Activation gradients are summed where a
    value has several uses; each parameter contribution becomes a
    graph.accumulate_grad into the parameter's fp32 accumulator, so a tied
    embedding's two uses add up there. The function is renamed @microbatch:
    one microbatch's forward, loss, backward and accumulation.
  }];
  let options = [
    Option<"lossScale", "loss-scale", "double", "1.0",
           "The loss gradient's seed: 1/microbatches">
  ];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def Optimizer : Pass<"strata-optimizer", "mlir::ModuleOp"> {
  let summary = "Add @optimizer: global gradient norm, clipping, AdamW";
  let description = [{
    One step from the accumulated gradients: the sum of squares of every
    parameter's gradient, the global norm and its clipping coefficient, then
    graph.adamw per parameter, with weight decay on matrices only (Megatron
    leaves biases and norm weights undecayed). Returns the gradient norm.
  }];
  let dependentDialects = ["::strata::graph::GraphDialect"];
}

def ContextParallel : Pass<"strata-context-parallel", "mlir::ModuleOp"> {
  let summary = "Split the training step along the sequence across "
                "context-parallel ranks";
  let description = [{
    Megatron's context parallelism: every sample's sequence is cut into 2c
    chunks and context-parallel rank i holds chunks i and 2c - 1 - i (so
    that under a causal mask every rank attends to as many keys). Each op's
    rule (graph::ContextSplittable) finds which dimension of its results
    runs along the sequence, from the tokens and labels on; such a
    dimension becomes the rank's share, size / c. Ops that must know where
    their tokens sit in the whole sequence (rotary angles, a learned
    position table and its gradient, attention, which reads every rank's
    keys) are marked `dist.context_positions` for their lowering. Weight
    gradients, sums over the rank's tokens, are summed over the cp ranks
    with the data-parallel ones (--strata-data-parallel, after it); the loss
    seed divides by c (strata-compile sets it). Sets the cp axis of @mesh.
    With `ring`, attention's keys and values pass around the cp ranks
    (Megatron's p2p; its ops marked `dist.context_ring`) instead of being
    all-gathered.
  }];
  let options = [
    Option<"size", "size", "int64_t", "1", "Context-parallel size">,
    Option<"ring", "ring", "bool", "false",
           "Pass attention's keys and values around the ring (p2p) instead "
           "of gathering them">
  ];
  let dependentDialects = ["::strata::dist::DistDialect",
                           "::mlir::shard::ShardDialect"];
}

def TensorParallel : Pass<"strata-tensor-parallel", "mlir::ModuleOp"> {
  let summary = "Shard the training step across tensor-parallel ranks";
  let description = [{
    Gives every tensor of @microbatch and @optimizer a sharding over the tp
    axis of @mesh (replicated, split along a dimension, or partial sums),
    seeded by parameter shardings — vocabulary-parallel embedding tables;
    column-parallel weights whose outputs feed a row-parallel matmul, the
    loss or attention queries (key/value heads split when they divide,
    else stay replicated) — and propagated through every op, inserting
    shard.all_reduce, all_gather, reduce_scatter or a local slice where a
    sharding must change. The loss over a split vocabulary becomes three
    all-reduced row statistics. Types become each rank's local shapes; a
    split parameter records `dist.split_dim` and `dist.global_shape`. With
    `sequence-parallel`, the residual stream is split along the sequence:
    reduce-scatter and all-gather instead of all-reduce.
  }];
  let options = [
    Option<"size", "size", "int64_t", "1", "Tensor-parallel size">,
    Option<"sequenceParallel", "sequence-parallel", "bool", "false",
           "Split the residual stream along the sequence">
  ];
  let dependentDialects = ["::strata::dist::DistDialect",
                           "::mlir::shard::ShardDialect"];
}

def DataParallel : Pass<"strata-data-parallel", "mlir::ModuleOp"> {
  let summary = "Reduce gradients across data-parallel replicas";
  let description = [{
    Sets the dp axis of @mesh and starts @optimizer with a
    dist.reduce_gradients: an all-reduce of the gradient accumulators in
    buckets, or with `distributed-optimizer` a reduce-scatter, after which
    each rank updates its 1/dp of the parameters (its own AdamW moments and
    master weights: ZeRO-1) and all-gathers them; the gradient norm then
    sums over the dp axis as well.
  }];
  let options = [
    Option<"size", "size", "int64_t", "1", "Data-parallel size">,
    Option<"distributedOptimizer", "distributed-optimizer", "bool", "false",
           "Shard optimizer state across data-parallel ranks">,
    Option<"bucketElements", "bucket-elements", "int64_t", "40000000",
           "Gradient elements per all-reduce bucket">
  ];
  let dependentDialects = ["::strata::dist::DistDialect",
                           "::mlir::shard::ShardDialect"];
}

def FuseLoss : Pass<"strata-fuse-loss", "mlir::ModuleOp"> {
  let summary = "Compute the loss's gradient with the loss, in one op";
  let description = [{
    Where a cross_entropy and the cross_entropy_grad of the same logits and
    labels meet (autodiff's seed, a graph.constant, is the loss's
    gradient), both become one cross_entropy_with_grad at the forward's
    place; likewise cross_entropy_from_stats and
    cross_entropy_grad_from_stats (the vocabulary-parallel loss) become
    cross_entropy_with_grad_from_stats. The row statistics are then
    computed once, and the forward leaves the logits' gradient, not the
    logits, for the backward (what a pipeline stashes). A gradient whose
    loss gradient is not a constant is left as it is.
  }];
}

def FuseOutputLayer : Pass<"strata-fuse-output-layer", "mlir::ModuleOp"> {
  let summary = "Compute the output layer, the loss and their gradients in "
                "blocks of the vocabulary, in the forward";
  let description = [{
    Where the logits are a parameter's product read only by a
    cross_entropy_with_grad, whose gradient only the output layer's two
    gradient products read (the input's, and the weight's into its
    accumulator), the five become one linear_cross_entropy_with_grad at the
    loss's place that runs them `block-columns` of the vocabulary at a
    time: no more than a block's logits and their gradient are held, and
    the forward leaves the input's gradient for the backward instead of the
    logits'. Each block's logits are computed twice (the row statistics
    first, then the gradients): four products of the layer's size instead
    of three. With block-columns 0 (the default) nothing changes; given and
    finding no such layer, the pass fails (the vocabulary-parallel loss is
    not one).
  }];
  let options = [
    Option<"blockColumns", "block-columns", "int64_t", "0",
           "Vocabulary columns a block (0: leave the output layer as it is)">
  ];
}

def PipelineSplit : Pass<"strata-pipeline-split", "mlir::ModuleOp"> {
  let summary = "Cut the step into pipeline chunks: @forward_c, @backward_c";
  let description = [{
    Cuts @microbatch at layer boundaries into chunks of whole layers —
    `stages` chunks, or `layers-per-virtual-stage` layers each (v chunks
    per stage, chunk c on stage c mod p), or with `first-stage-layers` /
    `last-stage-layers` uneven ends — and makes each chunk a forward and a
    backward function with dist.send/dist.recv where values cross chunks.
    The forward values a backward needs are stashed per microbatch or
    recomputed (`recompute` none, selective: attention, full: all but each
    layer's input; with `whole-layers`, each layer's whole forward run
    again before its backward, its output and that output's collectives
    too, as Megatron's checkpointing runs it). A parameter used on several
    stages gets a
    dist.tie_gradients in @optimizer, and the gradient norm sums over the
    pipeline axis. A layer count that does not split is an error: layers
    are never dropped. With `split-weights` each backward is cut in two:
    @backward_c keeps the ops the gradient it sends depends on (B), and
    @weight_c the rest (W: the weights' gradients and their accumulation),
    taking what it reads of B's values, and of the forward values B holds,
    as the arguments @backward_c returns.
  }];
  let options = [
    Option<"stages", "stages", "int64_t", "1", "Pipeline-parallel size p">,
    Option<"layersPerVirtualStage", "layers-per-virtual-stage", "int64_t",
           "0", "Layers per chunk (0: one chunk per stage)">,
    Option<"firstStageLayers", "first-stage-layers", "int64_t", "-1",
           "Layers on the first stage (-1: even split)">,
    Option<"lastStageLayers", "last-stage-layers", "int64_t", "-1",
           "Layers on the last stage (-1: even split)">,
    Option<"recompute", "recompute", "std::string", "\"none\"",
           "Activation recomputation: none, selective or full">,
    Option<"wholeLayers", "whole-layers", "bool", "false",
           "With full: recompute each layer's whole forward, not only what "
           "its backward reads (Megatron's --recompute-method uniform)">,
    Option<"splitWeights", "split-weights", "bool", "false",
           "Cut each chunk's backward in two (zero-bubble schedules): "
           "@backward_c computes what the input's gradient needs (B), "
           "@weight_c the weights' gradients (W)">,
    Option<"placement", "placement", "std::string", "\"looped\"",
           "Where the chunks live: looped (chunk c on stage c mod p) or v "
           "(two chunks a stage in a V, ZB-V's: chunk c on stage c, then "
           "2p-1-c)">
  ];
  let dependentDialects = ["::strata::dist::DistDialect",
                           "::mlir::shard::ShardDialect",
                           "::mlir::func::FuncDialect"];
}

def Schedule : Pass<"strata-schedule", "mlir::ModuleOp"> {
  let summary = "Order one iteration's work: microbatches, then the optimizer";
  let description = [{
    Writes a dist.schedule per pipeline stage. Without pipeline chunks:
    @microbatch for each of `microbatches` microbatches (their gradients
    accumulate), then @optimizer. With them, each stage's forwards and
    backwards in the order of `pipeline-schedule` — gpipe, 1f1b (one chunk
    per stage) or interleaved (several; Megatron's interleaved 1F1B), by
    default interleaved when a stage holds several chunks and 1f1b when
    one; or, with each backward cut in two (@weight_c beside
    @backward_c), zb-h1, zb-h2, zb-auto or, with two chunks a stage in a
    V (--strata-pipeline-split placement=v), zb-v — then @optimizer. zb-auto
    searches for the fastest order within a stash limit
    (compiler/ZeroBubbleAuto.h) from the chunks' costs and stash bytes
    given here (strata-compile prices them on a cluster), or from unit
    costs and microbatches in flight. zb-h1 given stash bytes has each
    stage hold back as many W's (up to the paper's r on stage r) as keep
    its stash within the limit, by default 1F1B's; zb-v given them runs a
    cool-down W early wherever a forward or B would take the stash past
    the limit (its live slots' running sum), by default what each stage
    keeps at most up to its last forward.
    Every schedule is run on a clock before it is written: one that could
    deadlock is an error.
  }];
  let options = [
    Option<"microbatches", "microbatches", "int64_t", "1",
           "Microbatches per iteration: global batch / (micro batch * dp)">,
    Option<"pipelineSchedule", "pipeline-schedule", "std::string", "\"\"",
           "gpipe, 1f1b, interleaved, zb-h1, zb-h2, zb-auto or zb-v "
           "(default by chunks per stage)">,
    ListOption<"forwardCosts", "forward-costs", "double",
               "zb-auto: each chunk's forward cost (any unit)">,
    ListOption<"backwardCosts", "backward-costs", "double",
               "zb-auto: each chunk's B cost">,
    ListOption<"weightCosts", "weight-costs", "double",
               "zb-auto: each chunk's W cost">,
    Option<"transferCost", "transfer-cost", "double", "0",
           "zb-auto: a transfer between stages, in the costs' unit">,
    ListOption<"stashBytes", "stash-bytes", "int64_t",
               "zb-auto, zb-h1 and zb-v: three numbers a chunk, one "
               "microbatch's stash in bytes kept until B, held until W and "
               "passed from B to W (zb-h1: each stage holds back the W's "
               "they allow; zb-v: runs a W early where they pass the limit)">,
    ListOption<"chosenOrder", "order", "int64_t",
               "zb-auto, zb-h1 and zb-v: the order chosen already (strata-compile "
               "searched, or held back, to say what it chose): per stage its "
               "count of works, then each work's phase (0 F, 1 B, 2 W), "
               "chunk and microbatch">,
    Option<"maxStashBytes", "max-stash-bytes", "int64_t", "0",
           "zb-auto, zb-h1 and zb-v: the most a stage's stash may take (0: "
           "1F1B's most; zb-v: each stage's own up to its last forward)">
  ];
  let dependentDialects = ["::strata::dist::DistDialect"];
}

def FuseEpilogues : Pass<"strata-fuse-epilogues", "mlir::ModuleOp"> {
  let summary = "Mark what each gemm's epilogue does for the exec lowering";
  let description = [{
    A linear layer's bias add (a vector of the product's last dimension,
    the product's only use) goes into its matmul's epilogue, and an exact
    (erf) GELU of the biased product too (the biased product, which the
    GELU's backward reads, is kept); a tanh GELU never. The bias's
    gradient (a sum_to of the output gradient that only accumulates) goes
    into the epilogue of the weight gradient beside it (same output
    gradient, later in the function, not transposed, only accumulating).
    The gemm's op gets `exec.epilogue` (bias, gelu_bias or bias_grad), what
    it absorbs `exec.absorbed`; --strata-lower-to-exec reads the marks and
    without them lowers every op to instructions of its own. With
    `bias-only` (the CUDA target: cuBLASLt's GELU is the tanh form and its
    bias gradient overwrites) only the bias add is absorbed.
  }];
  let options = [
    Option<"biasOnly", "bias-only", "bool", "false",
           "Absorb only a bias add, not a GELU after it or a bias gradient "
           "beside a weight gradient (the CUDA target)">
  ];
  let dependentDialects = ["::strata::exec::ExecDialect"];
}

def LayoutOptimizerState : Pass<"strata-layout-optimizer-state",
                                "mlir::ModuleOp"> {
  let summary = "Choose each stage's gradient buckets: the flat layout";
  let description = [{
    Writes `dist.buckets` on each stage's dist.schedule: the buckets its
    parameters, gradients and optimizer state are laid out in, in order.
    Per chunk of the stage, parameters in reverse first-use order (the
    order the backward produces their gradients), whole parameters up to
    about the bucket size of dist.reduce_gradients each, laid out in
    forward order; then one last bucket (chunk -1) for the gradients
    another collective finishes before the data-parallel sum: partial
    sums over tensor-parallel ranks, then parameters tied across stages.
    --strata-lower-to-exec lays the flat regions out from it.
  }];
  let dependentDialects = ["::strata::dist::DistDialect"];
}

def LowerToExec : Pass<"strata-lower-to-exec", "mlir::ModuleOp"> {
  let summary = "Lower the scheduled step to buffers and typed instructions";
  let description = [{
    Each tensor becomes an exec.buffer (inputs and outputs persistent;
    everything else in the workspace), each graph op a gemm or a launch of
    the kernel catalog (a reshape or layer boundary only a view), each
    function a program, and each stage's dist.schedule its exec.schedule:
    one exec.template per pipeline stage, whose rank-dependent values are
    per_rank expressions the runtime resolves at load. A
    weight gradient that only feeds its accumulator is written straight
    into it (a gemm with beta 1). What --strata-fuse-epilogues marked goes
    into the gemms' epilogues. Parameters, gradients and the optimizer
    state live in flat regions laid out in the buckets
    --strata-layout-optimizer-state chose (dist.buckets); @optimizer
    becomes a fixed handful of instructions (one sum of squares, one
    multi-tensor AdamW) whatever the parameter count, each bucket's
    data-parallel reduction (and the distributed optimizer's all-gather of
    its parameters after the update) among them, on the compute stream,
    marked `exec.bucket`. Pipeline transfers run on the communication stream,
    ordered by events. With `bf16`, activations and the parameters the
    model reads are bf16; gradients, master weights and moments stay fp32.
    Offsets are left for --strata-plan-memory.
  }];
  let options = [
    Option<"bf16", "bf16", "bool", "false",
           "bf16 parameters and activations, fp32 master weights and grads">
  ];
  let dependentDialects = ["::strata::exec::ExecDialect"];
}

def OverlapCommunication : Pass<"strata-overlap-communication",
                                "mlir::ModuleOp"> {
  let summary = "Move the data-parallel traffic beside the compute";
  let description = [{
    With `overlap-grad-reduce`, each bucket reduction of @optimizer whose
    gradients nothing before it in @optimizer writes (a tied or partial
    gradient's collective comes first) moves to right after the last
    microbatch's last write of its gradients, on the communication stream,
    in the last microbatch only, after an event the compute stream records
    there; each program that issues reductions records when its last is
    done, and @optimizer waits for them first. With
    `overlap-param-gather`, the distributed optimizer's parameter gathers
    run on the communication stream after the update, each recording an
    event every program waits for before it first reads those parameters.
    Megatron's --overlap-grad-reduce and --overlap-param-gather, both on
    by default there and here.
  }];
  let options = [
    Option<"overlapGradReduce", "overlap-grad-reduce", "bool", "true",
           "Reduce each gradient bucket as the backward produces it">,
    Option<"overlapParamGather", "overlap-param-gather", "bool", "true",
           "Gather the distributed optimizer's parameters during the next "
           "forward">
  ];
}

def PlanMemory : Pass<"strata-plan-memory", "mlir::ModuleOp"> {
  let summary = "Place every buffer at an arena offset";
  let description = [{
    Persistent buffers are laid end to end. Workspace buffers the
    communication stream touches get memory of their own; the others are
    placed per program by liveness (the instructions between a buffer's
    first and last use) in a best-fit linear scan, n·log n: by first use,
    each in the smallest free block once the buffers dead before it have
    given theirs back, so buffers whose lives do not overlap share memory.
    Stash buffers (a pipeline chunk's activations kept for its backward)
    are laid end to end per chunk into a slot, times the chunk's slots.
    Views share their root's offset. Sets each template's persistent_bytes,
    workspace_bytes and stash_bytes: a rank's peak memory is their sum,
    known before anything runs.
  }];
}

def FuseElementwise : Pass<"strata-fuse-elementwise", "mlir::ModuleOp"> {
  let summary = "Group chains of pointwise launches into one CUDA kernel";
  let description = [{
    For the CUDA target, after memory planning: each run of adjacent
    pointwise launches of a program (bias and residual adds, scaling,
    GELU, SiLU and their gradients, casts, accumulation) over the same
    number of elements and under the same condition becomes one group: its
    first launch gets `fuses N`, and strata-cuda-codegen generates one
    kernel for the group that reads what the group reads once and keeps
    what one member passes to the next in registers. The members stay in
    the plan (the CPU runs them one by one). A launch joins a group only
    when every element is still read and written by one thread: buffers
    the group writes and any it touches either are the same bytes or do
    not overlap, and no operand broadcast over rows overlaps what the
    group writes. A LayerNorm or RMSNorm forward right after a group closes
    it when its input is bytes the group writes and it fits as a member
    would (its output exactly the bytes of a buffer the group uses, or
    disjoint from them; its weight and bias overlap nothing written): the
    residual add before a norm. The kernel's warp for a row runs the
    members on the row's elements, then the norm.
    Buffers whose place differs between ranks are left out.
    Any earlier grouping is replaced.
  }];
  let dependentDialects = ["::strata::exec::ExecDialect"];
}

def CudaCodegen : Pass<"strata-cuda-codegen", "mlir::ModuleOp"> {
  let summary = "Generate a CUDA kernel for every launch";
  let description = [{
    For each exec.launch of every template, emits one CUDA C++ kernel
    specialized for its shapes, dtypes and constant arguments
    (compiler/codegen), and sets the launch's `code`, `grid`, `block` and
    `shared_bytes`; a fused group (strata-fuse-elementwise) gets one kernel
    for all its members, on its first launch, named `fused_N`, and its
    members none. A gemm whose epilogue cuBLASLt would compute
    differently (gelu_bias: its GELU is the tanh form; bias_grad: it
    overwrites the bias) is an error: the CUDA target fuses epilogues
    with `--strata-fuse-epilogues=bias-only`. Launches whose kernels come out the same share one
    exec.code op, at module level; a kernel is named after its catalog
    kernel and a number. Records the architecture in the module attribute
    `strata.cuda_arch`. Any earlier generated code is replaced. PTX comes
    later, from NVRTC in strata-compile.
  }];
  let options = [
    Option<"arch", "arch", "std::string", "\"sm_80\"",
           "CUDA architecture: sm_80 or sm_90a">
  ];
  let dependentDialects = ["::strata::exec::ExecDialect"];
}

#endif // STRATA_COMPILER_PASSES_TD
