//===- Hyper.h - run-time hyperparameters -----------------------*- C++ -*-===//
#ifndef STRATA_RUNTIME_EXEC_HYPER_H
#define STRATA_RUNTIME_EXEC_HYPER_H

#include <cstdint>

namespace strata::runtime {

/// What the optimizer kernels read that a plan does not fix: set by the run
/// (flags and the learning-rate schedule) before each optimizer program.
struct Hyper {
  double lr = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.01;
  double clipGrad = 1.0; // 0: no clipping
  int64_t step = 1;      // 1-based, for bias correction
};

} // namespace strata::runtime

#endif
