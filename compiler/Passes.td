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

#endif // STRATA_COMPILER_PASSES_TD
