//===- CodegenTest.cpp - the CUDA kernels' generation, without a GPU ------===//
//
// Every kernel of the catalog is emitted for small shapes in f32 and bf16
// and compiled by NVRTC for both architectures; the launch shapes cover
// the work; equal launches share a unit; the kernel's parameters follow
// the launch contract (CudaKernel.h). Whether the kernels compute the
// right numbers needs a GPU (test/gpu).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/CudaKernel.h"
#include "compiler/codegen/CudaSources.h"
#include "compiler/codegen/Nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

using namespace strata;
using namespace strata::codegen;
using runtime::DType;
using runtime::KernelId;

namespace {

/// Each kernel's operands' shapes, in the catalog's order.
std::vector<std::vector<int64_t>> sampleShapes(KernelId id) {
  using S = std::vector<std::vector<int64_t>>;
  const std::vector<int64_t> m = {5, 7}, row = {7}, one = {1};
  const std::vector<int64_t> q = {2, 9, 4, 16}, kv = {2, 9, 2, 16},
                             lse = {2, 4, 9};
  const std::vector<int64_t> logits = {6, 10}, stat = {6}, flat = {100};
  switch (id) {
  case KernelId::Fill:
    return S{m};
  case KernelId::Copy:
  case KernelId::Scale:
  case KernelId::Accumulate:
  case KernelId::GeluFwd:
  case KernelId::GeluTanhFwd:
  case KernelId::SiluFwd:
  case KernelId::KeepOnFirst:
    return S{m, m};
  case KernelId::GeluBwd:
  case KernelId::GeluTanhBwd:
  case KernelId::SiluBwd:
    return S{m, m, m};
  case KernelId::Add:
  case KernelId::Sub:
  case KernelId::Mul:
    return S{m, row, m};
  case KernelId::SumTo:
    return S{m, row};
  case KernelId::AddPositions:
    return S{{2, 6, 5}, {12, 5}, {2, 6, 5}};
  case KernelId::SumPositions:
    return S{{2, 6, 5}, {12, 5}};
  case KernelId::EmbeddingFwd:
    return S{{11, 6}, {2, 3}, {2, 3, 6}};
  case KernelId::EmbeddingBwd:
    return S{{2, 3, 6}, {2, 3}, {11, 6}};
  case KernelId::LayerNormFwd:
    return S{m, row, row, m};
  case KernelId::LayerNormBwd:
    return S{m, row, m, m, row, row};
  case KernelId::RmsNormFwd:
    return S{m, row, m};
  case KernelId::RmsNormBwd:
    return S{m, row, m, m, row};
  case KernelId::Transpose:
    return S{{2, 3, 4}, {4, 2, 3}};
  case KernelId::Rope:
    return S{{2, 6, 3, 8}, {2, 6, 3, 8}};
  case KernelId::AttentionFwd:
    return S{q, kv, kv, q, lse};
  case KernelId::AttentionBwd:
    return S{q, kv, kv, q, lse, q, q, kv, kv};
  case KernelId::AttentionMerge:
    return S{q, lse, q, lse};
  case KernelId::Dropout:
    return S{{2, 4, 9, 9}, {2}, {2, 4, 9, 9}};
  case KernelId::SoftmaxFwd:
    return S{{2, 3, 5, 5}, {2, 3, 5, 5}};
  case KernelId::SoftmaxBwd:
    return S{{2, 3, 5, 5}, {2, 3, 5, 5}, {2, 3, 5, 5}};
  case KernelId::CrossEntropyFwd:
    return S{logits, stat, one};
  case KernelId::CrossEntropyBwd:
    return S{logits, stat, one, logits};
  case KernelId::CrossEntropyWithGrad:
    return S{logits, stat, one, one, logits};
  case KernelId::Slice:
    return S{{4, 6}, {4, 3}};
  case KernelId::LogitsMax:
    return S{logits, stat};
  case KernelId::LogitsTarget:
    return S{logits, stat, stat};
  case KernelId::LogitsSumExp:
    return S{logits, stat, stat};
  case KernelId::LogitsMaxSum:
    return S{logits, stat, stat};
  case KernelId::SumExpRescale:
    return S{stat, stat, stat, stat};
  case KernelId::CrossEntropyFromStats:
    return S{stat, stat, stat, one};
  case KernelId::CrossEntropyGradFromStats:
    return S{logits, stat, stat, stat, one, logits};
  case KernelId::CrossEntropyWithGradFromStats:
    return S{logits, stat, stat, stat, stat, one, one, logits};
  case KernelId::SumSquares:
    return S{flat, one};
  case KernelId::ClipCoefficient:
    return S{one, {9}, one, one};
  case KernelId::AdamW:
    return S{flat, one, {9}, flat, flat, flat, flat};
  case KernelId::Count:
    break;
  }
  return {};
}

/// A launch of `id` at the sample shapes, its float operands `dtype`.
LaunchDesc sample(KernelId id, DType dtype) {
  const runtime::KernelSpec &spec = runtime::kernelSpec(id);
  std::vector<std::vector<int64_t>> shapes = sampleShapes(id);
  EXPECT_EQ(shapes.size(), spec.operands.size()) << spec.name;
  LaunchDesc launch;
  launch.kernel = id;
  for (size_t i = 0; i < spec.operands.size() && i < shapes.size(); ++i) {
    OperandDesc operand;
    operand.shape = shapes[i];
    operand.dtype = spec.operands[i].dtypes == runtime::DTypes::Float ? dtype
                    : spec.operands[i].dtypes == runtime::DTypes::I32
                        ? DType::I32
                        : DType::F32;
    // The fp32 masters exist only for bf16 parameters.
    operand.present = !spec.operands[i].optional || dtype == DType::BF16;
    launch.operands.push_back(operand);
  }
  std::map<std::string, AttrDesc> attrs;
  attrs["value"].f = 0.5;
  attrs["factor"].f = -2.0;
  attrs["epsilon"].f = 1e-5;
  attrs["base"].f = 10000.0;
  attrs["causal"].i = 1;
  attrs["group_size"].i = 2;
  attrs["vocab_size"].i = 9;
  attrs["dim"].i = 1;
  attrs["parts"].i = 2;
  attrs["part"].perRank = true;
  attrs["vocab_offset"].perRank = true;
  attrs["rate"].f = 0.1; // dropout: its heads split, a rank's share of 8
  attrs["site"].i = 3;
  attrs["split_dim"].i = 1;
  attrs["split_offset"].perRank = true;
  attrs["split_size"].i = 8;
  // Context parallelism (two ranks) where a kernel has it, but attention,
  // whose sample keys are its queries' length.
  bool attention = id == KernelId::AttentionFwd || id == KernelId::AttentionBwd;
  attrs["context_parallel"].i = attention ? 0 : 2;
  attrs["context_rank"].perRank = true;
  attrs["permutation"].list = {2, 0, 1};
  attrs["segments"].list = id == KernelId::AdamW
                               ? std::vector<int64_t>{0, 40, 1, 50, 30, 0}
                               : std::vector<int64_t>{0, 40, 50, 30};
  attrs["first_segments"].list = {40, 10};
  attrs["windows"].list = {0, 50, 0, 50, 50, 50};
  for (const runtime::AttrSpec &attr : spec.attrs)
    launch.attrs.push_back(attrs[attr.name]);
  return launch;
}

std::vector<KernelId> everyKernel() {
  std::vector<KernelId> ids;
  for (int i = 0; i < runtime::kKernelCount; ++i)
    ids.push_back(KernelId(i));
  return ids;
}

TEST(Codegen, EveryKernelCompilesForBothArchitecturesInBothDtypes) {
  for (KernelId id : everyKernel())
    for (DType dtype : {DType::F32, DType::BF16}) {
      LaunchDesc launch = sample(id, dtype);
      KernelCode code;
      ASSERT_EQ(emitKernel(launch, code), "") << runtime::kernelName(id);
      std::string name = std::string(runtime::kernelName(id)) + "_0";
      std::string unit = kernelUnit(launch, code, name);
      for (const char *arch : {"sm_80", "sm_90a"}) {
        std::string ptx;
        std::string error = compileToPtx(unit, name, arch, ptx);
        ASSERT_EQ(error, "") << name << " for " << arch << "\n" << unit;
        EXPECT_NE(ptx.find(".entry " + name), std::string::npos) << name;
        EXPECT_NE(ptx.find(std::string(".target ") + arch), std::string::npos)
            << name;
      }
    }
}

TEST(Codegen, EveryCudaFileCompilesByItself) {
  // Each file of compiler/codegen/cuda/ with what it includes, and nothing
  // else: a file that leans on another it does not include fails here.
  std::vector<std::string> names = cudaSourceNames();
  for (const char *expected :
       {"common.cuh", "ptx.cuh", "attention_fwd.cuh", "attention_bwd.cuh"})
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end())
        << expected;
  for (const std::string &name : names) {
    std::set<std::string> included;
    std::string unit = expandCudaSources({name}, included);
    EXPECT_EQ(unit.find("#include"), std::string::npos) << name;
    EXPECT_EQ(unit.find("#pragma once"), std::string::npos) << name;
    for (const char *arch : {"sm_80", "sm_90a"}) {
      std::string ptx;
      EXPECT_EQ(compileToPtx(unit, "file", arch, ptx), "")
          << name << " for " << arch;
    }
  }
  // An include of a file that is not built in is NVRTC's error, by name.
  std::set<std::string> included;
  EXPECT_NE(expandCudaSources({"no-such.cuh"}, included)
                .find("#error \"no-such.cuh is not among the built-in CUDA "
                      "files\""),
            std::string::npos);
}

