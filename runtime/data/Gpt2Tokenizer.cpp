//===- Gpt2Tokenizer.cpp - GPT-2's byte-level BPE -------------------------===//
#include "runtime/data/Gpt2Tokenizer.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"

#include <algorithm>
#include <limits>
#include <sstream>

namespace strata::runtime {

namespace {

struct CodePointRange {
  uint32_t first, last;
};
#include "runtime/data/UnicodeClasses.inc"

/// The pattern's classes; every code point is exactly one.
enum class CharClass : uint8_t { Letter, Number, Space, Other };

template <size_t N>
bool inRanges(const CodePointRange (&ranges)[N], uint32_t cp) {
  auto it = std::upper_bound(
      ranges, ranges + N, cp,
      [](uint32_t c, const CodePointRange &r) { return c < r.first; });
  return it != ranges && cp <= (it - 1)->last;
}

CharClass classify(uint32_t cp) {
  if (cp < 128) {
    if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z'))
      return CharClass::Letter;
    if (cp >= '0' && cp <= '9')
      return CharClass::Number;
    if (cp == ' ' || (cp >= 0x9 && cp <= 0xD))
      return CharClass::Space;
    return CharClass::Other;
  }
  if (inRanges(kLetters, cp))
    return CharClass::Letter;
  if (inRanges(kNumbers, cp))
    return CharClass::Number;
  if (inRanges(kSpaces, cp))
    return CharClass::Space;
  return CharClass::Other;
}

/// Decodes `text` strictly (no overlong forms, surrogates or code points
/// past U+10FFFF): each code point's class and byte offset, plus a final
/// offset at the end; "" or the first bad byte.
std::string decodeUtf8(std::string_view text, std::vector<CharClass> &classes,
                       std::vector<uint32_t> &codes,
                       std::vector<size_t> &offsets) {
  classes.clear();
  codes.clear();
  offsets.clear();
  const auto *bytes = reinterpret_cast<const uint8_t *>(text.data());
  size_t i = 0, n = text.size();
  while (i < n) {
    uint32_t cp = bytes[i];
    size_t length = 1;
    uint32_t minimum = 0;
    if (cp >= 0x80) {
      if (cp >= 0xC2 && cp <= 0xDF)
        length = 2, cp &= 0x1F, minimum = 0x80;
      else if (cp >= 0xE0 && cp <= 0xEF)
        length = 3, cp &= 0x0F, minimum = 0x800;
      else if (cp >= 0xF0 && cp <= 0xF4)
        length = 4, cp &= 0x07, minimum = 0x10000;
      else
        return "not UTF-8 at byte " + std::to_string(i);
      if (i + length > n)
        return "not UTF-8 at byte " + std::to_string(i) +
               " (a sequence cut short)";
      for (size_t k = 1; k < length; ++k) {
        if ((bytes[i + k] & 0xC0) != 0x80)
          return "not UTF-8 at byte " + std::to_string(i);
        cp = cp << 6 | (bytes[i + k] & 0x3F);
      }
      if (cp < minimum || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return "not UTF-8 at byte " + std::to_string(i);
    }
    classes.push_back(classify(cp));
    codes.push_back(cp);
    offsets.push_back(i);
    i += length;
  }
  offsets.push_back(n);
  return "";
}

/// GPT-2's byte-to-unicode map: the printable bytes spell themselves, the
/// others (controls, space, 127–160, the soft hyphen) take 256 onwards in
/// order. Returns the byte a vocabulary character stands for, or -1.
int byteOfCharacter(uint32_t cp) {
  auto printable = [](uint32_t b) {
    return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) ||
           (b >= 0xAE && b <= 0xFF);
  };
  if (cp < 256)
    return printable(cp) ? int(cp) : -1;
  uint32_t n = cp - 256;
  for (uint32_t b = 0; b < 256; ++b)
    if (!printable(b) && n-- == 0)
      return int(b);
  return -1;
}

} // namespace

std::string splitGpt2Pieces(std::string_view text,
                            std::vector<std::string_view> &pieces) {
  std::vector<CharClass> cls;
  std::vector<uint32_t> cps;
  std::vector<size_t> at;
  if (std::string error = decodeUtf8(text, cls, cps, at); !error.empty())
    return error;
  size_t n = cls.size(), i = 0;
  auto emit = [&](size_t end) {
    pieces.push_back(text.substr(at[i], at[end] - at[i]));
    i = end;
  };
  auto runOf = [&](size_t from, auto inside) {
    while (from < n && inside(cls[from]))
      ++from;
    return from;
  };
  auto is = [](CharClass c) { return [c](CharClass k) { return k == c; }; };
  while (i < n) {
    // 's 't 're 've 'm 'll 'd, in the pattern's order.
    if (cps[i] == '\'') {
      auto next = [&](size_t k) { return i + k < n ? cps[i + k] : 0u; };
      uint32_t a = next(1), b = next(2);
      if (a == 's' || a == 't' || a == 'm' || a == 'd') {
        emit(i + 2);
        continue;
      }
      if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') ||
          (a == 'l' && b == 'l')) {
        emit(i + 3);
        continue;
      }
    }
    // ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+': an optional space,
    // then a run of one class.
    size_t start = cps[i] == ' ' && i + 1 < n ? i + 1 : i;
    CharClass c = cls[start];
    if (c != CharClass::Space) {
      emit(runOf(start, is(c)));
      continue;
    }
    // '\s+(?!\S)': the whitespace run, less its last character when a
    // non-space follows; a lone space before one is '\s+'.
    size_t end = runOf(i, is(CharClass::Space));
    if (end < n && end - i > 1)
      --end;
    emit(end);
  }
  return "";
}

