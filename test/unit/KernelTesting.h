//===- KernelTesting.h - what the kernel tests share ------------*- C++ -*-===//
//
// What every kernel test file shares (test/unit/Kernels*Test.cpp, one per
// kernel family): random inputs, the devices a test runs on (the CPU, a
// GPU with kernels generated for sm_80 or sm_90a, simt), a one-instruction
// plan on a device (Harness), the comparison, the vector-Jacobian product
// by central differences, and the float64 references.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TEST_UNIT_KERNELTESTING_H
#define STRATA_TEST_UNIT_KERNELTESTING_H

#include "compiler/codegen/CudaKernel.h"
#include "compiler/codegen/Nvrtc.h"
#include "runtime/base/BFloat16.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/plan/ContextPositions.h"
#include "runtime/plan/PlanCheck.h"
#include "runtime/simt/SimtBackend.h"

#include "TestRandom.h"

#include <gtest/gtest.h>

#include <array>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <numeric>
#include <random>
#include <string_view>
#include <thread>

namespace strata::kernel_testing {

// The tests name the runtime's kernels and buffers unqualified: a file's
// `using namespace strata::kernel_testing` brings these along.
using namespace strata::runtime;
using Vec = std::vector<double>;

inline Vec randomVec(size_t n, double scale = 1.0) {
  std::normal_distribution<double> normal(0.0, scale);
  Vec v(n);
  for (double &x : v)
    x = static_cast<float>(normal(rng())); // representable in f32
  return v;
}

/// `v` rounded to bf16, as a bf16 buffer holds it.
inline Vec roundedToBf16(Vec v) {
  for (double &x : v)
    x = roundToBf16(float(x));
  return v;
}

inline std::vector<int32_t> randomIds(size_t n, int32_t bound) {
  std::uniform_int_distribution<int32_t> uniform(0, bound - 1);
  std::vector<int32_t> ids(n);
  for (int32_t &id : ids)
    id = uniform(rng());
  return ids;
}

inline int64_t count(const std::vector<int64_t> &shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

/// A kernel argument given by name; the kernel's others default to zero.
struct Arg {
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> list;
};
inline Arg intArg(int64_t v) { return {v, 0, {}}; }
inline Arg boolArg(bool v) { return {v ? 1 : 0, 0, {}}; }
inline Arg floatArg(double v) { return {0, v, {}}; }
inline Arg listArg(std::vector<int64_t> v) { return {0, 0, std::move(v)}; }

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

/// Where a test's kernels run: "cpu", a GPU with kernels generated for
/// "sm_80" or "sm_90a", or "simt": sm_80's kernels on the host. A GPU's
/// name ending in "_cudnn" ("sm_90a_cudnn") runs attention through cuDNN
/// (strata-run --attention-backend cudnn), the rest as the GPU's.
using Device = std::string;
constexpr std::string_view kCudnnSuffix = "_cudnn";
/// Whether `device` runs attention through cuDNN.
inline bool throughCudnn(const Device &device) {
  return device.ends_with(kCudnnSuffix);
}
/// The architecture `device`'s kernels are generated for.
inline std::string archOf(const Device &device) {
  if (device == "simt")
    return "sm_80";
  return throughCudnn(device)
             ? device.substr(0, device.size() - kCudnnSuffix.size())
             : device;
}

/// The process's GPU for kernels of `arch`, opened once; "" or why the
/// kernels of `arch` cannot run here.
inline std::string openGpuFor(const std::string &arch, cuda::Gpu *&gpu) {
  struct Opened {
    cuda::Gpu gpu;
    std::string error;
  };
  static std::map<std::string, Opened> opened;
  static std::mutex mutex;
  std::lock_guard<std::mutex> lock(mutex);
  auto [it, fresh] = opened.try_emplace(arch);
  if (fresh) {
    Plan plan;
    plan.cudaArch = arch;
    it->second.error = cuda::openGpu(plan, it->second.gpu);
  }
  gpu = &it->second.gpu;
  return it->second.error;
}

/// The generated kernel's parts of a launch: its operands' shapes and
/// dtypes off the buffers, its attributes' values.
inline codegen::LaunchDesc describe(const LaunchOp &launch,
                                    const std::vector<Buffer> &buffers) {
  codegen::LaunchDesc desc;
  desc.kernel = launch.kernel;
  for (uint32_t index : launch.operands) {
    codegen::OperandDesc operand;
    operand.present = index != kNoBuffer;
    if (operand.present) {
      operand.dtype = buffers[index].dtype;
      operand.shape = buffers[index].shape;
    }
    desc.operands.push_back(operand);
  }
  for (const AttrValue &value : launch.attrs)
    desc.attrs.push_back({value.i, value.f, value.list, false});
  return desc;
}

/// A one-instruction plan on one device: buffers end to end in the
/// persistent arena, written and read through a host copy of the arena
/// (the backend's copies, as the executor's inputs and outputs go).
class Harness {
public:
  explicit Harness(const Device &device) : device(device) {}

  uint32_t add(const std::vector<int64_t> &shape, DType dtype = DType::F32) {
    Buffer b;
    b.name = "b" + std::to_string(rank.buffers.size());
    b.arena = Arena::Persistent;
    b.dtype = dtype;
    b.shape = shape;
    b.elements = count(shape);
    b.bytes = b.elements * dtypeBytes(dtype);
    b.offset = rank.persistentBytes;
    rank.persistentBytes += (b.bytes + 255) / 256 * 256;
    rank.buffers.push_back(b);
    return rank.buffers.size() - 1;
  }
  /// Another name for buffer `index`'s bytes, as memory planning gives a
  /// buffer the bytes of one whose life has ended.
  uint32_t alias(uint32_t index) {
    Buffer b = rank.buffers[index];
    b.name = "b" + std::to_string(rank.buffers.size());
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
  /// The hyper buffer for `hyper` (the optimizer kernels read it).
  uint32_t hyper(const Hyper &hyper) {
    float values[kHyperSlots];
    hyperValues(hyper, values);
    return input({kHyperSlots}, Vec(values, values + kHyperSlots));
  }
  /// Values an output starts with (for kernels that accumulate into it).
  void presetOutput(uint32_t index, const Vec &values) {
    preset.push_back({index, values});
  }

  /// A launch by kernel name, its inputs, outputs and arguments.
  struct Call {
    std::string kernel;
    std::vector<uint32_t> ins, outs;
    std::map<std::string, Arg> args;
  };

  /// Checks the launch as a plan load would, then runs it.
  void run(const std::string &kernel, std::vector<uint32_t> ins,
           std::vector<uint32_t> outs, std::map<std::string, Arg> args = {}) {
    runFused({{kernel, std::move(ins), std::move(outs), std::move(args)}});
  }

  /// Runs `calls` as one fused group (the CUDA target's fusion pass):
  /// on a GPU one generated kernel, given every member's operands as the
  /// executor gives them; on the CPU each member as written.
  void runFused(const std::vector<Call> &calls) {
    std::vector<Instruction> instructions;
    for (const Call &call : calls) {
      int id = findKernel(call.kernel);
      ASSERT_GE(id, 0) << call.kernel;
      LaunchOp launch;
      launch.kernel = KernelId(id);
      const KernelSpec &spec = kernelSpec(launch.kernel);
      launch.operands = call.ins;
      launch.operands.insert(launch.operands.end(), call.outs.begin(),
                             call.outs.end());
      while (launch.operands.size() < spec.operands.size())
        launch.operands.push_back(kNoBuffer);
      for (const AttrSpec &attr : spec.attrs) {
        auto it = call.args.find(attr.name);
        Arg arg = it == call.args.end() ? Arg() : it->second;
        launch.attrs.push_back({arg.i, arg.f, arg.list});
      }
      ASSERT_EQ(checkLaunch(launch, rank.buffers, CheckContext()), "");
      instructions.emplace_back().op = launch;
    }
    if (instructions.size() > 1)
      std::get<LaunchOp>(instructions[0].op).fuse = instructions.size();
    if (device != "cpu")
      ASSERT_NO_FATAL_FAILURE(generate(instructions));
    ASSERT_NO_FATAL_FAILURE(load(instructions));
    // As the executor runs a program: a fused group on a GPU is its first
    // launch with every member's operands; on the CPU each member.
    const std::vector<Instruction> &loaded = rank.programs[0].instructions;
    bool fused = loaded.size() > 1 && backend->runsFusedKernels();
    for (size_t at = 0; at < (fused ? 1 : loaded.size()); ++at) {
      std::vector<Operand> operands;
      for (size_t m = at; m < (fused ? loaded.size() : at + 1); ++m)
        for (uint32_t index : loaded[m].launch()->operands)
          operands.push_back(operand(index));
      try {
        backend->launch(Stream::Compute, *loaded[at].launch(), operands);
      } catch (const std::exception &failure) { // the simt model's finding
        FAIL() << failure.what();
      }
    }
  }

  void runGemm(const GemmOp &gemm) {
    Instruction instruction;
    instruction.op = gemm;
    ASSERT_EQ(checkInstruction(instruction, rank.buffers, CheckContext()), "");
    ASSERT_NO_FATAL_FAILURE(load({instruction}));
    // cuBLASLt's choice is kept by the loaded instruction's address.
    const GemmOp &loaded = *rank.programs[0].instructions[0].gemm();
    Operand operands[5] = {operand(loaded.a), operand(loaded.b),
                           operand(loaded.d), operand(loaded.bias),
                           operand(loaded.aux)};
    backend->gemm(Stream::Compute, loaded, operands);
  }

  /// A buffer's values, once what was launched has run.
  Vec read(uint32_t index) {
    const Buffer &b = rank.buffers[index];
    uint8_t *data = host.data() + b.offset;
    backend->copyOut(Stream::Compute, data, address(index), b.bytes);
    backend->synchronize();
    Vec out(b.elements);
    if (b.dtype == DType::BF16) {
      auto *p = reinterpret_cast<const uint16_t *>(data);
      for (int64_t i = 0; i < b.elements; ++i)
        out[i] = bf16ToFloat(p[i]);
    } else {
      auto *p = reinterpret_cast<const float *>(data);
      for (int64_t i = 0; i < b.elements; ++i)
        out[i] = p[i];
    }
    return out;
  }
  const std::vector<Buffer> &buffers() const { return rank.buffers; }
  /// The library that ran the last launch in place of its kernel
  /// (Backend::launchLibrary), or "".
  std::string library() const {
    const LaunchOp *launch = rank.programs.at(0).instructions.at(0).launch();
    return launch ? backend->launchLibrary(*launch) : "";
  }

private:
  void *address(uint32_t index) const {
    return backend->arena(Arena::Persistent) + rank.buffers[index].offset;
  }
  Operand operand(uint32_t index) const {
    if (index == kNoBuffer)
      return {};
    return {address(index), &rank.buffers[index]};
  }

  /// The launches' kernel as the CUDA target generates it, into the plan:
  /// one launch's own, or a fused group's in its first launch (the members
  /// keep none).
  void generate(std::vector<Instruction> &instructions) {
    std::vector<codegen::FusedMember> members;
    std::vector<KernelId> kernels;
    for (const Instruction &instruction : instructions) {
      codegen::FusedMember &member = members.emplace_back();
      member.launch = describe(*instruction.launch(), rank.buffers);
      for (uint32_t index : instruction.launch()->operands)
        // By bytes, as the CUDA target tells buffers apart: an alias is
        // the same value.
        member.buffers.push_back(
            index == kNoBuffer ? -1 : int(rank.buffers[index].offset));
      kernels.push_back(instruction.launch()->kernel);
    }
    codegen::KernelCode code;
    CodeObject object;
    object.name = "kernel_under_test";
    object.kernel = fusedKernelName(kernels);
    if (members.size() > 1) {
      ASSERT_EQ(codegen::emitFused(members, code), "");
      object.source = codegen::fusedUnit(members, code, object.name);
    } else {
      ASSERT_EQ(codegen::emitKernel(members[0].launch, code), "");
      object.source = codegen::kernelUnit(members[0].launch, code, object.name);
    }
    ASSERT_EQ(
        codegen::compileToPtx(object.source, object.name, arch(), object.ptx),
        "")
        << object.source;
    LaunchOp &launch = std::get<LaunchOp>(instructions[0].op);
    launch.grid.assign(code.grid.begin(), code.grid.end());
    launch.block.assign(code.block.begin(), code.block.end());
    launch.sharedBytes = code.sharedBytes;
    launch.code = int32_t(plan.code.size());
    plan.code.push_back(std::move(object));
    plan.cudaArch = arch();
  }
  /// The architecture the device's kernels are generated for.
  std::string arch() const { return archOf(device); }

  /// Makes the device's backend for the instructions, then writes the
  /// arena: inputs and presets their values, every other byte poisoned
  /// (NaN in a float output) so an output the kernel skips shows.
  void load(const std::vector<Instruction> &instructions) {
    ASSERT_TRUE(rank.programs.empty()) << "a harness runs once";
    rank.programs.push_back({"test", instructions});
    if (device == "cpu") {
      backend = std::make_unique<cpu::CpuBackend>();
    } else if (device == "simt") {
      backend = std::make_unique<simt::SimtBackend>();
    } else {
      cuda::Gpu *gpu = nullptr;
      ASSERT_EQ(openGpuFor(arch(), gpu), "");
      auto made = std::make_unique<cuda::CudaBackend>(
          gpu->context, throughCudnn(device) ? cuda::AttentionBackend::Cudnn
                                             : cuda::AttentionBackend::Strata);
      ASSERT_EQ(made->create(), "");
      backend = std::move(made);
    }
    ASSERT_EQ(backend->allocate(Arena::Persistent, rank.persistentBytes), "");
    ASSERT_EQ(backend->prepare(plan, rank), "");
    host.assign(rank.persistentBytes, 0xFF);
    for (auto &[index, values] : pending)
      write(index, values);
    for (auto &[index, values] : pendingIds)
      std::memcpy(host.data() + rank.buffers[index].offset, values.data(),
                  values.size() * 4);
    for (auto &[index, values] : preset)
      write(index, values);
    backend->copyIn(Stream::Compute, backend->arena(Arena::Persistent),
                    host.data(), host.size());
  }
  void write(uint32_t index, const Vec &values) {
    const Buffer &b = rank.buffers[index];
    ASSERT_EQ(int64_t(values.size()), b.elements);
    uint8_t *data = host.data() + b.offset;
    if (b.dtype == DType::BF16) {
      auto *p = reinterpret_cast<uint16_t *>(data);
      for (int64_t i = 0; i < b.elements; ++i)
        p[i] = floatToBf16(float(values[i]));
    } else {
      auto *p = reinterpret_cast<float *>(data);
      for (int64_t i = 0; i < b.elements; ++i)
        p[i] = float(values[i]);
    }
  }

  Device device;
  Plan plan;
  RankPlan rank;
  std::vector<std::pair<uint32_t, Vec>> pending, preset;
  std::vector<std::pair<uint32_t, std::vector<int32_t>>> pendingIds;
  std::unique_ptr<Backend> backend;
  std::vector<uint8_t> host; // the arena's bytes on the host
};

/// The kernel tests, once per device; a GPU's skip when none can run them.
class Kernels : public testing::TestWithParam<Device> {
protected:
  void SetUp() override {
    if (GetParam() == "cpu" || GetParam() == "simt")
      return;
    cuda::Gpu *gpu = nullptr;
    if (std::string error = openGpuFor(GetParam(), gpu); !error.empty())
      GTEST_SKIP() << "skipped: no GPU for " << GetParam() << " kernels ("
                   << error << ")";
  }
  const Device &on() const { return GetParam(); }
};

/// A contiguous row-major gemm's descriptor.
inline GemmOp plainGemm(uint32_t a, uint32_t b, uint32_t d, int64_t m,
                        int64_t n, int64_t k, bool ta, bool tb,
                        float beta = 0) {
  GemmOp g;
  g.a = a;
  g.b = b;
  g.d = d;
  g.m = m;
  g.n = n;
  g.k = k;
  g.transposeA = ta;
  g.transposeB = tb;
  g.lda = ta ? m : k;
  g.ldb = tb ? k : n;
  g.ldd = n;
  g.beta = beta;
  return g;
}

/// max |actual − expected| ≤ tolerance · max(1, max |expected|); a NaN
/// (a poisoned output the kernel never wrote) is an error of any size.
inline void expectClose(const Vec &actual, const Vec &expected,
                        double tolerance, const char *what = "") {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double scale = 1, worst = 0;
  size_t at = 0;
  for (double e : expected)
    scale = std::max(scale, std::fabs(e));
  for (size_t i = 0; i < actual.size(); ++i) {
    double error = std::fabs(actual[i] - expected[i]);
    if (std::isnan(error))
      error = INFINITY;
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
inline Vec vjp(const std::function<Vec(const Vec &)> &f, const Vec &x,
               const Vec &dy) {
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

constexpr double kTol = 1e-5;     // fp32 kernels against float64
constexpr double kTolBf16 = 1e-2; // bf16 ones

//===----------------------------------------------------------------------===//
// Float64 references
//===----------------------------------------------------------------------===//

inline Vec refGemm(const Vec &a, const Vec &b, int64_t m, int64_t n, int64_t k,
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

inline Vec refNorm(const Vec &x, const Vec &w, const Vec *bias, int64_t cols,
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
  // Query head h reads kv head (offset + h) / group; group 0: h / kv.
  int64_t group = 0, offset = 0;
  int64_t groupSize() const { return group ? group : h / kv; }
};

/// Attention's output; each query row's log-sum-exp of its scaled scores
/// ([b, heads, s]) into `lse` when given.
inline Vec refAttention(const AttnDims &a, const Vec &q, const Vec &k,
                        const Vec &v, Vec *lse = nullptr);

/// Where a launch's query and key rows sit in the sequence, which the
/// causal mask compares: a query sees the keys at or before its place.
struct RowPlaces {
  std::vector<int64_t> queries, keys;
};
/// The rows of a whole sequence of `s`: their places are their indices.
inline RowPlaces wholeSequence(int64_t s) {
  RowPlaces at{std::vector<int64_t>(s), std::vector<int64_t>(s)};
  std::iota(at.queries.begin(), at.queries.end(), 0);
  at.keys = at.queries;
  return at;
}

/// Query row `i` of head `h` in sample `bi` of `n` queries ([b, n, h, d])
/// against `m` keys and values ([b, m, kv, d]), seeing the keys j where
/// `sees(j)`: its output ([d]) and, into `lse`, its log-sum-exp; a row that
/// sees no key gets o = 0 and lse = −∞.
template <class Sees>
Vec refAttentionRowWhere(const AttnDims &a, int64_t n, int64_t m, const Vec &q,
                         const Vec &k, const Vec &v, int64_t bi, int64_t h,
                         int64_t i, Sees sees, double &lse) {
  int64_t g = (a.offset + h) / a.groupSize();
  const double *qi = &q[((bi * n + i) * a.h + h) * a.d];
  auto kvAt = [&](int64_t j) { return ((bi * m + j) * a.kv + g) * a.d; };
  Vec score(m, 0.0), out(a.d, 0.0);
  double max = -INFINITY;
  for (int64_t j = 0; j < m; ++j) {
    if (!sees(j))
      continue;
    double dot = 0;
    for (int64_t x = 0; x < a.d; ++x)
      dot += qi[x] * k[kvAt(j) + x];
    max = std::max(max, score[j] = dot / std::sqrt(double(a.d)));
  }
  lse = max;
  if (max == -INFINITY)
    return out;
  double sum = 0;
  for (int64_t j = 0; j < m; ++j)
    if (sees(j))
      sum += (score[j] = std::exp(score[j] - max));
  lse = max + std::log(sum);
  for (int64_t j = 0; j < m; ++j)
    if (sees(j))
      for (int64_t x = 0; x < a.d; ++x)
        out[x] += score[j] / sum * v[kvAt(j) + x];
  return out;
}

/// Query row `i` of head `h` in sample `bi`: its output ([d]) and, into
/// `lse`, its log-sum-exp (refAttention row by row; a test that samples
/// rows of a shape too large for the whole calls it alone).
inline Vec refAttentionRow(const AttnDims &a, const Vec &q, const Vec &k,
                           const Vec &v, int64_t bi, int64_t h, int64_t i,
                           double &lse) {
  return refAttentionRowWhere(
      a, a.s, a.s, q, k, v, bi, h, i,
      [&](int64_t j) { return !a.causal || j <= i; }, lse);
}

/// Attention of queries [b, n, h, d] against keys and values [b, m, kv, d]
/// at places `at` (n queries, m keys): the output, and each query's
/// log-sum-exp ([b, h, n]) into `lse`.
inline Vec refAttentionAt(const AttnDims &a, const RowPlaces &at, const Vec &q,
                          const Vec &k, const Vec &v, Vec &lse) {
  const int64_t n = at.queries.size(), m = at.keys.size();
  Vec o(q.size(), 0.0);
  lse.assign(a.b * a.h * n, 0.0);
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < n; ++i) {
        Vec row = refAttentionRowWhere(
            a, n, m, q, k, v, bi, h, i,
            [&](int64_t j) { return !a.causal || at.keys[j] <= at.queries[i]; },
            lse[(bi * a.h + h) * n + i]);
        std::copy(row.begin(), row.end(),
                  o.begin() + ((bi * n + i) * a.h + h) * a.d);
      }
  return o;
}

inline Vec refAttention(const AttnDims &a, const Vec &q, const Vec &k,
                        const Vec &v, Vec *lse) {
  Vec o(q.size(), 0.0);
  if (lse)
    lse->assign(a.b * a.h * a.s, 0.0);
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h)
      for (int64_t i = 0; i < a.s; ++i) {
        double rowLse;
        Vec row = refAttentionRow(a, q, k, v, bi, h, i, rowLse);
        std::copy(row.begin(), row.end(),
                  o.begin() + ((bi * a.s + i) * a.h + h) * a.d);
        if (lse)
          (*lse)[(bi * a.h + h) * a.s + i] = rowLse;
      }
  return o;
}

/// Context parallelism: the rows of [b, s, inner] (s the whole sequence)
/// that context-parallel rank `rank` of `c` holds, its two chunks
/// (runtime/plan/ContextPositions.h), as [b, s / c, inner].
inline Vec contextRows(const Vec &whole, int64_t b, int64_t s, int64_t inner,
                       int64_t c, int64_t rank) {
  int64_t rows = s / c;
  Vec part;
  for (int64_t bi = 0; bi < b; ++bi)
    for (int64_t l = 0; l < rows; ++l) {
      int64_t place = strata::runtime::contextPosition(l, rows, c, rank);
      auto from = whole.begin() + (bi * s + place) * inner;
      part.insert(part.end(), from, from + inner);
    }
  return part;
}

/// Every rank's rows gathered along the sequence in rank order,
/// [b, s, inner] as context-parallel attention reads its keys.
inline Vec contextGathered(const Vec &whole, int64_t b, int64_t s,
                           int64_t inner, int64_t c) {
  int64_t rows = s / c;
  Vec gathered(whole.size());
  for (int64_t r = 0; r < c; ++r) {
    Vec part = contextRows(whole, b, s, inner, c, r);
    for (int64_t bi = 0; bi < b; ++bi)
      std::copy_n(part.begin() + bi * rows * inner, rows * inner,
                  gathered.begin() + (bi * s + r * rows) * inner);
  }
  return gathered;
}

inline Vec refRope(const Vec &x, int64_t b, int64_t s, int64_t h, int64_t d,
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

inline double refCrossEntropy(const Vec &logits,
                              const std::vector<int32_t> &labels,
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

inline double gelu(double x) {
  return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
}
inline double silu(double x) { return x / (1 + std::exp(-x)); }
// GPT-2's GELU, in float64 from its definition (the kernels' derivative is
// checked against vjp's differences of this, not against a second formula).
inline double geluTanh(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
}

} // namespace strata::kernel_testing

#endif
