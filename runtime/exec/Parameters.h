//===- Parameters.h - a rank's parameters, from the host --------*- C++ -*-===//
//
// Initialization and reading back, through the backend's copies:
// parameters are defined on the global tensor (element e of parameter p is
// drawn from Philox keyed by the seed and p's name, at counter e), so a
// shard holds exactly the values the whole tensor would, in every layout.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_EXEC_PARAMETERS_H
#define STRATA_RUNTIME_EXEC_PARAMETERS_H

#include "runtime/exec/Executor.h"

#include <vector>

namespace strata::runtime {

/// Zeroes the zero_init buffers (accumulators, moments) and draws every
/// parameter from the seed; vocabulary padding is zero.
void initializeParameters(Executor &executor, uint64_t seed);

/// A parameter's local values as the model reads them, in fp32 (the
/// masters' where there are masters).
std::vector<float> parameterValues(Executor &executor, const Param &param);

/// Sets a parameter's local values and its master segments, on the
/// compute stream (synchronize before reading them from another).
void setParameterValues(Executor &executor, const Param &param,
                        const float *values);

} // namespace strata::runtime

#endif
