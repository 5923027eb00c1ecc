//===- Dataset.h - where training batches come from -------------*- C++ -*-===//
#ifndef STRATA_RUNTIME_DATA_DATASET_H
#define STRATA_RUNTIME_DATA_DATASET_H

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime {

/// Samples by global index: sample i is the same on every rank and in every
/// layout, so runs of different layouts see the same data.
class Dataset {
public:
  virtual ~Dataset() = default;
  /// Writes `seq` tokens and the `seq` labels that follow them.
  virtual void sample(int64_t index, int32_t *tokens, int32_t *labels) const = 0;
};

/// Tokens drawn uniformly from [0, vocab) by the seed.
std::unique_ptr<Dataset> makeSyntheticDataset(uint64_t seed, uint32_t vocab,
                                              uint32_t seq);

/// A text file's bytes as tokens (needs vocab >= 256): sample i is the
/// window of seq + 1 bytes at (i · seq) mod (size − seq). Returns "" or the
/// error.
std::string makeTextDataset(const std::string &path, uint32_t vocab,
                            uint32_t seq, std::unique_ptr<Dataset> &out);

} // namespace strata::runtime

#endif
