//===- CollectivesTest.cpp - local collectives against the ring -----------===//
//
// LocalCollectives computes every rank's result in one pass, in the ring's
// order: the same bits as RingCollectives, which the parity suites check
// against one device. Here both run on fresh random inputs for groups of
// 2, 3 and 4 ranks (threads over the local transport), every kind of
// collective (a shift along the first dimension only: it keeps its
// shape), along the first and a later dimension, in f32 and bf16, and
// their outputs are compared bit for bit. The device-side communicator's
// kernels (ranks sharing a GPU) run the same collectives on the simt model
// by their launch contract (CollectiveLaunch.h), and must give the same
// bits too.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/CudaKernel.h"
#include "runtime/base/BFloat16.h"
#include "runtime/comm/LocalCollectives.h"
#include "runtime/comm/Transport.h"
#include "runtime/cuda/CollectiveLaunch.h"
#include "runtime/simt/Simt.h"

#include "TestRandom.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

using namespace strata::runtime;

namespace {

Buffer bufferOf(std::vector<int64_t> shape, DType dtype) {
  Buffer b;
  b.dtype = dtype;
  b.shape = shape;
  b.elements = 1;
  for (int64_t d : shape)
    b.elements *= d;
  b.bytes = uint64_t(b.elements) * dtypeBytes(dtype);
  return b;
}

/// Random values of `buffer`'s dtype, as its bytes.
std::vector<uint8_t> randomBytes(const Buffer &buffer) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<uint8_t> bytes(buffer.bytes);
  for (int64_t e = 0; e < buffer.elements; ++e) {
    float v = normal(rng());
    if (buffer.dtype == DType::BF16) {
      uint16_t h = floatToBf16(v);
      std::memcpy(bytes.data() + 2 * e, &h, 2);
    } else {
      std::memcpy(bytes.data() + 4 * e, &v, 4);
    }
  }
  return bytes;
}

struct Case {
  CollectiveKind kind;
  int32_t dim;
  DType dtype;
};

/// A collective of `n` ranks whose blocks are [2, 3, 5] (odd sizes:
/// uneven ring chunks): its buffers and op, random inputs, and each rank's
/// result as computeCollective gives it.
struct Setup {
  Buffer in, out;
  CollectiveOp op;
  std::vector<std::vector<uint8_t>> inputs, expected;

  Setup(int n, const Case &c) {
    std::vector<int64_t> block = {2, 3, 5}, whole = block;
    whole[c.dim] *= n;
    in = bufferOf(c.kind == CollectiveKind::ReduceScatter ? whole : block,
                  c.dtype);
    out =
        bufferOf(c.kind == CollectiveKind::AllGather ? whole : block, c.dtype);
    op.kind = c.kind;
    op.dim = c.dim;
    op.dtype = c.dtype;
    for (int r = 0; r < n; ++r) {
      inputs.push_back(randomBytes(in));
      expected.emplace_back(out.bytes, 0xFF);
    }
    std::vector<std::vector<uint8_t>> copies = inputs;
    std::vector<CollectiveOperands> ranks;
    for (int r = 0; r < n; ++r)
      ranks.push_back({{copies[r].data(), &in}, {expected[r].data(), &out}});
    computeCollective(op, ranks);
  }
};

/// Runs the collective over `n` ranks through the ring (threads over the
/// local transport); expects computeCollective's bytes in every output.
void compare(int n, const Case &c) {
  Setup s(n, c);
  std::vector<std::vector<uint8_t>> ringIn = s.inputs, ringOut(n);
  Plan plan;
  plan.tensorParallel = uint32_t(n);
  plan.groups.push_back(Group{{0}, {}});
  auto hub = makeLocalHub(n);
  std::vector<std::thread> threads;
  for (int r = 0; r < n; ++r) {
    ringOut[r].assign(s.out.bytes, 0xFF);
    threads.emplace_back([&, r] {
      auto transport = makeLocalTransport(hub, r);
      RingCollectives ring(*transport, runNow, std::chrono::seconds(30));
      // (An ASSERT would end this thread alone: the others would wait.)
      EXPECT_EQ(ring.createGroups(plan, uint32_t(r)), "");
      ring.collective(Stream::Compute, s.op, {ringIn[r].data(), &s.in},
                      {ringOut[r].data(), &s.out}, "test");
    });
  }
  for (std::thread &thread : threads)
    thread.join();
  for (int r = 0; r < n; ++r)
    EXPECT_EQ(ringOut[r], s.expected[r])
        << collectiveName(c.kind) << " dim " << c.dim << " over " << n
        << " ranks, rank " << r << (c.dtype == DType::BF16 ? " (bf16)" : "");
}

