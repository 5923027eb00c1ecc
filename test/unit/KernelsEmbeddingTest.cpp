//===- KernelsEmbeddingTest.cpp
//---------------------------------------------===//
//
// The embedding lookup and its scatter-add gradient; each against its float64
// reference on every device (KernelTesting.h).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, EmbeddingForwardAndBackward) {
  const int64_t vocab = 11, hidden = 6, tokens = 17;
  Harness h(on());
  Vec table = randomVec(vocab * hidden);
  auto ids = randomIds(tokens, vocab);
  uint32_t it = h.input({vocab, hidden}, table), ii = h.ids({tokens}, ids);
  uint32_t out = h.add({tokens, hidden});
  h.run("embedding_fwd", {it, ii}, {out});
  Vec expected(tokens * hidden);
  for (int64_t i = 0; i < tokens; ++i)
    for (int64_t j = 0; j < hidden; ++j)
      expected[i * hidden + j] = table[ids[i] * hidden + j];
  expectClose(h.read(out), expected, 0, "embedding_fwd");

  for (bool accumulate : {false, true}) {
    Harness g(on());
    Vec dy = randomVec(tokens * hidden), start = randomVec(vocab * hidden);
    uint32_t idy = g.input({tokens, hidden}, dy), iid = g.ids({tokens}, ids);
    uint32_t grad = g.add({vocab, hidden});
    if (accumulate)
      g.presetOutput(grad, start);
    g.run("embedding_bwd", {idy, iid}, {grad},
          {{"accumulate", boolArg(accumulate)}});
    auto forward = [&](const Vec &t) {
      Vec y(tokens * hidden);
      for (int64_t i = 0; i < tokens; ++i)
        for (int64_t j = 0; j < hidden; ++j)
          y[i * hidden + j] = t[ids[i] * hidden + j];
      return y;
    };
    Vec expectedGrad = vjp(forward, table, dy);
    if (accumulate)
      for (size_t i = 0; i < expectedGrad.size(); ++i)
        expectedGrad[i] += start[i];
    expectClose(g.read(grad), expectedGrad, kTol, "embedding_bwd");
  }
}

TEST_P(Kernels, EmbeddingGradientAtTrainingShapes) {
  // The GPU's backward takes 32 rows of the table a block and lists their
  // tokens in token order: a vocabulary of 300 (ten blocks, the last
  // partial), rows of 2056 (two passes of a lane's 8 chunks of 8, and a
  // row split across ranks from vocab_offset 40); batches of 6000 tokens
  // spread over the vocabulary, and skewed: 5000 of them on 3 ids of one
  // block, past its list of 4096, which then walks the ids again. With
  // accumulate, onto the rows' values, in token order as the CPU adds.
  const int64_t rows = 300, hidden = 2056, tokens = 6000, offset = 40;
  for (bool skewed : {false, true})
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(std::string(skewed ? "skewed" : "spread") +
                   (accumulate ? ", accumulate" : ""));
      std::vector<int32_t> ids = randomIds(tokens, int32_t(rows + 80));
      if (skewed)
        for (int64_t i = 0; i < 5000; ++i)
          ids[i] = int32_t(offset + 33 + i % 3);
      Vec dy = roundedToBf16(randomVec(tokens * hidden)),
          start = randomVec(rows * hidden);
      Harness g(on());
      uint32_t idy = g.input({tokens, hidden}, dy, DType::BF16),
               iid = g.ids({tokens}, ids), grad = g.add({rows, hidden});
      if (accumulate)
        g.presetOutput(grad, start);
      g.run("embedding_bwd", {idy, iid}, {grad},
            {{"accumulate", boolArg(accumulate)},
             {"vocab_offset", intArg(offset)}});
      Vec expected = accumulate ? start : Vec(rows * hidden, 0.0);
      for (int64_t i = 0; i < tokens; ++i) {
        int64_t row = ids[i] - offset;
        if (row >= 0 && row < rows)
          for (int64_t j = 0; j < hidden; ++j)
            expected[row * hidden + j] += dy[i * hidden + j];
      }
      expectClose(g.read(grad), expected, kTol, "embedding_bwd");
    }
}

} // namespace
