//===- Safetensors.cpp - the safetensors format ---------------------------===//
#include "runtime/io/Safetensors.h"
#include "runtime/io/JsonReader.h"
#include "runtime/io/WholeFile.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

namespace strata::runtime {

namespace {

/// `text` as a JSON string.
std::string quoted(const std::string &text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\')
      out += '\\';
    if (static_cast<unsigned char>(c) < 0x20) {
      char escape[8];
      std::snprintf(escape, sizeof escape, "\\u%04x", c);
      out += escape;
      continue;
    }
    out += c;
  }
  return out + "\"";
}

} // namespace

std::string
writeSafetensors(const std::string &path,
                 const std::map<std::string, HostTensor> &tensors,
                 const std::map<std::string, std::string> &metadata) {
  std::string header = "{";
  if (!metadata.empty()) {
    header += "\"__metadata__\":{";
    for (const auto &[key, value] : metadata)
      header +=
          (header.back() == '{' ? "" : ",") + quoted(key) + ":" + quoted(value);
    header += "}";
  }
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    uint64_t bytes = tensor.values.size() * sizeof(float);
    header += (header.size() > 1 ? "," : "") + quoted(name) +
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
  std::vector<uint8_t> file(8 + header.size() + offset);
  uint64_t length = header.size();
  for (int i = 0; i < 8; ++i)
    file[i] = static_cast<uint8_t>(length >> (8 * i));
  std::memcpy(file.data() + 8, header.data(), header.size());
  uint8_t *data = file.data() + 8 + header.size();
  for (const auto &[name, tensor] : tensors) {
    std::memcpy(data, tensor.values.data(), tensor.values.size() * 4);
    data += tensor.values.size() * 4;
  }
  return writeFileWhole(path, file);
}

namespace {

/// A safetensors header: {"name": {"dtype": "F32", "shape": [...],
/// "data_offsets": [begin, end]}, ...}, and "__metadata__", an object of
/// strings, read into `metadata` or skipped.
bool parseHeader(const std::string &header,
                 std::map<std::string, HostTensor> &tensors,
                 std::map<std::string, std::pair<uint64_t, uint64_t>> &ranges,
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
        if (!r.eat('{'))
          return false;
        if (r.eat('}'))
          continue;
        do {
          std::string key, value;
          if (!r.string(key) || !r.eat(':') || !r.string(value))
            return false;
          (*metadata)[key] = value;
        } while (r.eat(','));
        if (!r.eat('}'))
          return false;
        continue;
      }
      std::string dtype;
      HostTensor tensor;
      std::vector<int64_t> offsets;
      if (!r.eat('{'))
        return false;
      do {
        std::string key;
        if (!r.string(key) || !r.eat(':'))
          return false;
        bool ok = key == "dtype"          ? r.string(dtype)
                  : key == "shape"        ? integers(tensor.shape)
                  : key == "data_offsets" ? integers(offsets)
                                          : false;
        if (!ok)
          return false;
      } while (r.eat(','));
      if (!r.eat('}') || dtype != "F32" || offsets.size() != 2)
        return false;
      tensors[name] = std::move(tensor);
      ranges[name] = {uint64_t(offsets[0]), uint64_t(offsets[1])};
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
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return "cannot open '" + path + "': " + std::strerror(errno);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
  if (bytes.size() < 8)
    return "'" + path + "' is not a safetensors file";
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= uint64_t(bytes[i]) << (8 * i);
  if (length > bytes.size() - 8)
    return "'" + path + "' has a header longer than the file";
  std::string header(bytes.begin() + 8, bytes.begin() + 8 + length);
  std::map<std::string, std::pair<uint64_t, uint64_t>> ranges;
  if (!parseHeader(header, tensors, ranges, metadata))
    return "'" + path + "' has a header strata cannot read (only F32 tensors)";
  uint64_t dataSize = bytes.size() - 8 - length;
  for (auto &[name, tensor] : tensors) {
    auto [begin, end] = ranges[name];
    // The element count bounded by the data at every step: no product
    // wraps around.
    uint64_t elements = 1;
    bool fits = true;
    for (int64_t dim : tensor.shape) {
      fits = fits && (dim == 0 || elements <= dataSize / 4 / uint64_t(dim));
      elements = fits ? elements * uint64_t(dim) : 0;
    }
    if (!fits || end < begin || end > dataSize || end - begin != elements * 4)
      return "'" + path + "': tensor '" + name + "' has a bad byte range";
    tensor.values.resize(elements);
    std::memcpy(tensor.values.data(), bytes.data() + 8 + length + begin,
                end - begin);
  }
  return "";
}

} // namespace strata::runtime