std::string Gpt2Tokenizer::load(const std::string &vocabFile,
                                const std::string &mergeFile) {
  std::string text;
  if (std::string error = readFileWhole(vocabFile, text, kTokenizerFile);
      !error.empty())
    return "the GPT-2 vocabulary: " + error;
  auto bad = [&](const std::string &what) {
    return "'" + vocabFile + "': " + what;
  };
  JsonReader json(text);
  if (!json.eat('{'))
    return bad("not a JSON object of tokens and ids");
  std::vector<std::pair<std::string, int64_t>> entries;
  std::string key;
  if (!json.eat('}'))
    do {
      int64_t id = 0;
      if (!json.string(key) || !json.eat(':') || !json.unsignedInteger(id))
        return bad("not a JSON object of tokens and ids");
      entries.emplace_back(key, id);
    } while (json.eat(','));
  if ((!entries.empty() && !json.eat('}')) || !json.done())
    return bad("not a JSON object of tokens and ids");
  if (entries.empty() ||
      entries.size() > size_t(std::numeric_limits<int32_t>::max()))
    return bad("no tokens");

  tokenBytes.assign(entries.size(), std::string());
  std::vector<bool> seen(entries.size(), false);
  std::unordered_map<std::string, int32_t> idOf;
  std::vector<CharClass> cls;
  std::vector<uint32_t> cps;
  std::vector<size_t> at;
  for (auto &[token, id] : entries) {
    if (id >= int64_t(entries.size()) || seen[id])
      return bad("token ids are not 0 to " +
                 std::to_string(entries.size() - 1) + ", each once (id " +
                 std::to_string(id) + ")");
    seen[id] = true;
    if (!decodeUtf8(token, cls, cps, at).empty() || cps.empty())
      return bad("token " + std::to_string(id) + " is not UTF-8");
    std::string bytes;
    for (uint32_t cp : cps) {
      int b = byteOfCharacter(cp);
      if (b < 0)
        return bad("token " + std::to_string(id) + " (" + token +
                   ") has a character outside GPT-2's byte alphabet");
      bytes += char(b);
    }
    if (!idOf.emplace(bytes, int32_t(id)).second)
      return bad("token " + std::to_string(id) + " (" + token +
                 ") is in the vocabulary twice");
    if (token == "<|endoftext|>")
      eod = id;
    tokenBytes[id] = std::move(bytes);
  }
  for (int b = 0; b < 256; ++b) {
    auto it = idOf.find(std::string(1, char(b)));
    if (it == idOf.end())
      return bad("byte " + std::to_string(b) + " has no token");
    byteId[b] = it->second;
  }
  if (eod < 0)
    return bad("no <|endoftext|> token");

  if (std::string error = readFileWhole(mergeFile, text, kTokenizerFile);
      !error.empty())
    return "the GPT-2 merges: " + error;
  // As GPT-2's encoder reads it: the newline-ended lines after the first
  // (a version line), one merge each, by rank.
  merges.clear();
  size_t line = text.find('\n'), number = 1;
  if (line == std::string::npos)
    return "'" + mergeFile + "': no merges after the version line";
  for (size_t start = line + 1, end;
       (end = text.find('\n', start)) != std::string::npos; start = end + 1) {
    ++number;
    std::istringstream words(text.substr(start, end - start));
    std::string first, second, extra;
    auto where = [&] {
      return "'" + mergeFile + "' line " + std::to_string(number) + ": ";
    };
    if (!(words >> first >> second) || (words >> extra))
      return where() + "not a merge (two tokens)";
    std::string parts[2] = {first, second}, bytes[2];
    for (int k = 0; k < 2; ++k) {
      if (!decodeUtf8(parts[k], cls, cps, at).empty())
        return where() + "not UTF-8";
      for (uint32_t cp : cps) {
        int b = byteOfCharacter(cp);
        if (b < 0)
          return where() + "'" + parts[k] +
                 "' has a character outside GPT-2's byte alphabet";
        bytes[k] += char(b);
      }
    }
    auto a = idOf.find(bytes[0]), b = idOf.find(bytes[1]),
         ab = idOf.find(bytes[0] + bytes[1]);
    if (a == idOf.end() || b == idOf.end() || ab == idOf.end())
      return where() + "'" + first + " " + second +
             "' merges tokens the vocabulary does not hold";
    // A pair listed twice keeps its later rank, as GPT-2's dictionary does.
    merges[pairKey(a->second, b->second)] = {int32_t(number - 2), ab->second};
  }
  return "";
}

