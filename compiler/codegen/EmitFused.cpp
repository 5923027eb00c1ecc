//===- EmitFused.cpp - a chain of pointwise launches as one kernel --------===//
//
// A thread per element runs every member on its element in order, so a
// value one member writes and a later one reads stays in a register, and
// what the group reads from memory is read once. Buffers are told apart by
// the ids the caller gives (by their bytes: two names of the same elements
// must be one value, or a register would go stale). Each member's math is the
// single kernel's (pointwiseValue), and each output is stored as the
// member's own kernel stores it, so the group writes the same bytes as
// its members run one by one. A norm's forward may close the group (the
// residual add before a norm): its warps run the members on their row's
// elements first, then the norm on what they stored. Which launches may
// be one kernel is strata-fuse-elementwise's decision, on bytes; this
// trusts it (ids cannot show a partial overlap).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include <map>

namespace strata::codegen {

namespace {

std::string param(size_t member, size_t operand) {
  return "p" + std::to_string(member) + "_" + std::to_string(operand);
}

/// The group's last member `m`, a norm's forward whose warps run the
/// members before it (`body`) on their row's elements first; its operands
/// named as its own kernel names them.
std::string closeWithNorm(const std::vector<FusedMember> &members, size_t m,
                          const std::string &body, KernelCode &code) {
  const LaunchDesc &launch = members[m].launch;
  const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
  std::string aliases;
  for (unsigned k = 0; k < spec.operands.size(); ++k)
    aliases += std::string("  auto ") + spec.operands[k].name + " = " +
               param(m, k) + ";\n";
  if (std::string error = emitNormFwdAfter(launch, body, code); !error.empty())
    return error;
  code.body = aliases + code.body;
  return "";
}

} // namespace

std::string emitFused(const std::vector<FusedMember> &members,
                      KernelCode &code) {
  code = KernelCode();
  if (members.size() < 2)
    return "a fused kernel has two members or more";
  int64_t n = -1;
  // The buffers read or written so far, each with the register holding
  // this thread's element of it.
  std::map<int, std::string> registers;
  std::string body;
  for (size_t m = 0; m < members.size(); ++m) {
    const LaunchDesc &launch = members[m].launch;
    const std::vector<int> &buffers = members[m].buffers;
    const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
    bool tail =
        m > 0 && m + 1 == members.size() && closesFusedGroup(launch.kernel);
    if (!isPointwise(launch.kernel) && !tail)
      return std::string("'") + spec.name + "' is not a pointwise kernel";
    if (std::string error = checkAgainstCatalog(launch); !error.empty())
      return error;
    unsigned inputs = spec.inputs();
    if (buffers.size() != spec.operands.size())
      return std::string("member '") + spec.name + "' has " +
             std::to_string(buffers.size()) + " buffer ids";
    int64_t count = launch.operands[inputs].elements();
    if (n >= 0 && count != n)
      return "the members run over different numbers of elements";
    n = count;
    if (tail)
      return closeWithNorm(members, m, body, code);
    auto value = [&](unsigned k) -> std::string {
      std::string index = pointwiseIndex(launch, k);
      if (index != "i") // broadcast: another buffer than any output
        return "load(" + param(m, k) + ", " + index + ")";
      auto [it, fresh] = registers.try_emplace(
          buffers[k], "r" + std::to_string(registers.size()));
      if (fresh) // loaded once, kept for the members after
        body +=
            "    float " + it->second + " = load(" + param(m, k) + ", i);\n";
      return it->second;
    };
    std::vector<std::string> in;
    for (unsigned k = 0; k < inputs; ++k)
      in.push_back(value(k));
    if (launch.kernel == runtime::KernelId::Accumulate)
      in.push_back(value(inputs));
    std::string out = param(m, inputs), v = "v" + std::to_string(m);
    body +=
        fill("    float $V = stored($OUT, $VALUE);\n    store($OUT, i, $V);\n",
             {{"V", v}, {"OUT", out}, {"VALUE", pointwiseValue(launch, in)}});
    registers[buffers[inputs]] = v;
  }
  body.pop_back(); // forEach adds the line's end
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor(n, kThreads), 1, 1};
  code.body = forEach(n, body);
  return "";
}

std::string fusedUnit(const std::vector<FusedMember> &members,
                      const KernelCode &code, const std::string &name) {
  std::string params;
  std::vector<runtime::KernelId> kernels;
  for (size_t m = 0; m < members.size(); ++m) {
    const LaunchDesc &launch = members[m].launch;
    const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
    kernels.push_back(launch.kernel);
    for (size_t k = 0; k < spec.operands.size(); ++k)
      addPointerParam(params, launch, k, param(m, k));
  }
  return unitText(code, kernels, name, params);
}

} // namespace strata::codegen
