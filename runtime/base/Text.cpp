//===- Text.cpp - numbers and strings for messages ------------------------===//
#include "runtime/base/Text.h"

#include <cctype>
#include <cstdint>
#include <cstdio>

namespace strata::runtime {

std::string withThousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

std::string printable(const std::string &text) {
  std::string out;
  for (unsigned char c : text.substr(0, 64)) {
    if (c >= 0x20 && c < 0x7f) {
      out += char(c);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02x", c);
      out += escaped;
    }
  }
  return text.size() > 64 ? out + "..." : out;
}

bool parseBytes(const std::string &text, int64_t &bytes) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit((unsigned char)text[digits]))
    ++digits;
  if (digits == 0 || digits > 18) // 18 digits fit 63 bits
    return false;
  std::string unit = text.substr(digits);
  int shift = unit.empty()    ? 0
              : unit == "KiB" ? 10
              : unit == "MiB" ? 20
              : unit == "GiB" ? 30
              : unit == "TiB" ? 40
                              : -1;
  if (shift < 0)
    return false;
  int64_t count = std::stoll(text.substr(0, digits));
  if (count > (INT64_MAX >> shift))
    return false;
  bytes = count << shift;
  return true;
}

} // namespace strata::runtime
