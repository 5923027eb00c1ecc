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

} // namespace
