//===- Plan.h - a loaded, checked plan --------------------------*- C++ -*-===//
//
// The runtime's view of a plan file: plain structs, filled only after the
// frame's checksum, the FlatBuffers verifier and the semantic checks
// (arena bounds, indices, each kernel's operand counts, dtypes and sizes)
// have passed. Nothing after loading needs to distrust the plan.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_PLAN_H
#define STRATA_RUNTIME_PLAN_PLAN_H

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace strata::runtime {

enum class DType : uint8_t { F32, BF16, I32 };
inline size_t dtypeBytes(DType dtype) { return dtype == DType::BF16 ? 2 : 4; }
const char *dtypeName(DType dtype);

/// 1234567 as "1,234,567", for byte counts in messages and reports.
std::string withThousands(uint64_t value);

enum class Arena : uint8_t { Persistent, Workspace, Stash };

struct Buffer {
  std::string name;
  Arena arena = Arena::Workspace;
  uint64_t offset = 0;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  int64_t elements = 0;
  uint64_t bytes = 0;
  bool zeroInit = false;
  uint64_t slotStride = 0; // stash: slot k lies k * slotStride further
  bool isFloat() const { return dtype != DType::I32; }
};

struct AttrValue {
  enum class Kind : uint8_t { Int, Float, Bool, Ints } kind = Kind::Int;
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> ints;
};

struct Instruction {
  std::string kernel;
  int kernelId = -1; // into the kernel table, resolved at load
  std::vector<uint32_t> inputs, outputs;
  std::map<std::string, AttrValue> attrs;
  std::string location;

  const AttrValue *attr(const std::string &key) const {
    auto it = attrs.find(key);
    return it == attrs.end() ? nullptr : &it->second;
  }
  int64_t intAttr(const std::string &key) const { return attr(key)->i; }
  double floatAttr(const std::string &key) const { return attr(key)->f; }
  bool boolAttr(const std::string &key) const { return attr(key)->i != 0; }
};

enum class Phase : uint8_t { Microbatch, Forward, Backward, Optimizer };

const char *phaseName(Phase phase); // "forward", ...

struct Program {
  std::string name;
  std::vector<Instruction> instructions;
  Phase phase = Phase::Microbatch;
  int32_t chunk = -1; // forward and backward: the pipeline chunk
};

/// An fp32 master copy of elements [begin, begin + its size) of a rank's
/// local parameter.
struct MasterSegment {
  uint32_t buffer = 0;
  int64_t begin = 0;
};

struct Param {
  std::string name;
  uint32_t value = 0, grad = 0;
  std::vector<MasterSegment> masters;
  // The global tensor's shape, and with its vocabulary padding (elements
  // past globalShape are padding; whole shards may be).
  std::vector<int64_t> globalShape, paddedShape, shardOffset;
  std::string init;
  double std = 0;
};

/// Calls fn(e, global, padding) for each element e (row-major) of a rank's
/// shard of `param`, whose local shape is `local`: the element's index in
/// the global tensor, and whether it is vocabulary padding (past the
/// global shape, so `global` means nothing).
template <typename Fn>
void forEachShardElement(const Param &param, const std::vector<int64_t> &local,
                         Fn fn) {
  size_t dims = local.size();
  std::vector<int64_t> index(dims, 0), stride(dims, 1);
  for (size_t d = dims; d-- > 1;)
    stride[d - 1] = stride[d] * param.globalShape[d];
  int64_t count = 1;
  for (int64_t extent : local)
    count *= extent;
  for (int64_t e = 0; e < count; ++e) {
    int64_t global = 0;
    bool padding = false;
    for (size_t d = 0; d < dims; ++d) {
      int64_t at = index[d] + param.shardOffset[d];
      padding |= at >= param.globalShape[d];
      global += at * stride[d];
    }
    fn(e, global, padding);
    for (size_t d = dims; d-- > 0;) {
      if (++index[d] < local[d])
        break;
      index[d] = 0;
    }
  }
}

struct Io {
  std::string name;
  uint32_t buffer = 0;
};

struct Step {
  uint32_t program = 0;
  int32_t microbatch = -1;
  int32_t slot = -1; // a pipeline chunk's stash slot
};

struct RankPlan {
  uint32_t rank = 0;
  uint64_t persistentBytes = 0, workspaceBytes = 0, stashBytes = 0;
  std::vector<Buffer> buffers;
  std::vector<Program> programs;
  std::vector<Param> params;
  std::vector<Io> io;
  std::vector<Step> schedule;

  /// The buffer index of an io entry, or -1.
  int ioBuffer(const std::string &name) const {
    for (const Io &entry : io)
      if (entry.name == name)
        return static_cast<int>(entry.buffer);
    return -1;
  }
};

struct Plan {
  std::string model;
  uint32_t microBatchSize = 0, globalBatchSize = 0, numMicrobatches = 0;
  uint32_t seqLength = 0, vocabSize = 0;
  double flopsPerIteration = 0;
  uint32_t tensorParallel = 1, dataParallel = 1, pipelineParallel = 1;
  std::string pipelineSchedule; // "" without pipeline chunks
  std::vector<RankPlan> ranks;

  /// The pipeline stage of a rank (ranks go tp fastest, then dp, then pp).
  uint32_t stageOf(uint32_t rank) const {
    return rank / (tensorParallel * dataParallel);
  }
};

/// Reads and checks the plan at `path`. Returns "" or what is wrong.
std::string loadPlan(const std::string &path, Plan &plan);

/// The same, from the file's bytes.
std::string loadPlanFromBytes(const std::vector<uint8_t> &bytes, Plan &plan);

} // namespace strata::runtime

#endif
