//===- CudaHostTest.cpp - the cuda backend's host side, without a GPU -----===//
//
// What the cuda backend decides on the host, tested where no GPU is: the
// row-major gemm of the plan turned into cuBLASLt's column-major problem
// (run here by a column-major reference with cuBLASLt's semantics and
// compared with the CPU backend's gemm on random inputs), the launch
// contract's parameters, the alignment cuBLASLt is promised, and the
// checks that refuse a plan before anything runs.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/Transport.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/cuda/DeviceChecks.h"
#include "runtime/cuda/Nccl.h"
#include "runtime/device/KernelArgs.h"

#include "TestRandom.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <mutex>
#include <random>
#include <set>
#include <thread>

using namespace strata::runtime;
using namespace strata::runtime::cuda;

namespace {

std::vector<float> randomFloats(size_t n) {
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> values(n);
  for (float &v : values)
    v = normal(rng());
  return values;
}

/// cuBLASLt's D = alpha·op(A)·op(B) + beta·C (C = D) with a bias per row
/// of D, column-major, as its documentation defines it, in double.
void columnMajorReference(const ColumnMajorGemm &g, float alpha, float beta,
                          const float *first, const float *second, float *d,
                          const float *bias) {
  auto element = [](const float *x, const ColumnMajorGemm::Layout &l,
                    bool transpose, uint64_t i, uint64_t j) {
    return transpose ? x[j + i * l.ld] : x[i + j * l.ld];
  };
  uint64_t rows = g.d.rows, cols = g.d.cols;
  uint64_t inner = g.transposeFirst ? g.first.rows : g.first.cols;
  for (int64_t batch = 0; batch < g.batch; ++batch) {
    const float *f = first + batch * g.first.stride;
    const float *s = second + batch * g.second.stride;
    float *out = d + batch * g.d.stride;
    for (uint64_t r = 0; r < rows; ++r)
      for (uint64_t c = 0; c < cols; ++c) {
        double sum = 0;
        for (uint64_t p = 0; p < inner; ++p)
          sum += double(element(f, g.first, g.transposeFirst, r, p)) *
                 element(s, g.second, g.transposeSecond, p, c);
        double value = alpha * sum + beta * out[r + c * g.d.ld];
        if (bias)
          value += bias[r];
        out[r + c * g.d.ld] = float(value);
      }
  }
}

struct GemmCase {
  int64_t m, n, k;
  bool ta, tb;
  int64_t pad; // extra leading-dimension elements
  int64_t batch;
  float alpha, beta;
  bool bias;
};

TEST(CudaHost, ColumnMajorGemmIsThePlansRowMajorGemm) {
  std::vector<GemmCase> cases = {
      {3, 5, 4, false, false, 0, 1, 1.0f, 0.0f, false},
      {3, 5, 4, true, false, 2, 1, 1.0f, 1.0f, false},
      {6, 2, 7, false, true, 1, 1, 0.5f, 0.0f, true},
      {4, 4, 3, true, true, 3, 1, 1.0f, 1.0f, false},
      {5, 3, 2, false, true, 0, 3, 1.0f, 0.0f, false},
      {2, 6, 5, true, false, 1, 2, 2.0f, 1.0f, false},
      {7, 9, 1, false, false, 0, 1, 1.0f, 0.0f, true},
  };
  for (const GemmCase &c : cases) {
    GemmOp op;
    op.m = c.m, op.n = c.n, op.k = c.k;
    op.transposeA = c.ta, op.transposeB = c.tb;
    // Row-major storage: A is [m, k] or [k, m], B [k, n] or [n, k].
    int64_t aRows = c.ta ? c.k : c.m, aCols = c.ta ? c.m : c.k;
    int64_t bRows = c.tb ? c.n : c.k, bCols = c.tb ? c.k : c.n;
    op.lda = aCols + c.pad, op.ldb = bCols + c.pad, op.ldd = c.n + c.pad;
    op.batch = c.batch;
    op.strideA = aRows * op.lda, op.strideB = bRows * op.ldb;
    op.strideD = c.m * op.ldd;
    op.alpha = c.alpha, op.beta = c.beta;
    op.epilogue = c.bias ? Epilogue::Bias : Epilogue::None;
    std::vector<float> a = randomFloats(op.strideA * c.batch),
                       b = randomFloats(op.strideB * c.batch),
                       d = randomFloats(op.strideD * c.batch),
                       bias = randomFloats(c.n);
    std::vector<float> expected = d, got = d;
    cpu::gemm(op, a.data(), b.data(), expected.data(), bias.data(), nullptr);

    ColumnMajorGemm g = columnMajor(op);
    // What cuBLASLt checks of a layout: D is [n, m], ld at least the rows.
    EXPECT_EQ(g.d.rows, uint64_t(c.n));
    EXPECT_EQ(g.d.cols, uint64_t(c.m));
    for (const auto *l : {&g.first, &g.second, &g.d})
      EXPECT_GE(l->ld, int64_t(l->rows));
    columnMajorReference(g, op.alpha, op.beta, b.data(), a.data(), got.data(),
                         c.bias ? bias.data() : nullptr);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], expected[i], 1e-4 * (1 + std::fabs(expected[i])))
          << "m " << c.m << " n " << c.n << " k " << c.k << " ta " << c.ta
          << " tb " << c.tb << " batch " << c.batch << " at " << i;
  }
}

