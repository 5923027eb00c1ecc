//===- Elementwise.cpp - pointwise kernels and layout ---------------------===//
//
//   add/sub/mul   c[i] = a[i] op b[i mod |b|]   (b broadcast over rows)
//   sum_to        y[j] (+)= sum over rows r of x[r·|y| + j]
//   gelu          x·Φ(x), the exact (erf) form; gelu' = Φ(x) + x·φ(x)
//   gelu_tanh     ½x(1 + t), t = tanh(u), u = √(2/π)(x + κx³), κ = 0.044715;
//                 gelu_tanh' = ½(1 + t) + ½x(1 − t²)·√(2/π)(1 + 3κx²)
//   silu          x·σ(x);  silu' = σ(x)·(1 + x·(1 − σ(x)))
//   transpose     y[i0..] = x[i_perm]
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/ContextPositions.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace strata::runtime::cpu {

using namespace kernels;

/// y[i] = op(x[i]) for kernels whose operands are (x, y).
template <typename Op>
static void unary(const KernelArgs &args, int64_t threshold, Op op) {
  const float *x = args.f(0);
  float *y = args.f(1);
  int64_t n = args.count(0);
#pragma omp parallel for if (n > threshold)
  for (int64_t i = 0; i < n; ++i)
    y[i] = op(x[i]);
}

/// dx[i] = op(x[i], dy[i]): a backward of a pointwise op, (x, dy, dx).
template <typename Op>
static void pointwiseBackward(const KernelArgs &args, Op op) {
  const float *x = args.f(0), *dy = args.f(1);
  float *dx = args.f(2);
  int64_t n = args.count(0);
#pragma omp parallel for if (n > kCostly)
  for (int64_t i = 0; i < n; ++i)
    dx[i] = op(x[i], dy[i]);
}

void runFill(const KernelArgs &args) {
  float value = static_cast<float>(args.real(Fill::attr::value));
  float *y = args.f(Fill::op::y);
  int64_t n = args.count(Fill::op::y);
#pragma omp parallel for if (n > kCheap)
  for (int64_t i = 0; i < n; ++i)
    y[i] = value;
}

void runCopy(const KernelArgs &args) {
  std::memcpy(args.f(Copy::op::y), args.f(Copy::op::x),
              args.count(Copy::op::x) * sizeof(float));
}

void runKeepOnFirst(const KernelArgs &args) {
  float *y = args.f(KeepOnFirst::op::y);
  int64_t n = args.count(KeepOnFirst::op::y);
  if (args.i(KeepOnFirst::attr::part) == 0)
    std::memcpy(y, args.f(KeepOnFirst::op::x), n * sizeof(float));
  else
    std::fill(y, y + n, 0.0f);
}

void runAccumulate(const KernelArgs &args) {
  const float *x = args.f(Accumulate::op::x);
  float *y = args.f(Accumulate::op::y);
  int64_t n = args.count(Accumulate::op::x);
#pragma omp parallel for if (n > kCheap)
  for (int64_t i = 0; i < n; ++i)
    y[i] += x[i];
}

/// Add, Sub and Mul: (x, y, z), y broadcast over the rows of x.
template <typename Op> static void broadcast(const KernelArgs &args, Op op) {
  const float *a = args.f(Add::op::x), *b = args.f(Add::op::y);
  float *c = args.f(Add::op::z);
  int64_t n = args.count(Add::op::x), width = args.count(Add::op::y);
  int64_t rows = n / width;
#pragma omp parallel for if (n > kCheap)
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t j = 0; j < width; ++j)
      c[r * width + j] = op(a[r * width + j], b[j]);
}

void runAdd(const KernelArgs &args) {
  broadcast(args, [](float a, float b) { return a + b; });
}
void runSub(const KernelArgs &args) {
  broadcast(args, [](float a, float b) { return a - b; });
}
void runMul(const KernelArgs &args) {
  broadcast(args, [](float a, float b) { return a * b; });
}

void runScale(const KernelArgs &args) {
  float factor = static_cast<float>(args.real(Scale::attr::factor));
  unary(args, kCheap, [factor](float x) { return x * factor; });
}

void runSumTo(const KernelArgs &args) {
  const float *x = args.f(SumTo::op::x);
  float *y = args.f(SumTo::op::y);
  int64_t width = args.count(SumTo::op::y),
          rows = args.count(SumTo::op::x) / width;
  bool add = args.flag(SumTo::attr::accumulate);
#pragma omp parallel for if (rows * width > kCheap)
  for (int64_t j = 0; j < width; ++j) {
    double sum = 0;
    for (int64_t r = 0; r < rows; ++r)
      sum += x[r * width + j];
    y[j] = add ? y[j] + static_cast<float>(sum) : static_cast<float>(sum);
  }
}

namespace {

/// add_positions' and sum_positions' rows: x [batch, rows, width], and the
/// place in the whole sequence of each row (runtime/plan/ContextPositions.h).
struct PositionRows {
  int64_t batch, rows, width, context, rank;
  PositionRows(const KernelArgs &args, unsigned x, unsigned context,
               unsigned rank)
      : rows(args.shape(x)[1]), width(args.shape(x)[2]),
        context(args.i(context)), rank(args.i(rank)) {
    batch = args.count(x) / (rows * width);
  }
  /// The table's row for row l.
  int64_t place(int64_t l) const {
    return contextPosition(l, rows, context, rank);
  }
};

} // namespace

