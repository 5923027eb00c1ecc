//===- KernelsTest.cpp - every kernel against float64, on each device -----===//
//
// Each kernel runs through the real path of a device on fresh random
// inputs, its outputs poisoned (NaN) first, and is compared with a float64
// reference written here. On the CPU: a plan's buffers in a CPU backend's
// arena, the instruction checked against the kernel catalog as a plan load
// checks it, the backend's launch. On a GPU, for sm_80 and for sm_90a: the
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
#include "compiler/codegen/CudaKernel.h"
#include "compiler/codegen/Nvrtc.h"
#include "runtime/base/BFloat16.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cuda/CudaBackend.h"
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
#include <random>
#include <thread>

using namespace strata;
using namespace strata::runtime;
using Vec = std::vector<double>;

namespace {

Vec randomVec(size_t n, double scale = 1.0) {
  std::normal_distribution<double> normal(0.0, scale);
  Vec v(n);
  for (double &x : v)
    x = static_cast<float>(normal(rng())); // representable in f32
  return v;
}

/// `v` rounded to bf16, as a bf16 buffer holds it.
Vec roundedToBf16(Vec v) {
  for (double &x : v)
    x = roundToBf16(float(x));
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

/// A kernel argument given by name; the kernel's others default to zero.
struct Arg {
  int64_t i = 0;
  double f = 0;
  std::vector<int64_t> list;
};
Arg intArg(int64_t v) { return {v, 0, {}}; }
Arg boolArg(bool v) { return {v ? 1 : 0, 0, {}}; }
Arg floatArg(double v) { return {0, v, {}}; }
Arg listArg(std::vector<int64_t> v) { return {0, 0, std::move(v)}; }

//===----------------------------------------------------------------------===//
// Devices
//===----------------------------------------------------------------------===//

/// Where a test's kernels run: "cpu", a GPU with kernels generated for
/// "sm_80" or "sm_90a", or "simt": sm_80's kernels on the host.
using Device = std::string;

/// The process's GPU for kernels of `arch`, opened once; "" or why the
/// kernels of `arch` cannot run here.
std::string openGpuFor(const std::string &arch, cuda::Gpu *&gpu) {
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
codegen::LaunchDesc describe(const LaunchOp &launch,
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
  std::string arch() const { return device == "simt" ? "sm_80" : device; }

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
      ASSERT_EQ(openGpuFor(device, gpu), "");
      auto made = std::make_unique<cuda::CudaBackend>(gpu->context);
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

INSTANTIATE_TEST_SUITE_P(On, Kernels,
                         testing::Values("cpu", "simt", "sm_80", "sm_90a"),
                         [](const testing::TestParamInfo<Device> &info) {
                           return info.param;
                         });

/// A contiguous row-major gemm's descriptor.
GemmOp plainGemm(uint32_t a, uint32_t b, uint32_t d, int64_t m, int64_t n,
                 int64_t k, bool ta, bool tb, float beta = 0) {
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
void expectClose(const Vec &actual, const Vec &expected, double tolerance,
                 const char *what = "") {
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

constexpr double kTol = 1e-5;     // fp32 kernels against float64
constexpr double kTolBf16 = 1e-2; // bf16 ones

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
  // Query head h reads kv head (offset + h) / group; group 0: h / kv.
  int64_t group = 0, offset = 0;
  int64_t groupSize() const { return group ? group : h / kv; }
};

/// Attention's output; each query row's log-sum-exp of its scaled scores
/// ([b, heads, s]) into `lse` when given.
Vec refAttention(const AttnDims &a, const Vec &q, const Vec &k, const Vec &v,
                 Vec *lse = nullptr) {
  Vec o(q.size(), 0.0);
  if (lse)
    lse->assign(a.b * a.h * a.s, 0.0);
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h) {
      int64_t g = (a.offset + h) / a.groupSize();
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
        if (lse)
          (*lse)[(bi * a.h + h) * a.s + i] = max + std::log(sum);
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
// GPT-2's GELU, in float64 from its definition (the kernels' derivative is
// checked against vjp's differences of this, not against a second formula).
double geluTanh(double x) {
  const double pi = 3.14159265358979323846;
  return 0.5 * x *
         (1 + std::tanh(std::sqrt(2 / pi) * (x + 0.044715 * x * x * x)));
}

//===----------------------------------------------------------------------===//
// Tests
//===----------------------------------------------------------------------===//

TEST_P(Kernels, GemmAllTransposesAndAccumulate) {
  const int64_t m = 13, n = 7, k = 19;
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (bool accumulate : {false, true}) {
        Harness h(on());
        Vec a = randomVec(m * k), b = randomVec(k * n), c0 = randomVec(m * n);
        uint32_t ia = h.input(
            ta ? std::vector<int64_t>{k, m} : std::vector<int64_t>{m, k}, a);
        uint32_t ib = h.input(
            tb ? std::vector<int64_t>{n, k} : std::vector<int64_t>{k, n}, b);
        uint32_t ic = h.add({m, n});
        if (accumulate)
          h.presetOutput(ic, c0);
        h.runGemm(plainGemm(ia, ib, ic, m, n, k, ta, tb, accumulate ? 1 : 0));
        Vec expected = refGemm(a, b, m, n, k, ta, tb);
        if (accumulate)
          for (size_t i = 0; i < expected.size(); ++i)
            expected[i] += c0[i];
        expectClose(h.read(ic), expected, kTol, "gemm");
      }
}

TEST_P(Kernels, GemmBatchedStridedWithAlphaBeta) {
  // Two [m, k] x [k, n] products read from padded rows (lda > k) and
  // written into padded rows (ldd > n): D = alpha·A·B + beta·D.
  const int64_t m = 5, n = 6, k = 4, lda = 7, ldb = 9, ldd = 8, batch = 2;
  const float alpha = 0.5f, beta = -2.0f;
  Harness h(on());
  Vec a = randomVec(batch * m * lda), b = randomVec(batch * k * ldb),
      d0 = randomVec(batch * m * ldd);
  uint32_t ia = h.input({batch * m * lda}, a),
           ib = h.input({batch * k * ldb}, b);
  uint32_t id = h.add({batch * m * ldd});
  h.presetOutput(id, d0);
  GemmOp g = plainGemm(ia, ib, id, m, n, k, false, false, beta);
  g.alpha = alpha;
  g.lda = lda;
  g.ldb = ldb;
  g.ldd = ldd;
  g.batch = batch;
  g.strideA = m * lda;
  g.strideB = k * ldb;
  g.strideD = m * ldd;
  h.runGemm(g);
  Vec expected = d0;
  for (int64_t t = 0; t < batch; ++t)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t p = 0; p < k; ++p)
          sum += a[t * m * lda + i * lda + p] * b[t * k * ldb + p * ldb + j];
        double &out = expected[t * m * ldd + i * ldd + j];
        out = alpha * sum + beta * out;
      }
  expectClose(h.read(id), expected, kTol, "batched gemm");
}

TEST_P(Kernels, GemmEpilogues) {
  const int64_t m = 11, n = 6, k = 9;
  Vec a = randomVec(m * k), b = randomVec(k * n), bias = randomVec(n);
  Vec product = refGemm(a, b, m, n, k, false, false);
  // bias: D = A·B + bias; gelu_bias: aux = A·B + bias, D = GELU(aux).
  for (Epilogue epilogue : {Epilogue::Bias, Epilogue::GeluBias}) {
    bool withGelu = epilogue == Epilogue::GeluBias;
    // A CUDA plan has bias-only epilogues (cuBLASLt's GELU is the tanh
    // form, its bias gradient overwrites); GELU and the bias gradient are
    // launches there.
    if (withGelu && on() != "cpu")
      continue;
    Harness h(on());
    uint32_t ia = h.input({m, k}, a), ib = h.input({k, n}, b),
             ibias = h.input({n}, bias), id = h.add({m, n});
    GemmOp g = plainGemm(ia, ib, id, m, n, k, false, false);
    g.epilogue = epilogue;
    g.bias = ibias;
    if (withGelu)
      g.aux = h.add({m, n});
    h.runGemm(g);
    Vec pre = product, expected(m * n);
    for (int64_t i = 0; i < m * n; ++i) {
      pre[i] += bias[i % n];
      expected[i] = withGelu ? gelu(pre[i]) : pre[i];
    }
    if (withGelu)
      expectClose(h.read(g.aux), pre, kTol, "gelu_bias pre-activation");
    expectClose(h.read(id), expected, kTol, withGelu ? "gelu_bias" : "bias");
  }
  // bias_grad beside a weight gradient dW = xᵀ·dy: bias = beta·bias +
  // the column sums of dy.
  for (float beta : {0.0f, 1.0f}) {
    if (on() != "cpu")
      break;
    Harness h(on());
    Vec x = randomVec(k * m), dy = randomVec(k * n), w0 = randomVec(m * n),
        db0 = randomVec(n);
    uint32_t ix = h.input({k, m}, x), idy = h.input({k, n}, dy),
             iw = h.add({m, n}), idb = h.add({n});
    h.presetOutput(iw, w0);
    h.presetOutput(idb, db0);
    GemmOp g = plainGemm(ix, idy, iw, m, n, k, true, false, beta);
    g.epilogue = Epilogue::BiasGrad;
    g.bias = idb;
    h.runGemm(g);
    Vec expectedW = refGemm(x, dy, m, n, k, true, false);
    Vec expectedB(n, 0.0);
    for (int64_t r = 0; r < k; ++r)
      for (int64_t j = 0; j < n; ++j)
        expectedB[j] += dy[r * n + j];
    for (int64_t i = 0; i < m * n; ++i)
      expectedW[i] += beta * w0[i];
    for (int64_t j = 0; j < n; ++j)
      expectedB[j] += beta * db0[j];
    expectClose(h.read(iw), expectedW, kTol, "weight gradient");
    expectClose(h.read(idb), expectedB, kTol, "bias_grad");
  }
}

TEST(KernelChecks, GemmChecksItsOperands) {
  Harness h("cpu");
  uint32_t ia = h.add({4, 3}), ib = h.add({3, 5}), id = h.add({4, 5});
  Instruction instruction;
  auto refusal = [&] {
    return checkInstruction(instruction, h.buffers(), CheckContext());
  };
  // Each mistake refused for its own reason. k = 4 reads past A's 12
  // elements.
  instruction.op = plainGemm(ia, ib, id, 4, 5, 4, false, false);
  EXPECT_NE(refusal().find("does not fit A"), std::string::npos) << refusal();
  // A bias epilogue without its bias.
  GemmOp g = plainGemm(ia, ib, id, 4, 5, 3, false, false);
  g.epilogue = Epilogue::Bias;
  instruction.op = g;
  EXPECT_EQ(refusal(), "gemm: the epilogue's operands do not match the "
                       "epilogue");
  // A batch whose stride walks off D.
  g = plainGemm(ia, ib, id, 4, 5, 3, false, false);
  g.batch = 2;
  g.strideD = 20;
  instruction.op = g;
  EXPECT_NE(refusal().find("batch=2 does not fit"), std::string::npos)
      << refusal();
  // The same gemm unbatched passes.
  g.batch = 1;
  instruction.op = g;
  EXPECT_EQ(refusal(), "");
}

TEST_P(Kernels, EmbeddingForwardAndBackward) {
  const int64_t vocab = 11, hidden = 6, tokens = 17;
  Harness h(on());
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
    Harness g(on());
    Vec dy = randomVec(tokens * hidden), start = randomVec(vocab * hidden);
    uint32_t idy = g.input({tokens, hidden}, dy), iid = g.ids({tokens}, ids);
    uint32_t grad = g.add({vocab, hidden});
    if (accumulate)
      g.presetOutput(grad, start);
    g.run("embedding_bwd", {idy, iid}, {grad},
          {{"accumulate", boolArg(accumulate)}});
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

TEST_P(Kernels, BroadcastArithmetic) {
  const int64_t rows = 5, width = 8;
  for (const char *kernel : {"add", "sub", "mul"}) {
    for (int64_t rhsWidth : {width * rows, width}) {
      Harness h(on());
      Vec a = randomVec(rows * width), b = randomVec(rhsWidth);
      uint32_t ia = h.input({rows, width}, a);
      uint32_t ib =
          h.input(rhsWidth == width ? std::vector<int64_t>{width}
                                    : std::vector<int64_t>{rows, width},
                  b);
      uint32_t out = h.add({rows, width});
      h.run(kernel, {ia, ib}, {out});
      Vec expected(a.size());
      for (size_t i = 0; i < a.size(); ++i) {
        double y = b[i % rhsWidth];
        expected[i] = kernel[0] == 'a'   ? a[i] + y
                      : kernel[0] == 's' ? a[i] - y
                                         : a[i] * y;
      }
      expectClose(h.read(out), expected, 1e-6, kernel);
    }
  }
}

TEST_P(Kernels, ScaleFillCopyAccumulate) {
  Vec x = randomVec(37), y0 = randomVec(37);
  Harness h(on());
  uint32_t ix = h.input({37}, x), out = h.add({37});
  h.run("scale", {ix}, {out}, {{"factor", floatArg(-0.75)}});
  Vec expected(37);
  for (int i = 0; i < 37; ++i)
    expected[i] = -0.75 * x[i];
  expectClose(h.read(out), expected, 1e-7, "scale");

  Harness f(on());
  uint32_t filled = f.add({9});
  f.run("fill", {}, {filled}, {{"value", floatArg(0.25)}});
  expectClose(f.read(filled), Vec(9, 0.25), 0, "fill");

  Harness c(on());
  uint32_t cx = c.input({37}, x), cy = c.add({37});
  c.run("copy", {cx}, {cy});
  expectClose(c.read(cy), x, 0, "copy");

  Harness a(on());
  uint32_t ax = a.input({37}, x), ay = a.add({37});
  a.presetOutput(ay, y0);
  a.run("accumulate", {ax}, {ay});
  for (int i = 0; i < 37; ++i)
    expected[i] = x[i] + y0[i];
  expectClose(a.read(ay), expected, 1e-6, "accumulate");
}

TEST_P(Kernels, SumToRowsAndAccumulate) {
  const int64_t rows = 23, width = 10;
  for (bool accumulate : {false, true}) {
    Harness h(on());
    Vec x = randomVec(rows * width), start = randomVec(width);
    uint32_t ix = h.input({rows, width}, x), out = h.add({width});
    if (accumulate)
      h.presetOutput(out, start);
    h.run("sum_to", {ix}, {out}, {{"accumulate", boolArg(accumulate)}});
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

TEST_P(Kernels, ActivationsAndTheirGradients) {
  for (auto [fwd, bwd, fn] :
       {std::tuple{"gelu_fwd", "gelu_bwd", &gelu},
        std::tuple{"gelu_tanh_fwd", "gelu_tanh_bwd", &geluTanh},
        std::tuple{"silu_fwd", "silu_bwd", &silu}}) {
    Vec x = randomVec(64, 2.0), dy = randomVec(64);
    Harness h(on());
    uint32_t ix = h.input({64}, x), out = h.add({64});
    h.run(fwd, {ix}, {out});
    Vec expected(64);
    for (int i = 0; i < 64; ++i)
      expected[i] = fn(x[i]);
    expectClose(h.read(out), expected, kTol, fwd);

    Harness g(on());
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

TEST_P(Kernels, NormsAndTheirGradients) {
  const int64_t rows = 9, cols = 16;
  const double eps = 1e-5;
  for (bool layerNorm : {true, false}) {
    Vec x = randomVec(rows * cols, 3.0), w = randomVec(cols),
        b = randomVec(cols), dy = randomVec(rows * cols);
    Harness h(on());
    uint32_t ix = h.input({rows, cols}, x), iw = h.input({cols}, w);
    std::vector<uint32_t> ins = {ix, iw};
    if (layerNorm)
      ins.push_back(h.input({cols}, b));
    uint32_t out = h.add({rows, cols});
    h.run(layerNorm ? "layer_norm_fwd" : "rms_norm_fwd", ins, {out},
          {{"epsilon", floatArg(eps)}});
    expectClose(h.read(out), refNorm(x, w, layerNorm ? &b : nullptr, cols, eps),
                kTol, layerNorm ? "layer_norm_fwd" : "rms_norm_fwd");

    Harness g(on());
    uint32_t gx = g.input({rows, cols}, x), gw = g.input({cols}, w),
             gdy = g.input({rows, cols}, dy);
    uint32_t dx = g.add({rows, cols}), dw = g.add({cols});
    std::vector<uint32_t> outs = {dx, dw};
    if (layerNorm)
      outs.push_back(g.add({cols}));
    g.run(layerNorm ? "layer_norm_bwd" : "rms_norm_bwd", {gx, gw, gdy}, outs,
          {{"epsilon", floatArg(eps)}});
    const Vec *bias = layerNorm ? &b : nullptr;
    expectClose(
        g.read(dx),
        vjp([&](const Vec &v) { return refNorm(v, w, bias, cols, eps); }, x,
            dy),
        kTol, "input gradient");
    expectClose(
        g.read(dw),
        vjp([&](const Vec &v) { return refNorm(x, v, bias, cols, eps); }, w,
            dy),
        kTol, "weight gradient");
    if (layerNorm)
      expectClose(
          g.read(outs[2]),
          vjp([&](const Vec &v) { return refNorm(x, w, &v, cols, eps); }, b,
              dy),
          kTol, "bias gradient");
  }
}

TEST_P(Kernels, TransposeFourDimensions) {
  const std::vector<int64_t> shape = {2, 3, 4, 5}, perm = {0, 2, 3, 1};
  Vec x = randomVec(count(shape));
  Harness h(on());
  uint32_t ix = h.input(shape, x), out = h.add({2, 4, 5, 3});
  h.run("transpose", {ix}, {out}, {{"permutation", listArg(perm)}});
  Vec expected(x.size());
  int64_t e = 0;
  for (int64_t a = 0; a < 2; ++a)
    for (int64_t c = 0; c < 4; ++c)
      for (int64_t d = 0; d < 5; ++d)
        for (int64_t b = 0; b < 3; ++b)
          expected[e++] = x[((a * 3 + b) * 4 + c) * 5 + d];
  expectClose(h.read(out), expected, 0, "transpose");
}

TEST_P(Kernels, RopeAndItsInverse) {
  const int64_t b = 2, s = 7, heads = 3, d = 8;
  Vec x = randomVec(b * s * heads * d);
  for (bool inverse : {false, true}) {
    Harness h(on());
    uint32_t ix = h.input({b, s, heads, d}, x), out = h.add({b, s, heads, d});
    h.run("rope", {ix}, {out},
          {{"base", floatArg(10000.0)}, {"inverse", boolArg(inverse)}});
    expectClose(h.read(out), refRope(x, b, s, heads, d, 10000.0, inverse), kTol,
                "rope");
    // The inverse rotation is the forward rotation's gradient.
    if (inverse)
      expectClose(h.read(out),
                  vjp(
                      [&](const Vec &v) {
                        return refRope(v, b, s, heads, d, 10000.0, false);
                      },
                      Vec(x.size(), 0.0), x),
                  kTol, "rope gradient");
  }
}

TEST_P(Kernels, AttentionGroupedQueryCausalAndNot) {
  for (bool causal : {true, false}) {
    AttnDims a{2, 6, 4, 2, 4, causal};
    Vec q = randomVec(a.b * a.s * a.h * a.d),
        k = randomVec(a.b * a.s * a.kv * a.d),
        v = randomVec(a.b * a.s * a.kv * a.d), dout = randomVec(q.size());
    std::map<std::string, Arg> args = {{"causal", boolArg(causal)},
                                       {"group_size", intArg(a.h / a.kv)}};
    Harness h(on());
    uint32_t iq = h.input({a.b, a.s, a.h, a.d}, q),
             ik = h.input({a.b, a.s, a.kv, a.d}, k),
             iv = h.input({a.b, a.s, a.kv, a.d}, v),
             out = h.add({a.b, a.s, a.h, a.d}), lse = h.add({a.b, a.h, a.s});
    h.run("attention_fwd", {iq, ik, iv}, {out, lse}, args);
    Vec expectedLse;
    Vec o = refAttention(a, q, k, v, &expectedLse);
    expectClose(h.read(out), o, kTol, "attention_fwd");
    expectClose(h.read(lse), expectedLse, kTol, "attention_fwd log-sum-exp");

    // The backward takes the forward's log-sum-exp.
    Harness g(on());
    uint32_t gq = g.input({a.b, a.s, a.h, a.d}, q),
             gk = g.input({a.b, a.s, a.kv, a.d}, k),
             gv = g.input({a.b, a.s, a.kv, a.d}, v),
             go = g.input({a.b, a.s, a.h, a.d}, o),
             glse = g.input({a.b, a.h, a.s}, h.read(lse)),
             gdo = g.input({a.b, a.s, a.h, a.d}, dout);
    uint32_t dq = g.add({a.b, a.s, a.h, a.d}),
             dk = g.add({a.b, a.s, a.kv, a.d}),
             dv = g.add({a.b, a.s, a.kv, a.d});
    g.run("attention_bwd", {gq, gk, gv, go, glse, gdo}, {dq, dk, dv}, args);
    expectClose(
        g.read(dq),
        vjp([&](const Vec &x) { return refAttention(a, x, k, v); }, q, dout),
        kTol, "query gradient");
    expectClose(
        g.read(dk),
        vjp([&](const Vec &x) { return refAttention(a, q, x, v); }, k, dout),
        kTol, "key gradient");
    expectClose(
        g.read(dv),
        vjp([&](const Vec &x) { return refAttention(a, q, k, x); }, v, dout),
        kTol, "value gradient");
  }
}

TEST_P(Kernels, CrossEntropyAndItsGradient) {
  const int64_t tokens = 12, vocab = 9;
  Vec logits = randomVec(tokens * vocab, 2.0);
  auto labels = randomIds(tokens, vocab);
  Harness h(on());
  uint32_t il = h.input({tokens, vocab}, logits), ii = h.ids({tokens}, labels);
  uint32_t loss = h.add({});
  h.run("cross_entropy_fwd", {il, ii}, {loss}, {{"vocab_size", intArg(vocab)}});
  expectClose(h.read(loss), {refCrossEntropy(logits, labels, vocab)}, kTol,
              "cross_entropy_fwd");

  Harness g(on());
  double seed = 0.25;
  uint32_t gl = g.input({tokens, vocab}, logits), gi = g.ids({tokens}, labels),
           gs = g.input({}, {seed}), grad = g.add({tokens, vocab});
  g.run("cross_entropy_bwd", {gl, gi, gs}, {grad},
        {{"vocab_size", intArg(vocab)}});
  expectClose(
      g.read(grad),
      vjp([&](const Vec &x) { return Vec{refCrossEntropy(x, labels, vocab)}; },
          logits, {seed}),
      kTol, "cross_entropy_bwd");
}

TEST_P(Kernels, GradientNormOverSegmentsAndClipping) {
  // Counted: the segments, the first-only ones where first_part is 0, each
  // within the rank's part of the windows: two buckets [0, 500) and
  // [500, 1000), each split between two data-parallel parts of 250.
  Vec g = randomVec(1000);
  std::vector<int64_t> windows = {0, 250, 0, 500, 250, 250};
  double expected = 0, overParts = 0;
  for (int64_t part : {0, 1}) {
    for (int64_t firstPart : {0, 1}) {
      Harness h(on());
      uint32_t ig = h.input({1000}, g), sum = h.add({});
      h.run("sum_squares", {ig}, {sum},
            {{"segments", listArg({0, 300, 400, 600})},
             {"first_segments", listArg({300, 100})},
             {"windows", listArg(windows)},
             {"part", intArg(part)},
             {"first_part", intArg(firstPart)}});
      double want = 0;
      for (int64_t i = 0; i < 1000; ++i) {
        bool owned = (i % 500) / 250 == part;
        bool counted = i < 300 || i >= 400 || firstPart == 0;
        if (owned && counted)
          want += g[i] * g[i];
      }
      expectClose(h.read(sum), {want}, 1e-6, "sum_squares");
      if (firstPart == 0)
        overParts += h.read(sum)[0];
      if (part == 0 && firstPart == 0)
        expected = want;
    }
  }
  // Each element lies in one part: the parts' sums make the whole norm.
  double whole = 0;
  for (double x : g)
    whole += x * x;
  EXPECT_NEAR(overParts, whole, 1e-6 * whole);

  for (double clip : {0.0, 1.0, 1e6}) {
    Hyper hyper;
    hyper.clipGrad = clip;
    Harness c(on());
    uint32_t is = c.input({}, {expected}), ih = c.hyper(hyper),
             norm = c.add({}), coef = c.add({});
    c.run("clip_coefficient", {is, ih}, {norm, coef});
    double n = std::sqrt(expected);
    expectClose(c.read(norm), {n}, 1e-6, "norm");
    expectClose(c.read(coef),
                {clip > 0 ? std::min(1.0, clip / (n + 1e-6)) : 1.0}, 1e-6,
                "coefficient");
  }
}

TEST_P(Kernels, KeepOnFirstKeepsOnPartZeroOnly) {
  Vec x = randomVec(64);
  for (int64_t part : {0, 1, 3}) {
    Harness h(on());
    uint32_t ix = h.input({64}, x), y = h.add({64});
    h.presetOutput(y, randomVec(64));
    h.run("keep_on_first", {ix}, {y}, {{"part", intArg(part)}});
    expectClose(h.read(y), part == 0 ? x : Vec(64, 0.0), 0, "keep_on_first");
  }
}

TEST_P(Kernels, MultiTensorAdamWAgainstTheFormula) {
  // Two segments of one flat region: [0, 20) decayed, [30, 50) not. Two
  // windows split each between two data-parallel parts of 10: part k owns
  // [10k, 10k + 10) with its state at 0 and [30 + 10k, 40 + 10k) with its
  // state at 20 (a distributed optimizer's layout); elements outside the
  // rank's part stay as they were.
  const int64_t n = 50;
  for (auto [master, part] : {std::pair{false, 0}, std::pair{false, 1},
                              std::pair{true, 0}, std::pair{true, 1}}) {
    Hyper hyper;
    hyper.lr = 3e-3;
    hyper.weightDecay = 0.1;
    hyper.step = 3;
    Vec grad = randomVec(n), param = randomVec(n), m = randomVec(40, 0.1),
        v = randomVec(40, 0.1), p0 = randomVec(40);
    for (double &x : v)
      x = std::fabs(x);
    double coefficient = 0.5;
    Harness h(on());
    uint32_t ig = h.input({n}, grad), ic = h.input({}, {coefficient}),
             ih = h.hyper(hyper);
    uint32_t value = h.add({n}, master ? DType::BF16 : DType::F32);
    uint32_t im = h.add({40}), iv = h.add({40});
    std::vector<uint32_t> outs = {value, im, iv};
    h.presetOutput(im, m);
    h.presetOutput(iv, v);
    h.presetOutput(value, param);
    Vec truth = param; // the fp32 values the update starts from
    if (master) {
      uint32_t ip = h.add({40});
      h.presetOutput(ip, p0);
      outs.push_back(ip);
    }
    h.run("adamw", {ig, ic, ih}, outs,
          {{"segments", listArg({0, 20, 1, 30, 20, 0})},
           {"windows", listArg({0, 10, 0, 30, 10, 20})},
           {"part", intArg(part)}});
    Vec expected(n), expectedM = m, expectedV = v, expectedMaster = p0;
    for (int64_t i = 0; i < n; ++i)
      expected[i] = master ? roundToBf16(float(param[i])) : param[i];
    for (auto [begin, state, decay] : {std::tuple{10 * part, 0, true},
                                       std::tuple{30 + 10 * part, 20, false}})
      for (int64_t e = 0; e < 10; ++e) {
        int64_t i = begin + e, s = state + e;
        double g = grad[i] * coefficient;
        double start = master ? p0[s] : truth[i];
        double p = start * (1 - hyper.lr * (decay ? hyper.weightDecay : 0));
        expectedM[s] = 0.9 * m[s] + 0.1 * g;
        expectedV[s] = 0.999 * v[s] + 0.001 * g * g;
        double mhat = expectedM[s] / (1 - std::pow(0.9, 3));
        double vhat = expectedV[s] / (1 - std::pow(0.999, 3));
        double updated = p - hyper.lr * mhat / (std::sqrt(vhat) + hyper.eps);
        if (master)
          expectedMaster[s] = updated;
        else
          expected[i] = updated;
      }
    expectClose(h.read(im), expectedM, 1e-6, "exp_avg");
    expectClose(h.read(iv), expectedV, 1e-6, "exp_avg_sq");
    if (master) {
      Vec written = h.read(outs[3]);
      expectClose(written, expectedMaster, 1e-6, "master");
      // The bf16 values: exactly the masters the kernel wrote, rounded to
      // nearest even; elsewhere untouched.
      for (auto [begin, state] :
           {std::pair{10 * part, 0}, std::pair{30 + 10 * part, 20}})
        for (int64_t e = 0; e < 10; ++e)
          expected[begin + e] = roundToBf16(float(written[state + e]));
      expectClose(h.read(value), expected, 0, "bf16 value");
    } else {
      expectClose(h.read(value), expected, 1e-6, "param");
    }
  }
}

TEST_P(Kernels, SliceEachPartAlongEachDimension) {
  const std::vector<int64_t> shape = {4, 6, 8};
  Vec x = randomVec(count(shape));
  for (int64_t dim : {0, 1, 2}) {
    const int64_t parts = 2;
    std::vector<int64_t> part = shape;
    part[dim] /= parts;
    for (int64_t p = 0; p < parts; ++p) {
      Harness h(on());
      uint32_t ix = h.input(shape, x), out = h.add(part);
      h.run("slice", {ix}, {out},
            {{"dim", intArg(dim)},
             {"part", intArg(p)},
             {"parts", intArg(parts)}});
      Vec expected;
      for (int64_t a = 0; a < part[0]; ++a)
        for (int64_t b = 0; b < part[1]; ++b)
          for (int64_t c = 0; c < part[2]; ++c) {
            int64_t at[3] = {a, b, c};
            at[dim] += p * part[dim];
            expected.push_back(
                x[(at[0] * shape[1] + at[1]) * shape[2] + at[2]]);
          }
      expectClose(h.read(out), expected, 0, "slice");
    }
  }
}

/// The mean cross-entropy over rows of `width` columns of which the first
/// `valid` are the vocabulary (the rest padding).
double refPaddedCrossEntropy(const Vec &logits,
                             const std::vector<int32_t> &labels, int64_t width,
                             int64_t valid) {
  Vec real;
  for (size_t i = 0; i < labels.size(); ++i)
    real.insert(real.end(), logits.begin() + i * width,
                logits.begin() + i * width + valid);
  return refCrossEntropy(real, labels, valid);
}

TEST_P(Kernels, CrossEntropyWithItsGradientInOneLaunch) {
  // The fused loss (strata-fuse-loss): loss and gradient of a vocabulary
  // of 37 padded to 40 columns, over rows enough for many blocks.
  const int64_t tokens = 130, vocab = 37, width = 40;
  Vec logits = randomVec(tokens * width, 2.0);
  auto labels = randomIds(tokens, vocab);
  const double seed = 0.25;
  auto loss = [&](const Vec &z) {
    return Vec{refPaddedCrossEntropy(z, labels, width, vocab)};
  };
  Harness h(on());
  uint32_t out = h.add({}), grad = h.add({tokens, width});
  h.run("cross_entropy_with_grad",
        {h.input({tokens, width}, logits), h.ids({tokens}, labels),
         h.input({}, {seed})},
        {out, grad}, {{"vocab_size", intArg(vocab)}});
  expectClose(h.read(out), loss(logits), kTol, "cross_entropy_with_grad loss");
  expectClose(h.read(grad), vjp(loss, logits, {seed}), kTol,
              "cross_entropy_with_grad gradient");
}

TEST_P(Kernels, VocabularyParallelLossFromRowStatistics) {
  // A vocabulary of 19 padded to 24 columns, split between three ranks of
  // 8: the last holds 3 real columns and 5 of padding. Each kernel gets
  // the float64 statistics (as the all-reduces would give them) and is
  // compared alone.
  const int64_t tokens = 7, vocab = 19, width = 24, columns = 8;
  Vec logits = randomVec(tokens * width, 2.0);
  auto labels = randomIds(tokens, vocab);
  Vec max(tokens, -INFINITY), target(tokens, 0.0), sum(tokens, 0.0);
  for (int64_t i = 0; i < tokens; ++i) {
    for (int64_t c = 0; c < vocab; ++c)
      max[i] = std::max(max[i], logits[i * width + c]);
    for (int64_t c = 0; c < vocab; ++c)
      sum[i] += std::exp(logits[i * width + c] - max[i]);
    target[i] = logits[i * width + labels[i]];
  }
  const double seed = 0.5;
  auto loss = [&](const Vec &z) {
    return Vec{refPaddedCrossEntropy(z, labels, width, vocab)};
  };
  Vec gradient = vjp(loss, logits, {seed});
  for (int64_t part = 0; part < 3; ++part) {
    int64_t offset = part * columns;
    int64_t valid = std::min(columns, vocab - offset);
    auto shard = [&](const Vec &full) {
      Vec out;
      for (int64_t i = 0; i < tokens; ++i)
        out.insert(out.end(), full.begin() + i * width + offset,
                   full.begin() + i * width + offset + columns);
      return out;
    };
    std::map<std::string, Arg> args = {{"vocab_size", intArg(vocab)},
                                       {"vocab_offset", intArg(offset)}};
    Vec ownMax(tokens, -INFINITY), ownTarget(tokens, 0.0), ownSum(tokens, 0.0);
    for (int64_t i = 0; i < tokens; ++i) {
      for (int64_t c = 0; c < valid; ++c) {
        double z = logits[i * width + offset + c];
        ownMax[i] = std::max(ownMax[i], z);
        ownSum[i] += std::exp(z - max[i]);
      }
      if (labels[i] >= offset && labels[i] < offset + valid)
        ownTarget[i] = logits[i * width + labels[i]];
    }
    Harness m(on());
    uint32_t ml = m.input({tokens, columns}, shard(logits)),
             mo = m.add({tokens});
    m.run("logits_max", {ml}, {mo}, args);
    expectClose(m.read(mo), ownMax, 0, "logits_max");

    Harness t(on());
    uint32_t tl = t.input({tokens, columns}, shard(logits)),
             ti = t.ids({tokens}, labels), to = t.add({tokens});
    t.run("logits_target", {tl, ti}, {to}, args);
    expectClose(t.read(to), ownTarget, 0, "logits_target");

    Harness s(on());
    uint32_t sl = s.input({tokens, columns}, shard(logits)),
             sm = s.input({tokens}, max), so = s.add({tokens});
    s.run("logits_sum_exp", {sl, sm}, {so}, args);
    expectClose(s.read(so), ownSum, kTol, "logits_sum_exp");

    Harness g(on());
    uint32_t gl = g.input({tokens, columns}, shard(logits)),
             gi = g.ids({tokens}, labels), gm = g.input({tokens}, max),
             gs = g.input({tokens}, sum), gd = g.input({}, {seed}),
             go = g.add({tokens, columns});
    g.run("cross_entropy_grad_from_stats", {gl, gi, gm, gs, gd}, {go}, args);
    expectClose(g.read(go), shard(gradient), kTol,
                "cross_entropy_grad_from_stats");

    // Both in one launch: every rank's loss is the whole one.
    Harness f(on());
    uint32_t fo = f.add({}), fg = f.add({tokens, columns});
    f.run("cross_entropy_with_grad_from_stats",
          {f.input({tokens, columns}, shard(logits)), f.ids({tokens}, labels),
           f.input({tokens}, max), f.input({tokens}, sum),
           f.input({tokens}, target), f.input({}, {seed})},
          {fo, fg}, args);
    expectClose(f.read(fo), loss(logits), kTol,
                "cross_entropy_with_grad_from_stats loss");
    expectClose(f.read(fg), shard(gradient), kTol,
                "cross_entropy_with_grad_from_stats gradient");
  }
  Harness l(on());
  uint32_t lm = l.input({tokens}, max), ls = l.input({tokens}, sum),
           lt = l.input({tokens}, target), lo = l.add({});
  l.run("cross_entropy_from_stats", {lm, ls, lt}, {lo});
  expectClose(l.read(lo), loss(logits), kTol, "cross_entropy_from_stats");
}

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

/// bf16 attention forward and backward of shape `a` on `device` (random
/// bf16 inputs) against float64: outputs within 1e-2, the log-sum-exp
/// (f32) within 1e-5; the gradients stored as `gradients`.
/// Attention's backward as the tensor-core kernels compute it
/// (compiler/codegen/EmitAttentionMma.cpp), in double otherwise: P
/// recomputed from the forward's log-sum-exp, D = rowsum(dO ⊙ O) from the
/// output as stored, and P (for dV = Pᵀ·dO) and dS = P ⊙ (dP − D) (for
/// dQ = scale·dS·K and dK = scale·dSᵀ·Q) rounded to bf16 as those products'
/// operands. Their exact gradients differ from these by the sum of many
/// bf16 roundings of dS (over 1% of the largest gradient for some inputs),
/// which is the algorithm's, as in flash attention; the kernel is held to
/// this. Returns dq, dk, dv.
std::array<Vec, 3> refAttentionBwdOnTensorCores(const AttnDims &a,
                                                const Vec &q, const Vec &k,
                                                const Vec &v, const Vec &o,
                                                const Vec &lse,
                                                const Vec &dout) {
  Vec dq(q.size(), 0.0), dk(k.size(), 0.0), dv(v.size(), 0.0);
  const double scale = 1 / std::sqrt(double(a.d));
  auto at = [&](int64_t bi, int64_t row, int64_t heads, int64_t head) {
    return ((bi * a.s + row) * heads + head) * a.d;
  };
  for (int64_t bi = 0; bi < a.b; ++bi)
    for (int64_t h = 0; h < a.h; ++h) {
      int64_t g = (a.offset + h) / a.groupSize();
      for (int64_t i = 0; i < a.s; ++i) {
        const double *qi = &q[at(bi, i, a.h, h)], *oi = &o[at(bi, i, a.h, h)],
                     *doi = &dout[at(bi, i, a.h, h)];
        double rowLse = float(lse[(bi * a.h + h) * a.s + i]); // stored f32
        double dRow = 0;
        for (int64_t x = 0; x < a.d; ++x)
          dRow += doi[x] * oi[x];
        int64_t n = a.causal ? i + 1 : a.s;
        for (int64_t j = 0; j < n; ++j) {
          const double *kj = &k[at(bi, j, a.kv, g)], *vj = &v[at(bi, j, a.kv, g)];
          double score = 0, dp = 0;
          for (int64_t x = 0; x < a.d; ++x) {
            score += qi[x] * kj[x];
            dp += doi[x] * vj[x];
          }
          double p = std::exp(score * scale - rowLse);
          double pRounded = roundToBf16(float(p));
          double ds = roundToBf16(float(p * (dp - dRow)));
          for (int64_t x = 0; x < a.d; ++x) {
            dv[at(bi, j, a.kv, g) + x] += pRounded * doi[x];
            dq[at(bi, i, a.h, h) + x] += scale * ds * kj[x];
            dk[at(bi, j, a.kv, g) + x] += scale * ds * qi[x];
          }
        }
      }
    }
  return {dq, dk, dv};
}

void expectBf16Attention(const Device &device, const AttnDims &a,
                         DType gradients) {
  const DType bf16 = DType::BF16;
  Vec q = roundedToBf16(randomVec(a.b * a.s * a.h * a.d)),
      k = roundedToBf16(randomVec(a.b * a.s * a.kv * a.d)),
      v = roundedToBf16(randomVec(a.b * a.s * a.kv * a.d)),
      dout = roundedToBf16(randomVec(q.size()));
  std::map<std::string, Arg> args = {{"causal", boolArg(a.causal)},
                                     {"group_size", intArg(a.groupSize())},
                                     {"query_head_offset", intArg(a.offset)}};
  const std::vector<int64_t> qShape = {a.b, a.s, a.h, a.d},
                             kvShape = {a.b, a.s, a.kv, a.d};
  Vec lse;
  Vec o = refAttention(a, q, k, v, &lse);
  Harness h(device);
  uint32_t out = h.add(qShape, bf16), ilse = h.add({a.b, a.h, a.s});
  h.run("attention_fwd",
        {h.input(qShape, q, bf16), h.input(kvShape, k, bf16),
         h.input(kvShape, v, bf16)},
        {out, ilse}, args);
  expectClose(h.read(out), o, kTolBf16, "attention_fwd");
  expectClose(h.read(ilse), lse, kTol, "attention_fwd log-sum-exp");

  Harness g(device);
  uint32_t dq = g.add(qShape, gradients), dk = g.add(kvShape, gradients),
           dv = g.add(kvShape, gradients);
  g.run("attention_bwd",
        {g.input(qShape, q, bf16), g.input(kvShape, k, bf16),
         g.input(kvShape, v, bf16), g.input(qShape, roundedToBf16(o), bf16),
         g.input({a.b, a.h, a.s}, lse), g.input(qShape, dout, bf16)},
        {dq, dk, dv}, args);
  if (device != "cpu") {
    // The tensor-core kernels (simt runs the generated ones): against what
    // they compute, within the gradients' own rounding (2^-9 of the
    // largest) and a P or dS that rounds the other way from f32 than from
    // double.
    auto [refQ, refK, refV] = refAttentionBwdOnTensorCores(
        a, q, k, v, roundedToBf16(o), lse, dout);
    constexpr double kTolOnTensorCores = 4e-3;
    expectClose(g.read(dq), refQ, kTolOnTensorCores, "query gradient");
    expectClose(g.read(dk), refK, kTolOnTensorCores, "key gradient");
    expectClose(g.read(dv), refV, kTolOnTensorCores, "value gradient");
    return;
  }
  // The CPU's: f32 throughout, against the exact gradients.
  expectClose(
      g.read(dq),
      vjp([&](const Vec &x) { return refAttention(a, x, k, v); }, q, dout),
      kTolBf16, "query gradient");
  expectClose(
      g.read(dk),
      vjp([&](const Vec &x) { return refAttention(a, q, x, v); }, k, dout),
      kTolBf16, "key gradient");
  expectClose(
      g.read(dv),
      vjp([&](const Vec &x) { return refAttention(a, q, k, x); }, v, dout),
      kTolBf16, "value gradient");
}

TEST_P(Kernels, Bf16AttentionAndLoss) {
  const DType bf16 = DType::BF16;
  expectBf16Attention(on(), {1, 16, 4, 2, 16, true}, bf16);

  const int64_t tokens = 12, vocab = 40;
  Vec logits = roundedToBf16(randomVec(tokens * vocab, 2.0));
  auto labels = randomIds(tokens, vocab);
  Harness l(on());
  uint32_t loss = l.add({});
  l.run("cross_entropy_fwd",
        {l.input({tokens, vocab}, logits, bf16), l.ids({tokens}, labels)},
        {loss}, {{"vocab_size", intArg(vocab)}});
  // The loss is f32: from the bf16 logits, only f32's rounding.
  expectClose(l.read(loss), {refCrossEntropy(logits, labels, vocab)}, kTol,
              "bf16 cross_entropy_fwd");
  Harness lg(on());
  uint32_t grad = lg.add({tokens, vocab}, bf16);
  lg.run("cross_entropy_bwd",
         {lg.input({tokens, vocab}, logits, bf16), lg.ids({tokens}, labels),
          lg.input({}, {1.0})},
         {grad}, {{"vocab_size", intArg(vocab)}});
  // The gradient's entries are O(1/tokens): relative to its largest.
  Vec expected =
      vjp([&](const Vec &z) { return Vec{refCrossEntropy(z, labels, vocab)}; },
          logits, {1.0});
  double largest = 0;
  for (double e : expected)
    largest = std::max(largest, std::fabs(e));
  expectClose(lg.read(grad), expected, kTolBf16 * largest,
              "bf16 cross_entropy_bwd");
}

TEST_P(Kernels, Bf16AttentionOnTensorCoresAcrossTilesAndShapes) {
  // bf16 attention runs on tensor cores (mma.sync): blocks of 64 query
  // rows, tiles of 32 keys. Shapes that cross both with partial ones, a
  // head dimension that is a multiple of 8 but not of 16 (padded for the
  // products over it), 64, grouped queries with a first query head past 0,
  // causal and not. The output gradients are f32 and bf16.
  const DType bf16 = DType::BF16;
  struct Case {
    AttnDims a;
    DType gradients;
  };
  for (const Case &c : {Case{{1, 70, 2, 1, 24, true}, DType::F32},
                        Case{{1, 70, 2, 1, 24, false}, bf16},
                        Case{{2, 33, 3, 2, 8, true, 2, 1}, bf16},
                        Case{{1, 40, 1, 1, 64, true}, DType::F32}}) {
    SCOPED_TRACE("s " + std::to_string(c.a.s) + " d " + std::to_string(c.a.d) +
                 (c.a.causal ? " causal" : ""));
    expectBf16Attention(on(), c.a, c.gradients);
  }
}

TEST_P(Kernels, FusedPointwiseChainEqualsItsMembers) {
  // A group as the fusion pass makes them: residual and bias adds (the
  // bias broadcast), GELU, a cast to bf16 that a later member reads back,
  // scaling, accumulation in place and a two-input gradient. On the CPU
  // the members run one by one; on a GPU as one generated kernel, whose
  // registers must hold what the buffers hold (the bf16-rounded value).
  const int64_t rows = 5, cols = 24, n = rows * cols;
  Vec x = randomVec(n), r = randomVec(n), bias = randomVec(cols),
      start = randomVec(n);
  Harness h(on());
  uint32_t ix = h.input({rows, cols}, x), ir = h.input({rows, cols}, r),
           ibias = h.input({cols}, bias);
  uint32_t a = h.add({rows, cols}), b = h.add({rows, cols}),
           g = h.add({rows, cols}), cast = h.add({rows, cols}, DType::BF16),
           m = h.add({rows, cols}), s = h.add({rows, cols}),
           acc = h.add({rows, cols}), d = h.add({rows, cols});
  h.presetOutput(acc, start);
  h.runFused({{"add", {ix, ir}, {a}, {}},
              {"add", {a, ibias}, {b}, {}},
              {"gelu_fwd", {b}, {g}, {}},
              {"copy", {g}, {cast}, {}},
              {"mul", {cast, ix}, {m}, {}},
              {"scale", {m}, {s}, {{"factor", floatArg(-0.5)}}},
              {"accumulate", {s}, {acc}, {}},
              {"silu_bwd", {a, s}, {d}, {}}});
  Vec ea(n), eb(n), eg(n), em(n), es(n), eacc(n), ed(n);
  Vec castRead = h.read(cast);
  for (int64_t i = 0; i < n; ++i) {
    ea[i] = x[i] + r[i];
    eb[i] = ea[i] + bias[i % cols];
    eg[i] = gelu(eb[i]);
    // From the cast as it was stored: a later member reads those bits.
    em[i] = castRead[i] * x[i];
    es[i] = -0.5 * em[i];
    eacc[i] = start[i] + es[i];
    double sig = 1 / (1 + std::exp(-ea[i]));
    ed[i] = es[i] * sig * (1 + ea[i] * (1 - sig));
  }
  expectClose(h.read(a), ea, kTol, "residual add");
  expectClose(h.read(b), eb, kTol, "bias add");
  expectClose(h.read(g), eg, kTol, "gelu");
  expectClose(castRead, roundedToBf16(eg), kTolBf16, "cast to bf16");
  expectClose(h.read(m), em, kTol, "mul of the cast");
  expectClose(h.read(s), es, kTol, "scale");
  expectClose(h.read(acc), eacc, kTol, "accumulate");
  expectClose(h.read(d), ed, kTol, "silu_bwd");
}

TEST_P(Kernels, ResidualAddsFusedIntoTheNormAfterThem) {
  // A residual add, a bias add and the norm of what they wrote, as the
  // fusion pass closes a group with a norm: on a GPU one kernel whose warp
  // for a row runs the adds on the row, then the norm. 70 columns: lanes
  // with three elements and lanes with two. Also in bf16, where the norm
  // reads the sum as its buffer rounded it; and with the norm's output on
  // the residual's bytes, as memory planning may place it (the lane that
  // read element c of x writes element c of y).
  const int64_t rows = 7, cols = 70, n = rows * cols;
  const double eps = 1e-5;
  for (DType dtype : {DType::F32, DType::BF16})
    for (bool layerNorm : {true, false})
      for (bool inPlace : {false, true}) {
        bool bf16 = dtype == DType::BF16;
        Vec x = randomVec(n), r = randomVec(n), bias = randomVec(cols),
            w = randomVec(cols), b = randomVec(cols);
        if (bf16) {
          x = roundedToBf16(x);
          r = roundedToBf16(r);
        }
        Harness h(on());
        uint32_t ix = h.input({rows, cols}, x, dtype),
                 ir = h.input({rows, cols}, r, dtype),
                 ibias = h.input({cols}, bias), iw = h.input({cols}, w);
        uint32_t a = h.add({rows, cols}, dtype),
                 sum = h.add({rows, cols}, dtype),
                 y = inPlace ? h.alias(ix) : h.add({rows, cols}, dtype);
        std::vector<uint32_t> normIns = {sum, iw};
        if (layerNorm)
          normIns.push_back(h.input({cols}, b));
        h.runFused({{"add", {ix, ir}, {a}, {}},
                    {"add", {a, ibias}, {sum}, {}},
                    {layerNorm ? "layer_norm_fwd" : "rms_norm_fwd",
                     normIns,
                     {y},
                     {{"epsilon", floatArg(eps)}}}});
        Vec ea(n), esum(n);
        for (int64_t i = 0; i < n; ++i) {
          ea[i] = bf16 ? roundToBf16(float(x[i] + r[i])) : x[i] + r[i];
          esum[i] = ea[i] + bias[i % cols];
          if (bf16)
            esum[i] = roundToBf16(float(esum[i]));
        }
        Vec ey = refNorm(esum, w, layerNorm ? &b : nullptr, cols, eps);
        double tol = bf16 ? kTolBf16 : kTol;
        std::string what = std::string(layerNorm ? "layer" : "rms") +
                           (bf16 ? " norm, bf16" : " norm") +
                           (inPlace ? ", on x: " : ": ");
        expectClose(h.read(a), ea, tol, (what + "residual add").c_str());
        expectClose(h.read(sum), esum, tol, (what + "bias add").c_str());
        expectClose(h.read(y), bf16 ? roundedToBf16(ey) : ey, tol,
                    (what + "norm").c_str());
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
