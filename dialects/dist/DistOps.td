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

def Dist_Dialect : Dialect {
  let name = "dist";
  let cppNamespace = "::strata::dist";
  let summary = "Parallel layout: collectives, chunks and the schedule";
}

class Dist_Op<string mnemonic, list<Trait> traits = []>
    : Op<Dist_Dialect, mnemonic, traits>;

def Dist_ScheduleOp : Dist_Op<"schedule", [NoTerminator, SingleBlock]> {
  let summary = "one stage's order of work in a training iteration";
  let arguments = (ins I64Attr:$stage, I64Attr:$microbatches);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    `stage` $stage `microbatches` $microbatches attr-dict-with-keyword $body
  }];
}

def Dist_StepOp : Dist_Op<"step", [HasParent<"ScheduleOp">]> {
  let summary = "run a function of the step, for a microbatch if it has one";
  let arguments = (ins FlatSymbolRefAttr:$function,
                   OptionalAttr<I64Attr>:$microbatch);
  let assemblyFormat = "$function (`microbatch` $microbatch^)? attr-dict";
  let hasVerifier = 1;
}

#endif // STRATA_DIST_OPS_TD
