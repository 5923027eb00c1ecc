//===- ParameterGather.h - parameters gathered from every rank --*- C++ -*-===//
//
// --save-params writes global tensors: each rank contributes its pieces
// (its shard of each parameter it holds, exact where it keeps fp32), and
// they are assembled by each parameter's shard offset. A parameter held by
// several pipeline stages (a tied embedding) arrives once per stage, with
// equal values.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_TRAIN_PARAMETERGATHER_H
#define STRATA_RUNTIME_TRAIN_PARAMETERGATHER_H

#include "runtime/exec/Executor.h"
#include "runtime/io/Safetensors.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace strata::runtime {

/// What one rank holds of each parameter, for the checkpoint: its local
/// values, and which of them are exact fp32 (its master segments when the
/// model reads bf16).
struct ParamPiece {
  std::vector<float> values;
  std::vector<std::pair<int64_t, int64_t>> exact; // [begin, end)
};

/// This rank's pieces, in the order of its plan's parameters.
std::vector<ParamPiece> piecesOf(Executor &executor);

/// Assembles global tensors from every rank's pieces (indexed by rank):
/// first every value, then the exact parts over them.
std::map<std::string, HostTensor>
assemble(const Plan &plan, const std::vector<std::vector<ParamPiece>> &all);

} // namespace strata::runtime

#endif
