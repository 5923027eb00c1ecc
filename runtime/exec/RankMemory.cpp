//===- RankMemory.cpp - one rank's arenas ---------------------------------===//
#include "runtime/exec/RankMemory.h"
#include "runtime/exec/BFloat16.h"
#include "runtime/exec/Philox.h"

#include <cstdlib>
#include <cstring>
#include <new>

namespace strata::runtime {

static uint8_t *allocateArena(uint64_t bytes) {
  uint64_t rounded = (bytes + 63) / 64 * 64 + 64;
  auto *memory = static_cast<uint8_t *>(std::aligned_alloc(64, rounded));
  if (!memory)
    throw std::bad_alloc();
  std::memset(memory, 0xFF, rounded);
  return memory;
}

RankMemory::RankMemory(const RankPlan &rank)
    : rank(rank), persistent(allocateArena(rank.persistentBytes)),
      workspace(allocateArena(rank.workspaceBytes)),
      stash(allocateArena(rank.stashBytes)) {}

void *RankMemory::data(uint32_t index) const {
  const Buffer &buffer = rank.buffers[index];
  switch (buffer.arena) {
  case Arena::Persistent:
    return persistent.get() + buffer.offset;
  case Arena::Workspace:
    return workspace.get() + buffer.offset;
  case Arena::Stash:
    // The plan's checks keep every slot a step names inside the arena.
    return stash.get() + buffer.offset +
           buffer.slotStride * uint64_t(slot < 0 ? 0 : slot);
  }
  return nullptr;
}

uint64_t RankMemory::highWater(Arena arena) const {
  const uint8_t *base = arena == Arena::Persistent  ? persistent.get()
                        : arena == Arena::Workspace ? workspace.get()
                                                    : stash.get();
  uint64_t size = arena == Arena::Persistent  ? rank.persistentBytes
                  : arena == Arena::Workspace ? rank.workspaceBytes
                                              : rank.stashBytes;
  uint64_t rounded = (size + 63) / 64 * 64 + 64;
  while (rounded > 0 && base[rounded - 1] == 0xFF)
    --rounded;
  return rounded;
}

void RankMemory::initializeParameters(uint64_t seed) {
  for (size_t i = 0; i < rank.buffers.size(); ++i)
    if (rank.buffers[i].zeroInit)
      std::memset(data(i), 0, rank.buffers[i].bytes);
  for (const Param &param : rank.params) {
    const Buffer &value = rank.buffers[param.value];
    std::vector<float> values(value.elements);
    uint64_t key = philoxKey(seed, param.name);
    forEachShardElement(param, value.shape,
                        [&](int64_t e, int64_t global, bool padding) {
                          if (padding || param.init == "zeros")
                            values[e] = 0.0f;
                          else if (param.init == "ones")
                            values[e] = 1.0f;
                          else
                            values[e] = static_cast<float>(
                                param.std * philoxNormal(key, global));
                        });
    setParameterValues(param, values.data());
  }
}

std::vector<float> RankMemory::parameterValues(const Param &param) const {
  const Buffer &value = rank.buffers[param.value];
  std::vector<float> out(value.elements);
  if (value.dtype == DType::BF16) {
    auto *bits = static_cast<const uint16_t *>(data(param.value));
    for (int64_t e = 0; e < value.elements; ++e)
      out[e] = bf16ToFloat(bits[e]);
  } else {
    std::memcpy(out.data(), data(param.value), value.bytes);
  }
  // Masters hold the fp32 truth where they exist.
  for (const MasterSegment &segment : param.masters)
    std::memcpy(out.data() + segment.begin, data(segment.buffer),
                rank.buffers[segment.buffer].bytes);
  return out;
}

void RankMemory::setParameterValues(const Param &param, const float *values) {
  const Buffer &value = rank.buffers[param.value];
  for (const MasterSegment &segment : param.masters)
    std::memcpy(data(segment.buffer), values + segment.begin,
                rank.buffers[segment.buffer].bytes);
  if (value.dtype == DType::BF16) {
    auto *out = static_cast<uint16_t *>(data(param.value));
    for (int64_t e = 0; e < value.elements; ++e)
      out[e] = floatToBf16(values[e]);
  } else {
    std::memcpy(data(param.value), values, value.elements * sizeof(float));
  }
}

} // namespace strata::runtime
