//===- Dropout.h - dropout's mask, the same on every layout -----*- C++ -*-===//
//
// Whether dropout keeps an element is a pure function of three numbers:
// its sample's key (the host derives it from the run's seed and the
// sample's place in the data, so every layout gives a sample the same
// key), the dropout's site (which dropout of the model) and the element's
// index within its sample in the unsplit tensor. A layout that splits the
// tensor, or the batch, or the layers, draws the same mask as one device.
// The dropout kernel's CPU twin computes it with these functions; its CUDA
// unit (compiler/codegen/EmitDropout.cpp) has the same arithmetic, and the
// float64 test checks every device against its own copy.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_DROPOUT_H
#define STRATA_RUNTIME_PLAN_DROPOUT_H

#include <cstdint>

namespace strata::runtime {

/// The batch input a model that drops out reads its samples' keys from,
/// [batch] i32: the frontend declares it, the training loop fills it.
inline constexpr const char *kDropoutKeys = "dropout_keys";

/// A bijection of 32-bit words that mixes every bit into every other
/// (Chris Wellons' "lowbias32").
constexpr uint32_t dropoutMix(uint32_t x) {
  x ^= x >> 16;
  x *= 0x7feb352du;
  x ^= x >> 15;
  x *= 0x846ca68bu;
  x ^= x >> 16;
  return x;
}

/// The rate as the kernels compare it: a 24-bit draw below it is dropped.
constexpr uint32_t dropoutThreshold(double rate) {
  return uint32_t(rate * 16777216.0);
}

/// Whether element `index` of a sample with `key` survives dropout `site`.
constexpr bool dropoutKeeps(uint32_t key, uint32_t site, uint32_t index,
                            uint32_t threshold) {
  uint32_t h =
      dropoutMix(dropoutMix(key ^ dropoutMix(site + 0x9e3779b9u)) ^ index);
  return (h >> 8) >= threshold;
}

/// Sample `sample`'s key under the run's seed: non-negative (a negative key
/// turns dropout off: evaluation).
constexpr int32_t dropoutKey(uint64_t seed, int64_t sample) {
  uint32_t s = dropoutMix(uint32_t(seed) ^ dropoutMix(uint32_t(seed >> 32)));
  return int32_t(dropoutMix(uint32_t(sample) ^ s) & 0x7fffffffu);
}

} // namespace strata::runtime

#endif
