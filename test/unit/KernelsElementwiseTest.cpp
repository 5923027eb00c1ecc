//===- KernelsElementwiseTest.cpp
//-------------------------------------------===//
//
// Pointwise arithmetic, activations, sums, transposes, slices, fused chains;
// each against its float64 reference on every device (KernelTesting.h).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

using namespace strata::kernel_testing;

namespace {

TEST_P(Kernels, BroadcastArithmetic) {
  const int64_t rows = 5, width = 8;
  for (const char *kernel : {"add", "sub", "mul"}) {
    for (int64_t rhsWidth : {width * rows, width}) {
      Harness h(on());
      Vec a = randomVec(rows * width), b = randomVec(rhsWidth);
      uint32_t ia = h.input({rows, width}, a);
      uint32_t ib =
          h.input(rhsWidth == width ? std::vector<int64_t>{width}
                                    : std::vector<int64_t>{rows, width},
                  b);
      uint32_t out = h.add({rows, width});
      h.run(kernel, {ia, ib}, {out});
      Vec expected(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        double y = b[i % rhsWidth];
        expected[i] = kernel[0] == 'a'   ? a[i] + y
                      : kernel[0] == 's' ? a[i] - y
                                         : a[i] * y;
      }
      expectClose(h.read(out), expected, 1e-6, kernel);
    }
  }
}

TEST_P(Kernels, ScaleFillCopyAccumulate) {
  Vec x = randomVec(37), y0 = randomVec(37);
  Harness h(on());
  uint32_t ix = h.input({37}, x), out = h.add({37});
  h.run("scale", {ix}, {out}, {{"factor", floatArg(-0.75)}});
  Vec expected(37);
  for (int i = 0; i < 37; ++i)
    expected[i] = -0.75 * x[i];
  expectClose(h.read(out), expected, 1e-7, "scale");

  Harness f(on());
  uint32_t filled = f.add({9});
  f.run("fill", {}, {filled}, {{"value", floatArg(0.25)}});
  expectClose(f.read(filled), Vec(9, 0.25), 0, "fill");

  Harness c(on());
  uint32_t cx = c.input({37}, x), cy = c.add({37});
  c.run("copy", {cx}, {cy});
  expectClose(c.read(cy), x, 0, "copy");

  Harness a(on());
  uint32_t ax = a.input({37}, x), ay = a.add({37});
  a.presetOutput(ay, y0);
  a.run("accumulate", {ax}, {ay});
  for (int i = 0; i < 37; ++i)
    expected[i] = x[i] + y0[i];
  expectClose(a.read(ay), expected, 1e-6, "accumulate");
}

TEST_P(Kernels, SumToRowsAndAccumulate) {
  const int64_t rows = 23, width = 10;
  for (bool accumulate : {false, true}) {
    Harness h(on());
    Vec x = randomVec(rows * width), start = randomVec(width);
    uint32_t ix = h.input({rows, width}, x), out = h.add({width});
    if (accumulate)
      h.presetOutput(out, start);
    h.run("sum_to", {ix}, {out}, {{"accumulate", boolArg(accumulate)}});
    Vec expected(width, 0.0);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t j = 0; j < width; ++j)
        expected[j] += x[r * width + j];
    if (accumulate)
      for (int64_t j = 0; j < width; ++j)
        expected[j] += start[j];
    expectClose(h.read(out), expected, kTol, "sum_to");
  }
}

