//===- Parameters.cpp - a rank's parameters, from the host ----------------===//
#include "runtime/exec/Parameters.h"
#include "runtime/base/BFloat16.h"
#include "runtime/base/Philox.h"

#include <cstring>

namespace strata::runtime {

void initializeParameters(Executor &executor, uint64_t seed) {
  const RankPlan &rank = executor.rankPlan();
  Backend &device = executor.device();
  for (size_t i = 0; i < rank.buffers.size(); ++i)
    if (rank.buffers[i].zeroInit)
      device.fillZero(Stream::Compute, executor.address(uint32_t(i)),
                      rank.buffers[i].bytes);
  for (const Param &param : rank.params) {
    const Buffer &value = rank.buffers[param.value];
    std::vector<float> values(value.elements);
    uint64_t key = philoxKey(seed, param.name);
    // The initializer decided once, not per element.
    bool zeros = param.init == "zeros", ones = param.init == "ones";
    auto initialize = [&](int64_t e, int64_t global, bool padding) {
      if (padding || zeros)
        values[e] = 0.0f;
      else if (ones)
        values[e] = 1.0f;
      else
        values[e] = static_cast<float>(param.std * philoxNormal(key, global));
    };
    // Counter-based draws: any split across threads gives the same values
    // (a 1.3B model's normals took a minute on one core).
    const int64_t chunk = int64_t(1) << 16;
    int64_t chunks = (value.elements + chunk - 1) / chunk;
#pragma omp parallel for schedule(static) if (chunks > 1)
    for (int64_t c = 0; c < chunks; ++c)
      forEachShardElement(param, value.shape, initialize, c * chunk,
                          (c + 1) * chunk);
    setParameterValues(executor, param, values.data());
  }
  device.synchronizeCompute();
}

std::vector<float> parameterValues(Executor &executor, const Param &param) {
  const RankPlan &rank = executor.rankPlan();
  Backend &device = executor.device();
  const Buffer &value = rank.buffers[param.value];
  std::vector<float> out(value.elements);
  device.synchronize();
  if (value.dtype == DType::BF16) {
    std::vector<uint16_t> bits(value.elements);
    device.copyOut(Stream::Compute, bits.data(), executor.address(param.value),
                   value.bytes);
    device.synchronizeCompute();
    widenBf16(bits.data(), out.data(), value.elements);
  } else {
    device.copyOut(Stream::Compute, out.data(), executor.address(param.value),
                   value.bytes);
  }
  // Masters hold the fp32 truth where they exist.
  if (rank.master != kNoBuffer)
    for (const StateSegment &segment : param.state)
      device.copyOut(Stream::Compute, out.data() + segment.begin,
                     static_cast<char *>(executor.address(rank.master)) +
                         segment.state * 4,
                     segment.length * 4);
  device.synchronizeCompute();
  return out;
}

void setParameterValues(Executor &executor, const Param &param,
                        const float *values) {
  const RankPlan &rank = executor.rankPlan();
  Backend &device = executor.device();
  const Buffer &value = rank.buffers[param.value];
  if (rank.master != kNoBuffer)
    for (const StateSegment &segment : param.state)
      device.copyIn(Stream::Compute,
                    static_cast<char *>(executor.address(rank.master)) +
                        segment.state * 4,
                    values + segment.begin, segment.length * 4);
  // copyIn may return before the copy is done, but its host bytes may be
  // reused at once: no wait here (initializeParameters waits once).
  if (value.dtype == DType::BF16) {
    std::vector<uint16_t> bits(value.elements);
    narrowToBf16(values, bits.data(), value.elements);
    device.copyIn(Stream::Compute, executor.address(param.value), bits.data(),
                  value.bytes);
  } else {
    device.copyIn(Stream::Compute, executor.address(param.value), values,
                  value.bytes);
  }
}

} // namespace strata::runtime
