//===- IndexedDataset.h - Megatron's .bin/.idx token files -----*- C++ -*-===//
//
// Megatron's indexed dataset (megatron/core/datasets/indexed_dataset.py),
// the files its preprocess_data.py writes and its GPT datasets read:
// P.bin holds every sequence's tokens end to end; P.idx, little endian,
//   the header "MMIDIDX\0\0" (9 bytes), version u64 = 1, dtype code u8
//   (8: uint16, 4: int32), sequence count u64, document count u64,
//   then sizes i32[sequences] (tokens per sequence), pointers
//   i64[sequences] (byte offset of each in .bin), and document indices
//   i64[documents] (0, then after each document the number of sequences
//   so far; so one more than the documents).
// strata writes one sequence per document, as preprocess_data.py does
// without sentence splitting, and none for an empty one.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DATA_INDEXEDDATASET_H
#define STRATA_RUNTIME_DATA_INDEXEDDATASET_H

#include "runtime/base/WholeFile.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace strata::runtime {

/// The token dtype for a vocabulary: uint16 when every id fits, as
/// Megatron chooses (below 65500), else int32.
enum class TokenType : uint8_t { UInt16 = 8, Int32 = 4 };
TokenType tokenTypeFor(int64_t vocabSize);

/// Writes P.bin and P.idx, document by document, each whole
/// (runtime/base/WholeFile.h): the tokens stream to the .bin's temporary;
/// finish() puts the .bin in place and then writes the index, so an
/// interrupted run leaves no index that names a partial .bin.
class IndexedDatasetBuilder {
public:
  IndexedDatasetBuilder() = default;
  IndexedDatasetBuilder(const IndexedDatasetBuilder &) = delete;
  IndexedDatasetBuilder &operator=(const IndexedDatasetBuilder &) = delete;

  /// "" or why P.bin cannot be written.
  std::string open(const std::string &prefix, TokenType type);
  /// Appends one document (one sequence); "" or why not (an id the dtype
  /// cannot hold, a write error).
  std::string addDocument(const std::vector<int64_t> &tokens);
  /// Writes P.idx and moves both files into place; "" or why not.
  std::string finish();

  uint64_t documents() const { return documentIndex.size() - 1; }
  uint64_t tokens() const { return tokenCount; }

private:
  std::string prefix;
  TokenType type = TokenType::UInt16;
  WholeFileWriter bin;
  std::vector<int32_t> sizes;
  std::vector<int64_t> pointers;
  std::vector<int64_t> documentIndex = {0};
  uint64_t tokenCount = 0;
};

/// P.bin and P.idx, memory-mapped and checked: the header, the counts
/// against the files' lengths, every sequence inside P.bin.
class IndexedDataset {
public:
  IndexedDataset() = default;
  IndexedDataset(const IndexedDataset &) = delete;
  IndexedDataset &operator=(const IndexedDataset &) = delete;
  ~IndexedDataset();

  /// "" or what is wrong, naming the file.
  std::string open(const std::string &prefix);

  TokenType tokenType() const { return type; }
  uint64_t sequences() const { return sequenceCount; }
  /// Documents (the document index has one more entry).
  uint64_t documents() const { return documentCount - 1; }
  int32_t size(uint64_t sequence) const;
  /// Sequence `sequence`'s tokens from `start`, `length` of them.
  void read(uint64_t sequence, uint64_t start, uint64_t length,
            int64_t *out) const;
  /// The smallest and largest token ids in P.bin ({0, -1} when it is
  /// empty): one pass.
  std::pair<int64_t, int64_t> tokenRange() const;
  /// The sequences of document d are [documentIndex(d), documentIndex(d+1)).
  int64_t documentIndex(uint64_t d) const;

private:
  struct Mapping {
    void *data = nullptr;
    size_t bytes = 0;
  };
  Mapping idx, bin;
  TokenType type = TokenType::UInt16;
  uint64_t sequenceCount = 0, documentCount = 0;
  // The arrays in the index, unaligned (the header is 34 bytes): read
  // with memcpy.
  const uint8_t *sizes = nullptr, *pointers = nullptr,
                *documentIndices = nullptr;
  int64_t pointer(uint64_t sequence) const;
};

} // namespace strata::runtime

#endif
