//===- strata-data.cpp - training data, prepared
//---------------------------===//
//
//   strata-data preprocess --input FILE --output-prefix P
//                          --tokenizer-type NullTokenizer --vocab-size N
//                          [--json-keys text] [--append-eod]
//
// Megatron's tools/preprocess_data.py: each document of FILE (a line of a
// .jsonl or .json file, the string under --json-keys; or a whole .txt
// file) tokenized and written as Megatron's indexed dataset
// P_KEY_document.bin/.idx (runtime/data/IndexedDataset.h). NullTokenizer
// is Megatron's: a document is token ids separated by single spaces, the
// end-of-document id is the vocabulary size. GPT-2's byte-level BPE
// (GPT2BPETokenizer) comes next.
//
//===----------------------------------------------------------------------===//
#include "runtime/data/IndexedDataset.h"
#include "runtime/io/JsonReader.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

using namespace strata::runtime;

namespace {

const char *const kUsage =
    "usage: strata-data preprocess --input FILE --output-prefix PREFIX\n"
    "         --tokenizer-type NullTokenizer --vocab-size N\n"
    "         [--json-keys KEY] [--append-eod]\n"
    "  --input FILE         .jsonl or .json: a document per line, the\n"
    "                       string under KEY; .txt: the file is one document\n"
    "  --output-prefix P    writes P_KEY_document.bin and .idx (Megatron's\n"
    "                       indexed dataset)\n"
    "  --tokenizer-type T   NullTokenizer: token ids separated by spaces\n"
    "  --vocab-size N       the NullTokenizer's ids are below N; its\n"
    "                       end-of-document id is N\n"
    "  --json-keys KEY      the JSON key of the text (text)\n"
    "  --append-eod         end each document with the end-of-document id\n";

int fail(const std::string &message) {
  std::cerr << "strata-data: error: " << message << "\n";
  return 1;
}

bool endsWith(const std::string &s, const std::string &suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

/// Megatron's NullTokenizer: int(x) of each piece of text.split(' ') (so
/// two spaces in a row, or an empty document, are an error there too).
std::string nullTokenize(const std::string &text, int64_t vocab,
                         std::vector<int64_t> &ids) {
  ids.clear();
  size_t start = 0;
  for (;;) {
    size_t space = text.find(' ', start);
    std::string piece = text.substr(
        start, space == std::string::npos ? std::string::npos : space - start);
    // int() ignores surrounding whitespace (a line's end, a tab).
    size_t first = piece.find_first_not_of("\t\n\r\f\v");
    size_t last = piece.find_last_not_of("\t\n\r\f\v");
    piece =
        first == std::string::npos ? "" : piece.substr(first, last - first + 1);
    size_t digits = piece.size() > 0 && (piece[0] == '-' || piece[0] == '+');
    bool number =
        piece.size() > digits && piece.size() - digits <= 18 &&
        piece.find_first_not_of("0123456789", digits) == std::string::npos;
    if (!number)
      return "'" + piece +
             "' is not a token id (NullTokenizer documents "
             "are ids separated by single spaces)";
    int64_t id = std::stoll(piece);
    if (id < 0 || id >= vocab)
      return "token id " + std::to_string(id) +
             " is outside the vocabulary "
             "[0, " +
             std::to_string(vocab) + ")";
    ids.push_back(id);
    if (space == std::string::npos)
      return "";
    start = space + 1;
  }
}

int preprocess(const std::map<std::string, std::string> &flags,
               bool appendEod) {
  auto need = [&](const char *name) -> std::string {
    auto it = flags.find(name);
    return it == flags.end() ? "" : it->second;
  };
  std::string input = need("--input"), prefix = need("--output-prefix"),
              tokenizer = need("--tokenizer-type"),
              key = flags.count("--json-keys") ? need("--json-keys") : "text";
  if (input.empty() || prefix.empty() || tokenizer.empty())
    return fail("preprocess needs --input, --output-prefix and "
                "--tokenizer-type\n" +
                std::string(kUsage));
  if (tokenizer != "NullTokenizer")
    return fail("--tokenizer-type " + tokenizer +
                ": this strata-data has NullTokenizer (GPT2BPETokenizer is "
                "not built yet)");
  int64_t vocab = 0;
  try {
    size_t used = 0;
    vocab = std::stoll(need("--vocab-size"), &used);
    if (used != need("--vocab-size").size())
      vocab = 0;
  } catch (...) {
  }
  if (vocab < 1)
    return fail("NullTokenizer needs --vocab-size N, a positive integer");
  bool json = endsWith(input, ".jsonl") || endsWith(input, ".json");
  if (!json && !endsWith(input, ".txt"))
    return fail("--input '" + input +
                "': a .jsonl or .json file (a document per line) or a .txt "
                "file (one document)");
  std::ifstream in(input, std::ios::binary);
  if (!in)
    return fail("cannot open '" + input + "'");

  auto began = std::chrono::steady_clock::now();
  IndexedDatasetBuilder builder;
  std::string output = prefix + "_" + key + "_document";
  // The end-of-document id is the vocabulary size: one more id.
  if (std::string error = builder.open(output, tokenTypeFor(vocab + 1));
      !error.empty())
    return fail(error);
  uint64_t bytes = 0;
  std::vector<int64_t> ids;
  auto add = [&](const std::string &text, const std::string &where) {
    if (std::string error = nullTokenize(text, vocab, ids); !error.empty())
      return fail(where + ": " + error);
    if (appendEod)
      ids.push_back(vocab);
    if (std::string error = builder.addDocument(ids); !error.empty())
      return fail(where + ": " + error);
    return 0;
  };
  if (json) {
    std::string line, text;
    for (uint64_t number = 1; std::getline(in, line); ++number) {
      bytes += line.size() + 1;
      std::string where = input + ":" + std::to_string(number);
      if (std::string error = jsonStringField(line, key, text); !error.empty())
        return fail(where + ": " + error);
      if (int status = add(text, where))
        return status;
    }
  } else {
    std::stringstream text;
    text << in.rdbuf();
    bytes = text.str().size();
    if (int status = add(text.str(), input))
      return status;
  }
  if (builder.documents() == 0)
    return fail("'" + input + "' holds no document");
  if (std::string error = builder.finish(); !error.empty())
    return fail(error);
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began)
          .count();
  std::printf("wrote %s.bin and .idx: %llu documents, %llu tokens (%s); "
              "%.1f MB/s, %.0f tokens/s\n",
              output.c_str(), (unsigned long long)builder.documents(),
              (unsigned long long)builder.tokens(),
              tokenTypeFor(vocab + 1) == TokenType::UInt16 ? "uint16" : "int32",
              bytes / 1e6 / std::max(seconds, 1e-9),
              builder.tokens() / std::max(seconds, 1e-9));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" ||
      std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 1 : 0;
  }
  std::string command = argv[1];
  if (command != "preprocess")
    return fail("unknown command '" + command + "'\n" + kUsage);
  std::map<std::string, std::string> flags;
  bool appendEod = false;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--append-eod") {
      appendEod = true;
      continue;
    }
    if (arg != "--input" && arg != "--output-prefix" &&
        arg != "--tokenizer-type" && arg != "--vocab-size" &&
        arg != "--json-keys")
      return fail("unknown flag '" + arg + "'\n" + kUsage);
    if (i + 1 >= argc)
      return fail(arg + " needs a value");
    flags[arg] = argv[++i];
  }
  return preprocess(flags, appendEod);
}
