//===- Pipeline.h - the passes strata-compile runs, in one place -*- C++ -*-===//
#ifndef STRATA_COMPILER_PIPELINE_H
#define STRATA_COMPILER_PIPELINE_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Pass/PassManager.h"

#include <cstdint>
#include <string>

namespace strata {

struct CompileOptions {
  int64_t microBatchSize = 1;
  int64_t globalBatchSize = 1;
  bool bf16 = false;

  /// Microbatches per iteration: global / (micro · dp).
  int64_t microbatches() const { return globalBatchSize / microBatchSize; }
};

/// How far to lower.
enum class Level { Step, Dist, Exec };

/// Checks what the options must satisfy; the message says which sizes
/// disagree. "" when they fit.
std::string checkOptions(const CompileOptions &options);

/// Adds the passes from a model's graph IR to `level`: autodiff and the
/// optimizer (the training step), the schedule (dist), then lowering and
/// memory planning (exec).
void buildPipeline(mlir::PassManager &pm, const CompileOptions &options,
                   Level level);

/// Bytes one rank holds, by kind, read off planned exec IR.
struct MemoryReport {
  int64_t parameters = 0, gradients = 0, optimizer = 0, io = 0;
  int64_t persistent = 0, workspace = 0;
  int64_t peak() const { return persistent + workspace; }
};
MemoryReport reportMemory(mlir::Operation *rank);

} // namespace strata

#endif
