//===- CpuKernelsTest.cpp - every CPU kernel against float64 --------------===//
//
// Each kernel runs through the real path (a plan's buffers in a RankMemory,
// the instruction checked by the kernel table, the CPU backend) on fresh
// random inputs, and is compared with a float64 reference written here.
// Backward kernels are compared with the vector-Jacobian product of the
// float64 forward reference taken by central differences, so a reference
// shares no derivation with the kernel it checks.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/CpuBackend.h"
#include "runtime/exec/BFloat16.h"
#include "runtime/exec/KernelTable.h"
#include "runtime/exec/RankMemory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <random>

using namespace strata::runtime;
using Vec = std::vector<double>;

namespace {

std::mt19937_64 &rng() {
  static std::mt19937_64 engine(std::random_device{}());
  return engine;
}

Vec randomVec(size_t n, double scale = 1.0) {
  std::normal_distribution<double> normal(0.0, scale);
  Vec v(n);
  for (double &x : v)
    x = static_cast<float>(normal(rng())); // representable in f32
  return v;
}

std::vector<int32_t> randomIds(size_t n, int32_t bound) {
  std::uniform_int_distribution<int32_t> uniform(0, bound - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = uniform(rng());
  return ids;
}

int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A one-instruction plan: buffers end to end in the persistent arena.
class Harness {
public:
  uint32_t add(const std::vector<int64_t> &shape, DType dtype = DType::F32) {
    Buffer b;
    b.name = "b" + std::to_string(rank.buffers.size());
    b.arena = Arena::Persistent;
    b.dtype = dtype;
    b.shape = shape;
    b.elements = count(shape);
    b.bytes = b.elements * dtypeBytes(dtype);
    b.offset = rank.persistentBytes;
    rank.persistentBytes += (b.bytes + 63) / 64 * 64;
    rank.buffers.push_back(b);
    return rank.buffers.size() - 1;
  }
  uint32_t input(const std::vector<int64_t> &shape, const Vec &values,
                 DType dtype = DType::F32) {
    uint32_t index = add(shape, dtype);
    pending.push_back({index, values});
    return index;
  }
  uint32_t ids(const std::vector<int64_t> &shape,
               const std::vector<int32_t> &values) {
    uint32_t index = add(shape, DType::I32);
    pendingIds.push_back({index, values});
    return index;
  }

  /// Checks the instruction as a plan load would, then runs it.
  void run(const std::string &kernel, std::vector<uint32_t> ins,
           std::vector<uint32_t> outs,
           std::map<std::string, AttrValue> attrs = {},
           const Hyper &hyper = Hyper()) {
    Instruction instruction;
    instruction.kernel = kernel;
    instruction.kernelId = findKernel(kernel);
    ASSERT_GE(instruction.kernelId, 0) << kernel;
    instruction.inputs = std::move(ins);
    instruction.outputs = std::move(outs);
    instruction.attrs = std::move(attrs);
    ASSERT_EQ(checkInstruction(instruction, rank.buffers), "");
    memory = std::make_unique<RankMemory>(rank);
    for (auto &[index, values] : pending)
      write(index, values);
    for (auto &[index, values] : pendingIds)
      std::memcpy(memory->data(index), values.data(), values.size() * 4);
    for (auto &[index, values] : preset)
      write(index, values);
    backend.run(instruction, *memory, hyper);
  }

  /// Values an output starts with (for kernels that accumulate into it).
  void presetOutput(uint32_t index, const Vec &values) {
    preset.push_back({index, values});
  }

  Vec read(uint32_t index) const {
    const Buffer &b = rank.buffers[index];
    Vec out(b.elements);
    if (b.dtype == DType::BF16) {
      auto *p = static_cast<const uint16_t *>(memory->data(index));
      for (int64_t i = 0; i < b.elements; ++i)
        out[i] = bf16ToFloat(p[i]);
    } else {
      const float *p = memory->f32(index);
      for (int64_t i = 0; i < b.elements; ++i)
        out[i] = p[i];
    }
    return out;
  }

private:
  void write(uint32_t index, const Vec &values) {
    const Buffer &b = rank.buffers[index];
    ASSERT_EQ(int64_t(values.size()), b.elements);
    if (b.dtype == DType::BF16) {
      auto *p = static_cast<uint16_t *>(memory->data(index));
      for (int64_t i = 0; i < b.elements; ++i)
        p[i] = floatToBf16(float(values[i]));
    } else {
      float *p = memory->f32(index);
      for (int64_t i = 0; i < b.elements; ++i)
        p[i] = float(values[i]);
    }
  }

  RankPlan rank;
  std::vector<std::pair<uint32_t, Vec>> pending, preset;
  std::vector<std::pair<uint32_t, std::vector<int32_t>>> pendingIds;
  std::unique_ptr<RankMemory> memory;
  cpu::CpuBackend backend;
};

AttrValue intAttr(int64_t v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Int;
  a.i = v;
  return a;
}
AttrValue boolAttr(bool v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Bool;
  a.i = v;
  return a;
}
AttrValue floatAttr(double v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Float;
  a.f = v;
  return a;
}
AttrValue intsAttr(std::vector<int64_t> v) {
  AttrValue a;
  a.kind = AttrValue::Kind::Ints;
  a.ints = std::move(v);
  return a;
}

/// max |actual − expected| ≤ tolerance · max(1, max |expected|).
void expectClose(const Vec &actual, const Vec &expected, double tolerance,
                 const char *what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 1, worst = 0;
  size_t at = 0;
  for (double e : expected)
    scale = std::max(scale, std::fabs(e));
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::fabs(actual[i] - expected[i]);
    if (error > worst) {
      worst = error;
      at = i;
    }
  }
  EXPECT_LE(worst, tolerance * scale)
      << what << ": element " << at << " is " << actual[at] << ", expected "
      << expected[at];
}

/// The VJP of f at x for cotangent dy, by central differences in double.
Vec vjp(const std::function<Vec(const Vec &)> &f, const Vec &x, const Vec &dy) {
  const double h = 1e-6;
  Vec grad(x.size());
  Vec probe = x;
  for (size_t i = 0; i < x.size(); ++i) {
    probe[i] = x[i] + h;
    Vec plus = f(probe);
    probe[i] = x[i] - h;
    Vec minus = f(probe);
    probe[i] = x[i];
    double sum = 0;
    for (size_t j = 0; j < dy.size(); ++j)
      sum += dy[j] * (plus[j] - minus[j]);
    grad[i] = sum / (2 * h);
  }
  return grad;
}

constexpr double kTol = 2e-5; // fp32 kernels against float64

//===----------------------------------------------------------------------===//
// Float64 references
//===----------------------------------------------------------------------===//

Vec refGemm(const Vec &a, const Vec &b, int64_t m, int64_t n, int64_t k,
            bool ta, bool tb) {
  Vec c(m * n, 0.0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double sum = 0;
      for (int64_t p = 0; p < k; ++p)
        sum += (ta ? a[p * m + i] : a[i * k + p]) *
               (tb ? b[j * k + p] : b[p * n + j]);
      c[i * n + j] = sum;
    }
  return c;
}

Vec refNorm(const Vec &x, const Vec &w, const Vec *bias, int64_t cols,
            double eps) {
  Vec y(x.size());
  for (size_t r = 0; r < x.size() / cols; ++r) {
    double mean = 0, var = 0;
    if (bias) {
      for (int64_t c = 0; c < cols; ++c)
        mean += x[r * cols + c];
      mean /= cols;
    }
    for (int64_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    var /= cols;
    for (int64_t c = 0; c < cols; ++c)
      y[r * cols + c] = (x[r * cols + c] - mean) / std::sqrt(var + eps) * w[c] +
                        (bias ? (*bias)[c] : 0.0);
  }
  return y;
}

struct AttnDims {
  int64_t b, s, h, kv, d;
  bool causal;
};

Vec refAttention(const AttnDims &a, const Vec &q, const Vec &k, const Vec &v) {
  Vec o(q.size(), 0.0);
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h) {
      int64_t g = h / (a.h / a.kv);
      for (int64_t i = 0; i < a.s; ++i) {
        int64_t n = a.causal ? i + 1 : a.s;
        Vec score(n);
        double max = -INFINITY;
        for (int64_t j = 0; j < n; ++j) {
          double dot = 0;
          for (int64_t x = 0; x < a.d; ++x)
            dot += q[((bi * a.s + i) * a.h + h) * a.d + x] *
                   k[((bi * a.s + j) * a.kv + g) * a.d + x];
          score[j] = dot / std::sqrt(double(a.d));
          max = std::max(max, score[j]);
        }
        double sum = 0;
        for (double &s : score)
          sum += (s = std::exp(s - max));
        for (int64_t j = 0; j < n; ++j)
          for (int64_t x = 0; x < a.d; ++x)
            o[((bi * a.s + i) * a.h + h) * a.d + x] +=
                score[j] / sum * v[((bi * a.s + j) * a.kv + g) * a.d + x];
      }
    }
  return o;
}

Vec refRope(const Vec &x, int64_t b, int64_t s, int64_t h, int64_t d,
            double base, bool inverse) {
  Vec y(x.size());
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t p = 0; p < s; ++p)
      for (int64_t hi = 0; hi < h; ++hi)
        for (int64_t i = 0; i < d / 2; ++i) {
          double theta = p * std::pow(base, -2.0 * i / d) * (inverse ? -1 : 1);
          int64_t row = ((bi * s + p) * h + hi) * d;
          double x1 = x[row + i], x2 = x[row + i + d / 2];
          y[row + i] = x1 * std::cos(theta) - x2 * std::sin(theta);
          y[row + i + d / 2] = x2 * std::cos(theta) + x1 * std::sin(theta);
        }
  return y;
}

