//===- ShardedState.h - a rank's training state, as shards ------*- C++ -*-===//
//
// What a checkpoint holds of each rank: each parameter's shard (its local
// values, exact fp32 where the rank keeps them: fp32 parameters or its
// master segments) and the Adam moments of the elements it owns, each
// with the metadata that places it in the global tensor (global shape,
// the shard's offset, its exact ranges, its moment ranges). Any layout's
// shards assemble into global tensors, and any layout takes its shards
// from those: loading under another layout (t, p, v, d, sequence parallel,
// distributed optimizer on or off) reshards parameters and moments alike.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_TRAIN_SHARDEDSTATE_H
#define STRATA_RUNTIME_TRAIN_SHARDEDSTATE_H

#include "runtime/exec/Executor.h"
#include "runtime/io/Safetensors.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata::runtime {

/// One rank's shards: tensors NAME (the local shard), NAME.exp_avg and
/// NAME.exp_avg_sq (the owned elements' moments, end to end), and for each
/// parameter NAME the metadata "global D.. offset O.. exact B L.. state B
/// L.." (each list after its count).
struct RankShards {
  std::map<std::string, HostTensor> tensors;
  std::map<std::string, std::string> metadata;
};
RankShards shardsOf(Executor &executor);

/// A parameter's global tensors, assembled from shards: its values (and
/// which are known, exactly or not) and its moments (and which are known).
struct GlobalParam {
  std::vector<int64_t> shape;
  std::vector<float> value, expAvg, expAvgSq;
  std::vector<uint8_t> known;   // 0 none, 1 a copy (bf16), 2 exact
  std::vector<uint8_t> moments; // 1 where known; empty: weights alone
};

/// Adds one rank's shards of the parameters `wanted` names (with their
/// global shapes) to `global`, skipping the others; with no `wanted`,
/// every parameter, its global shape as the shards say, of at most
/// `maxElements` elements. "" or what is wrong with them, such as a shard
/// of another global shape.
std::string addShards(const RankShards &shards,
                      const std::map<std::string, std::vector<int64_t>> *wanted,
                      int64_t maxElements,
                      std::map<std::string, GlobalParam> &global);

/// Sets `executor`'s parameters, masters and moments from `global` (on the
/// compute stream, synchronized); "" or what is missing, such as a
/// parameter the shards do not hold or one of another shape.
std::string restoreShards(Executor &executor,
                          const std::map<std::string, GlobalParam> &global);

} // namespace strata::runtime

#endif