TEST(CudaHost, KernelArgsFollowTheContract) {
  // attention_fwd: q, k, v, o, lse, then the five Int attributes; causal
  // (a Bool) is a constant of the source, not a parameter.
  LaunchOp op;
  op.kernel = KernelId::AttentionFwd;
  op.attrs.resize(kernelSpec(KernelId::AttentionFwd).attrs.size());
  op.attrs[kernels::AttentionFwd::attr::causal].i = 1;
  op.attrs[kernels::AttentionFwd::attr::group_size].i = 2;
  op.attrs[kernels::AttentionFwd::attr::query_head_offset].i = -5;
  op.attrs[kernels::AttentionFwd::attr::context_parallel].i = 4;
  op.attrs[kernels::AttentionFwd::attr::context_rank].i = 3;
  op.attrs[kernels::AttentionFwd::attr::ring_step].i = 2;
  std::vector<Operand> operands(5);
  for (size_t i = 0; i < operands.size(); ++i)
    operands[i].data = reinterpret_cast<void *>(uintptr_t(0x1000 * (i + 1)));
  KernelArgs args;
  args.build(op, operands);
  std::vector<uint64_t> expected = {
      0x1000, 0x2000, 0x3000, 0x4000, 0x5000, 2, uint64_t(int64_t(-5)), 4, 3,
      2};
  EXPECT_EQ(args.values(), expected);
  for (size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(*static_cast<uint64_t *>(args.params()[i]), expected[i]);

  // adamw without its optional master: a null pointer in its place, then
  // `part` (segments and windows are constants).
  LaunchOp adamw;
  adamw.kernel = KernelId::AdamW;
  adamw.attrs.resize(3);
  adamw.attrs[kernels::AdamW::attr::part].i = 7;
  std::vector<Operand> six(6);
  for (size_t i = 0; i < six.size(); ++i)
    six[i].data = reinterpret_cast<void *>(uintptr_t(0x100 * (i + 1)));
  six.push_back(Operand{}); // the executor's operand for kNoBuffer
  args.build(adamw, six);
  expected = {0x100, 0x200, 0x300, 0x400, 0x500, 0x600, 0, 7};
  EXPECT_EQ(args.values(), expected);
}

TEST(CudaHost, AlignmentPromisedToCublasLt) {
  Buffer buffer;
  buffer.offset = 4096;
  EXPECT_EQ(bufferAlignment(buffer), 256u);
  buffer.offset = 64 * 3;
  EXPECT_EQ(bufferAlignment(buffer), 64u);
  buffer.offset = 512, buffer.slotStride = 1024 + 16;
  EXPECT_EQ(bufferAlignment(buffer), 16u);
}

DeviceInfo device(const std::string &name, int major, int minor) {
  DeviceInfo info;
  info.name = name, info.major = major, info.minor = minor;
  return info;
}

TEST(CudaHost, ArchitectureCheck) {
  DeviceInfo a100 = device("A100", 8, 0), h100 = device("H100", 9, 0),
             b200 = device("B200", 10, 0), t4 = device("T4", 7, 5);
  EXPECT_EQ(checkArchitecture("sm_80", a100), "");
  EXPECT_EQ(checkArchitecture("sm_80", h100), "");
  EXPECT_EQ(checkArchitecture("sm_80", b200), "");
  EXPECT_EQ(checkArchitecture("sm_90a", h100), "");
  EXPECT_EQ(checkArchitecture("sm_90a", a100),
            "the plan was compiled for sm_90a (compute capability 9.0 only); "
            "this GPU is A100 (compute capability 8.0): recompile with "
            "--cuda-arch sm_80");
  EXPECT_EQ(checkArchitecture("sm_90a", b200),
            "the plan was compiled for sm_90a (compute capability 9.0 only); "
            "this GPU is B200 (compute capability 10.0): recompile with "
            "--cuda-arch sm_80");
  EXPECT_EQ(checkArchitecture("sm_80", t4),
            "the plan was compiled for sm_80 (compute capability 8.0 or "
            "later); this GPU is T4 (compute capability 7.5): strata needs "
            "compute capability 8.0 or later");
  for (const char *bad : {"", "sm_", "sm_x0", "compute_80", "sm_8000000a"})
    EXPECT_EQ(checkArchitecture(bad, h100), "the plan's CUDA architecture '" +
                                                std::string(bad) +
                                                "' is not one strata knows");
}

TEST(CudaHost, MemoryAndSharedMemoryChecks) {
  Plan plan;
  plan.ranks[0].persistentBytes = 3 << 20;
  plan.ranks[0].workspaceBytes = 1 << 20;
  plan.ranks[1].persistentBytes = 3 << 20;
  plan.ranks[1].stashBytes = 1 << 20;
  DeviceInfo gpu = device("H100", 9, 0);
  gpu.freeBytes = 9 << 20;
  EXPECT_EQ(checkDeviceMemory(plan, 0, 2, 0, gpu), "");
  EXPECT_EQ(checkDeviceMemory(plan, 0, 2, 1 << 19, gpu), "");
  EXPECT_EQ(checkDeviceMemory(plan, 0, 2, 1 << 20, gpu),
            "the 2 ranks on this GPU need 10.00 MiB (10,485,760 bytes: "
            "persistent, workspace and stash arenas and cuBLASLt's "
            "workspaces); H100 has 9.00 MiB free");
  EXPECT_EQ(checkDeviceMemory(plan, 1, 1, 6 << 20, gpu),
            "rank 1 needs 10.00 MiB (10,485,760 bytes: persistent, workspace "
            "and stash arenas and cuBLASLt's workspaces); H100 has 9.00 MiB "
            "free");

  plan.code.push_back({"attention_fwd_0", "attention_fwd", "", ""});
  LaunchOp launch;
  launch.kernel = KernelId::AttentionFwd;
  launch.code = 0;
  launch.sharedBytes = 100 * 1024;
  Instruction instruction;
  instruction.op = launch;
  plan.ranks[0].programs.push_back({});
  plan.ranks[0].programs[0].instructions.push_back(instruction);
  gpu.sharedPerBlockOptIn = 227 * 1024;
  EXPECT_EQ(checkSharedMemory(plan, plan.ranks[0], gpu), "");
  gpu.sharedPerBlockOptIn = 99 * 1024;
  EXPECT_EQ(checkSharedMemory(plan, plan.ranks[0], gpu),
            "kernel attention_fwd_0 needs 102,400 bytes of shared memory; "
            "H100 allows 101,376");
}

} // namespace