double refCrossEntropy(const Vec &logits, const std::vector<int32_t> &labels,
                       int64_t vocab) {
  double total = 0;
  for (size_t i = 0; i < labels.size(); ++i) {
    double max = -INFINITY, sum = 0;
    for (int64_t v = 0; v < vocab; ++v)
      max = std::max(max, logits[i * vocab + v]);
    for (int64_t v = 0; v < vocab; ++v)
      sum += std::exp(logits[i * vocab + v] - max);
    total += max + std::log(sum) - logits[i * vocab + labels[i]];
  }
  return total / labels.size();
}

double gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
double silu(double x) { return x / (1 + std::exp(-x)); }

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

TEST(CpuKernels, GemmAllTransposesAndAccumulate) {
  const int64_t m = 13, n = 7, k = 19;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool accumulate : {false, true}) {
        Harness h;
        Vec a = randomVec(m * k), b = randomVec(k * n), c0 = randomVec(m * n);
        uint32_t ia = h.input(ta ? std::vector<int64_t>{k, m}
                                 : std::vector<int64_t>{m, k},
                              a);
        uint32_t ib = h.input(tb ? std::vector<int64_t>{n, k}
                                 : std::vector<int64_t>{k, n},
                              b);
        uint32_t ic = h.add({m, n});
        if (accumulate)
          h.presetOutput(ic, c0);
        h.run("gemm", {ia, ib}, {ic},
              {{"m", intAttr(m)},
               {"n", intAttr(n)},
               {"k", intAttr(k)},
               {"transpose_a", boolAttr(ta)},
               {"transpose_b", boolAttr(tb)},
               {"accumulate", boolAttr(accumulate)}});
        Vec expected = refGemm(a, b, m, n, k, ta, tb);
        if (accumulate)
          for (size_t i = 0; i < expected.size(); ++i)
            expected[i] += c0[i];
        expectClose(h.read(ic), expected, kTol, "gemm");
      }
}

