//===- Text.h - numbers and strings for messages ----------------*- C++ -*-===//
//
// How every tool writes a count, a size or a string it read from an
// untrusted file into a message, so that the same quantity reads the same
// everywhere.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_BASE_TEXT_H
#define STRATA_RUNTIME_BASE_TEXT_H

#include <cstdint>
#include <string>

namespace strata::runtime {

/// 1234567 as "1,234,567", for byte counts in messages and reports.
std::string withThousands(uint64_t value);
/// "12.50 GiB": bytes in the largest binary unit that keeps the number >= 1.
std::string humanBytes(uint64_t bytes);
/// A size a user wrote, "24GiB", "512MiB", "64KiB", "1TiB" or a count of
/// bytes, to bytes; false for anything else or past 63 bits.
bool parseBytes(const std::string &text, int64_t &bytes);
/// `text` for a message: control characters and bytes past ASCII escaped
/// as \xNN, at most 64 characters (then "...").
std::string printable(const std::string &text);

} // namespace strata::runtime

#endif
