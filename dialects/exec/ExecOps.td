//===- ExecOps.td - the exec dialect -----------------------*- tablegen -*-===//
//
// The last level: what the runtime does, per rank template (a pipeline
// stage: its ranks differ only in their tensor- and data-parallel
// coordinates, and every value that differs with them is an expression of
// the coordinates the runtime resolves at load). Buffers sit at offsets in
// arenas; programs are flat streams of typed instructions over buffers
// (named by symbol, not SSA: an instruction may write a buffer another
// reads later in another program): gemms, launches of the kernel catalog's
// kernels, collectives, pipeline transfers and events between a compute
// and a communication stream. A schedule orders the programs of one
// iteration. Each op serializes one to one into the plan
// (runtime/plan/plan.fbs, compiler/plan/PlanWriter.cpp).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_EXEC_OPS_TD
#define STRATA_EXEC_OPS_TD

include "mlir/IR/OpBase.td"
include "mlir/IR/EnumAttr.td"
include "mlir/IR/SymbolInterfaces.td"
include "mlir/IR/RegionKindInterface.td"

def Exec_Dialect : Dialect {
  let name = "exec";
  let cppNamespace = "::strata::exec";
  let summary = "Per-stage buffers, typed instruction streams and the schedule";
  // The marks the exec lowering's passes leave each other (the epilogue
  // pass for the lowering, the lowering for the overlap pass), declared once (generated helpers ExecDialect::<Name>AttrHelper, wrapped
  // in ExecDialect.h).
  let discardableAttrs = (ins
    // On a matmul or a weight gradient: what its gemm's epilogue does
    // (bias, gelu_bias, bias_grad; Exec_Epilogue's names).
    "::mlir::StringAttr":$epilogue,
    // On an op a gemm's epilogue does (a bias add, a GELU, a bias gradient
    // and its accumulation): it lowers to nothing of its own.
    "::mlir::UnitAttr":$absorbed,
    // On a data-parallel reduction or gather of @optimizer (the lowering
    // writes it): the gradient bucket it reduces or gathers, which
    // --strata-overlap-communication may move beside the compute.
    "::mlir::IntegerAttr":$bucket
  );
}

class Exec_Op<string mnemonic, list<Trait> traits = []>
    : Op<Exec_Dialect, mnemonic, traits>;

