//===- NumpyRandom.h - numpy's legacy RandomState shuffle -------*- C++ -*-===//
//
// Megatron shuffles its documents and samples with
// numpy.random.RandomState(seed).shuffle; to read the same samples in the
// same order, strata draws the same numbers: the seed initializes a
// Mersenne Twister as MT19937's reference init_genrand does (std::mt19937
// with that seed is the same generator), and shuffle is Fisher-Yates from
// the last element down, each swap partner drawn on [0, i] by masking
// 32-bit outputs to i's bit width and drawing again while above i (64-bit
// draws, two outputs high word first, past 2^32 - 1).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DATA_NUMPYRANDOM_H
#define STRATA_RUNTIME_DATA_NUMPYRANDOM_H

#include <cstdint>
#include <random>
#include <utility>

namespace strata::runtime {

class NumpyRandomState {
public:
  explicit NumpyRandomState(uint32_t seed) : mt(seed) {}

  /// A number on [0, max], as numpy's random_interval draws it.
  uint64_t interval(uint64_t max) {
    if (max == 0)
      return 0;
    uint64_t mask = max;
    for (int shift = 1; shift <= 32; shift *= 2)
      mask |= mask >> shift;
    uint64_t value;
    if (max <= 0xFFFFFFFFull) {
      while ((value = (uint64_t(mt()) & mask)) > max) {
      }
    } else {
      auto draw64 = [&] {
        uint64_t high = mt();
        return high << 32 | uint64_t(mt());
      };
      while ((value = (draw64() & mask)) > max) {
      }
    }
    return value;
  }

  /// numpy's RandomState.shuffle of a one-dimensional array.
  template <typename T> void shuffle(T *data, uint64_t n) {
    for (uint64_t i = n; i-- > 1;) {
      uint64_t j = interval(i);
      std::swap(data[i], data[j]);
    }
  }

private:
  std::mt19937 mt;
};

} // namespace strata::runtime

#endif
