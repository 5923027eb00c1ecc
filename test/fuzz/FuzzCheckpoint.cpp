//===- FuzzCheckpoint.cpp - the checkpoint's marker and metadata
//--------------===//
//
// A checkpoint directory is read back after a crash, a full disk or a copy
// between machines: any marker and metadata.json (and a shard's bytes) is
// refused in one message or read, without a crash or an unchecked size.
// The input is split in three: the marker, the metadata, rank 0's shard.
//
//===----------------------------------------------------------------------===//
#include "FuzzFiles.h"
#include "runtime/train/CheckpointStore.h"

#include <sys/stat.h>

using namespace strata::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view marker, rest, metadata, shard;
  strata::fuzz::splitInput(data, size, marker, rest);
  strata::fuzz::splitInput(reinterpret_cast<const uint8_t *>(rest.data()),
                           rest.size(), metadata, shard);
  const std::string &root = strata::fuzz::scratch();
  strata::fuzz::writeFile("latest_checkpointed_iteration.txt", marker);
  // The marker names a directory by its iteration; iteration 1's is the
  // one the metadata lands in, so that well-formed markers reach it.
  ::mkdir((root + "/iter_0000001").c_str(), 0700);
  strata::fuzz::writeFile("iter_0000001/metadata.json", metadata);
  strata::fuzz::writeFile("iter_0000001/rank_00000.safetensors", shard);
  LoadedCheckpoint checkpoint;
  std::map<std::string, HostTensor> params;
  (void)readCheckpointParams(root, checkpoint, params);
  return 0;
}
