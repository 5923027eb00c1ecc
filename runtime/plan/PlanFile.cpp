//===- PlanFile.cpp - the frame around a plan's FlatBuffer ----------------===//
#include "runtime/plan/PlanFile.h"

#include <array>
#include <cstring>

namespace strata::plan {

static constexpr char kMagic[8] = {'S', 'T', 'R', 'A', 'T', 'A', 'P', 'L'};

uint32_t crc32(const uint8_t *data, size_t size) {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k)
        c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  uint32_t crc = 0xFFFFFFFFu;
  for (size_t i = 0; i < size; ++i)
    crc = table[(crc ^ data[i]) & 0xFF] ^ (crc >> 8);
  return crc ^ 0xFFFFFFFFu;
}

static void putU32(uint8_t *out, uint32_t value) {
  for (int i = 0; i < 4; ++i)
    out[i] = static_cast<uint8_t>(value >> (8 * i));
}
static uint32_t getU32(const uint8_t *in) {
  uint32_t value = 0;
  for (int i = 0; i < 4; ++i)
    value |= static_cast<uint32_t>(in[i]) << (8 * i);
  return value;
}

std::vector<uint8_t> encodePlanFile(const uint8_t *payload, size_t size) {
  std::vector<uint8_t> file(kPlanHeaderBytes + size);
  std::memcpy(file.data(), kMagic, sizeof kMagic);
  putU32(file.data() + 8, kPlanFormatVersion);
  putU32(file.data() + 12, crc32(payload, size));
  std::memcpy(file.data() + kPlanHeaderBytes, payload, size);
  return file;
}

std::string decodePlanFile(const std::vector<uint8_t> &file,
                           const uint8_t *&payload, size_t &size) {
  if (file.size() < kPlanHeaderBytes ||
      std::memcmp(file.data(), kMagic, sizeof kMagic) != 0)
    return "not a strata plan (no STRATAPL header)";
  uint32_t version = getU32(file.data() + 8);
  if (version != kPlanFormatVersion)
    return "plan format version " + std::to_string(version) +
           ", but this strata-run reads version " +
           std::to_string(kPlanFormatVersion) +
           ": compile the plan again with the matching strata-compile";
  payload = file.data() + kPlanHeaderBytes;
  size = file.size() - kPlanHeaderBytes;
  if (crc32(payload, size) != getU32(file.data() + 12))
    return "the plan is corrupt or truncated (checksum mismatch over " +
           std::to_string(size) + " bytes)";
  return "";
}

} // namespace strata::plan