TEST(Codegen, ParametersFollowTheLaunchContract) {
  // Operands in the catalog's order, then its Int attributes as i64.
  LaunchDesc launch = sample(KernelId::EmbeddingFwd, DType::BF16);
  KernelCode code;
  ASSERT_EQ(emitKernel(launch, code), "");
  std::string unit = kernelUnit(launch, code, "k");
  EXPECT_NE(unit.find("k(const bf16 *table, const int *ids, bf16 *y, "
                      "i64 vocab_offset)"),
            std::string::npos)
      << unit;
  // An absent optional output is still a parameter (null at run time);
  // Ints lists and bools are constants, not parameters.
  launch = sample(KernelId::AdamW, DType::F32);
  ASSERT_EQ(emitKernel(launch, code), "");
  unit = kernelUnit(launch, code, "k");
  EXPECT_NE(unit.find("float *exp_avg_sq, float *master, i64 part)"),
            std::string::npos)
      << unit;
}

TEST(Codegen, LaunchShapesCoverTheWork) {
  KernelCode code;
  // Pointwise (cuda/pointwise.cuh): a grid-stride loop, 8 elements a
  // thread where the pointers allow 16-byte vectors; a broadcast row a
  // multiple of 8 wide keeps them.
  LaunchDesc add = sample(KernelId::Add, DType::F32);
  add.operands[0].shape = add.operands[2].shape = {1000, 1000};
  add.operands[1].shape = {1000};
  ASSERT_EQ(emitKernel(add, code), "");
  EXPECT_EQ(code.block[0], 256u);
  EXPECT_EQ(code.grid[0], (1000000u / 8 + 255) / 256);
  EXPECT_EQ(code.sources, std::vector<std::string>{"pointwise.cuh"});
  EXPECT_NE(code.body.find("pointwise(Chain{x, y, z}, 1000000LL, "
                           "aligned16(x) && aligned16(y) && aligned16(z));"),
            std::string::npos)
      << code.body;
  add.operands[1].shape = {4}; // a vector of 8 would cross its rows
  ASSERT_EQ(emitKernel(add, code), "");
  EXPECT_NE(code.body.find("1000000LL, false);"), std::string::npos)
      << code.body;
  add.operands[0].shape = add.operands[2].shape = {999, 7};
  add.operands[1].shape = {7};
  ASSERT_EQ(emitKernel(add, code), "");
  EXPECT_NE(code.body.find("6993LL, false);"), std::string::npos) << code.body;
  // Norms (cuda/norms.cuh): a warp per row, four rows a block.
  LaunchDesc norm = sample(KernelId::LayerNormFwd, DType::F32);
  norm.operands[0].shape = norm.operands[3].shape = {2, 1023, 7};
  ASSERT_EQ(emitKernel(norm, code), "");
  EXPECT_EQ(code.block[0], 128u);
  EXPECT_EQ(code.grid[0], (2046u + 3) / 4);
  EXPECT_NE(code.body.find("normFwd<7, true, 4>"), std::string::npos)
      << code.body;
  // The backward: rows a block leaving the grid 264 blocks (at least one
  // row), its partial rows of the weight's and the bias's sums (reduce.cuh).
  LaunchDesc normBwd = sample(KernelId::LayerNormBwd, DType::F32);
  ASSERT_EQ(emitKernel(normBwd, code), "");
  EXPECT_EQ(code.grid[0], 5u);
  EXPECT_NE(code.globals.find("normPartials[70LL]"), std::string::npos)
      << code.globals;
  for (unsigned i : {0u, 2u, 3u})
    normBwd.operands[i].shape = {8192, 768};
  for (unsigned i : {1u, 4u, 5u})
    normBwd.operands[i].shape = {768};
  ASSERT_EQ(emitKernel(normBwd, code), "");
  EXPECT_EQ(code.grid[0], (8192u + 30) / 31);
  EXPECT_NE(code.body.find("normBwd<768, true, 8, 31>"), std::string::npos)
      << code.body;
  // sum_to (cuda/sum_to.cuh): row ranges by column tiles of up to 2048.
  LaunchDesc sumTo = sample(KernelId::SumTo, DType::BF16);
  sumTo.operands[0].shape = {8192, 768};
  sumTo.operands[1].shape = {768};
  ASSERT_EQ(emitKernel(sumTo, code), "");
  EXPECT_EQ(code.grid, (std::array<uint32_t, 3>{265, 1, 1}));
  sumTo.operands[0].shape = {8, 1024, 768};
  sumTo.operands[1].shape = {1024, 768};
  ASSERT_EQ(emitKernel(sumTo, code), "");
  EXPECT_EQ(code.grid, (std::array<uint32_t, 3>{1, 384, 1}));
  // fp32 attention, the SIMT kernels: (query rows / 4, heads, batch), the
  // key tiles in dynamic shared memory; the backward adds key-row blocks,
  // over max(H, K).
  LaunchDesc attention = sample(KernelId::AttentionFwd, DType::F32);
  ASSERT_EQ(emitKernel(attention, code), "");
  EXPECT_EQ(code.grid, (std::array<uint32_t, 3>{3, 4, 2}));
  EXPECT_EQ(code.block, (std::array<uint32_t, 3>{128, 1, 1}));
  EXPECT_EQ(code.sharedBytes, (2u * 32 * 17 + 4 * 16) * 4);
  EXPECT_EQ(code.globals.find("mmaBf16"), std::string::npos);
  LaunchDesc attentionBwd = sample(KernelId::AttentionBwd, DType::F32);
  ASSERT_EQ(emitKernel(attentionBwd, code), "");
  EXPECT_EQ(code.grid, (std::array<uint32_t, 3>{3 + 3, 4, 2}));
  // bf16 attention, on tensor cores: the forward is cuda/attention_fwd.cuh's
  // template, 128 query rows a block (16 a warp), 64 keys a tile, three
  // tiles in flight at this head dimension (16, each shared row padded to
  // 24 bf16), one block an SM in the launch bounds.
  attention = sample(KernelId::AttentionFwd, DType::BF16);
  ASSERT_EQ(emitKernel(attention, code), "");
  EXPECT_EQ(code.grid, (std::array<uint32_t, 3>{1, 4, 2}));
  EXPECT_EQ(code.block, (std::array<uint32_t, 3>{256, 1, 1}));
  EXPECT_EQ(code.sharedBytes, (128u + 2 * 3 * 64) * 24 * 2);
  EXPECT_EQ(code.blocksPerSm, 1u);
  EXPECT_EQ(code.sources, std::vector<std::string>{"attention_fwd.cuh"});
  EXPECT_NE(
      code.body.find("attentionFwdMma<Shape, AttentionFwdTiles<8, 64, 3>>"),
      std::string::npos)
      << code.body;
  std::string unit = kernelUnit(attention, code, "k");
  EXPECT_NE(unit.find("mma.sync.aligned.m16n8k16.row.col.f32.bf16"),
            std::string::npos);
  EXPECT_NE(unit.find("__launch_bounds__(256, 1)"), std::string::npos);
  attentionBwd = sample(KernelId::AttentionBwd, DType::BF16);
  // The backward (cuda/attention_bwd.cuh): a block per 128 keys of a kv
  // head, (key blocks, kv heads, batch); shared, its keys and values, two
  // stages of 64 queries and output gradients, and dSᵀ (128 rows of 64 + 8);
  // the scratch its blocks share sized by the shape.
  ASSERT_EQ(emitKernel(attentionBwd, code), "");
  EXPECT_EQ(code.grid, (std::array<uint32_t, 3>{1, 2, 2}));
  EXPECT_EQ(code.sharedBytes, (2u * 128 + 2 * 2 * 64) * 24 * 2 + 128 * 72 * 2);
  EXPECT_NE(code.globals.find("__device__ int attentionTurn[8LL]"),
            std::string::npos)
      << code.globals;
  // A head dimension that is not a multiple of 8, or past 128, stays SIMT;
  // 128 runs on tensor cores.
  for (int64_t dim : {12, 136, 256, 128}) {
    attention = sample(KernelId::AttentionFwd, DType::BF16);
    for (unsigned i : {0u, 1u, 2u, 3u})
      attention.operands[i].shape.back() = dim;
    ASSERT_EQ(emitKernel(attention, code), "");
    EXPECT_EQ(kernelUnit(attention, code, "k").find("mmaBf16(") !=
                  std::string::npos,
              dim == 128)
        << "head dimension " << dim;
  }
  // Context parallelism's bf16 attention runs on tensor cores too, told
  // its rank and ring step. The backward's keys gathered from two ranks
  // (2 × 160) are two runs of key blocks, 2 × ⌈160 / 128⌉, that no block
  // crosses; one rank's keys (the ring's step) are one.
  for (int64_t keys : {320, 160}) {
    namespace op = runtime::kernels::AttentionBwd::op;
    attentionBwd = sample(KernelId::AttentionBwd, DType::BF16);
    attentionBwd.attrs[runtime::kernels::AttentionBwd::attr::context_parallel]
        .i = 2;
    for (unsigned i : {op::q, op::o, op::dout, op::dq})
      attentionBwd.operands[i].shape = {2, 160, 4, 16};
    for (unsigned i : {op::k, op::v, op::dk, op::dv})
      attentionBwd.operands[i].shape = {2, keys, 2, 16};
    attentionBwd.operands[op::lse].shape = {2, 4, 160};
    ASSERT_EQ(emitKernel(attentionBwd, code), "") << keys << " keys";
    EXPECT_EQ(code.grid,
              (std::array<uint32_t, 3>{keys == 320 ? 4u : 2u, 2, 2}));
    EXPECT_NE(code.body.find("ContextPlace{context_rank, ring_step}"),
              std::string::npos)
        << code.body;
    EXPECT_NE(kernelUnit(attentionBwd, code, "k").find("mmaBf16("),
              std::string::npos);
  }
  // Row kernels of the loss: a block per row.
  LaunchDesc loss = sample(KernelId::LogitsSumExp, DType::F32);
  ASSERT_EQ(emitKernel(loss, code), "");
  EXPECT_EQ(code.grid[0], 6u);
  // The optimizer's owned elements (cuda/optimizer.cuh): windows of 50, 8
  // elements a thread, grid-stride.
  LaunchDesc adamw = sample(KernelId::AdamW, DType::BF16);
  ASSERT_EQ(emitKernel(adamw, code), "");
  EXPECT_EQ(code.grid[0], 1u);
  EXPECT_NE(code.body.find("      100LL, step);"), std::string::npos)
      << code.body;
}