// Context parallelism: a table over the sequence's places (learned
// positions) added at a rank's rows, the rank's two chunks, and its
// gradient, the sum over the batch written at those places (the other
// rows zero, or kept when adding); c = 1 is the whole sequence.
TEST_P(Kernels, PositionTableAtAContextParallelRanksRows) {
  const int64_t b = 3, seq = 12, width = 5;
  for (int64_t c : {1, 2, 3}) {
    int64_t rows = seq / c;
    Vec table = randomVec(seq * width);
    for (int64_t rank = 0; rank < c; ++rank) {
      std::map<std::string, Arg> where = {{"context_parallel", intArg(c)},
                                          {"context_rank", intArg(rank)}};
      Vec x = randomVec(b * rows * width);
      Harness h(on());
      uint32_t ix = h.input({b, rows, width}, x),
               it = h.input({seq, width}, table), out = h.add({b, rows, width});
      h.run("add_positions", {ix, it}, {out}, where);
      Vec expected(x.size());
      for (int64_t bi = 0; bi < b; ++bi)
        for (int64_t l = 0; l < rows; ++l)
          for (int64_t j = 0; j < width; ++j)
            expected[(bi * rows + l) * width + j] =
                x[(bi * rows + l) * width + j] +
                table[strata::runtime::contextPosition(l, rows, c, rank) *
                          width +
                      j];
      expectClose(h.read(out), expected, kTol, "add_positions");

      for (bool accumulate : {false, true}) {
        Harness g(on());
        Vec start = randomVec(seq * width);
        uint32_t gx = g.input({b, rows, width}, x), gy = g.add({seq, width});
        if (accumulate)
          g.presetOutput(gy, start);
        std::map<std::string, Arg> args = where;
        args["accumulate"] = boolArg(accumulate);
        g.run("sum_positions", {gx}, {gy}, args);
        Vec sums = accumulate ? start : Vec(seq * width, 0.0);
        for (int64_t bi = 0; bi < b; ++bi)
          for (int64_t l = 0; l < rows; ++l)
            for (int64_t j = 0; j < width; ++j)
              sums[strata::runtime::contextPosition(l, rows, c, rank) * width +
                   j] += x[(bi * rows + l) * width + j];
        expectClose(g.read(gy), sums, kTol, "sum_positions");
      }
    }
  }
}

TEST_P(Kernels, SumToOverManyBlocksAndColumnTiles) {
  // A bias gradient at training sizes: 3000 columns (two tiles of the
  // GPU's, 2048 and 952) over 400 rows; 8 columns over 5000 rows (many row
  // ranges, their sums added in two stages); 13 columns (not a multiple of
  // 8: one at a time). With accumulate, onto what y holds.
  for (auto [rows, width] :
       {std::pair<int64_t, int64_t>{400, 3000}, {5000, 8}, {700, 13}})
    for (bool accumulate : {false, true}) {
      SCOPED_TRACE(std::to_string(rows) + " x " + std::to_string(width));
      Harness h(on());
      Vec x = randomVec(rows * width), start = randomVec(width);
      uint32_t ix = h.input({rows, width}, x), out = h.add({width});
      if (accumulate)
        h.presetOutput(out, start);
      h.run("sum_to", {ix}, {out}, {{"accumulate", boolArg(accumulate)}});
      Vec expected = accumulate ? start : Vec(width, 0.0);
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < width; ++j)
          expected[j] += x[r * width + j];
      expectClose(h.read(out), expected, kTol, "sum_to");
    }
}

TEST_P(Kernels, ActivationsAndTheirGradients) {
  for (auto [fwd, bwd, fn] :
       {std::tuple{"gelu_fwd", "gelu_bwd", &gelu},
        std::tuple{"gelu_tanh_fwd", "gelu_tanh_bwd", &geluTanh},
        std::tuple{"silu_fwd", "silu_bwd", &silu}}) {
    Vec x = randomVec(64, 2.0), dy = randomVec(64);
    Harness h(on());
    uint32_t ix = h.input({64}, x), out = h.add({64});
    h.run(fwd, {ix}, {out});
    Vec expected(64);
    for (int i = 0; i < 64; ++i)
      expected[i] = fn(x[i]);
    expectClose(h.read(out), expected, kTol, fwd);

    Harness g(on());
    uint32_t gx = g.input({64}, x), gdy = g.input({64}, dy), dx = g.add({64});
    g.run(bwd, {gx, gdy}, {dx});
    auto forward = [&](const Vec &v) {
      Vec y(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        y[i] = fn(v[i]);
      return y;
    };
    expectClose(g.read(dx), vjp(forward, x, dy), kTol, bwd);
  }
}

TEST_P(Kernels, TransposeFourDimensions) {
  const std::vector<int64_t> shape = {2, 3, 4, 5}, perm = {0, 2, 3, 1};
  Vec x = randomVec(count(shape));
  Harness h(on());
  uint32_t ix = h.input(shape, x), out = h.add({2, 4, 5, 3});
  h.run("transpose", {ix}, {out}, {{"permutation", listArg(perm)}});
  Vec expected(x.size());
  int64_t e = 0;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t d = 0; d < 5; ++d)
        for (int64_t b = 0; b < 3; ++b)
          expected[e++] = x[((a * 3 + b) * 4 + c) * 5 + d];
  expectClose(h.read(out), expected, 0, "transpose");
}

