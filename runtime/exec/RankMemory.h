//===- RankMemory.h - one rank's arenas -------------------------*- C++ -*-===//
#ifndef STRATA_RUNTIME_EXEC_RANKMEMORY_H
#define STRATA_RUNTIME_EXEC_RANKMEMORY_H

#include "runtime/plan/Plan.h"

#include <cstdint>
#include <memory>
#include <vector>

namespace strata::runtime {

/// The persistent, workspace and stash arenas of one rank, and what lives
/// there. A stash buffer has a copy per slot: data() finds the one of the
/// slot the current step runs in.
/// Arenas start filled with 0xFF, a byte no float or id the kernels write
/// ends in (it would be the top byte of a negative NaN, or a negative id),
/// so the highest byte that differs is the measured high-water mark.
class RankMemory {
public:
  explicit RankMemory(const RankPlan &rank);

  const RankPlan &plan() const { return rank; }
  void *data(uint32_t buffer) const;
  /// The stash slot of the step about to run (-1: none).
  void setSlot(int32_t value) { slot = value; }
  float *f32(uint32_t buffer) const {
    return static_cast<float *>(data(buffer));
  }
  template <typename T> T *data(uint32_t buffer) const {
    return static_cast<T *>(data(buffer));
  }

  /// Zeroes the zero_init buffers (accumulators, moments) and draws every
  /// parameter from the seed, on the global tensor; vocabulary padding
  /// (past the global shape) is zero.
  void initializeParameters(uint64_t seed);

  /// A parameter's local values as the model reads them, in fp32.
  std::vector<float> parameterValues(const Param &param) const;
  /// Sets a parameter's local values and its master segments.
  void setParameterValues(const Param &param, const float *values);

  /// The highest byte written in an arena, +1.
  uint64_t highWater(Arena arena) const;

private:
  const RankPlan &rank;
  struct Free {
    void operator()(uint8_t *p) const { std::free(p); }
  };
  std::unique_ptr<uint8_t, Free> persistent, workspace, stash;
  int32_t slot = -1;
};

} // namespace strata::runtime

#endif
