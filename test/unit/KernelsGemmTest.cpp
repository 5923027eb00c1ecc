//===- KernelsGemmTest.cpp
//--------------------------------------------------===//
//
// Gemms (cuBLASLt on a GPU): transposes, batches, epilogues, operand checks;
// each against its float64 reference on every device (KernelTesting.h).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, GemmAllTransposesAndAccumulate) {
  const int64_t m = 13, n = 7, k = 19;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool accumulate : {false, true}) {
        Harness h(on());
        Vec a = randomVec(m * k), b = randomVec(k * n), c0 = randomVec(m * n);
        uint32_t ia = h.input(
            ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, a);
        uint32_t ib = h.input(
            tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, b);
        uint32_t ic = h.add({m, n});
        if (accumulate)
          h.presetOutput(ic, c0);
        h.runGemm(plainGemm(ia, ib, ic, m, n, k, ta, tb, accumulate ? 1 : 0));
        Vec expected = refGemm(a, b, m, n, k, ta, tb);
        if (accumulate)
          for (size_t i = 0; i < expected.size(); ++i)
            expected[i] += c0[i];
        expectClose(h.read(ic), expected, kTol, "gemm");
      }
}

TEST_P(Kernels, GemmBatchedStridedWithAlphaBeta) {
  // Two [m, k] x [k, n] products read from padded rows (lda > k) and
  // written into padded rows (ldd > n): D = alpha·A·B + beta·D.
  const int64_t m = 5, n = 6, k = 4, lda = 7, ldb = 9, ldd = 8, batch = 2;
  const float alpha = 0.5f, beta = -2.0f;
  Harness h(on());
  Vec a = randomVec(batch * m * lda), b = randomVec(batch * k * ldb),
      d0 = randomVec(batch * m * ldd);
  uint32_t ia = h.input({batch * m * lda}, a),
           ib = h.input({batch * k * ldb}, b);
  uint32_t id = h.add({batch * m * ldd});
  h.presetOutput(id, d0);
  GemmOp g = plainGemm(ia, ib, id, m, n, k, false, false, beta);
  g.alpha = alpha;
  g.lda = lda;
  g.ldb = ldb;
  g.ldd = ldd;
  g.batch = batch;
  g.strideA = m * lda;
  g.strideB = k * ldb;
  g.strideD = m * ldd;
  h.runGemm(g);
  Vec expected = d0;
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a[t * m * lda + i * lda + p] * b[t * k * ldb + p * ldb + j];
        double &out = expected[t * m * ldd + i * ldd + j];
        out = alpha * sum + beta * out;
      }
  expectClose(h.read(id), expected, kTol, "batched gemm");
}

TEST_P(Kernels, GemmEpilogues) {
  const int64_t m = 11, n = 6, k = 9;
  Vec a = randomVec(m * k), b = randomVec(k * n), bias = randomVec(n);
  Vec product = refGemm(a, b, m, n, k, false, false);
  // bias: D = A·B + bias; gelu_bias: aux = A·B + bias, D = GELU(aux).
  for (Epilogue epilogue : {Epilogue::Bias, Epilogue::GeluBias}) {
    bool withGelu = epilogue == Epilogue::GeluBias;
    // A CUDA plan has bias-only epilogues (cuBLASLt's GELU is the tanh
    // form, its bias gradient overwrites); GELU and the bias gradient are
    // launches there.
    if (withGelu && on() != "cpu")
      continue;
    Harness h(on());
    uint32_t ia = h.input({m, k}, a), ib = h.input({k, n}, b),
             ibias = h.input({n}, bias), id = h.add({m, n});
    GemmOp g = plainGemm(ia, ib, id, m, n, k, false, false);
    g.epilogue = epilogue;
    g.bias = ibias;
    if (withGelu)
      g.aux = h.add({m, n});
    h.runGemm(g);
    Vec pre = product, expected(m * n);
    for (int64_t i = 0; i < m * n; ++i) {
      pre[i] += bias[i % n];
      expected[i] = withGelu ? gelu(pre[i]) : pre[i];
    }
    if (withGelu)
      expectClose(h.read(g.aux), pre, kTol, "gelu_bias pre-activation");
    expectClose(h.read(id), expected, kTol, withGelu ? "gelu_bias" : "bias");
  }
  // bias_grad beside a weight gradient dW = xᵀ·dy: bias = beta·bias +
  // the column sums of dy.
  for (float beta : {0.0f, 1.0f}) {
    if (on() != "cpu")
      break;
    Harness h(on());
    Vec x = randomVec(k * m), dy = randomVec(k * n), w0 = randomVec(m * n),
        db0 = randomVec(n);
    uint32_t ix = h.input({k, m}, x), idy = h.input({k, n}, dy),
             iw = h.add({m, n}), idb = h.add({n});
    h.presetOutput(iw, w0);
    h.presetOutput(idb, db0);
    GemmOp g = plainGemm(ix, idy, iw, m, n, k, true, false, beta);
    g.epilogue = Epilogue::BiasGrad;
    g.bias = idb;
    h.runGemm(g);
    Vec expectedW = refGemm(x, dy, m, n, k, true, false);
    Vec expectedB(n, 0.0);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = 0; j < n; ++j)
        expectedB[j] += dy[r * n + j];
    for (int64_t i = 0; i < m * n; ++i)
      expectedW[i] += beta * w0[i];
    for (int64_t j = 0; j < n; ++j)
      expectedB[j] += beta * db0[j];
    expectClose(h.read(iw), expectedW, kTol, "weight gradient");
    expectClose(h.read(idb), expectedB, kTol, "bias_grad");
  }
}

TEST(KernelChecks, GemmChecksItsOperands) {
  Harness h("cpu");
  uint32_t ia = h.add({4, 3}), ib = h.add({3, 5}), id = h.add({4, 5});
  Instruction instruction;
  auto refusal = [&] {
    return checkInstruction(instruction, h.buffers(), CheckContext());
  };
  // Each mistake refused for its own reason. k = 4 reads past A's 12
  // elements.
  instruction.op = plainGemm(ia, ib, id, 4, 5, 4, false, false);
  EXPECT_NE(refusal().find("does not fit A"), std::string::npos) << refusal();
  // A bias epilogue without its bias.
  GemmOp g = plainGemm(ia, ib, id, 4, 5, 3, false, false);
  g.epilogue = Epilogue::Bias;
  instruction.op = g;
  EXPECT_EQ(refusal(), "gemm: the epilogue's operands do not match the "
                       "epilogue");
  // A batch whose stride walks off D.
  g = plainGemm(ia, ib, id, 4, 5, 3, false, false);
  g.batch = 2;
  g.strideD = 20;
  instruction.op = g;
  EXPECT_NE(refusal().find("batch=2 does not fit"), std::string::npos)
      << refusal();
  // The same gemm unbatched passes.
  g.batch = 1;
  instruction.op = g;
  EXPECT_EQ(refusal(), "");
}

} // namespace
