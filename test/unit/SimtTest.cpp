//===- SimtTest.cpp - the host's model of a GPU block ----------*- C++ -*-===//
//
// runtime/simt runs generated kernels without a GPU; these check the model
// itself: barriers and shuffles mean what they mean on a GPU, and what a GPU
// leaves undefined is reported, not run.
//
//===----------------------------------------------------------------------===//
#include "runtime/simt/Simt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

using strata::runtime::simt::Kernel;

namespace {

/// Builds `body` as kernel k(float *out, const float *in, i64 n).
std::string unit(const std::string &body) {
  return "typedef long long i64;\nextern \"C\" __global__ void\n"
         "k(float *out, const float *in, i64 n) {\n" +
         body + "}\n";
}

struct Outcome {
  std::string error;
  std::vector<float> out;
};

Outcome run(const std::string &body, std::vector<float> in, size_t outputs,
            std::array<uint32_t, 3> grid, std::array<uint32_t, 3> block,
            uint32_t shared = 0) {
  Outcome result;
  std::string built;
  auto kernel = Kernel::build(unit(body), "k", built);
  EXPECT_EQ(built, "");
  if (!kernel) { // the caller's checks then fail on the error
    result.error = "not built: " + built;
    return result;
  }
  result.out.assign(outputs, -1.0f);
  float *out = result.out.data();
  const float *input = in.data();
  long long n = static_cast<long long>(in.size());
  void *params[] = {&out, &input, &n};
  result.error = kernel->launch(grid, block, shared, params);
  return result;
}

TEST(Simt, BlockReductionThroughSharedMemoryAndShuffles) {
  // Each block sums its 64 inputs: shuffles within each warp, then the
  // warps' partials through dynamic shared memory after a barrier.
  std::vector<float> in(256);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(i % 7) - 2.0f;
  Outcome r = run(R"(  extern __shared__ float partial[];
  i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x;
  float v = i < n ? in[i] : 0.0f;
  for (int o = 16; o > 0; o >>= 1)
    v += __shfl_xor_sync(0xffffffffu, v, o);
  if ((threadIdx.x & 31) == 0)
    partial[threadIdx.x >> 5] = v;
  __syncthreads();
  if (threadIdx.x == 0)
    out[blockIdx.x] = partial[0] + partial[1];
)",
                  in, 4, {4, 1, 1}, {64, 1, 1}, 8);
  ASSERT_EQ(r.error, "");
  for (int b = 0; b < 4; ++b) {
    float expected = 0;
    for (int i = 0; i < 64; ++i)
      expected += in[b * 64 + i];
    EXPECT_EQ(r.out[b], expected) << "block " << b;
  }
}

TEST(Simt, ThreadIndicesCoverEveryDimension) {
  Outcome r = run(
      R"(  i64 t = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  i64 b = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  out[b * blockDim.x * blockDim.y * blockDim.z + t] = (float)(b * 1000 + t);
)",
      {}, 2 * 3 * 2 * 4 * 2 * 3, {2, 3, 2}, {4, 2, 3});
  ASSERT_EQ(r.error, "");
  for (size_t i = 0; i < r.out.size(); ++i)
    EXPECT_EQ(r.out[i], float(i / 24 * 1000 + i % 24)) << i;
}

TEST(Simt, ABarrierSomeThreadsSkipIsAnError) {
  Outcome r = run(R"(  if (threadIdx.x < 16)
    __syncthreads();
  else
    out[0] = __shfl_sync(0xffffffffu, 1.0f, 0);
)",
                  {}, 1, {1, 1, 1}, {32, 1, 1});
  EXPECT_NE(r.error.find("threads wait at different barriers"),
            std::string::npos)
      << r.error;
}

TEST(Simt, AShuffleFromALaneThatLeftIsAnError) {
  Outcome r = run(R"(  if (threadIdx.x == 5)
    return;
  out[0] = __shfl_sync(0xffffffffu, 2.0f, 5);
)",
                  {}, 1, {1, 1, 1}, {32, 1, 1});
  EXPECT_NE(r.error.find("a shuffle reads a lane that did not take part"),
            std::string::npos)
      << r.error;
}