TEST_P(Kernels, KeepOnFirstKeepsOnPartZeroOnly) {
  Vec x = randomVec(64);
  for (int64_t part : {0, 1, 3}) {
    Harness h(on());
    uint32_t ix = h.input({64}, x), y = h.add({64});
    h.presetOutput(y, randomVec(64));
    h.run("keep_on_first", {ix}, {y}, {{"part", intArg(part)}});
    expectClose(h.read(y), part == 0 ? x : Vec(64, 0.0), 0, "keep_on_first");
  }
}

TEST_P(Kernels, SliceEachPartAlongEachDimension) {
  const std::vector<int64_t> shape = {4, 6, 8};
  Vec x = randomVec(count(shape));
  for (int64_t dim : {0, 1, 2}) {
    const int64_t parts = 2;
    std::vector<int64_t> part = shape;
    part[dim] /= parts;
    for (int64_t p = 0; p < parts; ++p) {
      Harness h(on());
      uint32_t ix = h.input(shape, x), out = h.add(part);
      h.run("slice", {ix}, {out},
            {{"dim", intArg(dim)},
             {"part", intArg(p)},
             {"parts", intArg(parts)}});
      Vec expected;
      for (int64_t a = 0; a < part[0]; ++a)
        for (int64_t b = 0; b < part[1]; ++b)
          for (int64_t c = 0; c < part[2]; ++c) {
            int64_t at[3] = {a, b, c};
            at[dim] += p * part[dim];
            expected.push_back(
                x[(at[0] * shape[1] + at[1]) * shape[2] + at[2]]);
          }
      expectClose(h.read(out), expected, 0, "slice");
    }
  }
}

TEST_P(Kernels, FusedPointwiseChainEqualsItsMembers) {
  // A group as the fusion pass makes them: residual and bias adds (the
  // bias broadcast), GELU, a cast to bf16 that a later member reads back,
  // scaling, accumulation in place and a two-input gradient. On the CPU
  // the members run one by one; on a GPU as one generated kernel, whose
  // registers must hold what the buffers hold (the bf16-rounded value).
  const int64_t rows = 5, cols = 24, n = rows * cols;
  Vec x = randomVec(n), r = randomVec(n), bias = randomVec(cols),
      start = randomVec(n);
  Harness h(on());
  uint32_t ix = h.input({rows, cols}, x), ir = h.input({rows, cols}, r),
           ibias = h.input({cols}, bias);
  uint32_t a = h.add({rows, cols}), b = h.add({rows, cols}),
           g = h.add({rows, cols}), cast = h.add({rows, cols}, DType::BF16),
           m = h.add({rows, cols}), s = h.add({rows, cols}),
           acc = h.add({rows, cols}), d = h.add({rows, cols});
  h.presetOutput(acc, start);
  h.runFused({{"add", {ix, ir}, {a}, {}},
              {"add", {a, ibias}, {b}, {}},
              {"gelu_fwd", {b}, {g}, {}},
              {"copy", {g}, {cast}, {}},
              {"mul", {cast, ix}, {m}, {}},
              {"scale", {m}, {s}, {{"factor", floatArg(-0.5)}}},
              {"accumulate", {s}, {acc}, {}},
              {"silu_bwd", {a, s}, {d}, {}}});
  Vec ea(n), eb(n), eg(n), em(n), es(n), eacc(n), ed(n);
  Vec castRead = h.read(cast);
  for (int64_t i = 0; i < n; ++i) {
    ea[i] = x[i] + r[i];
    eb[i] = ea[i] + bias[i % cols];
    eg[i] = gelu(eb[i]);
    // From the cast as it was stored: a later member reads those bits.
    em[i] = castRead[i] * x[i];
    es[i] = -0.5 * em[i];
    eacc[i] = start[i] + es[i];
    double sig = 1 / (1 + std::exp(-ea[i]));
    ed[i] = es[i] * sig * (1 + ea[i] * (1 - sig));
  }
  expectClose(h.read(a), ea, kTol, "residual add");
  expectClose(h.read(b), eb, kTol, "bias add");
  expectClose(h.read(g), eg, kTol, "gelu");
  expectClose(castRead, roundedToBf16(eg), kTolBf16, "cast to bf16");
  expectClose(h.read(m), em, kTol, "mul of the cast");
  expectClose(h.read(s), es, kTol, "scale");
  expectClose(h.read(acc), eacc, kTol, "accumulate");
  expectClose(h.read(d), ed, kTol, "silu_bwd");
}

