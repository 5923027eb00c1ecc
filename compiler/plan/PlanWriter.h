//===- PlanWriter.h - exec IR to a plan file --------------------*- C++ -*-===//
#ifndef STRATA_COMPILER_PLAN_PLANWRITER_H
#define STRATA_COMPILER_PLAN_PLANWRITER_H

#include "compiler/Layout.h"

#include "mlir/IR/BuiltinOps.h"

#include <cstdint>
#include <string>
#include <vector>

namespace strata {

/// What the plan says about the run beside the ranks' programs: the
/// layout it was compiled for (of which the plan file keeps the batch
/// and the parallelism; the rest its buffers and programs say), and the
/// model's figures.
struct PlanHeader : Layout {
  std::string model;
  uint32_t numMicrobatches = 1;
  uint32_t seqLength = 0, vocabSize = 0;
  double flopsPerIteration = 0;
  double paperFlopsPerIteration = 0; // with the layers' forward recomputed
  std::string gelu;                  // ModelStats::gelu
};

/// The header as the module attribute `strata.plan` holds it, so that exec
/// IR carries everything its plan says (and hand-written IR can be turned
/// into a plan).
void setPlanHeader(mlir::ModuleOp module, const PlanHeader &header);
mlir::FailureOr<PlanHeader> getPlanHeader(mlir::ModuleOp module);

/// Serializes a module of planned exec.template ops, one to one, with the
/// `strata.plan` header, into the bytes of a plan file (frame and
/// FlatBuffer). Errors go to the module's diagnostics.
mlir::LogicalResult writePlan(mlir::ModuleOp module,
                              std::vector<uint8_t> &bytes);

} // namespace strata

#endif
