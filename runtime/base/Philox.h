//===- Philox.h - counter-based random numbers ------------------*- C++ -*-===//
//
// Philox4x32-10 (Salmon et al., SC'11): the i-th draw depends only on the
// key and i, not on any order of calls. Initialization draws element e of
// a parameter from (seed, name) at counter e, so a rank holding a shard
// computes exactly the values the whole tensor would hold there.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_BASE_PHILOX_H
#define STRATA_RUNTIME_BASE_PHILOX_H

#include <array>
#include <cmath>
#include <cstdint>
#include <string>

namespace strata::runtime {

inline std::array<uint32_t, 4> philox4x32(uint64_t counter, uint64_t key,
                                          uint64_t stream = 0) {
  uint32_t c[4] = {static_cast<uint32_t>(counter),
                   static_cast<uint32_t>(counter >> 32),
                   static_cast<uint32_t>(stream),
                   static_cast<uint32_t>(stream >> 32)};
  uint32_t k0 = static_cast<uint32_t>(key), k1 = static_cast<uint32_t>(key >> 32);
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      k0 += 0x9E3779B9u;
      k1 += 0xBB67AE85u;
    }
    uint64_t p0 = uint64_t(0xD2511F53u) * c[0];
    uint64_t p1 = uint64_t(0xCD9E8D57u) * c[2];
    uint32_t next[4] = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k0,
                        static_cast<uint32_t>(p1),
                        static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k1,
                        static_cast<uint32_t>(p0)};
    for (int i = 0; i < 4; ++i)
      c[i] = next[i];
  }
  return {c[0], c[1], c[2], c[3]};
}

/// A 64-bit key from a seed and a name (FNV-1a of the name, mixed).
inline uint64_t philoxKey(uint64_t seed, const std::string &name) {
  uint64_t hash = 0xCBF29CE484222325ull;
  for (unsigned char c : name) {
    hash ^= c;
    hash *= 0x100000001B3ull;
  }
  return hash ^ (seed * 0x9E3779B97F4A7C15ull);
}

/// A standard normal draw for element `index` (Box-Muller on two uniforms).
inline double philoxNormal(uint64_t key, uint64_t index) {
  std::array<uint32_t, 4> r = philox4x32(index, key);
  // Uniforms in (0, 1]: 53-bit from two words, never 0 for the log.
  uint64_t a = (uint64_t(r[0]) << 21) ^ r[1];
  uint64_t b = (uint64_t(r[2]) << 21) ^ r[3];
  double u1 = (double(a & ((1ull << 53) - 1)) + 1.0) / 9007199254740992.0;
  double u2 = double(b & ((1ull << 53) - 1)) / 9007199254740992.0;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * M_PI * u2);
}

/// A uniform integer in [0, bound) for `index` of `stream`.
inline uint32_t philoxBelow(uint64_t key, uint64_t index, uint64_t stream,
                            uint32_t bound) {
  std::array<uint32_t, 4> r = philox4x32(index, key, stream);
  uint64_t wide = (uint64_t(r[0]) << 32) | r[1];
  return static_cast<uint32_t>(wide % bound);
}

} // namespace strata::runtime

#endif
