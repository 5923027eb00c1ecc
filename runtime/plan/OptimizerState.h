//===- OptimizerState.h - where a rank keeps its Adam state -----*- C++ -*-===//
//
// The optimizer's adamw launch names the rank's moment and master buffers
// and, by its windows and the rank's part, which parameter elements the
// rank owns (Ownership.h). Placing the state records, per parameter, where
// in those buffers its owned elements' state lies, for checkpoints.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_OPTIMIZERSTATE_H
#define STRATA_RUNTIME_PLAN_OPTIMIZERSTATE_H

#include "runtime/plan/Plan.h"

#include <string>

namespace strata::runtime {

/// Fills `rank`'s expAvg, expAvgSq, master and gradRegion buffers and each
/// parameter's state ranges from its one adamw launch (none: no state);
/// "" or what is wrong (two adamw launches, a parameter outside the
/// optimizer's region, overlapping parameters).
std::string placeOptimizerState(RankPlan &rank);

} // namespace strata::runtime

#endif
