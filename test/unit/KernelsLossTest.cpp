//===- KernelsLossTest.cpp
//--------------------------------------------------===//
//
// The cross-entropy: whole, with its gradient, vocabulary-parallel; each
// against its float64 reference on every device (KernelTesting.h).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, CrossEntropyAndItsGradient) {
  const int64_t tokens = 12, vocab = 9;
  Vec logits = randomVec(tokens * vocab, 2.0);
  auto labels = randomIds(tokens, vocab);
  Harness h(on());
  uint32_t il = h.input({tokens, vocab}, logits), ii = h.ids({tokens}, labels);
  uint32_t loss = h.add({});
  h.run("cross_entropy_fwd", {il, ii}, {loss}, {{"vocab_size", intArg(vocab)}});
  expectClose(h.read(loss), {refCrossEntropy(logits, labels, vocab)}, kTol,
              "cross_entropy_fwd");

  Harness g(on());
  double seed = 0.25;
  uint32_t gl = g.input({tokens, vocab}, logits), gi = g.ids({tokens}, labels),
           gs = g.input({}, {seed}), grad = g.add({tokens, vocab});
  g.run("cross_entropy_bwd", {gl, gi, gs}, {grad},
        {{"vocab_size", intArg(vocab)}});
  expectClose(
      g.read(grad),
      vjp([&](const Vec &x) { return Vec{refCrossEntropy(x, labels, vocab)}; },
          logits, {seed}),
      kTol, "cross_entropy_bwd");
}

/// The mean cross-entropy over rows of `width` columns of which the first
/// `valid` are the vocabulary (the rest padding).
double refPaddedCrossEntropy(const Vec &logits,
                             const std::vector<int32_t> &labels, int64_t width,
                             int64_t valid) {
  Vec real;
  for (size_t i = 0; i < labels.size(); ++i)
    real.insert(real.end(), logits.begin() + i * width,
                logits.begin() + i * width + valid);
  return refCrossEntropy(real, labels, valid);
}
TEST_P(Kernels, CrossEntropyWithItsGradientInOneLaunch) {
  // The fused loss (strata-fuse-loss): loss and gradient of a vocabulary
  // of 37 padded to 40 columns, over rows enough for many blocks.
  const int64_t tokens = 130, vocab = 37, width = 40;
  Vec logits = randomVec(tokens * width, 2.0);
  auto labels = randomIds(tokens, vocab);
  const double seed = 0.25;
  auto loss = [&](const Vec &z) {
    return Vec{refPaddedCrossEntropy(z, labels, width, vocab)};
  };
  Harness h(on());
  uint32_t out = h.add({}), grad = h.add({tokens, width});
  h.run("cross_entropy_with_grad",
        {h.input({tokens, width}, logits), h.ids({tokens}, labels),
         h.input({}, {seed})},
        {out, grad}, {{"vocab_size", intArg(vocab)}});
  expectClose(h.read(out), loss(logits), kTol, "cross_entropy_with_grad loss");
  expectClose(h.read(grad), vjp(loss, logits, {seed}), kTol,
              "cross_entropy_with_grad gradient");
}

TEST_P(Kernels, CrossEntropyWithGradientOverManyBlocks) {
  // Rows of 1000 columns (a vocabulary of 990 padded), bf16, 600 of them:
  // the GPU's block a row takes its statistics in one pass in chunks of 8
  // and adds the rows' losses over 600 blocks in two stages (groups of 256).
  // Against the loss and its gradient by their formulas in float64.
  const int64_t tokens = 600, vocab = 990, width = 1000;
  Vec logits = roundedToBf16(randomVec(tokens * width, 3.0));
  auto labels = randomIds(tokens, vocab);
  const double seed = 0.75;
  Harness h(on());
  uint32_t out = h.add({}), grad = h.add({tokens, width}, DType::BF16);
  h.run("cross_entropy_with_grad",
        {h.input({tokens, width}, logits, DType::BF16), h.ids({tokens}, labels),
         h.input({}, {seed})},
        {out, grad}, {{"vocab_size", intArg(vocab)}});
  double loss = 0;
  Vec expected(tokens * width, 0.0);
  for (int64_t r = 0; r < tokens; ++r) {
    const double *z = &logits[r * width];
    double max = -INFINITY, sum = 0;
    for (int64_t c = 0; c < vocab; ++c)
      max = std::max(max, z[c]);
    for (int64_t c = 0; c < vocab; ++c)
      sum += std::exp(z[c] - max);
    double lse = max + std::log(sum);
    loss += lse - z[labels[r]];
    for (int64_t c = 0; c < vocab; ++c)
      expected[r * width + c] =
          (std::exp(z[c] - lse) - (c == labels[r] ? 1.0 : 0.0)) * seed / tokens;
  }
  expectClose(h.read(out), {loss / tokens}, kTol, "loss");
  double largest = 0;
  for (double e : expected)
    largest = std::max(largest, std::fabs(e));
  expectClose(h.read(grad), roundedToBf16(expected), kTolBf16 * largest,
              "gradient");
}

