//===- IndexedDataset.cpp - Megatron's .bin/.idx token files --------------===//
#include "runtime/data/IndexedDataset.h"
#include "runtime/base/WholeFile.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace strata::runtime {

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', 0, 0};
constexpr uint64_t kVersion = 1;
constexpr size_t kHeaderBytes = 9 + 8 + 1 + 8 + 8;

template <typename T> void put(std::string &out, T value) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T)); // little endian, as x86-64 is
  out.append(bytes, sizeof(T));
}

template <typename T> T get(const uint8_t *at) {
  T value;
  std::memcpy(&value, at, sizeof(T));
  return value;
}

size_t bytesOf(TokenType type) { return type == TokenType::UInt16 ? 2 : 4; }

} // namespace

TokenType tokenTypeFor(int64_t vocabSize) {
  return vocabSize < 65500 ? TokenType::UInt16 : TokenType::Int32;
}

std::string IndexedDatasetBuilder::open(const std::string &path,
                                        TokenType tokenType) {
  prefix = path;
  type = tokenType;
  // The index is written last: refused now rather than after the tokens.
  if (std::string error = checkWritable(prefix + ".idx"); !error.empty())
    return error;
  return bin.open(prefix + ".bin");
}

std::string
IndexedDatasetBuilder::addDocument(const std::vector<int64_t> &tokens) {
  std::string bytes;
  bytes.reserve(tokens.size() * bytesOf(type));
  for (int64_t id : tokens) {
    bool fits = type == TokenType::UInt16 ? id >= 0 && id <= 0xFFFF
                                          : id >= INT32_MIN && id <= INT32_MAX;
    if (!fits)
      return "token id " + std::to_string(id) + " does not fit the " +
             (type == TokenType::UInt16 ? "uint16" : "int32") +
             " tokens of this dataset";
    if (type == TokenType::UInt16)
      put(bytes, uint16_t(id));
    else
      put(bytes, int32_t(id));
  }
  if (tokens.size() > size_t(INT32_MAX))
    return "a document of " + std::to_string(tokens.size()) +
           " tokens: the index holds at most 2^31 - 1 per sequence";
  if (std::string error = bin.write(bytes); !error.empty())
    return error;
  // An empty document is an entry of the document index with no sequence,
  // as Megatron's add_document(tensor, lengths=[]) writes it.
  if (!tokens.empty()) {
    sizes.push_back(int32_t(tokens.size()));
    pointers.push_back(int64_t(tokenCount * bytesOf(type)));
    tokenCount += tokens.size();
  }
  documentIndex.push_back(int64_t(sizes.size()));
  return "";
}

std::string IndexedDatasetBuilder::finish() {
  std::string index(kMagic, sizeof kMagic);
  put(index, kVersion);
  put(index, uint8_t(type));
  put(index, uint64_t(sizes.size()));
  put(index, uint64_t(documentIndex.size()));
  for (int32_t size : sizes)
    put(index, size);
  for (int64_t pointer : pointers)
    put(index, pointer);
  for (int64_t sequences : documentIndex)
    put(index, sequences);
  // The tokens first: an index never names a .bin that is not there.
  if (std::string error = bin.commit(); !error.empty())
    return error;
  return writeFileWhole(prefix + ".idx", index);
}

IndexedDataset::~IndexedDataset() {
  for (Mapping *m : {&idx, &bin})
    if (m->data)
      ::munmap(m->data, m->bytes);
}

/// `path` mapped read-only (an empty file maps to nothing); "" or why not.
static std::string mapFile(const std::string &path, void *&data,
                           size_t &bytes) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return "cannot open '" + path + "': " + std::strerror(errno);
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return "'" + path + "' is not a regular file";
  }
  bytes = size_t(st.st_size);
  data = nullptr;
  if (bytes > 0) {
    data = ::mmap(nullptr, bytes, PROT_READ, MAP_SHARED, fd, 0);
    if (data == MAP_FAILED) {
      data = nullptr;
      ::close(fd);
      return "cannot map '" + path + "': " + std::strerror(errno);
    }
  }
  ::close(fd);
  return "";
}