TEST(Simt, ThreadsThatLeftDoNotHoldABarrier) {
  // Since sm_70 a barrier waits only for the threads still running.
  Outcome r = run(R"(  if (threadIdx.x >= 40)
    return;
  __syncthreads();
  out[threadIdx.x] = 1.0f;
)",
                  {}, 64, {1, 1, 1}, {64, 1, 1});
  ASSERT_EQ(r.error, "");
  EXPECT_EQ(r.out[39], 1.0f);
  EXPECT_EQ(r.out[40], -1.0f);
}

TEST(Simt, SharedMemoryStartsAsNaN) {
  Outcome r = run(R"(  extern __shared__ float scratch[];
  out[0] = scratch[3];
)",
                  {}, 1, {1, 1, 1}, {1, 1, 1}, 16);
  ASSERT_EQ(r.error, "");
  EXPECT_TRUE(std::isnan(r.out[0]));
}

TEST(Simt, TensorCoreProductIsAMatmulInThePtxFragmentLayout) {
  // in: A [16][16] then B [16][8] (k by n), small integers (exact in
  // bf16). Each lane packs its fragments as the PTX ISA lays out
  // mma.m16n8k16 (g = lane / 4, t = lane % 4): a[r] row g + 8 (r % 2),
  // k 2t + 8 (r / 2) and the next; b[r] column g, k 2t + 8 r and the next;
  // d[r] row g + 8 (r / 2), column 2t + r % 2. D starts at 0.5.
  std::vector<float> in(16 * 16 + 16 * 8);
  for (size_t i = 0; i < in.size(); ++i)
    in[i] = float(int(i * 7 % 11) - 5);
  Outcome r = run(R"(  unsigned lane = threadIdx.x, g = lane / 4, t = lane % 4;
  const float *a = in, *b = in + 256;
  auto bits = [](float v) { return __float_as_uint(v) >> 16; };
  unsigned af[4], bf[2];
  for (int x = 0; x < 4; ++x) {
    unsigned row = g + 8 * (x % 2), k = 2 * t + 8 * (x / 2);
    af[x] = bits(a[row * 16 + k]) | bits(a[row * 16 + k + 1]) << 16;
  }
  for (int x = 0; x < 2; ++x) {
    unsigned k = 2 * t + 8 * x;
    bf[x] = bits(b[k * 8 + g]) | bits(b[(k + 1) * 8 + g]) << 16;
  }
  float d[4] = {0.5f, 0.5f, 0.5f, 0.5f};
  mmaBf16(d, af, bf);
  for (int x = 0; x < 4; ++x)
    out[(g + 8 * (x / 2)) * 8 + 2 * t + x % 2] = d[x];
)",
                  in, 16 * 8, {1, 1, 1}, {32, 1, 1});
  ASSERT_EQ(r.error, "");
  for (int row = 0; row < 16; ++row)
    for (int col = 0; col < 8; ++col) {
      float expected = 0.5f;
      for (int k = 0; k < 16; ++k)
        expected += in[row * 16 + k] * in[256 + k * 8 + col];
      EXPECT_EQ(r.out[row * 8 + col], expected) << row << ", " << col;
    }
}

TEST(Simt, ATensorCoreProductSomeLanesSkipIsAnError) {
  Outcome r = run(R"(  if (threadIdx.x == 9)
    return;
  float d[4] = {0, 0, 0, 0};
  unsigned a[4] = {0, 0, 0, 0}, b[2] = {0, 0};
  mmaBf16(d, a, b);
  out[0] = d[0];
)",
                  {}, 1, {1, 1, 1}, {32, 1, 1});
  EXPECT_NE(r.error.find("an mma some lanes of the warp did not take part in"),
            std::string::npos)
      << r.error;
}

TEST(Simt, ABlockPastAGpusLimitIsRefused) {
  Outcome r = run("", {}, 1, {1, 1, 1}, {2048, 1, 1});
  EXPECT_NE(r.error.find("a block holds 1 to 1024 threads"), std::string::npos)
      << r.error;
}

TEST(Simt, AUnitTheHostCompilerRefusesSaysWhy) {
  std::string error;
  EXPECT_EQ(Kernel::build(unit("  this is not C++;\n"), "k", error), nullptr);
  EXPECT_NE(error.find("the host compiler refused kernel k"), std::string::npos)
      << error;
}

} // namespace
