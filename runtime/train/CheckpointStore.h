//===- CheckpointStore.h - checkpoints on disk, whole or not at all -*- C++
//-*-===//
//
// --save DIR writes, every --save-interval iterations and at the end,
//   DIR/iter_0000005/rank_00003.safetensors  each rank's shards
//                                            (ShardedState.h) and a
//                                            checksum of its data
//   DIR/iter_0000005/metadata.json           the run: model, its GELU,
//                                            iteration, consumed samples,
//                                            global batch, seed, ranks,
//                                            layout
//   DIR/latest_checkpointed_iteration.txt    the iteration to load
// (Megatron's directory and marker names). A checkpoint becomes visible
// only whole: the ranks write into iter_0000005.tmp, wait for each other,
// then rank 0 writes metadata.json, renames the directory into place (an
// old one of the same iteration exchanged with it in one step) and
// only then replaces the marker (each file written whole, WholeFile.h). A
// crash at any moment leaves the marker naming the last complete
// checkpoint. --load DIR reads the marker's checkpoint, checks it (every
// rank's file there, its checksum, the model's parameters and shapes, the
// global batch and seed), and reshards it onto the plan's layout.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_TRAIN_CHECKPOINTSTORE_H
#define STRATA_RUNTIME_TRAIN_CHECKPOINTSTORE_H

#include "runtime/exec/Executor.h"
#include "runtime/train/ShardedState.h"

#include <cstdint>
#include <map>
#include <string>

namespace strata::runtime {

/// The directory of iteration `iteration`'s checkpoint under `root`.
std::string checkpointDirectory(const std::string &root, int64_t iteration);

/// Saves this rank's shards of the state after `iteration` under `root`;
/// every rank of the plan calls it at the same iteration (they wait for
/// each other). "" or what went wrong (on every rank if on any).
/// `skipped`: the iterations so far whose update was skipped (a gradient
/// norm that was not finite), which the optimizer's step and the learning
/// rate schedule did not count.
std::string saveCheckpoint(Executor &executor, const std::string &root,
                           int64_t iteration, uint64_t seed,
                           int64_t skipped = 0);

/// A checkpoint read and assembled: the iteration it was saved after and
/// every parameter's global values and moments.
struct LoadedCheckpoint {
  std::string directory, model;
  std::string gelu; // Plan::gelu of the run that saved it
  int64_t iteration = 0;
  int64_t skippedIterations = 0; // absent in older checkpoints: none
  uint32_t savedRanks = 0;
  std::string savedLayout;
  std::map<std::string, GlobalParam> params;
};

/// Reads the checkpoint `root`'s marker names, for `plan` and `seed`.
/// `found` is false when `root` holds no marker (nothing saved yet: the
/// run starts from iteration 0, as Megatron's does). "" or what is wrong,
/// naming the file.
std::string readCheckpoint(const std::string &root, const Plan &plan,
                           uint64_t seed, LoadedCheckpoint &out, bool &found);

/// Every parameter of the checkpoint `root`'s marker names, whole, by
/// strata's names (for export: no model to check against); "" or what is
/// wrong, naming the file.
std::string readCheckpointParams(const std::string &root, LoadedCheckpoint &out,
                                 std::map<std::string, HostTensor> &params);

} // namespace strata::runtime

#endif