void runAddPositions(const KernelArgs &args) {
  using namespace kernels::AddPositions;
  PositionRows p(args, op::x, attr::context_parallel, attr::context_rank);
  const float *x = args.f(op::x), *table = args.f(op::table);
  float *z = args.f(op::z);
#pragma omp parallel for collapse(2) if (p.batch * p.rows * p.width > kCheap)
  for (int64_t b = 0; b < p.batch; ++b)
    for (int64_t l = 0; l < p.rows; ++l) {
      const float *row = table + p.place(l) * p.width;
      int64_t at = (b * p.rows + l) * p.width;
      for (int64_t j = 0; j < p.width; ++j)
        z[at + j] = x[at + j] + row[j];
    }
}

void runSumPositions(const KernelArgs &args) {
  using namespace kernels::SumPositions;
  PositionRows p(args, op::x, attr::context_parallel, attr::context_rank);
  const float *x = args.f(op::x);
  float *y = args.f(op::y);
  if (!args.flag(attr::accumulate))
    std::fill_n(y, args.count(op::y), 0.0f);
    // Each row has a place of its own: no two threads write one.
#pragma omp parallel for if (p.batch * p.rows * p.width > kCheap)
  for (int64_t l = 0; l < p.rows; ++l) {
    float *row = y + p.place(l) * p.width;
    for (int64_t j = 0; j < p.width; ++j) {
      double sum = 0;
      for (int64_t b = 0; b < p.batch; ++b)
        sum += x[(b * p.rows + l) * p.width + j];
      row[j] += static_cast<float>(sum);
    }
  }
}

static constexpr float kInvSqrt2 = 0.70710678118654752440f;
static constexpr float kInvSqrt2Pi = 0.39894228040143267794f;

void runGeluFwd(const KernelArgs &args) {
  unary(args, kCostly, [](float x) { return gelu(x); });
}

void runGeluBwd(const KernelArgs &args) {
  pointwiseBackward(args, [](float x, float dy) {
    float cdf = 0.5f * (1.0f + std::erf(x * kInvSqrt2));
    float pdf = kInvSqrt2Pi * std::exp(-0.5f * x * x);
    return dy * (cdf + x * pdf);
  });
}

static constexpr float kSqrt2OverPi = 0.79788456080286535588f;
static constexpr float kGeluCubic = 0.044715f;

void runGeluTanhFwd(const KernelArgs &args) {
  unary(args, kCostly, [](float x) {
    float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    return 0.5f * x * (1.0f + std::tanh(u));
  });
}

void runGeluTanhBwd(const KernelArgs &args) {
  pointwiseBackward(args, [](float x, float dy) {
    float u = kSqrt2OverPi * (x + kGeluCubic * x * x * x);
    float t = std::tanh(u);
    float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x * x);
    return dy * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
  });
}

void runSiluFwd(const KernelArgs &args) {
  unary(args, kCostly, [](float x) { return x / (1.0f + std::exp(-x)); });
}

void runSiluBwd(const KernelArgs &args) {
  pointwiseBackward(args, [](float x, float dy) {
    float s = 1.0f / (1.0f + std::exp(-x));
    return dy * s * (1.0f + x * (1.0f - s));
  });
}

void runTranspose(const KernelArgs &args) {
  const std::vector<int64_t> &shape = args.shape(Transpose::op::x);
  const std::vector<int64_t> &perm = args.list(Transpose::attr::permutation);
  size_t rank = shape.size();
  std::vector<int64_t> inStride(rank, 1);
  for (size_t d = rank; d-- > 1;)
    inStride[d - 1] = inStride[d] * shape[d];
  // Walk the output in order; each output dim d steps input dim perm[d].
  std::vector<int64_t> outShape(rank), step(rank);
  for (size_t d = 0; d < rank; ++d) {
    outShape[d] = shape[perm[d]];
    step[d] = inStride[perm[d]];
  }
  const float *x = args.f(Transpose::op::x);
  float *y = args.f(Transpose::op::y);
  int64_t n = args.count(Transpose::op::x);
  std::vector<int64_t> index(rank, 0);
  int64_t source = 0;
  for (int64_t e = 0; e < n; ++e) {
    y[e] = x[source];
    for (size_t d = rank; d-- > 0;) {
      source += step[d];
      if (++index[d] < outShape[d])
        break;
      source -= step[d] * outShape[d];
      index[d] = 0;
    }
  }
}

void runSlice(const KernelArgs &args) {
  // y is part `part` of `parts` equal blocks of x along `dim`.
  const std::vector<int64_t> &shape = args.shape(Slice::op::x);
  int64_t dim = args.i(Slice::attr::dim);
  int64_t part = args.i(Slice::attr::part);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t chunk = args.shape(Slice::op::y)[dim] * inner;
  int64_t stride = shape[dim] * inner;
  const float *x = args.f(Slice::op::x);
  float *y = args.f(Slice::op::y);
  for (int64_t o = 0; o < outer; ++o)
    std::memcpy(y + o * chunk, x + o * stride + part * chunk,
                chunk * sizeof(float));
}

} // namespace strata::runtime::cpu