TEST_P(Kernels, RowStatisticsCombinedOverBlocksOfColumns) {
  // strata-fuse-output-layer's first pass: a vocabulary of 45 padded to 64,
  // in blocks of 16 columns, the third with 13 real columns and the fourth
  // all padding; each block's max and sum of exponentials combined with
  // the blocks' before it. Against the whole rows' in float64.
  const int64_t tokens = 9, vocab = 45, width = 64, columns = 16;
  Vec logits = randomVec(tokens * width, 4.0);
  Vec max(tokens, -INFINITY), sum(tokens, 0.0);
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t c = 0; c < vocab; ++c)
      max[i] = std::max(max[i], logits[i * width + c]);
    for (int64_t c = 0; c < vocab; ++c)
      sum[i] += std::exp(logits[i * width + c] - max[i]);
  }
  // A launch a block, each starting from the statistics the last left (a
  // harness runs once); the first finds a max above every logit, which it
  // must not combine with.
  Vec runningMax(tokens, 100.0), runningSum(tokens, 1.0);
  for (int64_t offset = 0; offset < width; offset += columns) {
    Vec block;
    for (int64_t i = 0; i < tokens; ++i)
      block.insert(block.end(), logits.begin() + i * width + offset,
                   logits.begin() + i * width + offset + columns);
    Harness h(on());
    uint32_t in = h.input({tokens, columns}, block),
             maxOut = h.input({tokens}, runningMax),
             sumOut = h.input({tokens}, runningSum);
    h.run("logits_max_sum", {in}, {maxOut, sumOut},
          {{"vocab_size", intArg(vocab)},
           {"vocab_offset", intArg(offset)},
           {"accumulate", boolArg(offset > 0)}});
    runningMax = h.read(maxOut);
    runningSum = h.read(sumOut);
  }
  expectClose(runningMax, max, 0, "logits_max_sum max");
  expectClose(runningSum, sum, kTol, "logits_max_sum sum");
}

TEST_P(Kernels, SumsOfExponentialsMovedToTheMaxOverRanks) {
  // The vocabulary-parallel loss in blocks: each of three ranks' rows'
  // (max, sum of exponentials) over its own columns, moved to the max over
  // the ranks, add up to the whole rows' sum (as the all-reduce will add
  // them). The third rank's last row holds no real column (max -inf, sum
  // 0): it adds 0. Against float64.
  const int64_t tokens = 7, ranks = 3, columns = 11;
  Vec logits = randomVec(tokens * ranks * columns, 4.0);
  Vec localMax(ranks * tokens, -INFINITY), localSum(ranks * tokens, 0.0),
      max(tokens, -INFINITY), sum(tokens, 0.0);
  auto z = [&](int64_t i, int64_t r, int64_t c) {
    return logits[(i * ranks + r) * columns + c];
  };
  auto holds = [&](int64_t i, int64_t r) { return r < 2 || i < tokens - 1; };
  for (int64_t r = 0; r < ranks; ++r)
    for (int64_t i = 0; i < tokens; ++i) {
      if (!holds(i, r))
        continue;
      double &m = localMax[r * tokens + i];
      for (int64_t c = 0; c < columns; ++c)
        m = std::max(m, z(i, r, c));
      for (int64_t c = 0; c < columns; ++c)
        localSum[r * tokens + i] += std::exp(z(i, r, c) - m);
      max[i] = std::max(max[i], m);
    }
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t r = 0; r < ranks; ++r)
      for (int64_t c = 0; holds(i, r) && c < columns; ++c)
        sum[i] += std::exp(z(i, r, c) - max[i]);
  Vec total(tokens, 0.0);
  for (int64_t r = 0; r < ranks; ++r) {
    Harness h(on());
    uint32_t m = h.input({tokens}, {localMax.begin() + r * tokens,
                                    localMax.begin() + (r + 1) * tokens}),
             s = h.input({tokens}, {localSum.begin() + r * tokens,
                                    localSum.begin() + (r + 1) * tokens}),
             most = h.input({tokens}, max), out = h.add({tokens});
    h.run("sum_exp_rescale", {m, s, most}, {out}, {});
    Vec moved = h.read(out);
    for (int64_t i = 0; i < tokens; ++i)
      total[i] += moved[i];
  }
  expectClose(total, sum, kTol, "sum_exp_rescale");
}