TEST(LocalCollectives, EveryCollectiveGivesTheRingsBits) {
  for (int n : {2, 3, 4})
    for (DType dtype : {DType::F32, DType::BF16}) {
      for (CollectiveKind kind :
           {CollectiveKind::AllReduceSum, CollectiveKind::AllReduceMax})
        compare(n, {kind, 0, dtype});
      for (CollectiveKind kind :
           {CollectiveKind::AllGather, CollectiveKind::ReduceScatter})
        for (int32_t dim : {0, 1, 2})
          compare(n, {kind, dim, dtype});
      compare(n, {CollectiveKind::Shift, 0, dtype});
    }
}

// A shift (the ring of context parallelism's attention): each rank's
// output is the previous rank's input, the first's the last's.
TEST(LocalCollectives, AShiftGivesEachRankThePreviousRanksInput) {
  for (int n : {1, 2, 3, 4}) {
    ::Setup s(n, {CollectiveKind::Shift, 0, DType::F32});
    for (int r = 0; r < n; ++r)
      EXPECT_EQ(s.expected[r], s.inputs[(r + n - 1) % n])
          << "rank " << r << " of " << n;
  }
}

/// Runs `op` over `n` ranks with the device-side communicator's kernel on
/// the simt model and with computeCollective; expects the same bytes.
/// `inPlace`: each rank's output and input share bytes as the plans make
/// them (the same buffer for an all-reduce; for a reduce-scatter along
/// dim 0 the output is the rank's block of its input, for an all-gather
/// the input the rank's block of its output).
void compareOnDeviceKernels(int n, const Case &c, bool inPlace) {
  Setup s(n, c);
  const Buffer &in = s.in, &out = s.out;
  const CollectiveOp &op = s.op;
  bool gather = c.kind == CollectiveKind::AllGather;
  bool scatter = c.kind == CollectiveKind::ReduceScatter;
  // Each rank's memory: one allocation holding both, or two.
  std::vector<std::vector<uint8_t>> memory(n), outMemory(n);
  std::vector<CollectiveOperands> ranks;
  for (int r = 0; r < n; ++r) {
    uint8_t *inAt, *outAt;
    if (!inPlace) {
      memory[r] = s.inputs[r];
      outMemory[r].assign(out.bytes, 0xFF);
      inAt = memory[r].data();
      outAt = outMemory[r].data();
    } else if (scatter) {
      memory[r] = s.inputs[r];
      inAt = memory[r].data();
      outAt = inAt + r * out.bytes;
    } else if (gather) {
      memory[r].assign(out.bytes, 0xFF);
      outAt = memory[r].data();
      inAt = outAt + r * in.bytes;
      std::memcpy(inAt, s.inputs[r].data(), in.bytes);
    } else {
      memory[r] = s.inputs[r];
      inAt = outAt = memory[r].data();
    }
    ranks.push_back({{inAt, &in}, {outAt, &out}, nullptr});
    ASSERT_TRUE(cuda::safeCollectiveAliasing(op, ranks.back(), r));
  }
  cuda::CollectiveLaunch launch = cuda::collectiveLaunch(op, ranks);
  std::string error;
  auto kernel = simt::Kernel::build(strata::codegen::collectiveKernelsUnit(),
                                    launch.name(), error);
  ASSERT_TRUE(kernel) << error;
  std::array<void *, 4> args = launch.args();
  ASSERT_EQ(kernel->launch({launch.blocks, 1, 1}, {256, 1, 1}, 0, args.data()),
            "");
  for (int r = 0; r < n; ++r) {
    std::vector<uint8_t> got(static_cast<const uint8_t *>(ranks[r].out.data),
                             static_cast<const uint8_t *>(ranks[r].out.data) +
                                 out.bytes);
    EXPECT_EQ(got, s.expected[r])
        << launch.name() << " dim " << c.dim << " over " << n << " ranks, rank "
        << r << (inPlace ? " in place" : "");
  }
}

TEST(DeviceCollectiveKernels, GiveTheCpusBitsOnTheSimtModel) {
  for (int n : {2, 3, 4})
    for (DType dtype : {DType::F32, DType::BF16}) {
      for (CollectiveKind kind :
           {CollectiveKind::AllReduceSum, CollectiveKind::AllReduceMax})
        for (bool inPlace : {false, true})
          compareOnDeviceKernels(n, {kind, 0, dtype}, inPlace);
      for (CollectiveKind kind :
           {CollectiveKind::AllGather, CollectiveKind::ReduceScatter}) {
        for (int32_t dim : {0, 1, 2})
          compareOnDeviceKernels(n, {kind, dim, dtype}, false);
        compareOnDeviceKernels(n, {kind, 0, dtype}, true);
      }
    }
}

TEST(DeviceCollectiveKernels, APartialOverlapIsNotSafe) {
  // A thread per element reads every rank's element before it writes: an
  // output that overlaps its input elsewhere than where the plans put it
  // would read what another thread wrote.
  Buffer b = bufferOf({8}, DType::F32);
  std::vector<float> memory(16);
  CollectiveOp op;
  op.kind = CollectiveKind::AllReduceSum;
  CollectiveOperands shifted{
      {memory.data(), &b}, {memory.data() + 1, &b}, nullptr};
  EXPECT_FALSE(cuda::safeCollectiveAliasing(op, shifted, 0));
  CollectiveOperands apart{
      {memory.data(), &b}, {memory.data() + 8, &b}, nullptr};
  EXPECT_TRUE(cuda::safeCollectiveAliasing(op, apart, 0));
}

