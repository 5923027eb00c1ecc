//===- BFloat16.h - bf16 storage on the CPU ---------------------*- C++ -*-===//
//
// bf16 is the top half of an f32. Rounding is to nearest, ties to even, as
// CUDA's __float2bfloat16 does; NaN stays NaN.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_BASE_BFLOAT16_H
#define STRATA_RUNTIME_BASE_BFLOAT16_H

#include <cstdint>
#include <cstring>

namespace strata::runtime {

inline uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7F800000u) == 0x7F800000u && (bits & 0x007FFFFFu))
    return static_cast<uint16_t>((bits >> 16) | 0x0040u); // quiet NaN
  uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

inline float bf16ToFloat(uint16_t value) {
  uint32_t bits = static_cast<uint32_t>(value) << 16;
  float out;
  std::memcpy(&out, &bits, 4);
  return out;
}

/// n bf16 values widened to f32, and f32 values rounded to bf16.
inline void widenBf16(const uint16_t *from, float *to, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    to[i] = bf16ToFloat(from[i]);
}
inline void narrowToBf16(const float *from, uint16_t *to, int64_t n) {
  for (int64_t i = 0; i < n; ++i)
    to[i] = floatToBf16(from[i]);
}

/// The f32 nearest that bf16 can hold: what storing and loading gives.
inline float roundToBf16(float value) {
  return bf16ToFloat(floatToBf16(value));
}

} // namespace strata::runtime

#endif