//===----------------------------------------------------------------------===//
// NCCL's communicators, with a stand-in for NCCL
//===----------------------------------------------------------------------===//

namespace {

/// What the stand-in saw: each rank's joins (set size, its index, the id).
struct Join {
  int nranks, index;
  std::string id;
};
std::mutex fakeMutex;
std::map<std::thread::id, std::vector<Join>> fakeJoins;
int fakeIds = 0;
thread_local int fakeGroupDepth = 0; // the calling rank's group calls open

ncclResult_t fakeUniqueId(ncclUniqueId *id) {
  std::lock_guard<std::mutex> lock(fakeMutex);
  std::memset(id, 0, sizeof *id);
  std::snprintf(id->internal, sizeof id->internal, "id-%d", fakeIds++);
  return ncclSuccess;
}
ncclResult_t fakeInit(ncclComm_t *comm, int nranks, ncclUniqueId id, int rank) {
  std::lock_guard<std::mutex> lock(fakeMutex);
  // A join outside a group call would block until every member joined.
  EXPECT_GT(fakeGroupDepth, 0);
  fakeJoins[std::this_thread::get_id()].push_back({nranks, rank, id.internal});
  // A handle of its own for every communicator made.
  static uintptr_t made = 0x1000;
  *comm = reinterpret_cast<ncclComm_t>(made++);
  return ncclSuccess;
}
ncclResult_t fakeGroupStart() {
  ++fakeGroupDepth;
  return ncclSuccess;
}
ncclResult_t fakeGroupEnd() {
  --fakeGroupDepth;
  return ncclSuccess;
}

/// The stand-in for NCCL, its record cleared.
NcclApi fakeNccl() {
  std::lock_guard<std::mutex> lock(fakeMutex);
  fakeJoins.clear();
  fakeIds = 0;
  NcclApi api;
  api.ncclGetUniqueId = fakeUniqueId;
  api.ncclCommInitRank = fakeInit;
  api.ncclGroupStart = fakeGroupStart;
  api.ncclGroupEnd = fakeGroupEnd;
  return api;
}

/// Each rank of `plan` creates its communicators on a thread of its own,
/// over a local transport; `ids[r]` is rank r's thread (fakeJoins' key).
void createAll(const NcclApi &api, const Plan &plan,
               std::vector<std::map<CommunicatorSet, ncclComm_t>> &comms,
               std::vector<std::thread::id> &ids) {
  int world = int(plan.world());
  comms.assign(size_t(world), {});
  ids.assign(size_t(world), {});
  auto hub = makeLocalHub(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r)
    threads.emplace_back([&, r] {
      ids[size_t(r)] = std::this_thread::get_id();
      auto transport = makeLocalTransport(hub, r);
      EXPECT_EQ(createCommunicators(api, plan, uint32_t(r), *transport,
                                    Clock::now() + std::chrono::seconds(30),
                                    comms[size_t(r)]),
                "");
      EXPECT_EQ(fakeGroupDepth, 0); // every group call closed
    });
  for (std::thread &thread : threads)
    thread.join();
}

constexpr uint8_t kOnCompute = 1u << int(Stream::Compute);
constexpr uint8_t kOnComm = 1u << int(Stream::Comm);

TEST(Nccl, EachSetOfRanksAndStreamGetsOneCommunicatorAndOneId) {
  // t=2, d=2, p=2: tp groups, dp groups, the tied embedding's first and
  // last stage, the gradient norm over dp and pp, and each pipeline line.
  Plan plan;
  plan.tensorParallel = plan.dataParallel = plan.pipelineParallel = 2;
  plan.groups = {{{0}, {}, kOnCompute},
                 {{1}, {}, kOnComm},
                 {{2}, {0, 1}, kOnComm},
                 {{1, 2}, {}, kOnCompute}};
  NcclApi api = fakeNccl();
  std::vector<std::map<CommunicatorSet, ncclComm_t>> comms;
  std::vector<std::thread::id> ids;
  createAll(api, plan, comms, ids);
  // The tied group (stages 0 and 1) and the pipeline line are the same
  // ranks, each with a communicator of its own: the line's transfers run on
  // four streams of their own, each with its communicator. Rank 0 (tp 0,
  // dp 0, pp 0): tp {0, 1}, dp {0, 2}, the tied group {0, 4}, dp and pp
  // {0, 2, 4, 6}, the line {0, 4} on each transfer stream.
  std::vector<CommunicatorSet> expected = {
      {{0, 1}, Stream::Compute},       {{0, 2}, Stream::Comm},
      {{0, 4}, Stream::Comm},          {{0, 2, 4, 6}, Stream::Compute},
      {{0, 4}, Stream::ActivationsUp}, {{0, 4}, Stream::ActivationsDown},
      {{0, 4}, Stream::GradientsUp},   {{0, 4}, Stream::GradientsDown}};
  EXPECT_EQ(communicatorSets(plan, 0), expected);
  std::map<std::string, std::vector<int>> byId; // id: the ranks that joined
  for (int r = 0; r < int(plan.world()); ++r) {
    std::vector<CommunicatorSet> sets = communicatorSets(plan, uint32_t(r));
    EXPECT_EQ(comms[size_t(r)].size(), sets.size()) << "rank " << r;
    std::set<ncclComm_t> distinct;
    for (auto &[set, comm] : comms[size_t(r)])
      distinct.insert(comm);
    EXPECT_EQ(distinct.size(), sets.size()) << "rank " << r;
    EXPECT_FALSE(distinct.count(nullptr)) << "rank " << r;
    const std::vector<Join> &joins = fakeJoins[ids[size_t(r)]];
    ASSERT_EQ(joins.size(), sets.size());
    for (size_t s = 0; s < sets.size(); ++s) {
      EXPECT_EQ(joins[s].nranks, int(sets[s].ranks.size()));
      EXPECT_EQ(sets[s].ranks[size_t(joins[s].index)], r);
      byId[joins[s].id].push_back(r);
    }
  }
  // Every set of ranks and stream shares one id, made once: 4 tp sets, 4
  // dp sets, 4 tied groups, 2 dp-and-pp sets, 4 lines four times.
  EXPECT_EQ(byId.size(), 30u);
  EXPECT_EQ(fakeIds, 30);
  for (auto &[id, ranks] : byId)
    EXPECT_TRUE(ranks.size() == 2 || ranks.size() == 4) << id;
}

TEST(Nccl, RanksThatTalkOnTwoStreamsGetACommunicatorOnEach) {
  // c=2, d=1: attention's exchanges over cp on the compute stream, the
  // gradients' reduction over dp and cp (the same two ranks) on the
  // communication stream, and a group whose collectives run on both. NCCL
  // orders one communicator's work only within a stream: one each.
  Plan plan;
  plan.contextParallel = 2;
  plan.groups = {{{3}, {}, kOnCompute},
                 {{1, 3}, {}, kOnComm},
                 {{3}, {}, kOnCompute | kOnComm},
                 {{0}, {}, kOnCompute}}; // t = 1: no communicator
  std::vector<CommunicatorSet> expected = {{{0, 1}, Stream::Compute},
                                           {{0, 1}, Stream::Comm}};
  EXPECT_EQ(communicatorSets(plan, 0), expected);
  NcclApi api = fakeNccl();
  std::vector<std::map<CommunicatorSet, ncclComm_t>> comms;
  std::vector<std::thread::id> ids;
  createAll(api, plan, comms, ids);
  for (int r = 0; r < 2; ++r) {
    ASSERT_EQ(comms[size_t(r)].size(), 2u) << "rank " << r;
    EXPECT_NE(comms[size_t(r)].at({{0, 1}, Stream::Compute}),
              comms[size_t(r)].at({{0, 1}, Stream::Comm}))
        << "rank " << r;
  }
  EXPECT_EQ(fakeIds, 2);
}

TEST(Nccl, AGroupOfSomeStagesIsNotARankOfAnotherStagesSet) {
  // p=3 with the tied embedding's group on the first and last stage: the
  // middle stage's rank is in the pipeline line only.
  Plan plan;
  plan.pipelineParallel = 3;
  plan.groups = {{{2}, {0, 2}, kOnComm}};
  std::vector<CommunicatorSet> line;
  for (Stream stream : kTransferStreams)
    line.push_back({{0, 1, 2}, stream});
  std::vector<CommunicatorSet> first = line;
  first.insert(first.begin(), {{0, 2}, Stream::Comm});
  EXPECT_EQ(communicatorSets(plan, 0), first);
  EXPECT_EQ(communicatorSets(plan, 1), line);
  NcclApi api = fakeNccl();
  std::vector<std::map<CommunicatorSet, ncclComm_t>> comms;
  std::vector<std::thread::id> ids;
  createAll(api, plan, comms, ids);
  // The tied group's apart from the line's, which every rank has.
  EXPECT_EQ(comms[0].size(), 5u);
  EXPECT_EQ(comms[1].size(), 4u);
  EXPECT_EQ(comms[2].size(), 5u);
  for (int r = 0; r < 3; ++r)
    for (Stream stream : kTransferStreams)
      EXPECT_NE(comms[size_t(r)].at({{0, 1, 2}, stream}), nullptr)
          << "rank " << r;
}

} // namespace