TEST(LocalCollectives, ASumInAnotherOrderIsCaught) {
  // The comparison tells orders apart: three values whose sum in f32
  // depends on the order (1e8 + 1 - 1e8).
  Buffer b = bufferOf({3}, DType::F32);
  float x[3][3] = {
      {1e8f, 1e8f, 1e8f}, {1.0f, 1.0f, 1.0f}, {-1e8f, -1e8f, -1e8f}};
  float y[3][3];
  CollectiveOp op;
  op.kind = CollectiveKind::AllReduceSum;
  std::vector<CollectiveOperands> ranks;
  for (int r = 0; r < 3; ++r)
    ranks.push_back({{x[r], &b}, {y[r], &b}});
  computeCollective(op, ranks);
  // Element 0 is chunk 0: rank 1's, + rank 2's, + rank 0's: (1 - 1e8) +
  // 1e8 = 0 in f32; element 2 is chunk 2: rank 0's + rank 1's + rank 2's:
  // (1e8 + 1) - 1e8 = 0; element 1, chunk 1: rank 2's + rank 0's + rank
  // 1's: (-1e8 + 1e8) + 1 = 1.
  EXPECT_EQ(y[0][0], 0.0f);
  EXPECT_EQ(y[0][1], 1.0f);
  EXPECT_EQ(y[0][2], 0.0f);
  EXPECT_EQ(y[2][1], 1.0f);
}

} // namespace

namespace {

TEST(CollectiveHub, TheLeadersResultReachesEveryRankAndIsReleasedOnce) {
  // What the device-side communicator relies on: the last to arrive leads
  // (its stream runs the kernel), every rank uses the result (its stream
  // waits for the leader's event) before any frees it, and it is freed
  // once, after the last use.
  auto hub = makeCollectiveHub();
  const std::vector<int> ranks = {3, 5, 7};
  std::atomic<int> leads{0}, uses{0}, releases{0};
  int token = 42;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < ranks.size(); ++i)
    threads.emplace_back([&, i] {
      for (uint64_t count = 0; count < 50; ++count)
        hub->meet(
            {&ranks, 0, count, i, ranks[i]}, {},
            [&](const std::vector<CollectiveOperands> &all) -> void * {
              EXPECT_EQ(all.size(), ranks.size());
              ++leads;
              return &token;
            },
            [&](void *result) {
              EXPECT_EQ(result, &token);
              ++uses;
            },
            [&](void *result) {
              EXPECT_EQ(result, &token);
              // Every rank of this meeting has used it, none of the next.
              EXPECT_EQ(uses.load(), 3 * (releases.load() + 1));
              ++releases;
            },
            std::chrono::seconds(30), "test", "here");
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(leads, 50);
  EXPECT_EQ(uses, 150);
  EXPECT_EQ(releases, 50);
}

TEST(CollectiveHub, AMeetingNamesTheRanksThatDidNotCome) {
  auto hub = makeCollectiveHub();
  const std::vector<int> ranks = {0, 1, 2};
  std::string error;
  std::thread late([&] {
    try {
      hub->meet(
          {&ranks, 1, 0, 1, 1}, {},
          [](const std::vector<CollectiveOperands> &) -> void * {
            return nullptr;
          },
          nullptr, nullptr, std::chrono::milliseconds(200), "all_reduce_sum",
          "program optimizer");
    } catch (const CommTimeout &timeout) {
      error = timeout.what();
    }
  });
  late.join();
  EXPECT_EQ(error, "rank 1: timed out in all_reduce_sum (program optimizer) "
                   "waiting for rank 0, 2");
}

TEST(CollectiveHub, TheLeadersWorkDoesNotCountAgainstTheTimeout) {
  // Every rank came; the leader's computation outlasting the timeout is
  // no rank missing. (The timeout leaves a loaded machine a second to start
  // the second thread; the leader's work outlasts it by half as much.)
  auto hub = makeCollectiveHub();
  const std::vector<int> ranks = {0, 1};
  std::string errors[2];
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r)
    threads.emplace_back([&, r] {
      try {
        hub->meet(
            {&ranks, 1, 1, size_t(r), r}, {},
            [](const std::vector<CollectiveOperands> &) -> void * {
              std::this_thread::sleep_for(std::chrono::milliseconds(1500));
              return nullptr;
            },
            nullptr, nullptr, std::chrono::milliseconds(1000), "all_reduce_sum",
            "program optimizer");
      } catch (const CommTimeout &timeout) {
        errors[r] = timeout.what();
      }
    });
  for (std::thread &thread : threads)
    thread.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

} // namespace
