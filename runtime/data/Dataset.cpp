//===- Dataset.cpp - where training batches come from ---------------------===//
#include "runtime/data/Dataset.h"
#include "runtime/base/Philox.h"
#include "runtime/base/WholeFile.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

namespace strata::runtime {
namespace {

class SyntheticDataset : public Dataset {
public:
  SyntheticDataset(uint64_t seed, uint32_t vocab, uint32_t seq)
      : key(philoxKey(seed, "data")), vocab(vocab), seq(seq) {}

  void sample(int64_t index, int32_t *tokens, int32_t *labels) const override {
    for (uint32_t p = 0; p <= seq; ++p) {
      auto token = static_cast<int32_t>(philoxBelow(key, p, index, vocab));
      if (p < seq)
        tokens[p] = token;
      if (p > 0)
        labels[p - 1] = token;
    }
  }

private:
  uint64_t key;
  uint32_t vocab, seq;
};

class TextDataset : public Dataset {
public:
  TextDataset(std::vector<uint8_t> bytes, uint32_t seq)
      : bytes(std::move(bytes)), seq(seq) {}

  void sample(int64_t index, int32_t *tokens, int32_t *labels) const override {
    uint64_t starts = bytes.size() - seq;
    uint64_t start = (uint64_t(index) * seq) % starts;
    for (uint32_t p = 0; p < seq; ++p) {
      tokens[p] = bytes[start + p];
      labels[p] = bytes[start + p + 1];
    }
  }

private:
  std::vector<uint8_t> bytes;
  uint32_t seq;
};

} // namespace

std::unique_ptr<Dataset> makeSyntheticDataset(uint64_t seed, uint32_t vocab,
                                              uint32_t seq) {
  return std::make_unique<SyntheticDataset>(seed, vocab, seq);
}

std::string makeTextDataset(const std::string &path, uint32_t vocab,
                            uint32_t seq, std::unique_ptr<Dataset> &out) {
  if (vocab < 256)
    return "--data-path trains on bytes, which needs a vocabulary of at least "
           "256; the model has " +
           std::to_string(vocab);
  std::vector<uint8_t> bytes;
  if (std::string error = readFileWhole(path, bytes, kTextData); !error.empty())
    return error;
  if (bytes.size() < uint64_t(seq) + 1)
    return "data file '" + path + "' has " + std::to_string(bytes.size()) +
           " bytes; a sample needs " + std::to_string(seq + 1);
  out = std::make_unique<TextDataset>(std::move(bytes), seq);
  return "";
}

} // namespace strata::runtime
