//===- CudaKernel.cpp - a launch's translation unit -----------------------===//
#include "compiler/codegen/Emitters.h"
#include "runtime/plan/PlanCheck.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace strata::codegen {

using runtime::DType;

int64_t OperandDesc::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::string
fill(std::string_view pattern,
     std::initializer_list<std::pair<std::string_view, std::string>> values) {
  std::string out;
  out.reserve(pattern.size() + 64);
  for (size_t i = 0; i < pattern.size();) {
    if (pattern[i] != '$') {
      out += pattern[i++];
      continue;
    }
    size_t end = i + 1;
    while (end < pattern.size() &&
           (std::isalnum(static_cast<unsigned char>(pattern[end])) ||
            pattern[end] == '_'))
      ++end;
    std::string_view name = pattern.substr(i + 1, end - i - 1);
    bool found = false;
    for (const auto &[key, value] : values)
      if (key == name) {
        out += value;
        found = true;
        break;
      }
    if (!found) // not a placeholder: kept as written
      out.append(pattern.substr(i, end - i));
    i = end;
  }
  return out;
}

std::string num(int64_t value) {
  // An i64 literal: no int overflow in the products the kernels form.
  return std::to_string(value) + "LL";
}

std::string f32(double value) {
  float v = static_cast<float>(value);
  if (std::isfinite(v)) {
    char text[48];
    std::snprintf(text, sizeof text, "%.9gf", v);
    // "1f" is not a literal: make it "1.f".
    std::string out = text;
    if (out.find_first_of(".e") == std::string::npos)
      out.insert(out.size() - 1, ".");
    return out;
  }
  uint32_t bits;
  std::memcpy(&bits, &v, 4);
  char text[40];
  std::snprintf(text, sizeof text, "__uint_as_float(0x%08xu)", bits);
  return text;
}

std::string f64(double value) {
  if (!std::isfinite(value)) {
    uint64_t bits;
    std::memcpy(&bits, &value, 8);
    char text[48];
    std::snprintf(text, sizeof text, "__longlong_as_double(0x%016llxLL)",
                  static_cast<unsigned long long>(bits));
    return text;
  }
  char text[48];
  std::snprintf(text, sizeof text, "%.17g", value);
  std::string out = text;
  if (out.find_first_of(".e") == std::string::npos)
    out += ".0";
  return out;
}

const char *ctype(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "float";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "int";
  }
  return "float";
}

uint32_t blocksFor(int64_t n, uint32_t threads, uint32_t cap) {
  int64_t blocks = (n + threads - 1) / threads;
  return static_cast<uint32_t>(
      std::max<int64_t>(1, std::min<int64_t>(blocks, cap)));
}

std::string forEach(int64_t n, std::string_view body) {
  return fill(
      R"(  for (i64 i = blockIdx.x * (i64)blockDim.x + threadIdx.x; i < $N;
       i += (i64)gridDim.x * blockDim.x) {
$BODY
  }
)",
      {{"N", num(n)}, {"BODY", std::string(body)}});
}

// What every unit starts with (Prelude.cuh, embedded at build time as
// kUnitPrelude): bf16 as its 16 bits (no CUDA header, so NVRTC needs none
// and a unit compiles in milliseconds), loads that widen to f32 and stores
// that round to nearest even as the CPU backend does
// (runtime/base/BFloat16.h), and the reductions the kernels share. Sums
// over a block add the warps' partials in a fixed order, so that a kernel
// gives the same bits on every run.
extern const char *const kUnitPrelude;

const char *unitPrelude() { return kUnitPrelude; }

namespace {

using Emitter = std::string (*)(const LaunchDesc &, KernelCode &);

constexpr Emitter kEmitters[] = {
#define KERNEL(Name, text) &emit##Name,
#include "runtime/plan/Kernels.def"
};
static_assert(sizeof kEmitters / sizeof kEmitters[0] == runtime::kKernelCount);

} // namespace

