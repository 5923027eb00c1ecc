//===- FuseEpilogues.h - the shapes a gemm's epilogue computes --*- C++ -*-===//
//
// What --strata-fuse-epilogues marks, and what the exec lowering checks a
// mark against before it honours it: a gemm's epilogue computes these
// shapes exactly, and only these.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_PASSES_FUSEEPILOGUES_H
#define STRATA_COMPILER_PASSES_FUSEEPILOGUES_H

#include "dialects/graph/GraphOps.h"

namespace strata::epilogues {

/// The bias added to a matmul's product (its only use): a vector of the
/// product's last dimension.
graph::AddOp biasAddOf(graph::MatmulOp matmul);

/// An exact (erf) GELU of a biased product (the sum stays: the GELU's
/// backward reads it).
graph::GeluOp exactGeluOf(graph::AddOp add);

/// The weight gradient beside a bias gradient: from the same output
/// gradient, later in the function, not transposed, both only
/// accumulating into parameters.
graph::MatmulWeightGradOp weightGradBeside(graph::SumToOp sum);

} // namespace strata::epilogues

#endif
