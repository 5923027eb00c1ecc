//===- EmitElementwise.cpp - pointwise, layout and embedding kernels ------===//
//
// The math of runtime/cpu/Elementwise.cpp, Embedding.cpp and Rope.cpp, in
// f32 (loads widen bf16, stores round). The pointwise kernels are chains of
// one (EmitFused.cpp) that cuda/pointwise.cuh runs 8 elements a thread,
// fill its fillAll; sum_to is cuda/sum_to.cuh's, the embedding
// cuda/embedding.cuh's and rope cuda/rope.cuh's (stubs written here);
// keep_on_first, transpose and slice are written here whole, a thread an
// element in a grid-stride loop (their index arithmetic is the launch's).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include <algorithm>

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

/// A kernel of pointwiseValue's: its one output from its inputs, as a
/// chain of one (EmitFused.cpp) that cuda/pointwise.cuh runs over the
/// elements.
std::string emitPointwise(const LaunchDesc &launch, KernelCode &code) {
  const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
  FusedMember member{launch, {}};
  for (unsigned k = 0; k < spec.operands.size(); ++k)
    member.buffers.push_back(int(k));
  ChainCode chain;
  if (std::string error = emitChain(
          {member}, 1,
          [&](size_t, size_t k) { return std::string(spec.operands[k].name); },
          -1, chain);
      !error.empty())
    return error;
  code.sources = {"pointwise.cuh"};
  code.globals = chain.type;
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor((chain.elements + 7) / 8, kThreads), 1, 1};
  code.body = "  pointwise(" + chain.construct + ", " + num(chain.elements) +
              ", " + chain.vectors + ");\n";
  return "";
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
  int64_t n = v.count(Fill::op::y);
  code.sources = {"pointwise.cuh"};
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor((n + 7) / 8, kThreads), 1, 1};
  code.body = "  fillAll(y, " + num(n) + ", " +
              f32(v.attr(Fill::attr::value).f) + ", aligned16(y));\n";
  return "";
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
  // cuda/sum_to.cuh: column tiles of up to 2048 (a 16-byte chunk a thread),
  // and row ranges enough that the grid has 2 blocks an SM of an H100
  // where the rows allow.
  const int64_t threads = 256, tile = std::min<int64_t>(width, 8 * threads);
  const int64_t tiles = (width + tile - 1) / tile;
  const int64_t ranges = std::max<int64_t>(1, (2 * 132 + tiles - 1) / tiles);
  const int64_t rowsPerBlock = std::max<int64_t>(1, rows / ranges);
  const int64_t blocks = (rows + rowsPerBlock - 1) / rowsPerBlock;
  const int64_t groups = (blocks + 15) / 16;
  code.sources = {"sum_to.cuh"};
  code.globals = "\n// The grid's partial sums (reduce.cuh).\n"
                 "__device__ alignas(16) float sumPartials[" +
                 num(tiles * blocks * tile) +
                 "];\n__device__ float sumGroupRows[" +
                 num(tiles * groups * tile) +
                 "];\n__device__ unsigned sumGroupDone[" + num(tiles * groups) +
                 "];\n__device__ unsigned sumGroupsDone[" + num(tiles) + "];\n";
  code.block = {uint32_t(threads), 1, 1};
  code.grid = {uint32_t(blocks), uint32_t(tiles), 1};
  code.body = "  sumTo<" + std::to_string(width) + ", " + std::to_string(tile) +
              ", " + std::to_string(threads) + ", " +
              std::to_string(rowsPerBlock) + ", " +
              (v.flag(SumTo::attr::accumulate) ? "true" : "false") +
              ">(\n      x, y, " + num(rows) +
              ", aligned16(x),\n      {sumPartials, sumGroupRows, "
              "sumGroupDone, sumGroupsDone});\n";
  return "";
}

// A table over the sequence's places, at a context-parallel rank's rows
// (cuda/context.cuh): an element a thread.
std::string emitAddPositions(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(AddPositions::op::x);
  code.sources = {"context.cuh"};
  return pointwise(
      code, v.count(AddPositions::op::x),
      fill("    i64 l = i / $W % $ROWS, j = i % $W;\n"
           "    store(z, i, load(x, i) + load(table, contextPosition(l, "
           "$ROWS, context_parallel, context_rank) * $W + j));",
           {{"W", num(shape[2])}, {"ROWS", num(shape[1])}}));
}