TEST(Codegen, EqualLaunchesShareAUnitAndShapesTellThemApart) {
  auto unitOf = [](const LaunchDesc &launch) {
    KernelCode code;
    EXPECT_EQ(emitKernel(launch, code), "");
    return kernelUnit(launch, code, "k");
  };
  LaunchDesc a = sample(KernelId::GeluFwd, DType::F32);
  LaunchDesc b = sample(KernelId::GeluFwd, DType::F32);
  EXPECT_EQ(unitOf(a), unitOf(b));
  b.operands[0].shape = b.operands[1].shape = {5, 8};
  EXPECT_NE(unitOf(a), unitOf(b));
  b = sample(KernelId::GeluFwd, DType::BF16);
  EXPECT_NE(unitOf(a), unitOf(b));
  // A per-rank value is a parameter: ranks with different offsets share.
  LaunchDesc e = sample(KernelId::EmbeddingFwd, DType::F32);
  LaunchDesc f = e;
  f.attrs[0].i = 128;
  EXPECT_EQ(unitOf(e), unitOf(f));
}

TEST(Codegen, RefusesWhatItCannotGenerate) {
  KernelCode code;
  LaunchDesc slice = sample(KernelId::Slice, DType::F32);
  slice.attrs[0].perRank = true; // dim
  EXPECT_EQ(emitKernel(slice, code),
            "slice's dim and parts must be the same on every rank");
  LaunchDesc rope = sample(KernelId::Rope, DType::F32);
  rope.operands[0].shape = rope.operands[1].shape = {2, 5, 3, 7};
  // What the kernel catalog's rules refuse, as a plan load would, before
  // an emitter reads a shape or an argument out of range.
  EXPECT_EQ(emitKernel(rope, code),
            "rope: rope needs [batch, seq, heads, even head_dim], got "
            "f32[2, 5, 3, 7]");
  LaunchDesc transpose = sample(KernelId::Transpose, DType::F32);
  transpose.attrs[0].list = {0, 7, 1};
  EXPECT_EQ(emitKernel(transpose, code),
            "transpose: transpose permutation does not map f32[2, 3, 4] to "
            "f32[4, 2, 3]");
  LaunchDesc missing = sample(KernelId::Add, DType::F32);
  missing.operands.pop_back();
  EXPECT_EQ(emitKernel(missing, code),
            "add takes 3 operands, the plan gives 2");
  std::string ptx;
  EXPECT_EQ(compileToPtx("", "k", "sm_70", ptx),
            "unknown CUDA architecture 'sm_70' (sm_80 or sm_90a)");
  std::string error = compileToPtx("this is not C++", "broken", "sm_80", ptx);
  EXPECT_NE(error.find("NVRTC cannot compile broken.cu for sm_80"),
            std::string::npos)
      << error;
}

