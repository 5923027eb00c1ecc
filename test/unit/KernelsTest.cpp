//===- KernelsTest.cpp - every kernel against float64, on each device -----===//
//
// Each kernel runs through the real path of a device on fresh random
// inputs, its outputs poisoned (NaN) first, and is compared with a float64
// reference (KernelTesting.h); the tests are in a file per kernel family,
// Kernels<Family>Test.cpp, beside the emitter (compiler/codegen/Emit*.cpp)
// and the CPU twin (runtime/cpu/) of the same family. This file holds the
// devices' instantiation, the mixed-precision tests across families, the
// catalog's checks and the CPU streams. On the CPU: a plan's buffers in a CPU
// backend's arena, the instruction checked against the kernel catalog as a plan
// load checks it, the backend's launch. On a GPU, for sm_80 and for sm_90a: the
// launch's kernel generated as strata-compile --target cuda generates it
// (compiler/codegen), compiled by NVRTC, loaded by a CudaBackend and
// launched by the launch contract; gemms through cuBLASLt. Without a GPU
// the GPU instances skip and say so. On "simt", on every machine: the
// sm_80 kernel, compiled by NVRTC and then by the host's C++ compiler, run
// by the fiber model of a GPU in runtime/simt (gemms the CPU's). Backward
// kernels are compared with the vector-Jacobian product of the float64 forward
// reference taken by central differences, so a reference shares no derivation
// with the kernel it checks. fp32 kernels hold to 1e-5, bf16 ones to 1e-2,
// relative to the largest expected value (or 1).
//
//===----------------------------------------------------------------------===//
#include "KernelTesting.h"

#include <cstring>

using namespace strata::kernel_testing;

