//===- AutoPlan.h - strata-compile --auto: the layout to train with -*- C++ -*-===//
//
// Searches the layouts of a model on N GPUs of a cluster spec for a global
// batch: tensor, pipeline and data sizes, chunks per stage, the micro-batch
// size, recomputation (none, selective, full), sequence parallelism, the
// distributed optimizer and, with one chunk a stage, zb-auto's zero-bubble
// order beside 1F1B (its bound stretched by (p - 1)/(4m), the least a
// zero-bubble order waits: B and W cost at most three forwards). A layout the compiler refuses (divisibility,
// schedules) or whose exact memory does not fit the GPU is rejected with
// the reason; the rest are compiled and simulated (strata-run --backend
// sim's predictor) in the order of a bound no simulation can beat (their
// FLOPs at the spec's gemm rate, stretched by the schedule's bubble), and
// the search stops when the next bound is slower than the K-th best found.
// A layout that needs at least the memory of one that did not fit is
// rejected without compiling; one that recomputes more than a simulated
// twin takes the twin's time as its bound. Candidates compile without the
// verifier between passes (half the time), on a thread per core; the best
// is compiled again with it, and must give the same plan, before it is
// written.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TOOLS_STRATA_COMPILE_AUTOPLAN_H
#define STRATA_TOOLS_STRATA_COMPILE_AUTOPLAN_H

#include "compiler/ModelStats.h"
#include "compiler/Pipeline.h"
#include "runtime/cluster/ClusterSpec.h"

#include <cstdint>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace strata {

struct AutoPlanRequest {
  int64_t gpus = 0;
  std::string clusterPath;
  int64_t top = 5;
  /// A layout to explain ("t8,p8,v2,mbs1,full,sp,distopt"), or "".
  std::string explain;
  /// Stop looking after this many seconds (0: search every layout); the
  /// layouts are looked at most promising first.
  double seconds = 0;
};

/// Compiles `options` to plan bytes, with MLIR's verifier after each pass
/// when `verify` (a zero-bubble candidate's work priced on `spec`); "" or
/// what the compiler said.
using CompileCandidate = std::function<std::string(
    const CompileOptions &options, bool verify,
    const runtime::ClusterSpec &spec, std::vector<uint8_t> &bytes)>;

/// Runs the search from `base` (the model's options: its global batch,
/// bf16, target; its layout flags are the search's), prints the top K and
/// writes the best plan to `output`; the exit status.
int autoPlan(const AutoPlanRequest &request, const CompileOptions &base,
             const ModelStats &stats, const CompileCandidate &compile,
             const std::string &output, std::ostream &out, std::ostream &err);

} // namespace strata

#endif
