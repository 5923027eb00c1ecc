//===- GptDataset.h - Megatron's GPT samples over indexed data --*- C++ -*-===//
//
// What Megatron's pretrain_gpt.py reads from --data-path, sample for
// sample (megatron/core/datasets/gpt_dataset.py, blended_dataset.py and
// helpers.cpp):
//  - the sequences of a prefix are cut into train, valid and test ranges by
//    --split (fractions, rounded half to even, as Python's round);
//  - a split's GptDataset covers as many epochs of its sequences as its
//    sample count needs: the epochs' sequence ids shuffled together (the
//    last epoch apart when less than 80% of it is used), then cut into
//    samples of seq + 1 tokens that run across sequence boundaries, then
//    the samples shuffled; all by numpy's RandomState(seed), as Megatron
//    draws it (NumpyRandom.h);
//  - weights blend several prefixes: each gives ceil(ceil(S·w)·1.005)
//    samples, and sample i comes from the prefix furthest behind its
//    share.
// Sample i is the same on every rank and layout; the trainer asks for
// sample indices in the order Megatron's sampler hands them to
// data-parallel ranks and microbatches.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_DATA_GPTDATASET_H
#define STRATA_RUNTIME_DATA_GPTDATASET_H

#include "runtime/data/Dataset.h"
#include "runtime/data/IndexedDataset.h"

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace strata::runtime {

/// --data-path's words: one prefix, or weight prefix pairs.
struct DataBlend {
  std::vector<std::string> prefixes;
  std::vector<double> weights; // normalized; empty for a lone prefix
};
/// "" or what is wrong with the words.
std::string parseDataPath(const std::vector<std::string> &words,
                          DataBlend &blend);

/// Megatron's --split: up to three numbers ("949,50,1", "98, 2"), the rest
/// 0, normalized; "" or what is wrong.
std::string parseSplit(const std::string &text, std::array<double, 3> &split);
/// The [begin, end) sequence ranges of the train, valid and test splits of
/// `sequences`.
std::array<std::pair<uint64_t, uint64_t>, 3>
splitRanges(const std::array<double, 3> &split, uint64_t sequences);

/// Megatron's GPTDataset over the sequences [begin, end) of `data`.
class GptDataset : public Dataset {
public:
  /// At least `samples` samples of `seq` tokens and their labels; "" or
  /// why not (a split with too few tokens).
  static std::string build(std::shared_ptr<const IndexedDataset> data,
                           uint64_t begin, uint64_t end, uint64_t samples,
                           uint32_t seq, uint32_t seed,
                           std::unique_ptr<GptDataset> &out);

  /// Samples built: whole epochs, so usually more than asked for.
  uint64_t size() const { return sampleIndex.size() - 1; }
  /// The seq + 1 tokens of sample `index`.
  void text(int64_t index, int64_t *out) const;
  void sample(int64_t index, int32_t *tokens, int32_t *labels) const override;

private:
  GptDataset(std::shared_ptr<const IndexedDataset> data, uint32_t seq)
      : data(std::move(data)), seq(seq) {}

  std::shared_ptr<const IndexedDataset> data;
  uint32_t seq;
  std::vector<int32_t> documentIndex; // sequence ids, epoch by epoch
  // Where each sample starts: a position in documentIndex and a token
  // offset in that sequence; one more entry than samples.
  std::vector<std::pair<int64_t, int64_t>> sampleIndex;
  std::vector<int64_t> shuffleIndex;
};

/// Megatron's BlendedDataset: sample i is sample datasetSampleIndex[i] of
/// dataset datasetIndex[i].
class BlendedDataset : public Dataset {
public:
  BlendedDataset(std::vector<std::unique_ptr<GptDataset>> datasets,
                 const std::vector<double> &weights, uint64_t size);

  uint64_t size() const { return datasetIndex.size(); }
  void sample(int64_t index, int32_t *tokens, int32_t *labels) const override;
  /// Samples the blend takes from dataset `d`, and those it holds.
  uint64_t takes(size_t d) const { return taken[d]; }
  uint64_t holds(size_t d) const { return datasets[d]->size(); }

private:
  std::vector<std::unique_ptr<GptDataset>> datasets;
  std::vector<int16_t> datasetIndex;
  std::vector<int64_t> datasetSampleIndex;
  std::vector<uint64_t> taken; // per dataset
};

/// The train, valid and test datasets of --data-path, --split, the
/// sequence length and seed, with `samples` samples each (a split of zero
/// width, a valid or test split with no sequence in some prefix, or one
/// asked for none, is null). Every token must be below `vocab`.
/// "" or what is wrong, naming the file.
std::string makeMegatronDatasets(const DataBlend &blend,
                                 const std::array<double, 3> &split,
                                 uint32_t seq, uint32_t seed,
                                 const std::array<uint64_t, 3> &samples,
                                 int64_t vocab,
                                 std::array<std::unique_ptr<Dataset>, 3> &out);

} // namespace strata::runtime

#endif
