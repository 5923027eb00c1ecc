//===- Hyper.h - run-time hyperparameters -----------------------*- C++ -*-===//
//
// What the optimizer kernels read that a plan does not fix: set by the run
// (flags and the learning-rate schedule). The runtime computes the values
// the kernels use (in double, as torch.optim.AdamW does) and writes them,
// as f32, into the plan's `hyper` buffer before each optimizer program, so
// that the kernels take them from memory like any operand (a captured GPU
// program replays unchanged while the learning rate moves).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_HYPER_H
#define STRATA_RUNTIME_PLAN_HYPER_H

#include <cstdint>

namespace strata::runtime {

struct Hyper {
  double lr = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  double weightDecay = 0.01;
  double clipGrad = 1.0; // 0: no clipping
  int64_t step = 1;      // 1-based, for bias correction
};

/// The f32 values of the `hyper` buffer, by index.
enum HyperSlot : int {
  kHyperClip,          // the clipping threshold, 0 for none
  kHyperDecay,         // 1 − lr · weight decay (decayed segments)
  kHyperBeta1,         // β1
  kHyperOneMinusBeta1, // 1 − β1
  kHyperBeta2,         // β2
  kHyperOneMinusBeta2, // 1 − β2
  kHyperStepSize,      // lr / (1 − β1^t)
  kHyperCorrection2,   // sqrt(1 − β2^t)
  kHyperEps,           // ε
  kHyperSlots
};

/// The slots' values for one optimizer step.
void hyperValues(const Hyper &hyper, float out[kHyperSlots]);

} // namespace strata::runtime

#endif
