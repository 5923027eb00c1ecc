//===- ModelStats.h - sizes a user wants before running ---------*- C++ -*-===//
#ifndef STRATA_COMPILER_MODELSTATS_H
#define STRATA_COMPILER_MODELSTATS_H

#include "mlir/IR/BuiltinOps.h"

#include <string>

namespace strata {

struct ModelStats {
  std::string name;
  int64_t parameters = 0;
  int64_t layers = 0;
  int64_t tokens = 0;    // per microbatch: the labels' elements
  int64_t seqLength = 0; // the labels' last dimension
  int64_t vocabSize = 0; // the logits' last dimension
  /// The GELU the model computes: "exact", "tanh", "exact,tanh" (both), or
  /// "" (none); a checkpoint keeps it, Hugging Face's config.json says it.
  std::string gelu;
  /// Matmul and attention FLOPs of one forward pass, counted as Narayanan et
  /// al. count them: 2mnk per matmul, 4·b·s²·h per attention (the full score
  /// matrix, masked or not); elementwise work is not counted.
  /// Exact integers: a 1T-parameter model's step is ~1.3e16, far inside
  /// int64, and a test compares them with the paper's formula digit by digit.
  int64_t forwardFlops = 0;
  /// Of forwardFlops, the output layer's (the matmul that makes the
  /// logits the loss reads), and that matmul's input width: the hidden
  /// size.
  int64_t logitFlops = 0, hidden = 0;
  /// Of forwardFlops, attention's (the full score matrix, as above).
  int64_t attentionFlops = 0;
  /// Forward and backward: the backward pass does twice the forward's work.
  int64_t stepFlops() const { return 3 * forwardFlops; }
  /// The paper's count, 96 B s l h^2 (1 + s/(6h) + V/(16 l h)): the
  /// layers' forward once more, as full recomputation runs it, whatever
  /// the plan recomputes (Narayanan et al. report throughput so).
  int64_t paperStepFlops() const {
    return stepFlops() + (forwardFlops - logitFlops);
  }
};

/// Reads the stats off a model's graph IR.
ModelStats computeModelStats(mlir::ModuleOp module);

} // namespace strata

#endif