TEST_P(Kernels, VocabularyParallelLossFromRowStatistics) {
  // A vocabulary of 19 padded to 24 columns, split between three ranks of
  // 8: the last holds 3 real columns and 5 of padding. Each kernel gets
  // the float64 statistics (as the all-reduces would give them) and is
  // compared alone.
  const int64_t tokens = 7, vocab = 19, width = 24, columns = 8;
  Vec logits = randomVec(tokens * width, 2.0);
  auto labels = randomIds(tokens, vocab);
  Vec max(tokens, -INFINITY), target(tokens, 0.0), sum(tokens, 0.0);
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t c = 0; c < vocab; ++c)
      max[i] = std::max(max[i], logits[i * width + c]);
    for (int64_t c = 0; c < vocab; ++c)
      sum[i] += std::exp(logits[i * width + c] - max[i]);
    target[i] = logits[i * width + labels[i]];
  }
  const double seed = 0.5;
  auto loss = [&](const Vec &z) {
    return Vec{refPaddedCrossEntropy(z, labels, width, vocab)};
  };
  Vec gradient = vjp(loss, logits, {seed});
  for (int64_t part = 0; part < 3; ++part) {
    int64_t offset = part * columns;
    int64_t valid = std::min(columns, vocab - offset);
    auto shard = [&](const Vec &full) {
      Vec out;
      for (int64_t i = 0; i < tokens; ++i)
        out.insert(out.end(), full.begin() + i * width + offset,
                   full.begin() + i * width + offset + columns);
      return out;
    };
    std::map<std::string, Arg> args = {{"vocab_size", intArg(vocab)},
                                       {"vocab_offset", intArg(offset)}};
    Vec ownMax(tokens, -INFINITY), ownTarget(tokens, 0.0), ownSum(tokens, 0.0);
    for (int64_t i = 0; i < tokens; ++i) {
      for (int64_t c = 0; c < valid; ++c) {
        double z = logits[i * width + offset + c];
        ownMax[i] = std::max(ownMax[i], z);
        ownSum[i] += std::exp(z - max[i]);
      }
      if (labels[i] >= offset && labels[i] < offset + valid)
        ownTarget[i] = logits[i * width + labels[i]];
    }
    Harness m(on());
    uint32_t ml = m.input({tokens, columns}, shard(logits)),
             mo = m.add({tokens});
    m.run("logits_max", {ml}, {mo}, args);
    expectClose(m.read(mo), ownMax, 0, "logits_max");

    Harness t(on());
    uint32_t tl = t.input({tokens, columns}, shard(logits)),
             ti = t.ids({tokens}, labels), to = t.add({tokens});
    t.run("logits_target", {tl, ti}, {to}, args);
    expectClose(t.read(to), ownTarget, 0, "logits_target");

    Harness s(on());
    uint32_t sl = s.input({tokens, columns}, shard(logits)),
             sm = s.input({tokens}, max), so = s.add({tokens});
    s.run("logits_sum_exp", {sl, sm}, {so}, args);
    expectClose(s.read(so), ownSum, kTol, "logits_sum_exp");

    Harness g(on());
    uint32_t gl = g.input({tokens, columns}, shard(logits)),
             gi = g.ids({tokens}, labels), gm = g.input({tokens}, max),
             gs = g.input({tokens}, sum), gd = g.input({}, {seed}),
             go = g.add({tokens, columns});
    g.run("cross_entropy_grad_from_stats", {gl, gi, gm, gs, gd}, {go}, args);
    expectClose(g.read(go), shard(gradient), kTol,
                "cross_entropy_grad_from_stats");

    // Both in one launch: every rank's loss is the whole one.
    Harness f(on());
    uint32_t fo = f.add({}), fg = f.add({tokens, columns});
    f.run("cross_entropy_with_grad_from_stats",
          {f.input({tokens, columns}, shard(logits)), f.ids({tokens}, labels),
           f.input({tokens}, max), f.input({tokens}, sum),
           f.input({tokens}, target), f.input({}, {seed})},
          {fo, fg}, args);
    expectClose(f.read(fo), loss(logits), kTol,
                "cross_entropy_with_grad_from_stats loss");
    expectClose(f.read(fg), shard(gradient), kTol,
                "cross_entropy_with_grad_from_stats gradient");
  }
  Harness l(on());
  uint32_t lm = l.input({tokens}, max), ls = l.input({tokens}, sum),
           lt = l.input({tokens}, target), lo = l.add({});
  l.run("cross_entropy_from_stats", {lm, ls, lt}, {lo});
  expectClose(l.read(lo), loss(logits), kTol, "cross_entropy_from_stats");
}

} // namespace
