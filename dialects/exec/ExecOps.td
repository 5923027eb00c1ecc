//===- ExecOps.td - the exec dialect -----------------------*- tablegen -*-===//
//
// The last level: what the runtime does, per rank. Buffers sit at offsets in
// arenas; programs are flat instruction streams over buffers (named by
// symbol, not SSA: an instruction may write a buffer another reads later in
// another program); a schedule orders the programs of one iteration. Each op
// serializes one to one into the plan (compiler/plan/PlanWriter.cpp).
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
  let summary = "Per-rank buffers, instruction streams and the schedule";
}

class Exec_Op<string mnemonic, list<Trait> traits = []>
    : Op<Exec_Dialect, mnemonic, traits>;

def Exec_Arena : I32EnumAttr<"Arena", "where a buffer lives", [
    I32EnumAttrCase<"Persistent", 0, "persistent">,
    I32EnumAttrCase<"Workspace", 1, "workspace">,
    I32EnumAttrCase<"Stash", 2, "stash">]> {
  let cppNamespace = "::strata::exec";
}

def Exec_RankOp : Exec_Op<"rank", [SymbolTable, NoTerminator,
    SingleBlock, IsolatedFromAbove]> {
  let summary = "everything one rank holds and runs";
  let description = [{
    `persistent_bytes` (parameters, gradients, optimizer state, inputs),
    `workspace_bytes` (activations and temporaries, reused by liveness) and
    `stash_bytes` (a pipeline stage's activations kept from a chunk's
    forward to its backward, one slot per microbatch in flight) are set by
    memory planning: the rank's peak is their sum. `stash_slots` says how
    many slots each of the stage's chunks needs (its schedule's most
    microbatches in flight).
  }];
  let arguments = (ins I64Attr:$rank, OptionalAttr<I64Attr>:$persistent_bytes,
                   OptionalAttr<I64Attr>:$workspace_bytes,
                   OptionalAttr<I64Attr>:$stash_bytes,
                   OptionalAttr<DenseI64ArrayAttr>:$stash_slots);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$rank attr-dict-with-keyword $body";
  let hasRegionVerifier = 1;
}

def Exec_BufferOp : Exec_Op<"buffer", [Symbol, HasParent<"RankOp">]> {
  let summary = "a typed region of an arena";
  let description = [{
    A buffer with an `alias` is a view of that buffer's bytes under another
    shape: a reshape or a layer boundary (at the same bytes), a parameter in
    the flat region of all parameters, a bucket or a data-parallel rank's
    part of the gradients (at `view_offset` bytes into the root). It has the
    root's arena. `offset` is -1 until memory planning; `zero_init` buffers
    (gradient accumulators, optimizer moments) start at zero.

    A `stash` buffer belongs to the stage's chunk `stash_group` (its index
    among the stage's chunks) and has a copy per slot: a step that runs in
    slot k finds it `slot_stride` · k bytes past `offset`.
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, TypeAttr:$type,
                   Exec_Arena:$arena, I64Attr:$offset,
                   OptionalAttr<FlatSymbolRefAttr>:$alias,
                   OptionalAttr<I64Attr>:$view_offset, UnitAttr:$zero_init,
                   OptionalAttr<I64Attr>:$stash_group,
                   OptionalAttr<I64Attr>:$slot_stride);
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
  }];
}

def Exec_ParamOp : Exec_Op<"param", [HasParent<"RankOp">]> {
  let summary = "a parameter's buffers, initializer and shard";
  let description = [{
    `value` is what the model reads (f32, or bf16 beside f32 masters);
    `grad` its fp32 accumulator. `masters` are the f32 master weights this
    rank keeps, each starting `master_offsets` elements into the (local)
    parameter: all of it, or with the distributed optimizer the rank's
    share. `global_shape` and `shard_offset` say which part of the global
    tensor this rank holds: initialization and checkpoints use the global
    tensor. `padded_shape` is the global tensor with its vocabulary padding
    (elements past `global_shape` are padding; whole shards may be).
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$value,
                   FlatSymbolRefAttr:$grad, FlatSymbolRefArrayAttr:$masters,
                   DenseI64ArrayAttr:$master_offsets,
                   DenseI64ArrayAttr:$global_shape,
                   DenseI64ArrayAttr:$padded_shape,
                   DenseI64ArrayAttr:$shard_offset,
                   StrAttr:$init, F64Attr:$std);
  let assemblyFormat = "$name attr-dict";
}

def Exec_IoOp : Exec_Op<"io", [HasParent<"RankOp">]> {
  let summary = "a buffer the runtime fills or reads";
  let description = [{
    Inputs ("tokens", "labels") are written before each microbatch program;
    outputs ("loss" after each microbatch, "grad_norm" after the optimizer)
    are read after it.
  }];
  let arguments = (ins StrAttr:$name, FlatSymbolRefAttr:$buffer);
  let assemblyFormat = "$name $buffer attr-dict";
}

def Exec_ProgramOp : Exec_Op<"program", [Symbol, HasParent<"RankOp">,
    NoTerminator, SingleBlock]> {
  let summary = "an instruction stream the schedule runs";
  let description = [{
    `phase` says what the program is to the schedule: "microbatch" (a
    whole forward and backward), "forward" or "backward" of pipeline chunk
    `chunk`, or "optimizer".
  }];
  let arguments = (ins SymbolNameAttr:$sym_name, StrAttr:$phase,
                   OptionalAttr<I64Attr>:$chunk);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "$sym_name $phase attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Exec_KernelOp : Exec_Op<"kernel", [HasParent<"ProgramOp">]> {
  let summary = "one kernel over buffers; other attributes are its arguments";
  let description = [{
    The kernel is named (the runtime's registry maps the name to its CPU or
    CUDA implementation); attributes beyond the op's own are the kernel's
    arguments (eps, causal, shapes) and travel into the plan as they are.

    ```mlir
    exec.kernel "layer_norm_fwd" (@x, @w, @b) -> (@y) {epsilon = 1.0e-05 : f64}
    ```
  }];
  let arguments = (ins StrAttr:$kernel, FlatSymbolRefArrayAttr:$inputs,
                   FlatSymbolRefArrayAttr:$outputs);
  let assemblyFormat = [{
    $kernel custom<SymbolList>($inputs) `->` custom<SymbolList>($outputs)
    attr-dict
  }];
}

def Exec_ScheduleOp : Exec_Op<"schedule", [HasParent<"RankOp">,
    NoTerminator, SingleBlock]> {
  let summary = "the programs of one training iteration, in order";
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = "attr-dict-with-keyword $body";
}

def Exec_RunOp : Exec_Op<"run", [HasParent<"ScheduleOp">]> {
  let summary = "run a program, for a microbatch when it reads inputs";
  let description = [{
    A pipeline chunk's forward and backward for one microbatch run in the
    same stash `slot`.
  }];
  let arguments = (ins FlatSymbolRefAttr:$program,
                   OptionalAttr<I64Attr>:$microbatch,
                   OptionalAttr<I64Attr>:$slot);
  let assemblyFormat = [{
    $program (`microbatch` $microbatch^)? (`slot` $slot^)? attr-dict
  }];
}

#endif // STRATA_EXEC_OPS_TD
