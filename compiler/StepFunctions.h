//===- StepFunctions.h - the names of a training step's functions -*- C++
//-*-===//
//
// The passes find a step's functions by name: the microbatch's forward and
// backward whole (Autodiff's), each pipeline chunk's forward and backward
// after the split (PipelineSplit's; with the backward cut in two, its
// weights' gradients apart), and the optimizer (Optimizer's). The
// names are written here once; the schedule refers to them and the exec
// programs take their phases from them.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_STEPFUNCTIONS_H
#define STRATA_COMPILER_STEPFUNCTIONS_H

#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"

#include <cstdint>
#include <string>

namespace strata::step {

/// A microbatch's forward and backward, one function before the split.
inline constexpr llvm::StringLiteral kMicrobatch = "microbatch";
/// The optimizer's step over the parameters and their gradients.
inline constexpr llvm::StringLiteral kOptimizer = "optimizer";
/// Pipeline chunk c's forward is kForwardPrefix + c, its backward
/// kBackwardPrefix + c.
inline constexpr llvm::StringLiteral kForwardPrefix = "forward_";
inline constexpr llvm::StringLiteral kBackwardPrefix = "backward_";
/// With the backward cut in two (zero-bubble schedules): chunk c's
/// weights' gradients, kWeightPrefix + c, apart from kBackwardPrefix + c's
/// input gradient.
inline constexpr llvm::StringLiteral kWeightPrefix = "weight_";

inline std::string forwardOf(int64_t chunk) {
  return (kForwardPrefix + llvm::Twine(chunk)).str();
}
inline std::string backwardOf(int64_t chunk) {
  return (kBackwardPrefix + llvm::Twine(chunk)).str();
}
inline std::string weightOf(int64_t chunk) {
  return (kWeightPrefix + llvm::Twine(chunk)).str();
}

} // namespace strata::step

#endif