std::string IndexedDataset::open(const std::string &prefix) {
  std::string idxPath = prefix + ".idx", binPath = prefix + ".bin";
  if (std::string error = mapFile(idxPath, idx.data, idx.bytes); !error.empty())
    return error;
  if (std::string error = mapFile(binPath, bin.data, bin.bytes); !error.empty())
    return error;
  auto bad = [&](const std::string &what) {
    return "'" + idxPath + "' is not a Megatron indexed dataset index: " + what;
  };
  const uint8_t *at = static_cast<const uint8_t *>(idx.data);
  if (idx.bytes < kHeaderBytes || std::memcmp(at, kMagic, sizeof kMagic) != 0)
    return bad("no MMIDIDX header");
  if (uint64_t version = get<uint64_t>(at + 9); version != kVersion)
    return bad("version " + std::to_string(version) + ", not 1");
  uint8_t code = at[17];
  if (code != uint8_t(TokenType::UInt16) && code != uint8_t(TokenType::Int32))
    return bad("token dtype code " + std::to_string(code) +
               " (strata reads 8, uint16, and 4, int32)");
  type = TokenType(code);
  sequenceCount = get<uint64_t>(at + 18);
  documentCount = get<uint64_t>(at + 26);
  // Counts first bounded by the file, so the products below cannot wrap.
  if (sequenceCount > idx.bytes || documentCount > idx.bytes ||
      documentCount < 1 ||
      kHeaderBytes + sequenceCount * 12 + documentCount * 8 != idx.bytes)
    return bad(std::to_string(sequenceCount) + " sequences and " +
               std::to_string(documentCount) +
               " document index entries do not fill its " +
               std::to_string(idx.bytes) + " bytes");
  sizes = at + kHeaderBytes;
  pointers = sizes + sequenceCount * 4;
  documentIndices = pointers + sequenceCount * 8;
  size_t tokenBytes = bytesOf(type);
  for (uint64_t s = 0; s < sequenceCount; ++s) {
    int32_t length = size(s);
    int64_t start = pointer(s);
    if (length < 0 || start < 0 ||
        uint64_t(start) + uint64_t(length) * tokenBytes > bin.bytes)
      return bad("sequence " + std::to_string(s) + " (" +
                 std::to_string(length) + " tokens at byte " +
                 std::to_string(start) + ") is not inside '" + binPath + "' (" +
                 std::to_string(bin.bytes) + " bytes)");
  }
  for (uint64_t d = 0; d < documentCount; ++d) {
    int64_t first = documentIndex(d);
    bool ordered = d == 0 ? first == 0 : first >= documentIndex(d - 1);
    if (!ordered || first > int64_t(sequenceCount) ||
        (d + 1 == documentCount && first != int64_t(sequenceCount)))
      return bad("document index entry " + std::to_string(d) + " is " +
                 std::to_string(first));
  }
  return "";
}

int32_t IndexedDataset::size(uint64_t sequence) const {
  return get<int32_t>(sizes + sequence * 4);
}

int64_t IndexedDataset::pointer(uint64_t sequence) const {
  return get<int64_t>(pointers + sequence * 8);
}

int64_t IndexedDataset::documentIndex(uint64_t d) const {
  return get<int64_t>(documentIndices + d * 8);
}

std::pair<int64_t, int64_t> IndexedDataset::tokenRange() const {
  const uint8_t *tokens = static_cast<const uint8_t *>(bin.data);
  size_t width = bytesOf(type), count = bin.bytes / width;
  int64_t smallest = 0, largest = -1;
  for (size_t i = 0; i < count; ++i) {
    int64_t id = type == TokenType::UInt16
                     ? int64_t(get<uint16_t>(tokens + i * 2))
                     : int64_t(get<int32_t>(tokens + i * 4));
    smallest = i == 0 ? id : std::min(smallest, id);
    largest = std::max(largest, id);
  }
  return {smallest, largest};
}

void IndexedDataset::read(uint64_t sequence, uint64_t start, uint64_t length,
                          int64_t *out) const {
  const uint8_t *tokens =
      static_cast<const uint8_t *>(bin.data) + pointer(sequence);
  for (uint64_t i = 0; i < length; ++i)
    out[i] = type == TokenType::UInt16
                 ? int64_t(get<uint16_t>(tokens + (start + i) * 2))
                 : int64_t(get<int32_t>(tokens + (start + i) * 4));
}

} // namespace strata::runtime
