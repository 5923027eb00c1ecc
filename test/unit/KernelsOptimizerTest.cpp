//===- KernelsOptimizerTest.cpp
//---------------------------------------------===//
//
// The gradient norm, clipping and multi-tensor AdamW; each against its float64
// reference on every device (KernelTesting.h).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, GradientNormOverSegmentsAndClipping) {
  // Counted: the segments, the first-only ones where first_part is 0, each
  // within the rank's part of the windows: two buckets [0, 500) and
  // [500, 1000), each split between two data-parallel parts of 250.
  Vec g = randomVec(1000);
  std::vector<int64_t> windows = {0, 250, 0, 500, 250, 250};
  double expected = 0, overParts = 0;
  for (int64_t part : {0, 1}) {
    for (int64_t firstPart : {0, 1}) {
      Harness h(on());
      uint32_t ig = h.input({1000}, g), sum = h.add({});
      h.run("sum_squares", {ig}, {sum},
            {{"segments", listArg({0, 300, 400, 600})},
             {"first_segments", listArg({300, 100})},
             {"windows", listArg(windows)},
             {"part", intArg(part)},
             {"first_part", intArg(firstPart)}});
      double want = 0;
      for (int64_t i = 0; i < 1000; ++i) {
        bool owned = (i % 500) / 250 == part;
        bool counted = i < 300 || i >= 400 || firstPart == 0;
        if (owned && counted)
          want += g[i] * g[i];
      }
      expectClose(h.read(sum), {want}, 1e-6, "sum_squares");
      if (firstPart == 0)
        overParts += h.read(sum)[0];
      if (part == 0 && firstPart == 0)
        expected = want;
    }
  }
  // Each element lies in one part: the parts' sums make the whole norm.
  double whole = 0;
  for (double x : g)
    whole += x * x;
  EXPECT_NEAR(overParts, whole, 1e-6 * whole);

  for (double clip : {0.0, 1.0, 1e6}) {
    Hyper hyper;
    hyper.clipGrad = clip;
    Harness c(on());
    uint32_t is = c.input({}, {expected}), ih = c.hyper(hyper),
             norm = c.add({}), coef = c.add({});
    c.run("clip_coefficient", {is, ih}, {norm, coef});
    double n = std::sqrt(expected);
    expectClose(c.read(norm), {n}, 1e-6, "norm");
    expectClose(c.read(coef),
                {clip > 0 ? std::min(1.0, clip / (n + 1e-6)) : 1.0}, 1e-6,
                "coefficient");
  }
}

TEST_P(Kernels, MultiTensorAdamWAgainstTheFormula) {
  // Two segments of one flat region: [0, 20) decayed, [30, 50) not. Two
  // windows split each between two data-parallel parts of 10: part k owns
  // [10k, 10k + 10) with its state at 0 and [30 + 10k, 40 + 10k) with its
  // state at 20 (a distributed optimizer's layout); elements outside the
  // rank's part stay as they were.
  const int64_t n = 50;
  for (auto [master, part] : {std::pair{false, 0}, std::pair{false, 1},
                              std::pair{true, 0}, std::pair{true, 1}}) {
    Hyper hyper;
    hyper.lr = 3e-3;
    hyper.weightDecay = 0.1;
    hyper.step = 3;
    Vec grad = randomVec(n), param = randomVec(n), m = randomVec(40, 0.1),
        v = randomVec(40, 0.1), p0 = randomVec(40);
    for (double &x : v)
      x = std::fabs(x);
    double coefficient = 0.5;
    Harness h(on());
    uint32_t ig = h.input({n}, grad), ic = h.input({}, {coefficient}),
             ih = h.hyper(hyper);
    uint32_t value = h.add({n}, master ? DType::BF16 : DType::F32);
    uint32_t im = h.add({40}), iv = h.add({40});
    std::vector<uint32_t> outs = {value, im, iv};
    h.presetOutput(im, m);
    h.presetOutput(iv, v);
    h.presetOutput(value, param);
    Vec truth = param; // the fp32 values the update starts from
    if (master) {
      uint32_t ip = h.add({40});
      h.presetOutput(ip, p0);
      outs.push_back(ip);
    }
    h.run("adamw", {ig, ic, ih}, outs,
          {{"segments", listArg({0, 20, 1, 30, 20, 0})},
           {"windows", listArg({0, 10, 0, 30, 10, 20})},
           {"part", intArg(part)}});
    Vec expected(n), expectedM = m, expectedV = v, expectedMaster = p0;
    for (int64_t i = 0; i < n; ++i)
      expected[i] = master ? roundToBf16(float(param[i])) : param[i];
    for (auto [begin, state, decay] : {std::tuple{10 * part, 0, true},
                                       std::tuple{30 + 10 * part, 20, false}})
      for (int64_t e = 0; e < 10; ++e) {
        int64_t i = begin + e, s = state + e;
        double g = grad[i] * coefficient;
        double start = master ? p0[s] : truth[i];
        double p = start * (1 - hyper.lr * (decay ? hyper.weightDecay : 0));
        expectedM[s] = 0.9 * m[s] + 0.1 * g;
        expectedV[s] = 0.999 * v[s] + 0.001 * g * g;
        double mhat = expectedM[s] / (1 - std::pow(0.9, 3));
        double vhat = expectedV[s] / (1 - std::pow(0.999, 3));
        double updated = p - hyper.lr * mhat / (std::sqrt(vhat) + hyper.eps);
        if (master)
          expectedMaster[s] = updated;
        else
          expected[i] = updated;
      }
    expectClose(h.read(im), expectedM, 1e-6, "exp_avg");
    expectClose(h.read(iv), expectedV, 1e-6, "exp_avg_sq");
    if (master) {
      Vec written = h.read(outs[3]);
      expectClose(written, expectedMaster, 1e-6, "master");
      // The bf16 values: exactly the masters the kernel wrote, rounded to
      // nearest even; elsewhere untouched.
      for (auto [begin, state] :
           {std::pair{10 * part, 0}, std::pair{30 + 10 * part, 20}})
        for (int64_t e = 0; e < 10; ++e)
          expected[begin + e] = roundToBf16(float(written[state + e]));
      expectClose(h.read(value), expected, 0, "bf16 value");
    } else {
      expectClose(h.read(value), expected, 1e-6, "param");
    }
  }
}

