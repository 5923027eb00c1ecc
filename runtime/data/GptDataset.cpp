//===- GptDataset.cpp - Megatron's GPT samples over indexed data ----------===//
#include "runtime/data/GptDataset.h"
#include "runtime/data/NumpyRandom.h"

#include <cmath>
#include <cstdlib>
#include <numeric>

namespace strata::runtime {

namespace {

/// Megatron appends one token to each sample: the last label.
constexpr int64_t kExtraToken = 1;

bool parseNumber(const std::string &text, double &out) {
  char *end = nullptr;
  out = std::strtod(text.c_str(), &end);
  return !text.empty() && end == text.c_str() + text.size() &&
         std::isfinite(out);
}

} // namespace

std::string parseDataPath(const std::vector<std::string> &words,
                          DataBlend &blend) {
  blend = {};
  if (words.empty())
    return "--data-path needs a prefix, or weights and prefixes";
  if (words.size() == 1) {
    blend.prefixes = words;
    return "";
  }
  if (words.size() % 2)
    return "--data-path takes one prefix, or weight and prefix pairs; got " +
           std::to_string(words.size()) + " words";
  double total = 0;
  for (size_t i = 0; i < words.size(); i += 2) {
    double weight = 0;
    if (!parseNumber(words[i], weight) || !(weight > 0))
      return "--data-path: '" + words[i] +
             "' is not a weight, a positive number (weight and prefix "
             "pairs: 0.7 A 0.3 B)";
    blend.weights.push_back(weight);
    blend.prefixes.push_back(words[i + 1]);
    total += weight;
  }
  for (double &weight : blend.weights)
    weight /= total;
  return "";
}

std::string parseSplit(const std::string &text, std::array<double, 3> &split) {
  // Megatron reads the numbers in the text, whatever separates them.
  std::vector<double> numbers;
  for (size_t i = 0; i < text.size();) {
    if (!std::isdigit((unsigned char)text[i]) && text[i] != '.') {
      ++i;
      continue;
    }
    size_t end = text.find_first_not_of("0123456789.", i);
    std::string number = text.substr(i, end - i);
    double value = 0;
    if (!parseNumber(number, value))
      return "--split '" + text + "': '" + number + "' is not a number";
    numbers.push_back(value);
    i = end == std::string::npos ? text.size() : end;
  }
  if (numbers.empty() || numbers.size() > 3)
    return "--split '" + text +
           "': one to three numbers, train, valid and test (969,30,1)";
  numbers.resize(3, 0.0);
  double total = 0;
  for (double n : numbers)
    total += n;
  if (!(total > 0))
    return "--split '" + text + "': the parts add up to 0";
  for (int i = 0; i < 3; ++i)
    split[i] = numbers[i] / total;
  return "";
}

std::array<std::pair<uint64_t, uint64_t>, 3>
splitRanges(const std::array<double, 3> &split, uint64_t sequences) {
  std::array<std::pair<uint64_t, uint64_t>, 3> ranges;
  double low = 0;
  for (int i = 0; i < 3; ++i) {
    double high = low + split[i];
    // Python's round: half to even, as nearbyint rounds by default.
    ranges[i] = {uint64_t(std::nearbyint(low * double(sequences))),
                 uint64_t(std::nearbyint(high * double(sequences)))};
    if (split[i] == 0)
      ranges[i] = {0, 0};
    low = high;
  }
  return ranges;
}

std::string GptDataset::build(std::shared_ptr<const IndexedDataset> data,
                              uint64_t begin, uint64_t end, uint64_t samples,
                              uint32_t seq, uint32_t seed,
                              std::unique_ptr<GptDataset> &out) {
  int64_t tokensPerEpoch = 0;
  for (uint64_t s = begin; s < end; ++s)
    tokensPerEpoch += data->size(s);
  if (tokensPerEpoch <= kExtraToken)
    return "holds " + std::to_string(tokensPerEpoch) +
           " tokens; a sample needs " + std::to_string(seq + kExtraToken);
  if (end > uint64_t(INT32_MAX))
    return "has more than 2^31 - 1 sequences";
  // Whole epochs: the fewest that give the samples.
  int64_t needed = int64_t(samples) * seq + kExtraToken;
  int64_t epochs =
      std::max<int64_t>(1, (needed + tokensPerEpoch - 1) / tokensPerEpoch);
  // The last epoch is shuffled apart when less than 80% of it is used, so
  // that its unused part is not mixed into the others.
  bool separateLast = false;
  int64_t samplesBeforeLast = 0;
  if (epochs > 1) {
    samplesBeforeLast = ((epochs - 1) * tokensPerEpoch - kExtraToken) / seq;
    int64_t fromLast = int64_t(samples) - samplesBeforeLast;
    int64_t perEpoch = (tokensPerEpoch - kExtraToken) / seq;
    separateLast = fromLast < int64_t(0.80 * double(perEpoch));
  }
  std::unique_ptr<GptDataset> made(new GptDataset(std::move(data), seq));
  NumpyRandomState random(seed);
  std::vector<int32_t> &documents = made->documentIndex;
  auto addEpochs = [&](int64_t count) {
    size_t first = documents.size();
    for (int64_t e = 0; e < count; ++e)
      for (uint64_t s = begin; s < end; ++s)
        documents.push_back(int32_t(s));
    random.shuffle(documents.data() + first, documents.size() - first);
  };
  if (separateLast) {
    addEpochs(epochs - 1);
    addEpochs(1);
  } else {
    addEpochs(epochs);
  }

  // Samples of seq + 1 tokens, each starting at the last token (the last
  // label) of the one before.
  const IndexedDataset &tokens = *made->data;
  int64_t count = (epochs * tokensPerEpoch - kExtraToken) / seq;
  auto &starts = made->sampleIndex;
  starts.reserve(size_t(count) + 1);
  starts.push_back({0, 0});
  int64_t position = 0, offset = 0;
  for (int64_t k = 1; k <= count; ++k) {
    int64_t remaining = seq + kExtraToken;
    while (remaining != 0) {
      int64_t length = tokens.size(documents[position]) - offset;
      remaining -= length;
      if (remaining <= 0) {
        offset += remaining + length - kExtraToken;
        remaining = 0;
      } else {
        ++position;
        offset = 0;
      }
    }
    starts.push_back({position, offset});
  }

  auto &shuffle = made->shuffleIndex;
  shuffle.resize(size_t(count));
  std::iota(shuffle.begin(), shuffle.end(), int64_t(0));
  int64_t firstPart = separateLast ? samplesBeforeLast : count;
  random.shuffle(shuffle.data(), uint64_t(firstPart));
  if (firstPart < count)
    random.shuffle(shuffle.data() + firstPart, uint64_t(count - firstPart));
  out = std::move(made);
  return "";
}

void GptDataset::text(int64_t index, int64_t *out) const {
  int64_t i = shuffleIndex[index];
  auto [first, firstOffset] = sampleIndex[i];
  auto [last, lastOffset] = sampleIndex[i + 1];
  for (int64_t k = first; k <= last; ++k) {
    int64_t sequence = documentIndex[k];
    int64_t from = k == first ? firstOffset : 0;
    int64_t to = k == last ? lastOffset + kExtraToken : data->size(sequence);
    data->read(uint64_t(sequence), uint64_t(from), uint64_t(to - from), out);
    out += to - from;
  }
}

void GptDataset::sample(int64_t index, int32_t *tokens, int32_t *labels) const {
  std::vector<int64_t> window(seq + kExtraToken);
  text(index, window.data());
  for (uint32_t p = 0; p < seq; ++p) {
    tokens[p] = int32_t(window[p]);
    labels[p] = int32_t(window[p + 1]);
  }
}

BlendedDataset::BlendedDataset(std::vector<std::unique_ptr<GptDataset>> parts,
                               const std::vector<double> &given, uint64_t size)
    : datasets(std::move(parts)) {
  // Normalized again, as BlendedDataset does.
  std::vector<double> weights = given;
  double total = 0;
  for (double w : weights)
    total += w;
  for (double &w : weights)
    w /= total;
  taken.assign(weights.size(), 0);
  datasetIndex.resize(size);
  datasetSampleIndex.resize(size);
  for (uint64_t s = 0; s < size; ++s) {
    double at = std::max(double(s), 1.0);
    size_t best = 0;
    double worst = weights[0] * at - double(taken[0]);
    for (size_t d = 1; d < weights.size(); ++d) {
      double error = weights[d] * at - double(taken[d]);
      if (error > worst) {
        worst = error;
        best = d;
      }
    }
    datasetIndex[s] = int16_t(best);
    datasetSampleIndex[s] = taken[best]++;
  }
}

void BlendedDataset::sample(int64_t index, int32_t *tokens,
                            int32_t *labels) const {
  datasets[datasetIndex[index]]->sample(datasetSampleIndex[index], tokens,
                                        labels);
}

std::string makeMegatronDatasets(const DataBlend &blend,
                                 const std::array<double, 3> &split,
                                 uint32_t seq, uint32_t seed,
                                 const std::array<uint64_t, 3> &samples,
                                 int64_t vocab,
                                 std::array<std::unique_ptr<Dataset>, 3> &out) {
  static const char *const kSplitNames[] = {"train", "valid", "test"};
  std::vector<std::shared_ptr<IndexedDataset>> opened;
  for (const std::string &prefix : blend.prefixes) {
    auto data = std::make_shared<IndexedDataset>();
    if (std::string error = data->open(prefix); !error.empty())
      return error;
    auto [smallest, largest] = data->tokenRange();
    if (smallest < 0 || largest >= vocab)
      return "'" + prefix + ".bin' holds token id " +
             std::to_string(smallest < 0 ? smallest : largest) +
             "; the model's vocabulary has " + std::to_string(vocab);
    opened.push_back(std::move(data));
  }
  for (int k = 0; k < 3; ++k) {
    out[k].reset();
    if (samples[k] == 0 || split[k] == 0)
      continue;
    // A valid or test fraction that rounds to no sequence of a prefix (a
    // small dataset) is no split, as a fraction of 0 is: a blend without
    // that prefix would not be the blend asked for.
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    bool empty = false;
    for (const auto &data : opened) {
      ranges.push_back(splitRanges(split, data->sequences())[k]);
      empty = empty || (k > 0 && ranges.back().first == ranges.back().second);
    }
    if (empty)
      continue;
    std::vector<std::unique_ptr<GptDataset>> parts;
    uint64_t size = 0;
    for (size_t d = 0; d < opened.size(); ++d) {
      uint64_t asked = samples[k];
      if (!blend.weights.empty()) {
        // Each prefix gives its share and half a percent more.
        uint64_t share =
            uint64_t(std::ceil(double(samples[k]) * blend.weights[d]));
        size += share;
        asked = uint64_t(std::ceil(double(share) * (1 + 0.005)));
      }
      auto [begin, end] = ranges[d];
      std::unique_ptr<GptDataset> part;
      if (std::string error =
              GptDataset::build(opened[d], begin, end, asked, seq, seed, part);
          !error.empty())
        return "the " + std::string(kSplitNames[k]) + " split of '" +
               blend.prefixes[d] + "' (sequences " + std::to_string(begin) +
               " to " + std::to_string(end) + ") " + error;
      parts.push_back(std::move(part));
    }
    if (blend.weights.empty()) {
      out[k] = std::move(parts[0]);
      continue;
    }
    auto blended =
        std::make_unique<BlendedDataset>(std::move(parts), blend.weights, size);
    // Each prefix was built for its share and more; the blend must not
    // ask past what was built (Megatron raises an IndexError there).
    for (size_t d = 0; d < opened.size(); ++d)
      if (blended->takes(d) > blended->holds(d))
        return "the " + std::string(kSplitNames[k]) + " split of '" +
               blend.prefixes[d] + "' gives " +
               std::to_string(blended->holds(d)) +
               " samples; the blend takes " + std::to_string(blended->takes(d));
    out[k] = std::move(blended);
  }
  return "";
}

} // namespace strata::runtime