/// A fused member over [5, 7] with buffer ids.
FusedMember member(KernelId id, DType dtype, std::vector<int> buffers) {
  return {sample(id, dtype), std::move(buffers)};
}

TEST(Codegen, AFusedGroupIsOneKernelKeepingValuesInRegisters) {
  // add(0, 1) -> 2; gelu_fwd(2) -> 3 (bf16); mul(3, 0) -> 4: the gelu
  // reads the add's value, the mul the gelu's as its bf16 buffer holds it.
  std::vector<FusedMember> group = {
      member(KernelId::Add, DType::F32, {0, 1, 2}),
      member(KernelId::GeluFwd, DType::F32, {2, 3}),
      member(KernelId::Mul, DType::F32, {3, 0, 4})};
  group[1].launch.operands[1].dtype = DType::BF16;
  group[2].launch.operands[0].dtype = DType::BF16;
  group[0].launch.operands[1].shape = {5, 7}; // not broadcast
  KernelCode code;
  ASSERT_EQ(emitFused(group, code), "");
  EXPECT_EQ(code.grid[0], 1u);
  // The chain (cuda/pointwise.cuh runs it), V elements a call.
  EXPECT_NE(code.globals.find("      v1[e] = stored(p1_1, gelu(v0[e]));"),
            std::string::npos)
      << code.globals;
  EXPECT_NE(code.globals.find("loadN<V>(p2_1, i % 7LL, b2_1);"),
            std::string::npos)
      << code.globals;
  EXPECT_NE(code.globals.find("(v1[e] * b2_1[e])"), std::string::npos)
      << code.globals;
  // What comes from memory is loaded once: the add's inputs, into r0, r1.
  EXPECT_NE(code.globals.find("      v0[e] = stored(p0_2, (r0[e] + r1[e]));"),
            std::string::npos)
      << code.globals;
  size_t load = code.globals.find("loadN<V>(p0_0, i, r0);");
  ASSERT_NE(load, std::string::npos) << code.globals;
  EXPECT_EQ(load, code.globals.rfind("loadN<V>(p0_0, i")) << code.globals;
  // A broadcast row of 7 keeps the chain to one element at a time.
  EXPECT_NE(code.body.find("pointwise(Chain{p0_0, p0_1, p0_2, p1_0, p1_1, "
                           "p2_0, p2_1, p2_2}, 35LL, false);"),
            std::string::npos)
      << code.body;
  std::string unit = fusedUnit(group, code, "fused_0");
  // The launch contract of a group: every member's operands in turn.
  EXPECT_NE(unit.find("// add+gelu_fwd+mul\n"), std::string::npos);
  EXPECT_NE(unit.find("fused_0(const float *p0_0, const float *p0_1, float "
                      "*p0_2, const float *p1_0, bf16 *p1_1, const bf16 "
                      "*p2_0, const float *p2_1, float *p2_2)"),
            std::string::npos)
      << unit;
  for (const char *arch : {"sm_80", "sm_90a"}) {
    std::string ptx;
    EXPECT_EQ(compileToPtx(unit, "fused_0", arch, ptx), "") << unit;
  }
}