TEST_P(Kernels, OptimizerOverLargeWindowsAndRaggedEdges) {
  // The GPU's kernels take 8 owned elements a thread, as 16-byte vectors
  // where the 8 lie in one window and one segment: two buckets of 4000 and
  // 1202 split between two parts, segments that end and begin inside a
  // thread's 8 (at 1001, 2999 and 5000) and a hole between them (1001 to
  // 1100, neither counted nor updated), a window whose part starts at an
  // odd offset; sum_squares' first-only segment counted on the first part
  // only. Against the formulas in float64, every element checked (those
  // outside the rank's part or the segments untouched).
  const int64_t n = 5202;
  const std::vector<int64_t> windows = {0, 2000, 0, 4000, 601, 2000};
  const std::vector<int64_t> adamSegments = {0,    1001, 1, 1100, 1899, 0,
                                             2999, 2001, 1, 5000, 202,  0};
  Vec grad = randomVec(n);
  for (int64_t part : {0, 1}) {
    SCOPED_TRACE("part " + std::to_string(part));
    auto owner = [&](int64_t i, int64_t &state) {
      int64_t bucket = i < 4000 ? 0 : 1, begin = bucket ? 4000 : 0;
      int64_t length = bucket ? 601 : 2000;
      int64_t from = begin + part * length;
      state = windows[3 * bucket + 2] + (i - from);
      return i >= from && i < from + length;
    };
    // sum_squares over [0, 1001) and [1100, 5202) (a first-only [2999,
    // 3999) inside them counted once).
    for (int64_t firstPart : {0, 1}) {
      Harness h(on());
      uint32_t ig = h.input({n}, grad), sum = h.add({});
      h.run("sum_squares", {ig}, {sum},
            {{"segments", listArg({0, 1001, 1100, 1899, 4000, 1202})},
             {"first_segments", listArg({2999, 1001})},
             {"windows", listArg(windows)},
             {"part", intArg(part)},
             {"first_part", intArg(firstPart)}});
      double want = 0;
      for (int64_t i = 0; i < n; ++i) {
        int64_t state;
        bool in = i < 1001 || (i >= 1100 && i < 2999) || i >= 4000 ||
                  (firstPart == 0 && i >= 2999 && i < 4000);
        if (owner(i, state) && in)
          want += grad[i] * grad[i];
      }
      expectClose(h.read(sum), {want}, 1e-6, "sum_squares");
    }
    Hyper hyper;
    hyper.lr = 1e-3;
    hyper.weightDecay = 0.1;
    hyper.step = 2;
    Vec param = randomVec(n), m = randomVec(2601, 0.1), v = randomVec(2601);
    for (double &x : v)
      x = std::fabs(x) * 0.01;
    const double coefficient = 0.75;
    Harness h(on());
    uint32_t ig = h.input({n}, grad), ic = h.input({}, {coefficient}),
             ih = h.hyper(hyper), value = h.add({n}), im = h.add({2601}),
             iv = h.add({2601});
    h.presetOutput(value, param);
    h.presetOutput(im, m);
    h.presetOutput(iv, v);
    h.run("adamw", {ig, ic, ih}, {value, im, iv},
          {{"segments", listArg(adamSegments)},
           {"windows", listArg(windows)},
           {"part", intArg(part)}});
    Vec expected = param, expectedM = m, expectedV = v;
    for (int64_t i = 0; i < n; ++i) {
      int64_t state;
      bool decayed = i < 1001 || (i >= 2999 && i < 5000);
      bool in = i < 1001 || i >= 1100;
      if (!owner(i, state) || !in)
        continue;
      double g = grad[i] * coefficient;
      expectedM[state] = 0.9 * m[state] + 0.1 * g;
      expectedV[state] = 0.999 * v[state] + 0.001 * g * g;
      double mhat = expectedM[state] / (1 - std::pow(0.9, 2));
      double vhat = expectedV[state] / (1 - std::pow(0.999, 2));
      expected[i] = param[i] * (1 - hyper.lr * (decayed ? 0.1 : 0)) -
                    hyper.lr * mhat / (std::sqrt(vhat) + hyper.eps);
    }
    expectClose(h.read(im), expectedM, 1e-6, "exp_avg");
    expectClose(h.read(iv), expectedV, 1e-6, "exp_avg_sq");
    expectClose(h.read(value), expected, 1e-6, "param");
  }
}

} // namespace
