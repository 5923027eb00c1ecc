//===- JsonReader.h - the JSON strata reads and writes ----------*- C++ -*-===//
//
// One reader of the whole JSON grammar (objects, arrays, strings with every
// escape and surrogate pairs, numbers, literals) for every JSON strata
// reads: safetensors headers, JSON Lines documents (Megatron's
// --json-keys). A caller walks the structure it expects with eat, string
// and unsignedInteger, and skips what it does not need with skipValue, so
// any valid input is read and any invalid one refused. jsonString and
// jsonObject write it.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_BASE_JSONREADER_H
#define STRATA_RUNTIME_BASE_JSONREADER_H

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace strata::runtime {

class JsonReader {
public:
  explicit JsonReader(std::string_view text) : text(text) {}

  /// `c` after any whitespace: consumed and true, else false.
  bool eat(char c);
  /// Only whitespace is left.
  bool done();
  /// A string, decoded to UTF-8.
  bool string(std::string &out);
  /// A non-negative integer that fits int64.
  bool unsignedInteger(int64_t &out);
  /// A number (JSON's grammar) that is finite as a double.
  bool number(double &out);
  /// true or false.
  bool boolean(bool &out);
  /// Any value, read and dropped.
  bool skipValue();
  /// An object whose values are all strings, its members added to `out`.
  bool stringObject(std::map<std::string, std::string> &out);

private:
  void space();
  bool hex4(uint32_t &code);
  bool scalar();
  bool numberToken(); // advances over a number, JSON's grammar
  bool skipValue(int depth);

  std::string_view text;
  size_t at = 0;
};

/// The string value of `key` in the JSON object `line`, as UTF-8, into
/// `out`; "" or what is wrong (not an object, no such key, not a string).
/// With `found`, a missing key is no error: *found says whether it is
/// there (and `out` is left as it was when not).
std::string jsonStringField(std::string_view line, std::string_view key,
                            std::string &out, bool *found = nullptr);

// Writing: what strata writes as JSON (safetensors headers, checkpoint
// metadata, Hugging Face configs) is built from these two.

/// `text` as a JSON string, quoted and escaped.
std::string jsonString(std::string_view text);

/// A JSON object of `members` (keys, and values already JSON text), one a
/// line, ending in a newline.
std::string
jsonObject(const std::vector<std::pair<std::string, std::string>> &members);

} // namespace strata::runtime

#endif
