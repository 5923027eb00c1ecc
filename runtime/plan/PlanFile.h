//===- PlanFile.h - the frame around a plan's FlatBuffer --------*- C++ -*-===//
//
// A plan file is
//   bytes 0..7    magic "STRATAPL"
//   bytes 8..11   format version, little endian
//   bytes 12..15  CRC-32 (IEEE) of the payload, little endian
//   bytes 16..    the FlatBuffer (plan.fbs)
// The checksum makes any flipped byte an error rather than a silently
// different plan: FlatBuffers' verifier checks structure, not values.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PLAN_PLANFILE_H
#define STRATA_RUNTIME_PLAN_PLANFILE_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::plan {

inline constexpr uint32_t kPlanFormatVersion = 11;
inline constexpr size_t kPlanHeaderBytes = 16;

uint32_t crc32(const uint8_t *data, size_t size);

/// The frame and payload, ready to write.
std::vector<uint8_t> encodePlanFile(const uint8_t *payload, size_t size);

/// Checks the frame; on success points `payload` into `file` and returns "",
/// else returns what is wrong.
std::string decodePlanFile(const std::vector<uint8_t> &file,
                           const uint8_t *&payload, size_t &size);

} // namespace strata::plan

#endif
