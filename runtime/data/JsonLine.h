//===- JsonLine.h - a string field of one JSON object -----------*- C++ -*-===//
//
// What preprocessing needs of JSON Lines: the text of one key of each
// line's top-level object (Megatron's --json-keys). A small reader of the
// whole grammar (objects, arrays, strings with every escape, numbers,
// literals), so that any valid line is read and any invalid one refused.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DATA_JSONLINE_H
#define STRATA_RUNTIME_DATA_JSONLINE_H

#include <string>
#include <string_view>

namespace strata::runtime {

/// The string value of `key` in the JSON object `line`, as UTF-8, into
/// `out`; "" or what is wrong (not an object, no such key, not a string).
std::string jsonStringField(std::string_view line, std::string_view key,
                            std::string &out);

} // namespace strata::runtime

#endif