void Gpt2Tokenizer::mergePiece(std::string_view piece,
                               std::vector<int32_t> &word) const {
  word.clear();
  for (unsigned char b : piece)
    word.push_back(byteId[b]);
  std::vector<int32_t> next;
  while (word.size() > 1) {
    const Merge *best = nullptr;
    int32_t first = 0, second = 0;
    for (size_t k = 0; k + 1 < word.size(); ++k) {
      auto it = merges.find(pairKey(word[k], word[k + 1]));
      if (it != merges.end() && (!best || it->second.rank < best->rank)) {
        best = &it->second;
        first = word[k];
        second = word[k + 1];
      }
    }
    if (!best)
      break;
    next.clear();
    for (size_t k = 0; k < word.size(); ++k) {
      if (k + 1 < word.size() && word[k] == first && word[k + 1] == second) {
        next.push_back(best->merged);
        ++k;
      } else {
        next.push_back(word[k]);
      }
    }
    word.swap(next);
  }
}

std::string Gpt2Tokenizer::encode(std::string_view text,
                                  std::vector<int64_t> &ids,
                                  Cache &cache) const {
  std::vector<std::string_view> pieces;
  if (std::string error = splitGpt2Pieces(text, pieces); !error.empty())
    return error;
  // A bound on the memo, which otherwise grows with every new word.
  constexpr size_t kMaxCached = size_t(1) << 20;
  std::vector<int32_t> word;
  std::string key;
  for (std::string_view piece : pieces) {
    key.assign(piece);
    auto it = cache.pieces.find(key);
    if (it == cache.pieces.end()) {
      mergePiece(piece, word);
      if (cache.pieces.size() >= kMaxCached)
        cache.pieces.clear();
      it = cache.pieces.emplace(key, word).first;
    }
    ids.insert(ids.end(), it->second.begin(), it->second.end());
  }
  return "";
}

std::string Gpt2Tokenizer::decode(const std::vector<int64_t> &ids,
                                  std::string &out) const {
  out.clear();
  for (int64_t id : ids) {
    if (id < 0 || id >= vocabSize())
      return "token id " + std::to_string(id) + " is outside the vocabulary";
    out += tokenBytes[id];
  }
  return "";
}

} // namespace strata::runtime