TEST(Codegen, AFusedGroupRefusesMembersItCannotChain) {
  // Which buffers may share a kernel is the fusion pass's decision, on
  // bytes (strata-fuse-elementwise.mlir); here the kinds, order and counts.
  KernelCode code;
  std::vector<FusedMember> counts = {
      member(KernelId::GeluFwd, DType::F32, {0, 1}),
      member(KernelId::GeluFwd, DType::F32, {1, 2})};
  counts[1].launch.operands[0].shape =
      counts[1].launch.operands[1].shape = {5, 8};
  EXPECT_EQ(emitFused(counts, code),
            "the members run over different numbers of elements");
  // A norm closes a group (the residual add before it), nothing else: not
  // first or in the middle.
  std::vector<FusedMember> normFirst = {
      member(KernelId::RmsNormFwd, DType::F32, {0, 1, 2}),
      member(KernelId::GeluFwd, DType::F32, {2, 3})};
  EXPECT_EQ(emitFused(normFirst, code),
            "'rms_norm_fwd' is not a pointwise kernel");
  std::vector<FusedMember> closed = {
      member(KernelId::GeluFwd, DType::F32, {0, 1}),
      member(KernelId::RmsNormFwd, DType::F32, {1, 2, 3})};
  ASSERT_EQ(emitFused(closed, code), "");
  // The norm's warps run the chain on their row's chunks (it stores the
  // member's output and returns it as the norm's input), then the norm.
  EXPECT_NE(code.globals.find("storeN<V>(p0_1, i, v0);"), std::string::npos)
      << code.globals;
  EXPECT_NE(code.globals.find("out[e] = v0[e];"), std::string::npos)
      << code.globals;
  EXPECT_NE(code.body.find("normFwd<7, false, 4>(\n      Chain{p0_0, p0_1}, "
                           "p1_0, p1_1, (const float *)nullptr, p1_2"),
            std::string::npos)
      << code.body;
  std::string unit = fusedUnit(closed, code, "fused_1");
  for (const char *arch : {"sm_80", "sm_90a"}) {
    std::string ptx;
    EXPECT_EQ(compileToPtx(unit, "fused_1", arch, ptx), "") << unit;
  }
  EXPECT_EQ(emitFused({counts[0]}, code),
            "a fused kernel has two members or more");
}

} // namespace
