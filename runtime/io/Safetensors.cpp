//===- Safetensors.cpp - the safetensors format ---------------------------===//
#include "runtime/io/Safetensors.h"
#include "runtime/io/WholeFile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace strata::runtime {

std::string writeSafetensors(const std::string &path,
                             const std::map<std::string, HostTensor> &tensors) {
  std::string header = "{";
  uint64_t offset = 0;
  for (const auto &[name, tensor] : tensors) {
    uint64_t bytes = tensor.values.size() * sizeof(float);
    header += (header.size() > 1 ? "," : "") + std::string("\"") + name +
              "\":{\"dtype\":\"F32\",\"shape\":[";
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

/// Just enough JSON for a safetensors header: objects, arrays, strings and
/// integers.
class HeaderParser {
public:
  explicit HeaderParser(const std::string &text) : text(text) {}

  bool parse(std::map<std::string, HostTensor> &tensors,
             std::map<std::string, std::pair<uint64_t, uint64_t>> &ranges) {
    if (!consume('{'))
      return false;
    if (consume('}'))
      return true;
    do {
      std::string name;
      if (!string(name) || !consume(':'))
        return false;
      if (name == "__metadata__") {
        if (!skipObject())
          return false;
        continue;
      }
      std::string dtype;
      HostTensor tensor;
      std::pair<uint64_t, uint64_t> range{0, 0};
      if (!consume('{'))
        return false;
      do {
        std::string key;
        if (!string(key) || !consume(':'))
          return false;
        if (key == "dtype") {
          if (!string(dtype))
            return false;
        } else if (key == "shape" || key == "data_offsets") {
          std::vector<int64_t> values;
          if (!integers(values))
            return false;
          if (key == "shape") {
            tensor.shape = values;
          } else {
            if (values.size() != 2)
              return false;
            range = {uint64_t(values[0]), uint64_t(values[1])};
          }
        } else {
          return false;
        }
      } while (consume(','));
      if (!consume('}') || dtype != "F32")
        return false;
      tensors[name] = std::move(tensor);
      ranges[name] = range;
    } while (consume(','));
    return consume('}');
  }

private:
  void space() {
    while (pos < text.size() &&
           std::isspace(static_cast<unsigned char>(text[pos])))
      ++pos;
  }
  bool consume(char c) {
    space();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool string(std::string &out) {
    if (!consume('"'))
      return false;
    size_t end = text.find('"', pos);
    if (end == std::string::npos)
      return false;
    out = text.substr(pos, end - pos);
    pos = end + 1;
    return true;
  }
  bool integers(std::vector<int64_t> &out) {
    if (!consume('['))
      return false;
    if (consume(']'))
      return true;
    do {
      space();
      size_t start = pos;
      while (pos < text.size() &&
             std::isdigit(static_cast<unsigned char>(text[pos])))
        ++pos;
      if (start == pos || pos - start > 18)
        return false;
      out.push_back(std::stoll(text.substr(start, pos - start)));
    } while (consume(','));
    return consume(']');
  }
  bool skipObject() {
    if (!consume('{'))
      return false;
    int depth = 1;
    while (pos < text.size() && depth > 0) {
      if (text[pos] == '{')
        ++depth;
      else if (text[pos] == '}')
        --depth;
      ++pos;
    }
    return depth == 0;
  }

  const std::string &text;
  size_t pos = 0;
};

} // namespace

std::string readSafetensors(const std::string &path,
                            std::map<std::string, HostTensor> &tensors) {
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
  if (!HeaderParser(header).parse(tensors, ranges))
    return "'" + path + "' has a header strata cannot read (only F32 tensors)";
  uint64_t dataSize = bytes.size() - 8 - length;
  for (auto &[name, tensor] : tensors) {
    auto [begin, end] = ranges[name];
    uint64_t elements = 1;
    for (int64_t dim : tensor.shape)
      elements *= uint64_t(dim);
    if (end < begin || end > dataSize || end - begin != elements * 4)
      return "'" + path + "': tensor '" + name + "' has a bad byte range";
    tensor.values.resize(elements);
    std::memcpy(tensor.values.data(), bytes.data() + 8 + length + begin,
                end - begin);
  }
  return "";
}

} // namespace strata::runtime