std::string checkAgainstCatalog(const LaunchDesc &launch) {
  runtime::LaunchOp op;
  op.kernel = launch.kernel;
  std::vector<runtime::Buffer> buffers;
  for (const OperandDesc &operand : launch.operands) {
    if (!operand.present) {
      op.operands.push_back(runtime::kNoBuffer);
      continue;
    }
    runtime::Buffer &b = buffers.emplace_back();
    b.name = "operand " + std::to_string(op.operands.size());
    b.dtype = operand.dtype;
    b.shape = operand.shape;
    b.elements = operand.elements();
    b.bytes = uint64_t(b.elements) * runtime::dtypeBytes(b.dtype);
    op.operands.push_back(uint32_t(buffers.size() - 1));
  }
  for (const AttrDesc &attr : launch.attrs)
    op.attrs.push_back({attr.i, attr.f, attr.list});
  return runtime::checkLaunch(op, buffers, runtime::CheckContext());
}

std::string emitKernel(const LaunchDesc &launch, KernelCode &code) {
  // The emitters read shapes and arguments as the catalog's rules allow
  // (an exec-level input is not checked before).
  if (std::string error = checkAgainstCatalog(launch); !error.empty())
    return error;
  code = KernelCode();
  return kEmitters[static_cast<size_t>(launch.kernel)](launch, code);
}

std::string kernelUnit(const LaunchDesc &launch, const KernelCode &code,
                       const std::string &name) {
  const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
  std::string params;
  for (size_t i = 0; i < spec.operands.size(); ++i)
    addPointerParam(params, launch, i, spec.operands[i].name);
  for (const runtime::AttrSpec &attr : spec.attrs)
    if (attr.kind == runtime::AttrKind::Int)
      params += std::string(", i64 ") + attr.name;
  return unitText(code, {launch.kernel}, name, params);
}

void addPointerParam(std::string &params, const LaunchDesc &launch,
                     size_t index, const std::string &name) {
  bool output = runtime::kernelSpec(launch.kernel).operands[index].output;
  params += params.empty() ? "" : ", ";
  params += output ? "" : "const ";
  params += std::string(ctype(launch.operands[index].dtype)) + " *" + name;
}

/// `text` as comment lines of at most 80 columns, the first after
/// `first`, the others indented under it.
static std::string commentLines(const std::string &first,
                                const std::string &text) {
  // Columns, not bytes: the math's symbols are several UTF-8 bytes.
  auto columns = [](const std::string &s) {
    return std::count_if(s.begin(), s.end(),
                         [](char c) { return (c & 0xC0) != 0x80; });
  };
  std::string out, line = first;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = std::min(text.find(' ', start), text.size());
    std::string word = text.substr(start, end - start);
    if (columns(line) + 1 + columns(word) > 80 && line.size() > first.size()) {
      out += line + "\n";
      line = "//     " + word;
    } else {
      line += " " + word;
    }
    start = end + 1;
  }
  return out + line + "\n";
}

std::string unitText(const KernelCode &code,
                     const std::vector<runtime::KernelId> &kernels,
                     const std::string &name, const std::string &params) {
  // The unit opens with what it computes, as the catalog states it.
  std::string what = runtime::fusedKernelName(kernels);
  std::string header;
  if (kernels.size() == 1) {
    header = "// " + what + ", as runtime/plan/Kernels.def states it:\n" +
             commentLines("//  ", runtime::kernelSpec(kernels[0]).math);
  } else {
    header = "// " + what +
             ", as runtime/plan/Kernels.def states its "
             "members:\n";
    for (runtime::KernelId kernel : kernels)
      header +=
          commentLines(std::string("//   ") + runtime::kernelName(kernel) + ":",
                       runtime::kernelSpec(kernel).math);
  }
  // Blocks enough to fill half an SM's 2048 threads: ptxas then has 64
  // registers a thread, where the bare thread count would hold it to the
  // 32 of full occupancy and make it spill.
  uint32_t threads = code.block[0] * code.block[1] * code.block[2];
  uint32_t blocks =
      code.blocksPerSm
          ? code.blocksPerSm
          : std::max<uint32_t>(1, 1024 / std::max<uint32_t>(1, threads));
  return header + kUnitPrelude + code.globals + "\n// " + what +
         "\nextern \"C\" __global__ void __launch_bounds__(" +
         std::to_string(threads) + ", " + std::to_string(blocks) + ")\n" +
         name + "(" + params + ") {\n" + code.body + "}\n";
}

} // namespace strata::codegen