/// Dropout's mask from its contract (runtime/plan/Dropout.h), written
/// again here: an element's 24-bit draw from the sample's key, the site
/// and its index in the unsplit sample, dropped below rate · 2^24.
bool refKeeps(uint32_t key, uint32_t site, uint32_t index, double rate) {
  auto mix = [](uint32_t x) {
    x ^= x >> 16;
    x *= 0x7feb352du;
    x ^= x >> 15;
    x *= 0x846ca68bu;
    x ^= x >> 16;
    return x;
  };
  uint32_t h = mix(mix(key ^ mix(site + 0x9e3779b9u)) ^ index);
  return (h >> 8) >= uint32_t(rate * 16777216.0);
}

// Dropout against its contract; a negative key leaves its sample alone
// (evaluation); about `rate` of the elements dropped; and a tensor split
// along its heads, each part at its offset, draws exactly the whole
// tensor's mask (what makes a tensor-parallel layout match one device).
TEST_P(Kernels, DropoutDrawsOneMaskWhateverTheSplit) {
  const int64_t b = 3, heads = 4, s = 32, k = 24, site = 7;
  const double rate = 0.3;
  std::vector<int64_t> shape = {b, heads, s, k};
  Vec x = randomVec(b * heads * s * k);
  std::vector<int32_t> keys = {12345, 0x7fffffff, -1};
  auto args = [&](int64_t dim, int64_t offset) {
    return std::map<std::string, Arg>{{"rate", floatArg(rate)},
                                      {"site", intArg(site)},
                                      {"split_dim", intArg(dim)},
                                      {"split_offset", intArg(offset)},
                                      {"split_size", intArg(dim ? heads : 0)}};
  };
  Harness h(on());
  uint32_t out = h.add(shape);
  h.run("dropout", {h.input(shape, x), h.ids({b}, keys)}, {out}, args(0, 0));
  Vec y = h.read(out), expected(x.size());
  int64_t perSample = heads * s * k, dropped = 0;
  for (int64_t i = 0; i < int64_t(x.size()); ++i) {
    int32_t key = keys[i / perSample];
    bool keep =
        key < 0 || refKeeps(uint32_t(key), site, uint32_t(i % perSample), rate);
    expected[i] = key < 0 ? x[i] : keep ? x[i] / (1 - rate) : 0.0;
    dropped += !keep;
  }
  expectClose(y, expected, kTol, "dropout");
  double fraction = double(dropped) / double(2 * perSample);
  EXPECT_NEAR(fraction, rate, 0.02) << "share of the elements dropped";

  // Two halves of the heads, each its own launch.
  for (int64_t part = 0; part < 2; ++part) {
    std::vector<int64_t> half = {b, heads / 2, s, k};
    Vec xs, ys;
    for (int64_t bi = 0; bi < b; ++bi)
      for (int64_t hi = part * 2; hi < part * 2 + 2; ++hi)
        for (int64_t r = 0; r < s * k; ++r) {
          xs.push_back(x[(bi * heads + hi) * s * k + r]);
          ys.push_back(y[(bi * heads + hi) * s * k + r]);
        }
    Harness p(on());
    uint32_t partOut = p.add(half);
    p.run("dropout", {p.input(half, xs), p.ids({b}, keys)}, {partOut},
          args(1, part * 2));
    expectClose(p.read(partOut), ys, 0.0, "half of the heads");
  }
}

} // namespace