namespace {

INSTANTIATE_TEST_SUITE_P(On, Kernels,
                         testing::Values("cpu", "simt", "sm_80", "sm_90a"),
                         [](const testing::TestParamInfo<Device> &info) {
                           return info.param;
                         });

// bf16 operands in, bf16 results out: each kernel against the float64
// reference of its rounded inputs, within 1e-2.
TEST_P(Kernels, Bf16ElementwiseNormsAndRope) {
  const DType bf16 = DType::BF16;
  const int64_t rows = 6, cols = 32;
  Vec x = roundedToBf16(randomVec(rows * cols, 2.0)),
      dy = roundedToBf16(randomVec(rows * cols)),
      w = roundedToBf16(randomVec(cols)), b = roundedToBf16(randomVec(cols));
  for (auto [fwd, bwd, fn] :
       {std::tuple{"gelu_fwd", "gelu_bwd", &gelu},
        std::tuple{"gelu_tanh_fwd", "gelu_tanh_bwd", &geluTanh},
        std::tuple{"silu_fwd", "silu_bwd", &silu}}) {
    auto forward = [&](const Vec &v) {
      Vec y(v.size());
      for (size_t i = 0; i < v.size(); ++i)
        y[i] = fn(v[i]);
      return y;
    };
    Harness h(on());
    uint32_t ix = h.input({rows, cols}, x, bf16),
             out = h.add({rows, cols}, bf16);
    h.run(fwd, {ix}, {out});
    expectClose(h.read(out), forward(x), kTolBf16, fwd);
    Harness g(on());
    uint32_t gx = g.input({rows, cols}, x, bf16),
             gdy = g.input({rows, cols}, dy, bf16),
             dx = g.add({rows, cols}, bf16);
    g.run(bwd, {gx, gdy}, {dx});
    expectClose(g.read(dx), vjp(forward, x, dy), kTolBf16, bwd);
  }
  {
    Harness h(on());
    uint32_t ix = h.input({rows, cols}, x, bf16), iw = h.input({cols}, w, bf16),
             out = h.add({rows, cols}, bf16);
    h.run("add", {ix, iw}, {out});
    Vec expected(x.size());
    for (size_t i = 0; i < x.size(); ++i)
      expected[i] = x[i] + w[i % cols];
    expectClose(h.read(out), expected, kTolBf16, "add");
  }
  const double eps = 1e-5;
  for (bool layerNorm : {true, false}) {
    const Vec *bias = layerNorm ? &b : nullptr;
    const char *name = layerNorm ? "layer_norm" : "rms_norm";
    Harness h(on());
    std::vector<uint32_t> ins = {h.input({rows, cols}, x, bf16),
                                 h.input({cols}, w, bf16)};
    if (layerNorm)
      ins.push_back(h.input({cols}, b, bf16));
    uint32_t out = h.add({rows, cols}, bf16);
    h.run(std::string(name) + "_fwd", ins, {out}, {{"epsilon", floatArg(eps)}});
    expectClose(h.read(out), refNorm(x, w, bias, cols, eps), kTolBf16, name);

    Harness g(on());
    uint32_t gx = g.input({rows, cols}, x, bf16), gw = g.input({cols}, w, bf16),
             gdy = g.input({rows, cols}, dy, bf16);
    std::vector<uint32_t> outs = {g.add({rows, cols}, bf16),
                                  g.add({cols}, bf16)};
    if (layerNorm)
      outs.push_back(g.add({cols}, bf16));
    g.run(std::string(name) + "_bwd", {gx, gw, gdy}, outs,
          {{"epsilon", floatArg(eps)}});
    expectClose(
        g.read(outs[0]),
        vjp([&](const Vec &v) { return refNorm(v, w, bias, cols, eps); }, x,
            dy),
        kTolBf16, "bf16 input gradient");
    expectClose(
        g.read(outs[1]),
        vjp([&](const Vec &v) { return refNorm(x, v, bias, cols, eps); }, w,
            dy),
        kTolBf16, "bf16 weight gradient");
  }
  {
    const int64_t batch = 2, seq = 3, heads = 2, dim = 16;
    ASSERT_EQ(batch * seq * heads * dim, rows * cols);
    Harness h(on());
    uint32_t ix = h.input({batch, seq, heads, dim}, x, bf16),
             out = h.add({batch, seq, heads, dim}, bf16);
    h.run("rope", {ix}, {out},
          {{"base", floatArg(10000.0)}, {"inverse", boolArg(false)}});
    expectClose(h.read(out), refRope(x, batch, seq, heads, dim, 10000.0, false),
                kTolBf16, "rope");
  }
}

TEST_P(Kernels, Bf16OperandsRoundThroughF32) {
  // A bf16 gemm equals the f32 gemm of the rounded inputs, rounded.
  const int64_t m = 8, n = 8, k = 32;
  Vec a = randomVec(m * k), b = randomVec(k * n);
  Harness h(on());
  uint32_t ia = h.input({m, k}, a, DType::BF16),
           ib = h.input({k, n}, b, DType::BF16),
           ic = h.add({m, n}, DType::BF16);
  h.runGemm(plainGemm(ia, ib, ic, m, n, k, false, false));
  Vec ra(a.size()), rb(b.size());
  for (size_t i = 0; i < a.size(); ++i)
    ra[i] = roundToBf16(float(a[i]));
  for (size_t i = 0; i < b.size(); ++i)
    rb[i] = roundToBf16(float(b[i]));
  Vec expected = refGemm(ra, rb, m, n, k, false, false);
  // One bf16 rounding of the result: relative 2^-8.
  expectClose(h.read(ic), expected, 1.0 / 256, "bf16 gemm");
}

// Every kernel states what it computes (MATH in Kernels.def), which the
// units generated for it open with (golden-units.test shows it for
// attention).
TEST(KernelChecks, EveryKernelStatesItsMath) {
  for (int id = 0; id < kKernelCount; ++id) {
    const KernelSpec &spec = kernelSpec(KernelId(id));
    EXPECT_GT(std::strlen(spec.math), 0u) << spec.name << " has no MATH";
  }
}

TEST(KernelChecks, CatalogChecksDtypesCountsAndArguments) {
  Harness h("cpu");
  uint32_t ids = h.ids({4}, {0, 1, 2, 3}), x = h.add({4}), y = h.add({4});
  auto check = [&](const std::string &kernel, std::vector<uint32_t> operands,
                   std::vector<AttrValue> attrs) {
    LaunchOp launch;
    launch.kernel = KernelId(findKernel(kernel));
    launch.operands = std::move(operands);
    launch.attrs = std::move(attrs);
    return checkLaunch(launch, h.buffers(), CheckContext());
  };
  EXPECT_EQ(check("gelu_fwd", {x, y}, {}), "");
  EXPECT_NE(check("gelu_fwd", {ids, y}, {}).find("must be a float buffer"),
            std::string::npos);
  EXPECT_NE(check("gelu_fwd", {x}, {}).find("takes 2 operands"),
            std::string::npos);
  EXPECT_NE(check("gelu_fwd", {x, 99}, {}).find("names buffer 99"),
            std::string::npos);
  EXPECT_NE(check("scale", {x, y}, {}).find("takes 1 attributes"),
            std::string::npos);
  AttrValue notBool;
  notBool.i = 7;
  EXPECT_NE(check("sum_to", {x, y}, {notBool}).find("'accumulate'"),
            std::string::npos);
  // A kernel's shape rule: an embedding's rows, one per id, forward and
  // backward alike.
  uint32_t table = h.add({5, 3}), rows = h.add({4, 3}), tooFew = h.add({3, 3});
  AttrValue zero;
  EXPECT_EQ(check("embedding_fwd", {table, ids, rows}, {zero}), "");
  EXPECT_NE(check("embedding_fwd", {table, ids, tooFew}, {zero})
                .find("must be ids x hidden"),
            std::string::npos);
  EXPECT_EQ(check("embedding_bwd", {rows, ids, table}, {zero, zero}), "");
  EXPECT_NE(check("embedding_bwd", {tooFew, ids, table}, {zero, zero})
                .find("must be ids x hidden"),
            std::string::npos);
  EXPECT_NE(check("embedding_fwd", {x, ids, rows}, {zero})
                .find("must be [vocab, hidden]"),
            std::string::npos);
}

// Context-parallel attention's keys: every rank's (c times the query rows,
// ring step 0) or one rank's (as many, the ring's step 0 to c - 1); the
// ring's merge takes a log-sum-exp per row of its output.
TEST(KernelChecks, AttentionsRingStepAndMergeShapes) {
  Harness h("cpu");
  const int64_t c = 2;
  uint32_t q = h.add({1, 4, 2, 8}), kOne = h.add({1, 4, 2, 8}),
           kAll = h.add({1, 8, 2, 8}), kThree = h.add({1, 12, 2, 8}),
           o = h.add({1, 4, 2, 8}), lse = h.add({1, 2, 4}),
           lseWrong = h.add({1, 4, 2});
  auto attention = [&](uint32_t k, int64_t step) {
    LaunchOp launch;
    launch.kernel = KernelId::AttentionFwd;
    launch.operands = {q, k, k, o, lse};
    launch.attrs.resize(kernelSpec(launch.kernel).attrs.size());
    using namespace kernels::AttentionFwd;
    launch.attrs[attr::causal].i = 1;
    launch.attrs[attr::group_size].i = 1;
    launch.attrs[attr::context_parallel].i = c;
    launch.attrs[attr::context_rank].i = 1;
    launch.attrs[attr::ring_step].i = step;
    return checkLaunch(launch, h.buffers(), CheckContext());
  };
  EXPECT_EQ(attention(kAll, 0), "");
  EXPECT_EQ(attention(kOne, 0), "");
  EXPECT_EQ(attention(kOne, 1), "");
  EXPECT_NE(attention(kOne, 2).find("ring step 2 is not one of the ring's 2"),
            std::string::npos);
  EXPECT_NE(attention(kOne, -1).find("ring step -1"), std::string::npos);
  EXPECT_NE(attention(kAll, 1).find("keys that are not one rank's"),
            std::string::npos);
  EXPECT_NE(attention(kThree, 0).find("keys of all 2 ranks"),
            std::string::npos);
  auto merge = [&](uint32_t stepLse) {
    LaunchOp launch;
    launch.kernel = KernelId::AttentionMerge;
    launch.operands = {o, stepLse, h.add({1, 4, 2, 8}), lse};
    return checkLaunch(launch, h.buffers(), CheckContext());
  };
  EXPECT_EQ(merge(lse), "");
  EXPECT_NE(merge(lseWrong).find("must be one f32 per row"), std::string::npos);
}

/// The CPU backend's streams: the communication stream runs in its own
/// thread, in issue order; a wait holds a stream until the record it
/// follows has passed.
TEST(CpuStreams, EventsOrderTheTwoStreams) {
  // Compute runs on a thread of its own here, as a GPU runs ahead of its
  // host: only the events order the two streams.
  cpu::CpuBackend backend(/*asyncCompute=*/true);
  backend.createEvents(2);
  std::atomic<int> value{0};
  std::vector<int> seen;
  std::mutex mutex;
  backend.wait(Stream::Comm, 0); // never recorded yet: passes
  // What each observing task does: note the value as it sees it.
  auto observe = [&] {
    std::lock_guard<std::mutex> lock(mutex);
    seen.push_back(value.load());
  };
  backend.submit(Stream::Comm, "first", observe);
  // The communication stream waits for event 0, which the compute stream
  // records after a slow task sets the value.
  backend.submit(Stream::Compute, "set", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 1;
  });
  backend.record(Stream::Compute, 0);
  backend.wait(Stream::Comm, 0);
  backend.submit(Stream::Comm, "second", observe);
  // And the compute stream waits for the communication stream's record.
  backend.submit(Stream::Comm, "slow", [&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    value = 2;
  });
  backend.record(Stream::Comm, 1);
  backend.wait(Stream::Compute, 1);
  backend.submit(Stream::Compute, "after", observe);
  backend.synchronize();
  ASSERT_EQ(seen.size(), 3u);
  EXPECT_EQ(seen[0], 0);
  EXPECT_EQ(seen[1], 1);
  EXPECT_EQ(seen[2], 2);
  EXPECT_GT(backend.exposedSeconds(), 0.0);
}

TEST(CpuStreams, AFailureOnTheCommunicationStreamReachesTheHost) {
  cpu::CpuBackend backend;
  backend.createEvents(1);
  backend.submit(Stream::Comm, "failing",
                 [] { throw std::runtime_error("peer 3 never answered"); });
  backend.record(Stream::Comm, 0);
  try {
    backend.wait(Stream::Compute, 0);
    backend.synchronize();
    FAIL() << "the failure was lost";
  } catch (const std::runtime_error &error) {
    EXPECT_STREQ(error.what(), "peer 3 never answered");
  }
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
