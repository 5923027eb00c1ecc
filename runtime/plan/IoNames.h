//===- IoNames.h - the io buffers the runtime reads and writes -*- C++ -*-===//
//
// A plan's io entries name the buffers the runtime fills and reads
// (Plan.h's RankPlan::ioBuffer): the model's inputs the data loader fills,
// the loss a microbatch program returns, and the optimizer program's
// hyperparameters and gradient norm. The compiler writes the entries and
// the executor looks them up, both by these names.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_IONAMES_H
#define STRATA_RUNTIME_PLAN_IONAMES_H

namespace strata::runtime::io_names {

/// The model's token ids and the labels of its loss (graph.input names a
/// model gives them; a stage without them is fed nothing).
inline constexpr char kTokens[] = "tokens";
inline constexpr char kLabels[] = "labels";
/// The microbatch's loss, summed over its tokens (its last stage's).
inline constexpr char kLoss[] = "loss";
/// The optimizer's hyperparameters, written before each step (Hyper.h).
inline constexpr char kHyper[] = "hyper";
/// The gradient norm the optimizer program computed.
inline constexpr char kGradNorm[] = "grad_norm";

} // namespace strata::runtime::io_names

#endif
