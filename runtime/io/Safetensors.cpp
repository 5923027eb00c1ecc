//===- Safetensors.cpp - the safetensors format ---------------------------===//
#include "runtime/io/Safetensors.h"
#include "runtime/base/BFloat16.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace strata::runtime {

std::string
writeSafetensors(const std::string &path,
                 const std::map<std::string, HostTensor> &tensors,
                 const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata)
      header += (header.back() == '{' ? "" : ",") + jsonString(key) + ":" +
                jsonString(value);
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    uint64_t bytes = tensor.values.size() * sizeof(float);
    header += (header.size() > 1 ? "," : "") + jsonString(name) +
              ":{\"dtype\":\"F32\",\"shape\":[";
    for (size_t d = 0; d < tensor.shape.size(); ++d)
      header += (d ? "," : "") + std::to_string(tensor.shape[d]);
    header += "],\"data_offsets\":[" + std::to_string(offset) + "," +
              std::to_string(offset + bytes) + "]}";
    offset += bytes;
  }
  header += "}";
  while (header.size() % 8 != 0)
    header += ' ';
  // Streamed to the file: the length, the header, each tensor's bytes.
  std::string length(8, '\0');
  for (int i = 0; i < 8; ++i)
    length[i] = char(uint64_t(header.size()) >> (8 * i));
  WholeFileWriter file;
  std::string error = file.open(path);
  if (error.empty())
    error = file.write(length);
  if (error.empty())
    error = file.write(header);
  for (auto it = tensors.begin(); error.empty() && it != tensors.end(); ++it)
    error = file.write(std::string_view(
        reinterpret_cast<const char *>(it->second.values.data()),
        it->second.values.size() * sizeof(float)));
  return error.empty() ? file.commit() : error;
}

namespace {

/// Bytes per element of a safetensors dtype, 0 for one strata does not
/// know.
size_t widthOf(const std::string &dtype) {
  static const std::map<std::string, size_t> widths = {
      {"F64", 8}, {"F32", 4}, {"F16", 2}, {"BF16", 2}, {"BOOL", 1},
      {"U8", 1},  {"I8", 1},  {"U16", 2}, {"I16", 2},  {"U32", 4},
      {"I32", 4}, {"U64", 8}, {"I64", 8}};
  auto it = widths.find(dtype);
  return it == widths.end() ? 0 : it->second;
}

bool isFloat(const std::string &dtype) {
  return dtype == "F64" || dtype == "F32" || dtype == "F16" || dtype == "BF16";
}

/// An IEEE half's value.
float halfToFloat(uint16_t h) {
  int exponent = (h >> 10) & 0x1F, mantissa = h & 0x3FF;
  float sign = (h & 0x8000) ? -1.0f : 1.0f;
  if (exponent == 0)
    return sign * std::ldexp(float(mantissa), -24);
  if (exponent == 31)
    return mantissa ? NAN : sign * INFINITY;
  return sign * std::ldexp(float(mantissa | 0x400), exponent - 25);
}

/// A tensor as the header describes it: its bytes [begin, end) of the data.
struct Entry {
  std::string dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;
};

/// A safetensors header: {"name": {"dtype": "F32", "shape": [...],
/// "data_offsets": [begin, end]}, ...}, and "__metadata__", an object of
/// strings, read into `metadata` or skipped.
bool parseHeader(const std::string &header,
                 std::map<std::string, Entry> &entries,
                 std::map<std::string, std::string> *metadata) {
  JsonReader r(header);
  auto integers = [&](std::vector<int64_t> &out) {
    if (!r.eat('['))
      return false;
    if (r.eat(']'))
      return true;
    do {
      int64_t value;
      if (!r.unsignedInteger(value))
        return false;
      out.push_back(value);
    } while (r.eat(','));
    return r.eat(']');
  };
  if (!r.eat('{'))
    return false;
  if (!r.eat('}')) {
    do {
      std::string name;
      if (!r.string(name) || !r.eat(':'))
        return false;
      if (name == "__metadata__" && !metadata) {
        if (!r.skipValue())
          return false;
        continue;
      }
      if (name == "__metadata__") {
        if (!r.stringObject(*metadata))
          return false;
        continue;
      }
      Entry entry;
      std::vector<int64_t> offsets;
      if (!r.eat('{'))
        return false;
      do {
        std::string key;
        if (!r.string(key) || !r.eat(':'))
          return false;
        bool ok = key == "dtype"          ? r.string(entry.dtype)
                  : key == "shape"        ? integers(entry.shape)
                  : key == "data_offsets" ? integers(offsets)
                                          : false;
        if (!ok)
          return false;
      } while (r.eat(','));
      if (!r.eat('}') || !widthOf(entry.dtype) || offsets.size() != 2)
        return false;
      entry.begin = uint64_t(offsets[0]);
      entry.end = uint64_t(offsets[1]);
      entries[name] = std::move(entry);
    } while (r.eat(','));
    if (!r.eat('}'))
      return false;
  }
  return r.done();
}

} // namespace

std::string readSafetensors(const std::string &path,
                            std::map<std::string, HostTensor> &tensors,
                            std::map<std::string, std::string> *metadata) {
  std::string file;
  if (std::string error = readFileWhole(path, file, kWeightsFile); !error.empty())
    return error;
  const auto *bytes = reinterpret_cast<const uint8_t *>(file.data());
  if (file.size() < 8)
    return "'" + path + "' is not a safetensors file";
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(bytes[i]) << (8 * i);
  if (length > file.size() - 8)
    return "'" + path + "' has a header longer than the file";
  std::map<std::string, Entry> entries;
  if (!parseHeader(file.substr(8, length), entries, metadata))
    return "'" + path + "' has a header strata cannot read";
  uint64_t dataSize = file.size() - 8 - length;
  const uint8_t *data = bytes + 8 + length;
  for (auto &[name, entry] : entries) {
    const auto &[dtype, shape, begin, end] = entry;
    uint64_t width = widthOf(dtype);
    // The element count bounded by the data at every step: no product
    // wraps around.
    uint64_t elements = 1;
    bool fits = true;
    for (int64_t dim : shape) {
      fits = fits && (dim == 0 || elements <= dataSize / width / uint64_t(dim));
      elements = fits ? elements * uint64_t(dim) : 0;
    }
    if (!fits || end < begin || end > dataSize ||
        end - begin != elements * width)
      return "'" + path + "': tensor '" + name + "' has a bad byte range";
    // Weights are floats: other tensors (masks, counters) are left out.
    if (!isFloat(dtype))
      continue;
    // The conversion chosen once a tensor.
    HostTensor &tensor = tensors[name];
    tensor.shape = shape;
    tensor.values.resize(elements);
    if (elements == 0)
      continue; // an empty tensor: nothing to copy (memcpy takes no null)
    const uint8_t *at = data + begin;
    if (dtype == "F32") {
      std::memcpy(tensor.values.data(), at, elements * 4);
    } else if (dtype == "BF16") {
      std::vector<uint16_t> bits(elements);
      std::memcpy(bits.data(), at, elements * 2);
      widenBf16(bits.data(), tensor.values.data(), int64_t(elements));
    } else if (dtype == "F16") {
      for (uint64_t e = 0; e < elements; ++e) {
        uint16_t half;
        std::memcpy(&half, at + e * 2, 2);
        tensor.values[e] = halfToFloat(half);
      }
    } else { // F64
      for (uint64_t e = 0; e < elements; ++e) {
        double wide;
        std::memcpy(&wide, at + e * 8, 8);
        tensor.values[e] = float(wide);
      }
    }
  }
  return "";
}

} // namespace strata::runtime
