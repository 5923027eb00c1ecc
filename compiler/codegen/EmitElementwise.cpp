//===- EmitElementwise.cpp - pointwise, layout and embedding kernels ------===//
//
// One thread per element in a grid-stride loop, computing in f32 (loads
// widen bf16, stores round): the same math as runtime/cpu/Elementwise.cpp,
// Embedding.cpp and Rope.cpp (sums in double where it sums in double).
// Sums over rows (sum_to, the embedding's
// gradient) run one thread per column over the rows in order: each column
// is added up in one fixed order, whatever the grid.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

namespace strata::codegen {

using namespace runtime::kernels;

namespace {

/// A kernel over `n` elements, one thread each; `body` sees the index `i`.
std::string pointwise(KernelCode &code, int64_t n, std::string_view body) {
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(n, kThreads), 1, 1};
  code.body = forEach(n, body);
  return "";
}

/// A kernel of pointwiseValue's: its one output from its inputs.
std::string emitPointwise(const LaunchDesc &launch, KernelCode &code) {
  const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
  unsigned inputs = spec.inputs();
  std::vector<std::string> in;
  for (unsigned k = 0; k < inputs; ++k)
    in.push_back("load(" + std::string(spec.operands[k].name) + ", " +
                 pointwiseIndex(launch, k) + ")");
  std::string out = spec.operands[inputs].name;
  if (launch.kernel == runtime::KernelId::Accumulate)
    in.push_back("load(" + out + ", i)");
  return pointwise(code, launch.operands[inputs].elements(),
                   "    store(" + out + ", i, " + pointwiseValue(launch, in) +
                       ");");
}

} // namespace

bool isPointwise(runtime::KernelId kernel) {
  switch (kernel) {
#define POINTWISE(Name) case runtime::KernelId::Name:
    STRATA_POINTWISE_KERNELS(POINTWISE)
#undef POINTWISE
    return true;
  default:
    return false;
  }
}

bool closesFusedGroup(runtime::KernelId kernel) {
  return kernel == runtime::KernelId::LayerNormFwd ||
         kernel == runtime::KernelId::RmsNormFwd;
}

std::string pointwiseIndex(const LaunchDesc &launch, unsigned input) {
  int64_t n = launch.operands[runtime::kernelSpec(launch.kernel).inputs()]
                  .elements(),
          width = launch.operands[input].elements();
  return width == n ? "i" : "i % " + num(width);
}

std::string pointwiseValue(const LaunchDesc &launch,
                           const std::vector<std::string> &in) {
  using runtime::KernelId;
  View v{launch};
  switch (launch.kernel) {
  case KernelId::Copy:
    return in[0];
  case KernelId::Add:
    return "(" + in[0] + " + " + in[1] + ")";
  case KernelId::Sub:
    return "(" + in[0] + " - " + in[1] + ")";
  case KernelId::Mul:
    return "(" + in[0] + " * " + in[1] + ")";
  case KernelId::Scale:
    return "(" + in[0] + " * " + f32(v.attr(Scale::attr::factor).f) + ")";
  case KernelId::Accumulate: // y + x, y's current value last
    return "(" + in[1] + " + " + in[0] + ")";
  case KernelId::GeluFwd:
    return "gelu(" + in[0] + ")";
  case KernelId::GeluBwd:
    return "geluGrad(" + in[0] + ", " + in[1] + ")";
  case KernelId::GeluTanhFwd:
    return "geluTanh(" + in[0] + ")";
  case KernelId::GeluTanhBwd:
    return "geluTanhGrad(" + in[0] + ", " + in[1] + ")";
  case KernelId::SiluFwd:
    return "silu(" + in[0] + ")";
  case KernelId::SiluBwd:
    return "siluGrad(" + in[0] + ", " + in[1] + ")";
  default:
    return "";
  }
}

std::string emitFill(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  return pointwise(code, v.count(Fill::op::y),
                   "    store(y, i, " + f32(v.attr(Fill::attr::value).f) +
                       ");");
}

std::string emitKeepOnFirst(const LaunchDesc &launch, KernelCode &code) {
  return pointwise(code, View{launch}.count(KeepOnFirst::op::y),
                   "    store(y, i, part == 0 ? load(x, i) : 0.0f);");
}

#define POINTWISE(Name)                                                        \
  std::string emit##Name(const LaunchDesc &launch, KernelCode &code) {         \
    return emitPointwise(launch, code);                                        \
  }
STRATA_POINTWISE_KERNELS(POINTWISE)
#undef POINTWISE

std::string emitSumTo(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t width = v.count(SumTo::op::y);
  int64_t rows = v.count(SumTo::op::x) / width;
  // A block is 32 columns by 8 row groups; the groups' sums are added in
  // order.
  code.block = {32, 8, 1};
  code.grid = {blocksFor(width, 32, 1u << 30), 1, 1};
  code.body = fill(
      R"(  __shared__ double part[8][33];
  i64 j = blockIdx.x * 32LL + threadIdx.x;
  double sum = 0.0;
  if (j < $WIDTH)
    for (i64 r = threadIdx.y; r < $ROWS; r += 8)
      sum += load(x, r * $WIDTH + j);
  part[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && j < $WIDTH) {
    double total = 0.0;
    for (int g = 0; g < 8; ++g)
      total += part[g][threadIdx.x];
    store(y, j, $ACCUMULATE (float)total);
  }
)",
      {{"WIDTH", num(width)},
       {"ROWS", num(rows)},
       {"ACCUMULATE", v.flag(SumTo::attr::accumulate) ? "load(y, j) +" : ""}});
  return "";
}

