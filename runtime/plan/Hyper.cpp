//===- Hyper.cpp - the optimizer's scalars for one step -------------------===//
#include "runtime/plan/Hyper.h"

#include <cmath>

namespace strata::runtime {

void hyperValues(const Hyper &h, float out[kHyperSlots]) {
  // In double, then rounded once, as torch.optim.AdamW computes them.
  out[kHyperClip] = static_cast<float>(h.clipGrad);
  out[kHyperDecay] = static_cast<float>(1.0 - h.lr * h.weightDecay);
  out[kHyperBeta1] = static_cast<float>(h.beta1);
  out[kHyperOneMinusBeta1] = static_cast<float>(1.0 - h.beta1);
  out[kHyperBeta2] = static_cast<float>(h.beta2);
  out[kHyperOneMinusBeta2] = static_cast<float>(1.0 - h.beta2);
  double correction1 = 1.0 - std::pow(h.beta1, double(h.step));
  double correction2 = 1.0 - std::pow(h.beta2, double(h.step));
  out[kHyperStepSize] = static_cast<float>(h.lr / correction1);
  out[kHyperCorrection2] = static_cast<float>(std::sqrt(correction2));
  out[kHyperEps] = static_cast<float>(h.eps);
}

} // namespace strata::runtime
