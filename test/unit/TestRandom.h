//===- TestRandom.h - the unit tests' random numbers ------------*- C++ -*-===//
//
// Fresh inputs every run, from a seed the process prints once on first use;
// STRATA_TEST_SEED=N runs with seed N again, to repeat a failure.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TEST_UNIT_TESTRANDOM_H
#define STRATA_TEST_UNIT_TESTRANDOM_H

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

inline std::mt19937_64 &rng() {
  static std::mt19937_64 engine = [] {
    const char *given = std::getenv("STRATA_TEST_SEED");
    uint64_t seed = given ? std::strtoull(given, nullptr, 10)
                          : (uint64_t(std::random_device{}()) << 32) |
                                std::random_device{}();
    std::fprintf(stderr, "random seed %llu (STRATA_TEST_SEED repeats it)\n",
                 static_cast<unsigned long long>(seed));
    return std::mt19937_64(seed);
  }();
  return engine;
}

#endif