std::string emitTranspose(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(Transpose::op::x);
  const std::vector<int64_t> &perm = v.attr(Transpose::attr::permutation).list;
  size_t rank = shape.size();
  std::vector<int64_t> inStride(rank, 1);
  for (size_t d = rank; d-- > 1;)
    inStride[d - 1] = inStride[d] * shape[d];
  // Output index i, split by the output's dimensions from the last, steps
  // each input dimension perm[d].
  std::string walk = "    i64 rest = i, from = 0, c;\n";
  for (size_t d = rank; d-- > 0;) {
    int64_t extent = shape[perm[d]];
    walk += fill("    c = rest % $E;\n    rest /= $E;\n    from += c * $S;\n",
                 {{"E", num(extent)}, {"S", num(inStride[perm[d]])}});
  }
  walk += "    store(y, i, load(x, from));";
  return pointwise(code, v.count(Transpose::op::x), walk);
}

std::string emitSlice(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(Slice::op::x);
  if (v.attr(Slice::attr::dim).perRank || v.attr(Slice::attr::parts).perRank)
    return "slice's dim and parts must be the same on every rank";
  int64_t dim = v.attr(Slice::attr::dim).i;
  int64_t inner = 1;
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  int64_t chunk = v.shape(Slice::op::y)[dim] * inner;
  int64_t stride = shape[dim] * inner;
  // y[o, c] = x[o, part · chunk + c], o over the dimensions before `dim`.
  return pointwise(code, v.count(Slice::op::y),
                   fill("    store(y, i, load(x, i / $CHUNK * $STRIDE + part "
                        "* $CHUNK + i % $CHUNK));",
                        {{"CHUNK", num(chunk)}, {"STRIDE", num(stride)}}));
}

std::string emitRope(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(Rope::op::x);
  int64_t seq = shape[1], heads = shape[2], dim = shape[3], half = dim / 2;
  int64_t pairs = v.count(Rope::op::x) / 2;
  // The angle in double, as the CPU backend computes it.
  return pointwise(
      code, pairs,
      fill(R"(    i64 row = i / $HALF, k = i % $HALF;
    double position = (double)(row / $HEADS % $SEQ);
    double theta = position * pow($BASE, -2.0 * (double)k / $DIM);
    double s, c;
    sincos(theta, &s, &c);
    s *= $SIGN;
    double x1 = load(x, row * $D + k), x2 = load(x, row * $D + k + $HALF);
    store(y, row * $D + k, (float)(x1 * c - x2 * s));
    store(y, row * $D + k + $HALF, (float)(x2 * c + x1 * s));)",
           {{"HALF", num(half)},
            {"HEADS", num(heads)},
            {"SEQ", num(seq)},
            {"BASE", f64(v.attr(Rope::attr::base).f)},
            {"DIM", f64(double(dim))},
            {"D", num(dim)},
            {"SIGN", v.flag(Rope::attr::inverse) ? "-1.0" : "1.0"}}));
}

std::string emitEmbeddingFwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t rows = v.shape(EmbeddingFwd::op::table)[0];
  int64_t hidden = v.lastDim(EmbeddingFwd::op::table);
  int64_t tokens = v.count(EmbeddingFwd::op::ids);
  // A block per token; ids outside the rank's rows give zeros.
  code.block = {128, 1, 1};
  code.grid = {blocksFor(tokens, 1), 1, 1};
  code.body = fill(
      R"(  for (i64 t = blockIdx.x; t < $TOKENS; t += gridDim.x) {
    i64 row = (i64)ids[t] - vocab_offset;
    bool mine = row >= 0 && row < $ROWS;
    for (i64 c = threadIdx.x; c < $HIDDEN; c += blockDim.x)
      store(y, t * $HIDDEN + c, mine ? load(table, row * $HIDDEN + c) : 0.0f);
  }
)",
      {{"TOKENS", num(tokens)}, {"ROWS", num(rows)}, {"HIDDEN", num(hidden)}});
  return "";
}

std::string emitEmbeddingBwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t rows = v.shape(EmbeddingBwd::op::dtable)[0];
  int64_t hidden = v.lastDim(EmbeddingBwd::op::dtable);
  int64_t tokens = v.count(EmbeddingBwd::op::ids);
  // A thread per column adds the tokens in order: tokens with the same id
  // never race, and the sum is the same on every run.
  std::string zero = v.flag(EmbeddingBwd::attr::accumulate) ? "" : R"(
  for (i64 r = 0; r < $ROWS; ++r)
    dtable[r * $HIDDEN + j] = 0.0f;)";
  code.block = {128, 1, 1};
  code.grid = {blocksFor(hidden, 128, 1u << 30), 1, 1};
  code.body = fill(R"(  i64 j = blockIdx.x * 128LL + threadIdx.x;
  if (j >= $HIDDEN)
    return;)" + zero + R"(
  for (i64 t = 0; t < $TOKENS; ++t) {
    i64 row = (i64)ids[t] - vocab_offset;
    if (row >= 0 && row < $ROWS)
      dtable[row * $HIDDEN + j] += load(dy, t * $HIDDEN + j);
  }
)",
                   {{"TOKENS", num(tokens)},
                    {"ROWS", num(rows)},
                    {"HIDDEN", num(hidden)}});
  return "";
}

} // namespace strata::codegen
