//===- ZeroBubblePricing.h - zb-auto's costs from the cost model -*- C++ -*-===//
//
// --pipeline-schedule zb-auto orders each stage's forwards, B's and W's
// from what they cost. strata-compile finds that out before it schedules:
// it compiles a probe of the model with the same programs under ZB-H1,
// simulates one iteration of the probe on the --cluster spec, and takes
// each chunk's forward, B and W seconds (their own operations on the
// compute stream), the pipeline transfer's, and each chunk's stash bytes
// by pool from the probe's memory plan; the Schedule pass then searches
// with them (compiler/ZeroBubbleAuto.h). --pipeline-schedule zb-h1 takes
// the stash bytes alone, to hold back only the W's that fit.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TOOLS_STRATA_COMPILE_ZEROBUBBLEPRICING_H
#define STRATA_TOOLS_STRATA_COMPILE_ZEROBUBBLEPRICING_H

#include "compiler/Pipeline.h"
#include "runtime/cluster/ClusterSpec.h"

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace strata {

/// Fills `options.zeroBubble`'s costs and stash bytes for `module` (at
/// `from`, before the schedule) and a line for the summary in `said`;
/// "" or why it cannot. `verify`: MLIR's verifier after each of the
/// probe's passes.
std::string priceZeroBubble(mlir::ModuleOp module, Level from,
                            const runtime::ClusterSpec &spec,
                            CompileOptions &options, std::string &said,
                            bool verify = true);

/// Fills `options.zeroBubble`'s stash bytes for zb-h1 from the same probe
/// (no cluster needed: only the memory plan), so that each stage holds
/// back the W's its stash limit allows, and a line for the summary in
/// `said`; "" or why it cannot. Where the compiler refuses the layout it
/// measures nothing, for the compile itself to say why.
std::string measureZeroBubbleStash(mlir::ModuleOp module, Level from,
                                   CompileOptions &options, std::string &said,
                                   bool verify = true);

} // namespace strata

#endif