// The table's gradient: a thread an element of the table, summing its
// rank's row over the batch (the rows of other ranks' chunks zero, or kept
// when adding).
std::string emitSumPositions(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(SumPositions::op::x);
  int64_t rows = shape[1], width = shape[2];
  int64_t batch = v.count(SumPositions::op::x) / (rows * width);
  code.sources = {"context.cuh"};
  return pointwise(
      code, v.count(SumPositions::op::y),
      fill("    i64 l = contextRow(i / $W, $ROWS, context_parallel, "
           "context_rank), j = i % $W;\n"
           "    float sum = 0.0f;\n"
           "    for (i64 b = 0; l >= 0 && b < $B; ++b)\n"
           "      sum += load(x, (b * $ROWS + l) * $W + j);\n"
           "    store(y, i, $KEEP sum);",
           {{"W", num(width)},
            {"ROWS", num(rows)},
            {"B", num(batch)},
            {"KEEP",
             v.flag(SumPositions::attr::accumulate) ? "load(y, i) +" : ""}}));
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
  int64_t seq = shape[1], heads = shape[2], dim = shape[3];
  int64_t rows = v.count(Rope::op::x) / dim;
  // cuda/rope.cuh: 8 pairs a thread where the row allows.
  code.sources = {"rope.cuh"};
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(rows * (dim / 2 + 7) / 8, kThreads), 1, 1};
  code.body = "  rope<" + std::to_string(seq) + ", " + std::to_string(heads) +
              ", " + std::to_string(dim) + ">(x, y, " + num(rows) + ", " +
              f64(v.attr(Rope::attr::base).f) + ", " +
              (v.flag(Rope::attr::inverse) ? "-1.0" : "1.0") +
              ", aligned16(x) && aligned16(y), context_parallel, "
              "context_rank);\n";
  return "";
}

std::string emitEmbeddingFwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t rows = v.shape(EmbeddingFwd::op::table)[0];
  int64_t hidden = v.lastDim(EmbeddingFwd::op::table);
  int64_t tokens = v.count(EmbeddingFwd::op::ids);
  // cuda/embedding.cuh: a block a token (ids outside the rank's rows give
  // zeros), 16-byte chunks a thread.
  code.sources = {"embedding.cuh"};
  code.block = {128, 1, 1};
  code.grid = {blocksFor(tokens, 1), 1, 1};
  code.body = "  embeddingFwd<" + std::to_string(hidden) +
              ", 128>(table, ids, y, " + num(tokens) + ", " + num(rows) +
              ", vocab_offset,\n      aligned16(table) && aligned16(y));\n";
  return "";
}

std::string emitEmbeddingBwd(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  int64_t rows = v.shape(EmbeddingBwd::op::dtable)[0];
  int64_t hidden = v.lastDim(EmbeddingBwd::op::dtable);
  int64_t tokens = v.count(EmbeddingBwd::op::ids);
  // cuda/embedding.cuh: a block per 32 rows of the table, a warp a row, the
  // tokens of the block's rows listed in token order (up to 4096 of them).
  const int64_t rowsPerBlock = 32;
  code.sources = {"embedding.cuh"};
  code.block = {256, 1, 1};
  code.grid = {uint32_t((rows + rowsPerBlock - 1) / rowsPerBlock), 1, 1};
  code.blocksPerSm = 2; // 128 registers a thread: a lane's 8 chunks of 8
  code.body = "  embeddingBwd<" + std::to_string(hidden) + ", 256, " +
              std::to_string(rowsPerBlock) +
              ", 4096>(\n      dy, ids, dtable, " + num(tokens) + ", " +
              num(rows) + ", vocab_offset, " +
              (v.flag(EmbeddingBwd::attr::accumulate) ? "true" : "false") +
              ",\n      aligned16(dy) && aligned16(dtable));\n";
  return "";
}

} // namespace strata::codegen