TEST(CpuKernels, EmbeddingForwardAndBackward) {
  const int64_t vocab = 11, hidden = 6, tokens = 17;
  Harness h;
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
    Harness g;
    Vec dy = randomVec(tokens * hidden), start = randomVec(vocab * hidden);
    uint32_t idy = g.input({tokens, hidden}, dy), iid = g.ids({tokens}, ids);
    uint32_t grad = g.add({vocab, hidden});
    if (accumulate)
      g.presetOutput(grad, start);
    g.run("embedding_bwd", {idy, iid}, {grad},
          {{"accumulate", boolAttr(accumulate)}});
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

TEST(CpuKernels, BroadcastArithmetic) {
  const int64_t rows = 5, width = 8;
  for (const char *kernel : {"add", "sub", "mul"}) {
    for (int64_t rhsWidth : {width * rows, width}) {
      Harness h;
      Vec a = randomVec(rows * width), b = randomVec(rhsWidth);
      uint32_t ia = h.input({rows, width}, a);
      uint32_t ib = h.input(rhsWidth == width
                                ? std::vector<int64_t>{width}
                                : std::vector<int64_t>{rows, width},
                            b);
      uint32_t out = h.add({rows, width});
      h.run(kernel, {ia, ib}, {out});
      Vec expected(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        double y = b[i % rhsWidth];
        expected[i] = kernel[0] == 'a' ? a[i] + y
                      : kernel[0] == 's' ? a[i] - y
                                         : a[i] * y;
      }
      expectClose(h.read(out), expected, 1e-6, kernel);
    }
  }
}

TEST(CpuKernels, ScaleFillCopyAccumulate) {
  Vec x = randomVec(37), y0 = randomVec(37);
  Harness h;
  uint32_t ix = h.input({37}, x), out = h.add({37});
  h.run("scale", {ix}, {out}, {{"factor", floatAttr(-0.75)}});
  Vec expected(37);
  for (int i = 0; i < 37; ++i)
    expected[i] = -0.75 * x[i];
  expectClose(h.read(out), expected, 1e-7, "scale");

  Harness f;
  uint32_t filled = f.add({9});
  f.run("fill", {}, {filled}, {{"value", floatAttr(0.25)}});
  expectClose(f.read(filled), Vec(9, 0.25), 0, "fill");

  Harness c;
  uint32_t cx = c.input({37}, x), cy = c.add({37});
  c.run("copy", {cx}, {cy});
  expectClose(c.read(cy), x, 0, "copy");

  Harness a;
  uint32_t ax = a.input({37}, x), ay = a.add({37});
  a.presetOutput(ay, y0);
  a.run("accumulate", {ax}, {ay});
  for (int i = 0; i < 37; ++i)
    expected[i] = x[i] + y0[i];
  expectClose(a.read(ay), expected, 1e-6, "accumulate");
}

TEST(CpuKernels, SumToRowsAndAccumulate) {
  const int64_t rows = 23, width = 10;
  for (bool accumulate : {false, true}) {
    Harness h;
    Vec x = randomVec(rows * width), start = randomVec(width);
    uint32_t ix = h.input({rows, width}, x), out = h.add({width});
    if (accumulate)
      h.presetOutput(out, start);
    h.run("sum_to", {ix}, {out}, {{"accumulate", boolAttr(accumulate)}});
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

TEST(CpuKernels, ActivationsAndTheirGradients) {
  for (auto [fwd, bwd, fn] :
       {std::tuple{"gelu_fwd", "gelu_bwd", &gelu},
        std::tuple{"silu_fwd", "silu_bwd", &silu}}) {
    Vec x = randomVec(64, 2.0), dy = randomVec(64);
    Harness h;
    uint32_t ix = h.input({64}, x), out = h.add({64});
    h.run(fwd, {ix}, {out});
    Vec expected(64);
    for (int i = 0; i < 64; ++i)
      expected[i] = fn(x[i]);
    expectClose(h.read(out), expected, kTol, fwd);

    Harness g;
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

TEST(CpuKernels, NormsAndTheirGradients) {
  const int64_t rows = 9, cols = 16;
  const double eps = 1e-5;
  for (bool layerNorm : {true, false}) {
    Vec x = randomVec(rows * cols, 3.0), w = randomVec(cols),
        b = randomVec(cols), dy = randomVec(rows * cols);
    Harness h;
    uint32_t ix = h.input({rows, cols}, x), iw = h.input({cols}, w);
    std::vector<uint32_t> ins = {ix, iw};
    if (layerNorm)
      ins.push_back(h.input({cols}, b));
    uint32_t out = h.add({rows, cols});
    h.run(layerNorm ? "layer_norm_fwd" : "rms_norm_fwd", ins, {out},
          {{"epsilon", floatAttr(eps)}});
    expectClose(h.read(out), refNorm(x, w, layerNorm ? &b : nullptr, cols, eps),
                kTol, layerNorm ? "layer_norm_fwd" : "rms_norm_fwd");

    Harness g;
    uint32_t gx = g.input({rows, cols}, x), gw = g.input({cols}, w),
             gdy = g.input({rows, cols}, dy);
    uint32_t dx = g.add({rows, cols}), dw = g.add({cols});
    std::vector<uint32_t> outs = {dx, dw};
    if (layerNorm)
      outs.push_back(g.add({cols}));
    g.run(layerNorm ? "layer_norm_bwd" : "rms_norm_bwd", {gx, gw, gdy}, outs,
          {{"epsilon", floatAttr(eps)}});
    const Vec *bias = layerNorm ? &b : nullptr;
    expectClose(g.read(dx),
                vjp([&](const Vec &v) { return refNorm(v, w, bias, cols, eps); },
                    x, dy),
                kTol, "input gradient");
    expectClose(g.read(dw),
                vjp([&](const Vec &v) { return refNorm(x, v, bias, cols, eps); },
                    w, dy),
                kTol, "weight gradient");
    if (layerNorm)
      expectClose(
          g.read(outs[2]),
          vjp([&](const Vec &v) { return refNorm(x, w, &v, cols, eps); }, b,
              dy),
          kTol, "bias gradient");
  }
}

TEST(CpuKernels, TransposeFourDimensions) {
  const std::vector<int64_t> shape = {2, 3, 4, 5}, perm = {0, 2, 3, 1};
  Vec x = randomVec(count(shape));
  Harness h;
  uint32_t ix = h.input(shape, x), out = h.add({2, 4, 5, 3});
  h.run("transpose", {ix}, {out}, {{"permutation", intsAttr(perm)}});
  Vec expected(x.size());
  int64_t e = 0;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t d = 0; d < 5; ++d)
        for (int64_t b = 0; b < 3; ++b)
          expected[e++] = x[((a * 3 + b) * 4 + c) * 5 + d];
  expectClose(h.read(out), expected, 0, "transpose");
}

TEST(CpuKernels, RopeAndItsInverse) {
  const int64_t b = 2, s = 7, heads = 3, d = 8;
  Vec x = randomVec(b * s * heads * d);
  for (bool inverse : {false, true}) {
    Harness h;
    uint32_t ix = h.input({b, s, heads, d}, x), out = h.add({b, s, heads, d});
    h.run("rope", {ix}, {out},
          {{"base", floatAttr(10000.0)}, {"inverse", boolAttr(inverse)}});
    expectClose(h.read(out), refRope(x, b, s, heads, d, 10000.0, inverse), kTol,
                "rope");
    // The inverse rotation is the forward rotation's gradient.
    if (inverse)
      expectClose(h.read(out),
                  vjp([&](const Vec &v) {
                    return refRope(v, b, s, heads, d, 10000.0, false);
                  },
                      Vec(x.size(), 0.0), x),
                  kTol, "rope gradient");
  }
}

TEST(CpuKernels, AttentionGroupedQueryCausalAndNot) {
  for (bool causal : {true, false}) {
    AttnDims a{2, 6, 4, 2, 4, causal};
    Vec q = randomVec(a.b * a.s * a.h * a.d), k = randomVec(a.b * a.s * a.kv * a.d),
        v = randomVec(a.b * a.s * a.kv * a.d), dout = randomVec(q.size());
    Harness h;
    uint32_t iq = h.input({a.b, a.s, a.h, a.d}, q),
             ik = h.input({a.b, a.s, a.kv, a.d}, k),
             iv = h.input({a.b, a.s, a.kv, a.d}, v),
             out = h.add({a.b, a.s, a.h, a.d});
    h.run("attention_fwd", {iq, ik, iv}, {out}, {{"causal", boolAttr(causal)}});
    Vec o = refAttention(a, q, k, v);
    expectClose(h.read(out), o, kTol, "attention_fwd");

    Harness g;
    uint32_t gq = g.input({a.b, a.s, a.h, a.d}, q),
             gk = g.input({a.b, a.s, a.kv, a.d}, k),
             gv = g.input({a.b, a.s, a.kv, a.d}, v),
             go = g.input({a.b, a.s, a.h, a.d}, o),
             gdo = g.input({a.b, a.s, a.h, a.d}, dout);
    uint32_t dq = g.add({a.b, a.s, a.h, a.d}), dk = g.add({a.b, a.s, a.kv, a.d}),
             dv = g.add({a.b, a.s, a.kv, a.d});
    g.run("attention_bwd", {gq, gk, gv, go, gdo}, {dq, dk, dv},
          {{"causal", boolAttr(causal)}});
    expectClose(g.read(dq),
                vjp([&](const Vec &x) { return refAttention(a, x, k, v); }, q,
                    dout),
                kTol, "query gradient");
    expectClose(g.read(dk),
                vjp([&](const Vec &x) { return refAttention(a, q, x, v); }, k,
                    dout),
                kTol, "key gradient");
    expectClose(g.read(dv),
                vjp([&](const Vec &x) { return refAttention(a, q, k, x); }, v,
                    dout),
                kTol, "value gradient");
  }
}

TEST(CpuKernels, CrossEntropyAndItsGradient) {
  const int64_t tokens = 12, vocab = 9;
  Vec logits = randomVec(tokens * vocab, 2.0);
  auto labels = randomIds(tokens, vocab);
  Harness h;
  uint32_t il = h.input({tokens, vocab}, logits), ii = h.ids({tokens}, labels);
  uint32_t loss = h.add({});
  h.run("cross_entropy_fwd", {il, ii}, {loss});
  expectClose(h.read(loss), {refCrossEntropy(logits, labels, vocab)}, kTol,
              "cross_entropy_fwd");

  Harness g;
  double seed = 0.25;
  uint32_t gl = g.input({tokens, vocab}, logits), gi = g.ids({tokens}, labels),
           gs = g.input({}, {seed}), grad = g.add({tokens, vocab});
  g.run("cross_entropy_bwd", {gl, gi, gs}, {grad});
  expectClose(g.read(grad),
              vjp([&](const Vec &x) {
                return Vec{refCrossEntropy(x, labels, vocab)};
              },
                  logits, {seed}),
              kTol, "cross_entropy_bwd");
}

TEST(CpuKernels, GradientNormAndClipping) {
  Vec g = randomVec(1000);
  Harness h;
  uint32_t ig = h.input({1000}, g), sum = h.add({});
  h.run("sum_squares", {ig}, {sum});
  double expected = 0;
  for (double x : g)
    expected += x * x;
  expectClose(h.read(sum), {expected}, 1e-6, "sum_squares");

  for (double clip : {0.0, 1.0, 1e6}) {
    Hyper hyper;
    hyper.clipGrad = clip;
    Harness c;
    uint32_t is = c.input({}, {expected}), norm = c.add({}), coef = c.add({});
    c.run("clip_coefficient", {is}, {norm, coef}, {}, hyper);
    double n = std::sqrt(expected);
    expectClose(c.read(norm), {n}, 1e-6, "norm");
    expectClose(c.read(coef), {clip > 0 ? std::min(1.0, clip / (n + 1e-6)) : 1.0},
                1e-6, "coefficient");
  }
}

TEST(CpuKernels, AdamWAgainstTheFormula) {
  const int64_t n = 50;
  for (bool master : {false, true}) {
    for (bool decay : {false, true}) {
      Hyper hyper;
      hyper.lr = 3e-3;
      hyper.weightDecay = 0.1;
      hyper.step = 3;
      Vec grad = randomVec(n), param = randomVec(n), m = randomVec(n, 0.1),
          v = randomVec(n, 0.1);
      for (double &x : v)
        x = std::fabs(x);
      double coefficient = 0.5;
      Harness h;
      uint32_t ig = h.input({n}, grad), ic = h.input({}, {coefficient});
      uint32_t value = h.add({n}, master ? DType::BF16 : DType::F32);
      uint32_t im = h.add({n}), iv = h.add({n});
      std::vector<uint32_t> outs = {value, im, iv};
      h.presetOutput(im, m);
      h.presetOutput(iv, v);
      if (master) {
        uint32_t ip = h.add({n});
        h.presetOutput(ip, param);
        outs.push_back(ip);
      } else {
        h.presetOutput(value, param);
      }
      h.run("adamw", {ig, ic}, outs, {{"weight_decay", boolAttr(decay)}}, hyper);
      Vec expected(n), expectedM(n), expectedV(n);
      for (int64_t i = 0; i < n; ++i) {
        double g = grad[i] * coefficient;
        double p = param[i] * (1 - hyper.lr * (decay ? hyper.weightDecay : 0));
        expectedM[i] = 0.9 * m[i] + 0.1 * g;
        expectedV[i] = 0.999 * v[i] + 0.001 * g * g;
        double mhat = expectedM[i] / (1 - std::pow(0.9, 3));
        double vhat = expectedV[i] / (1 - std::pow(0.999, 3));
        expected[i] = p - hyper.lr * mhat / (std::sqrt(vhat) + hyper.eps);
      }
      expectClose(h.read(im), expectedM, 1e-6, "exp_avg");
      expectClose(h.read(iv), expectedV, 1e-6, "exp_avg_sq");
      if (master) {
        expectClose(h.read(outs[3]), expected, 1e-6, "master");
        Vec rounded(n);
        for (int64_t i = 0; i < n; ++i)
          rounded[i] = roundToBf16(float(h.read(outs[3])[i]));
        expectClose(h.read(value), rounded, 0, "bf16 value");
      } else {
        expectClose(h.read(value), expected, 1e-6, "param");
      }
    }
  }
}

TEST(CpuKernels, Bf16OperandsRoundThroughF32) {
  // A bf16 gemm equals the f32 gemm of the rounded inputs, rounded.
  const int64_t m = 8, n = 8, k = 32;
  Vec a = randomVec(m * k), b = randomVec(k * n);
  Harness h;
  uint32_t ia = h.input({m, k}, a, DType::BF16),
           ib = h.input({k, n}, b, DType::BF16), ic = h.add({m, n}, DType::BF16);
  h.run("gemm", {ia, ib}, {ic},
        {{"m", intAttr(m)},
         {"n", intAttr(n)},
         {"k", intAttr(k)},
         {"transpose_a", boolAttr(false)},
         {"transpose_b", boolAttr(false)},
         {"accumulate", boolAttr(false)}});
  Vec ra(a.size()), rb(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ra[i] = roundToBf16(float(a[i]));
  for (size_t i = 0; i < b.size(); ++i)
    rb[i] = roundToBf16(float(b[i]));
  Vec expected = refGemm(ra, rb, m, n, k, false, false);
  // One bf16 rounding of the result: relative 2^-8.
  expectClose(h.read(ic), expected, 1.0 / 256, "bf16 gemm");
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3F80);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to even (1).
  EXPECT_EQ(floatToBf16(1.0f + 1.0f / 256), 0x3F80);
  // 1 + 3·2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even (1 + 2^-6).
  EXPECT_EQ(floatToBf16(1.0f + 3.0f / 256), 0x3F82);
  EXPECT_TRUE(std::isnan(bf16ToFloat(floatToBf16(NAN))));
}

} // namespace