def Exec_Arena : I32EnumAttr<"Arena", "where a buffer lives", [
    I32EnumAttrCase<"Persistent", 0, "persistent">,
    I32EnumAttrCase<"Workspace", 1, "workspace">,
    I32EnumAttrCase<"Stash", 2, "stash">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_Stream : I32EnumAttr<"Stream", "the stream an instruction runs on", [
    I32EnumAttrCase<"Compute", 0, "compute">,
    I32EnumAttrCase<"Comm", 1, "comm">,
    I32EnumAttrCase<"Context", 2, "context">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_Condition : I32EnumAttr<"Condition",
    "when an instruction of a per-microbatch program runs", [
    I32EnumAttrCase<"Always", 0, "always">,
    I32EnumAttrCase<"LastMicrobatch", 1, "last_microbatch">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_Phase : I32EnumAttr<"Phase", "what a program is to the schedule", [
    I32EnumAttrCase<"Microbatch", 0, "microbatch">,
    I32EnumAttrCase<"Forward", 1, "forward">,
    I32EnumAttrCase<"Backward", 2, "backward">,
    I32EnumAttrCase<"Optimizer", 3, "optimizer">,
    I32EnumAttrCase<"Weight", 4, "weight">]> {
  let cppNamespace = "::strata::exec";
}

// Whose slot a stash buffer lives in (plan.fbs's StashPool): held from
// the forward to the backward (B when cut in two), from the forward to W,
// or from B to W.
def Exec_StashPool : I32EnumAttr<"StashPool", "whose slot a stash buffer is in", [
    I32EnumAttrCase<"UntilBackward", 0, "until_backward">,
    I32EnumAttrCase<"Held", 1, "held">,
    I32EnumAttrCase<"Passed", 2, "passed">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_Epilogue : I32EnumAttr<"Epilogue", "what a gemm does after", [
    I32EnumAttrCase<"None", 0, "none">,
    I32EnumAttrCase<"Bias", 1, "bias">,
    I32EnumAttrCase<"GeluBias", 2, "gelu_bias">,
    I32EnumAttrCase<"BiasGrad", 3, "bias_grad">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_CollectiveKind : I32EnumAttr<"CollectiveKind", "a collective", [
    I32EnumAttrCase<"AllReduceSum", 0, "all_reduce_sum">,
    I32EnumAttrCase<"AllReduceMax", 1, "all_reduce_max">,
    I32EnumAttrCase<"AllGather", 2, "all_gather">,
    I32EnumAttrCase<"ReduceScatter", 3, "reduce_scatter">,
    I32EnumAttrCase<"Shift", 4, "shift">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_TemplateOp : Exec_Op<"template", [SymbolTable, NoTerminator,
    SingleBlock, IsolatedFromAbove]> {
  let summary = "everything the ranks of one pipeline stage hold and run";
  let description = [{
    One template per pipeline stage: its ranks (every tensor- and
    data-parallel coordinate on `stage`) run the same programs over the
    same buffers. What differs between them is written as an expression of
    the rank's coordinates (`per_rank` on a buffer view or a launch: a
    stride per coordinate of a mesh axis), resolved when the runtime loads
    the plan; communication groups and pipeline peers are relative to the
    rank already.

    `persistent_bytes` (parameters, gradients, optimizer state, inputs),
    `workspace_bytes` (activations and temporaries, reused by liveness) and
    `stash_bytes` (a pipeline stage's activations kept from a chunk's
    forward to its backward, one slot per microbatch in flight) are set by
    memory planning: a rank's peak is their sum. `stash_slots` says how
    many slots each of the stage's chunks needs (its schedule's most
    microbatches in flight); with the backward cut in two, `held_slots`
    and `passed_slots` how many its other pools need (a buffer's
    `stash_pool`: 1 held from the forward to W, 2 passed from B to W).
    `stash_classes`, where set, puts the chunks' pools in slot classes
    (entry 3 x chunk + pool: its class, -1 for none): the members of a
    class draw their slots from one set, laid out as one region whose slot
    is as large as its largest member's, and their slot counts above are
    the class's. Pools whose busiest times differ (a V's two chunks, a
    pool B frees and the one it fills) then share slots. `stash_strides`,
    where set, gives each class its slot's bytes instead: a class whose
    slot is a few bytes (the arena's alignment) has its members placed at
    any multiple of them, a step's slot number saying where (the schedule
    has placed every microbatch's bytes apart from the others').
  }];
  let arguments = (ins I64Attr:$stage, OptionalAttr<I64Attr>:$persistent_bytes,
                   OptionalAttr<I64Attr>:$workspace_bytes,
                   OptionalAttr<I64Attr>:$stash_bytes,
                   OptionalAttr<DenseI64ArrayAttr>:$stash_slots,
                   OptionalAttr<DenseI64ArrayAttr>:$held_slots,
                   OptionalAttr<DenseI64ArrayAttr>:$passed_slots,
                   OptionalAttr<DenseI64ArrayAttr>:$stash_classes,
                   OptionalAttr<DenseI64ArrayAttr>:$stash_strides);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "`stage` $stage attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
  let extraClassDeclaration = [{
    /// The slot counts of a stash pool, per chunk of the stage (null when
    /// none is set).
    ::mlir::DenseI64ArrayAttr getSlotsOf(StashPool pool);
    void setSlotsOf(StashPool pool, ::mlir::DenseI64ArrayAttr slots);
  }];
}

def Exec_BufferOp : Exec_Op<"buffer", [Symbol, HasParent<"TemplateOp">]> {
  let summary = "a typed region of an arena";
  let description = [{
    A buffer with an `alias` is a view of that buffer's bytes under another
    shape: a reshape or a layer boundary (at the same bytes), a parameter in
    the flat region of all parameters, a bucket or a data-parallel rank's
    part of the gradients (at `view_offset` bytes into the root, plus
    `per_rank` = [axis, stride]: stride bytes per coordinate of the rank
    along that mesh axis, or two such terms for a part of a group over two
    axes, [axis, stride, axis, stride]). It has the root's arena. `offset` is -1 until memory planning; `zero_init` buffers
    (gradient accumulators, optimizer moments) start at zero.

    A `stash` buffer belongs to the stage's chunk `stash_group` (its index
    among the stage's chunks) and has a copy per slot: a step that runs in
    slot k finds it `slot_stride` · k bytes past `offset`. Its
    `stash_pool` (0 when absent) says whose slot: 0 the step's `slot`
    (held from the forward to the backward, B when cut in two), 1 its
    `held` slot (from the forward to W), 2 its `passed` slot (from B to W).
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                   Exec_Arena:$arena, I64Attr:$offset,
                   OptionalAttr<FlatSymbolRefAttr>:$alias,
                   OptionalAttr<I64Attr>:$view_offset,
                   OptionalAttr<DenseI64ArrayAttr>:$per_rank,
                   UnitAttr:$zero_init,
                   OptionalAttr<I64Attr>:$stash_group,
                   OptionalAttr<I64Attr>:$slot_stride,
                   OptionalAttr<Exec_StashPool>:$stash_pool);
  let assemblyFormat = [{
    $sym_name `:` $type $arena `at` $offset
    (`alias` $alias^ (`+` $view_offset^)?)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// Bytes of the buffer's type (bf16 two per element).
    int64_t getBytes();
    ::mlir::RankedTensorType getTensorType() {
      return ::llvm::cast<::mlir::RankedTensorType>(getType());
    }
    /// The offset, signed: -1 before planning (I64Attr reads unsigned).
    int64_t getPlacedOffset() { return static_cast<int64_t>(getOffset()); }
    /// The stash pool, UntilBackward when absent.
    StashPool getPool() {
      return getStashPool().value_or(StashPool::UntilBackward);
    }
  }];
}

def Exec_EventOp : Exec_Op<"event", [Symbol, HasParent<"TemplateOp">]> {
  let summary = "an event between the rank's streams";
  let assemblyFormat = "$sym_name attr-dict";
  let arguments = (ins SymbolNameAttr:$sym_name);
}

def Exec_ParamOp : Exec_Op<"param", [HasParent<"TemplateOp">]> {
  let summary = "a parameter's buffers, initializer and shard";
  let description = [{
    `value` is what the model reads (f32, or bf16 beside f32 masters, which
    the optimizer's adamw launch lays out); `grad` its fp32 accumulator.
    `global_shape` and `split_dim` say which part of the global tensor a
    rank holds: the whole, or its tensor-parallel coordinate's slice along
    `split_dim`; initialization and checkpoints use the global tensor.
    `padded_shape` is the global tensor with its vocabulary padding
    (elements past `global_shape` are padding; whole shards may be).
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$value,
                   FlatSymbolRefAttr:$grad,
                   DenseI64ArrayAttr:$global_shape,
                   DenseI64ArrayAttr:$padded_shape,
                   OptionalAttr<I64Attr>:$split_dim,
                   StrAttr:$init, F64Attr:$std);
  let assemblyFormat = "$name attr-dict";
}

def Exec_IoOp : Exec_Op<"io", [HasParent<"TemplateOp">]> {
  let summary = "a buffer the runtime fills or reads";
  let description = [{
    Inputs ("tokens", "labels") are written before each microbatch program
    and "hyper" (the optimizer's scalars) before each iteration; outputs
    ("loss" after each microbatch, "grad_norm" after the optimizer) are read
    after it.
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$buffer);
  let assemblyFormat = "$name $buffer attr-dict";
}

def Exec_ProgramOp : Exec_Op<"program", [Symbol, HasParent<"TemplateOp">,
    NoTerminator, SingleBlock]> {
  let summary = "an instruction stream the schedule runs";
  let description = [{
    `phase` says what the program is to the schedule: `microbatch` (a
    whole forward and backward), `forward` or `backward` of pipeline chunk
    `chunk`, or `optimizer`. A program's pipeline receives lead it (then a
    record on the communication stream that its body waits on) and its
    sends trail it (after a wait on the compute stream's record): the
    runtime posts them at the schedule's exchange points.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, Exec_Phase:$phase,
                   OptionalAttr<I64Attr>:$chunk);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name $phase attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

// Every instruction: its stream (compute unless given) and, in a
// per-microbatch program, whether it runs only for the last microbatch.
class Exec_Instruction<string mnemonic, list<Trait> traits = []>
    : Exec_Op<mnemonic, !listconcat(traits, [HasParent<"ProgramOp">])> {
  code instructionClass = [{
    ::strata::exec::Stream getStreamOrCompute() {
      return getStream().value_or(::strata::exec::Stream::Compute);
    }
  }];
}

def Exec_GemmOp : Exec_Instruction<"gemm"> {
  let summary = "D = alpha · op(A) · op(B) + beta · D, then an epilogue";
  let description = [{
    Row-major, cuBLASLt's description: op(A) is [m, k] (stored [k, m] with
    `transpose_a`), op(B) [k, n]; leading dimensions in elements; `batch`
    matrices `stride_*` elements apart. The epilogue: `bias` adds a vector
    to each row; `gelu_bias` adds it, keeps the pre-activation in `aux` and
    applies the exact (erf) GELU; `bias_grad` writes `bias` = beta · bias + the column sums
    of op(B) (a linear layer's bias gradient beside its weight gradient).

    ```mlir
    exec.gemm @x, @w -> @y epilogue gelu_bias bias @b aux @pre {k = 64 : i64,
        lda = 64 : i64, ldb = 256 : i64, ldd = 256 : i64, m = 64 : i64,
        n = 256 : i64}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$a, FlatSymbolRefAttr:$b,
                   FlatSymbolRefAttr:$d, OptionalAttr<FlatSymbolRefAttr>:$bias,
                   OptionalAttr<FlatSymbolRefAttr>:$aux,
                   I64Attr:$m, I64Attr:$n, I64Attr:$k,
                   UnitAttr:$transpose_a, UnitAttr:$transpose_b,
                   I64Attr:$lda, I64Attr:$ldb, I64Attr:$ldd,
                   DefaultValuedAttr<I64Attr, "1">:$batch,
                   DefaultValuedAttr<I64Attr, "0">:$stride_a,
                   DefaultValuedAttr<I64Attr, "0">:$stride_b,
                   DefaultValuedAttr<I64Attr, "0">:$stride_d,
                   DefaultValuedAttr<F32Attr, "1.0">:$alpha,
                   DefaultValuedAttr<F32Attr, "0.0">:$beta,
                   DefaultValuedAttr<Exec_Epilogue,
                                     "::strata::exec::Epilogue::None">:$epilogue,
                   OptionalAttr<Exec_Stream>:$stream,
                   OptionalAttr<Exec_Condition>:$when);
  let assemblyFormat = [{
    $a `,` $b `->` $d (`epilogue` $epilogue^)? (`bias` $bias^)?
    (`aux` $aux^)? (`on` $stream^)? (`if` $when^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = instructionClass;
}

def Exec_LaunchOp : Exec_Instruction<"launch"> {
  let summary = "a kernel of the catalog over buffers";
  let description = [{
    `kernel` names a kernel of the catalog (runtime/plan/Kernels.def), which
    fixes its operands (inputs, then outputs) and its `args`. An integer
    argument that differs between the template's ranks has its stride per
    rank coordinate in `per_rank` ({name = array<i64: axis, stride>}, or
    two such terms): the rank's value is the argument plus each stride
    times its coordinate. A launch may
    carry its CUDA launch shape (`grid`, `block`, `shared_bytes`) and the
    name of its generated code; CPU plans leave them out.

    `fuses N` (the CUDA target's fusion pass, strata-fuse-elementwise): on
    a GPU this launch's code computes it and the N - 1 launches after it,
    its members, which have no code of their own; the CPU runs each
    member as written.

    ```mlir
    exec.launch "layer_norm_fwd" (@x, @w, @b) -> (@y) args {epsilon = 1.0e-05 : f64}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, FlatSymbolRefArrayAttr:$inputs,
                   FlatSymbolRefArrayAttr:$outputs, DictionaryAttr:$args,
                   OptionalAttr<DictionaryAttr>:$per_rank,
                   OptionalAttr<I64Attr>:$fuse,
                   OptionalAttr<DenseI64ArrayAttr>:$grid,
                   OptionalAttr<DenseI64ArrayAttr>:$block,
                   OptionalAttr<I64Attr>:$shared_bytes,
                   OptionalAttr<StrAttr>:$code,
                   OptionalAttr<Exec_Stream>:$stream,
                   OptionalAttr<Exec_Condition>:$when);
  let assemblyFormat = [{
    $kernel custom<SymbolList>($inputs) `->` custom<SymbolList>($outputs)
    `args` $args (`per_rank` $per_rank^)? (`fuses` $fuse^)? (`on` $stream^)?
    (`if` $when^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = instructionClass;
}

def Exec_CollectiveOp : Exec_Instruction<"collective"> {
  let summary = "a collective over a group of the mesh";
  let description = [{
    Over the ranks that differ from this one only along mesh `axes` (0 tp,
    1 dp, 2 pp), and only those on pipeline `stages` when given (a tied
    parameter's stages); gathers and scatters go along dimension `dim`.

    ```mlir
    exec.collective all_reduce_sum @x -> @x over [1] on comm
    ```
  }];
  let arguments = (ins Exec_CollectiveKind:$kind, FlatSymbolRefAttr:$input,
                   FlatSymbolRefAttr:$output, DenseI64ArrayAttr:$axes,
                   OptionalAttr<DenseI64ArrayAttr>:$stages,
                   DefaultValuedAttr<I64Attr, "0">:$dim,
                   OptionalAttr<Exec_Stream>:$stream,
                   OptionalAttr<Exec_Condition>:$when);
  let assemblyFormat = [{
    $kind $input `->` $output `over` $axes (`stages` $stages^)?
    (`on` $stream^)? (`if` $when^)? attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = instructionClass;
}

def Exec_SendOp : Exec_Instruction<"send"> {
  let summary = "send a buffer to the same tp and dp rank on another stage";
  let description = [{
    On the communication stream. A program's sends trail it; the runtime
    posts them with the next steps' receives (Megatron's batched
    isend/irecv).
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$peer_stage,
                   I64Attr:$channel);
  let assemblyFormat = [{
    $buffer `to` `stage` $peer_stage `channel` $channel attr-dict
  }];
  let extraClassDeclaration = [{
    ::strata::exec::Stream getStreamOrCompute() {
      return ::strata::exec::Stream::Comm;
    }
  }];
}

def Exec_RecvOp : Exec_Instruction<"recv"> {
  let summary = "receive a buffer from another stage";
  let description = [{
    On the communication stream; a program's receives lead it.
  }];
  let arguments = (ins FlatSymbolRefAttr:$buffer, I64Attr:$peer_stage,
                   I64Attr:$channel);
  let assemblyFormat = [{
    $buffer `from` `stage` $peer_stage `channel` $channel attr-dict
  }];
  let extraClassDeclaration = [{
    ::strata::exec::Stream getStreamOrCompute() {
      return ::strata::exec::Stream::Comm;
    }
  }];
}

def Exec_RecordOp : Exec_Instruction<"record"> {
  let summary = "mark this point of a stream for later waits";
  let arguments = (ins FlatSymbolRefAttr:$event,
                   OptionalAttr<Exec_Stream>:$stream,
                   OptionalAttr<Exec_Condition>:$when);
  let assemblyFormat = "$event (`on` $stream^)? (`if` $when^)? attr-dict";
  let extraClassDeclaration = instructionClass;
}

def Exec_WaitOp : Exec_Instruction<"wait"> {
  let summary = "hold a stream until the event's latest record has passed";
  let arguments = (ins FlatSymbolRefAttr:$event,
                   OptionalAttr<Exec_Stream>:$stream,
                   OptionalAttr<Exec_Condition>:$when);
  let assemblyFormat = "$event (`on` $stream^)? (`if` $when^)? attr-dict";
  let extraClassDeclaration = instructionClass;
}

def Exec_CodeOp : Exec_Op<"code", [Symbol]> {
  let summary = "a generated kernel for the CUDA target";
  let description = [{
    One translation unit of CUDA C++ with one kernel, named after the
    symbol, generated for launches of the catalog kernel `kernel`
    (compiler/codegen); launches name it in their `code`. strata-compile
    compiles `source` with NVRTC for the module's CUDA architecture and
    keeps the PTX in `ptx` for the plan. Beside the templates, at module
    level: launches on any stage with the same shapes share one.

    ```mlir
    exec.code @add_0 kernel "add" {source = "..."}
    ```
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$kernel,
                   StrAttr:$source, OptionalAttr<StrAttr>:$ptx);
  let assemblyFormat = "$sym_name `kernel` $kernel attr-dict";
}

def Exec_ScheduleOp : Exec_Op<"schedule", [HasParent<"TemplateOp">,
    NoTerminator, SingleBlock]> {
  let summary = "the programs of one training iteration, in order";
  let description = [{
    `kind`: the pipeline schedule (gpipe, 1f1b, interleaved), as the
    plan's `pipeline_schedule` records it; none without pipeline chunks.
  }];
  let arguments = (ins OptionalAttr<StrAttr>:$kind);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
}

def Exec_RunOp : Exec_Op<"run", [HasParent<"ScheduleOp">]> {
  let summary = "run a program, for a microbatch when it reads inputs";
  let description = [{
    A pipeline chunk's forward and backward for one microbatch run in the
    same stash `slot`; with the backward cut in two, the forward and W in
    the same `held` slot (forward values W reads) and B and W in the same
    `passed` slot (what B passes to W). `exchange`: the pipeline transfers of the steps
    since the last exchange point (their sends) and up to the next (their
    receives) are posted here as one group, where Megatron's schedules post
    theirs.
  }];
  let arguments = (ins FlatSymbolRefAttr:$program,
                   OptionalAttr<I64Attr>:$microbatch,
                   OptionalAttr<I64Attr>:$slot, UnitAttr:$exchange,
                   OptionalAttr<I64Attr>:$held_slot,
                   OptionalAttr<I64Attr>:$passed_slot);
  let assemblyFormat = [{
    $program (`microbatch` $microbatch^)? (`slot` $slot^)?
    (`held` $held_slot^)? (`passed` $passed_slot^)? attr-dict
  }];
}

#endif // STRATA_EXEC_OPS_TD
