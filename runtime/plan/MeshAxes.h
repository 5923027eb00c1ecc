//===- MeshAxes.h - the parallel axes of a layout, once ---------*- C++ -*-===//
//
// The device mesh's axes: each has an id that plans, collective groups and
// per-rank values name (the ids are kept as they were given, so plans and
// IR written before an axis existed read as they did), a short name for
// reports, and a place in the rank order, which is Megatron's: tensor
// parallel fastest, then context, then data, then pipeline parallel. The
// compiler's @mesh (compiler/Mesh.h) and the runtime's coordinates
// (Plan::coordinates) both read this.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_MESHAXES_H
#define STRATA_RUNTIME_PLAN_MESHAXES_H

#include <array>
#include <cstdint>

namespace strata::mesh {

enum Axis : uint8_t { kTensor = 0, kData = 1, kPipeline = 2, kContext = 3 };
inline constexpr int kAxisCount = 4;

/// Each axis's name in reports and group names, by id.
inline constexpr std::array<const char *, kAxisCount> kAxisNames = {"tp", "dp",
                                                                    "pp", "cp"};

/// The axes from the fastest-varying rank coordinate to the slowest.
inline constexpr std::array<Axis, kAxisCount> kRankOrder = {kTensor, kContext,
                                                            kData, kPipeline};

/// A rank's coordinate along each axis, by id.
using Coordinates = std::array<uint32_t, kAxisCount>;
/// Each axis's size, by id.
using Sizes = std::array<uint32_t, kAxisCount>;

/// The coordinates of `rank` in a mesh of `sizes` (none zero).
inline Coordinates coordinatesOf(uint32_t rank, const Sizes &sizes) {
  Coordinates c{};
  for (Axis axis : kRankOrder) {
    c[axis] = rank % sizes[axis];
    rank /= sizes[axis];
  }
  return c;
}

/// The rank at coordinates `c` in a mesh of `sizes`.
inline uint32_t rankAt(const Coordinates &c, const Sizes &sizes) {
  uint32_t rank = 0;
  for (int k = kAxisCount - 1; k >= 0; --k)
    rank = rank * sizes[kRankOrder[size_t(k)]] + c[kRankOrder[size_t(k)]];
  return rank;
}

} // namespace strata::mesh

#endif
