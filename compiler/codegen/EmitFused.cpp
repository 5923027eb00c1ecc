//===- EmitFused.cpp - pointwise chains as one functor --------------------===//
//
// A chain of pointwise launches, one alone or a group the fusion pass made
// one kernel, becomes the unit's functor `Chain`: its call runs every member
// on V consecutive elements from i, in order. A value one member writes and
// a later one reads stays in registers (as its buffer holds it: bf16-rounded
// for a bf16 buffer), what comes from memory is loaded once, V at a time
// (16-byte loads where every pointer is aligned), and every output is stored
// as the member's own kernel stores it, so the chain writes the same bytes
// as its members run one by one. Buffers are told apart by the ids the
// caller gives (by their bytes: two names of the same elements must be one
// value, or a register would go stale). cuda/pointwise.cuh's loop calls the
// functor over the elements; a norm's forward that closes a group (the
// residual add before it) calls it on each chunk of its row and normalizes
// the values it returns for the norm's input (cuda/norms.cuh). Which
// launches may be one kernel is strata-fuse-elementwise's decision, on
// bytes; this trusts it (ids cannot show a partial overlap).
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"

#include <map>

namespace strata::codegen {

namespace {

std::string param(size_t member, size_t operand) {
  return "p" + std::to_string(member) + "_" + std::to_string(operand);
}

} // namespace

std::string emitChain(const std::vector<FusedMember> &members, size_t count,
                      const ChainNames &names, int closingInput,
                      ChainCode &chain) {
  chain = ChainCode();
  int64_t n = -1;
  // The buffers read or written so far, each with the register array
  // holding this thread's elements of it.
  std::map<int, std::string> registers;
  std::string fields, body, vectors;
  bool broadcastsFit = true;
  for (size_t m = 0; m < count; ++m) {
    const LaunchDesc &launch = members[m].launch;
    const std::vector<int> &buffers = members[m].buffers;
    const runtime::KernelSpec &spec = runtime::kernelSpec(launch.kernel);
    if (!isPointwise(launch.kernel))
      return std::string("'") + spec.name + "' is not a pointwise kernel";
    if (std::string error = checkAgainstCatalog(launch); !error.empty())
      return error;
    unsigned inputs = spec.inputs();
    if (buffers.size() != spec.operands.size())
      return std::string("member '") + spec.name + "' has " +
             std::to_string(buffers.size()) + " buffer ids";
    int64_t elements = launch.operands[inputs].elements();
    if (n >= 0 && elements != n)
      return "the members run over different numbers of elements";
    n = elements;
    for (unsigned k = 0; k < spec.operands.size(); ++k) {
      bool output = spec.operands[k].output;
      fields += std::string("  ") + (output ? "" : "const ") +
                ctype(launch.operands[k].dtype) + " *" + names(m, k) + ";\n";
      vectors += (vectors.empty() ? "" : " && ") + std::string("aligned16(") +
                 names(m, k) + ")";
    }
    auto value = [&](unsigned k) -> std::string {
      std::string index = pointwiseIndex(launch, k);
      if (index != "i") { // broadcast: another buffer than any output
        int64_t width = launch.operands[k].elements();
        broadcastsFit &= width % 8 == 0;
        std::string r = "b" + std::to_string(m) + "_" + std::to_string(k);
        body += "    float " + r + "[V];\n    loadN<V>(" + names(m, k) + ", " +
                index + ", " + r + ");\n";
        return r;
      }
      auto [it, fresh] = registers.try_emplace(
          buffers[k], "r" + std::to_string(registers.size()));
      if (fresh) // loaded once, kept for the members after
        body += "    float " + it->second + "[V];\n    loadN<V>(" +
                names(m, k) + ", i, " + it->second + ");\n";
      return it->second;
    };
    std::vector<std::string> in;
    for (unsigned k = 0; k < inputs; ++k)
      in.push_back(value(k) + "[e]");
    if (launch.kernel == runtime::KernelId::Accumulate)
      in.push_back(value(inputs) + "[e]");
    std::string out = names(m, inputs), v = "v" + std::to_string(m);
    body +=
        fill(R"(    float $V[V];
#pragma unroll
    for (int e = 0; e < V; ++e)
      $V[e] = stored($OUT, $VALUE);
    storeN<V>($OUT, i, $V);
)",
             {{"V", v}, {"OUT", out}, {"VALUE", pointwiseValue(launch, in)}});
    registers[buffers[inputs]] = v;
  }
  // What the call returns: the closing norm's input as the chain left it,
  // or the last member's output.
  std::string result;
  if (closingInput >= 0) {
    auto it = registers.find(closingInput);
    if (it == registers.end())
      return "the norm that closes the group reads no buffer the members "
             "wrote or read";
    result = it->second;
  } else {
    result = "v" + std::to_string(count - 1);
  }
  chain.elements = n;
  chain.vectors = broadcastsFit ? vectors : "false";
  chain.type = "\n// The chain of pointwise kernels, on V elements from i.\n"
               "struct Chain {\n" +
               fields +
               "  template <int V>\n"
               "  __device__ __forceinline__ void operator()(i64 i, "
               "float out[V]) const {\n" +
               body + "#pragma unroll\n    for (int e = 0; e < V; ++e)\n" +
               "      out[e] = " + result + "[e];\n  }\n};\n";
  chain.construct = "Chain{";
  for (size_t m = 0; m < count; ++m) {
    const runtime::KernelSpec &spec =
        runtime::kernelSpec(members[m].launch.kernel);
    for (unsigned k = 0; k < spec.operands.size(); ++k)
      chain.construct += (chain.construct.size() > 6 ? ", " : "") + names(m, k);
  }
  chain.construct += "}";
  return "";
}

std::string emitFused(const std::vector<FusedMember> &members,
                      KernelCode &code) {
  code = KernelCode();
  if (members.size() < 2)
    return "a fused kernel has two members or more";
  const FusedMember &last = members.back();
  bool closed = closesFusedGroup(last.launch.kernel);
  if (closed) {
    // The norm reads the group's elements: a row of its input each warp.
    if (std::string error = checkAgainstCatalog(last.launch); !error.empty())
      return error;
    if (last.launch.operands[0].elements() !=
        members[0]
            .launch
            .operands[runtime::kernelSpec(members[0].launch.kernel).inputs()]
            .elements())
      return "the members run over different numbers of elements";
  }
  ChainCode chain;
  size_t count = closed ? members.size() - 1 : members.size();
  if (std::string error = emitChain(members, count, param,
                                    closed ? last.buffers[0] : -1, chain);
      !error.empty())
    return error;
  if (!closed) {
    code.sources = {"pointwise.cuh"};
    code.globals = chain.type;
    code.block = {kThreads, 1, 1};
    code.grid = {blocksFor((chain.elements + 7) / 8, kThreads), 1, 1};
    code.body = "  pointwise(" + chain.construct + ", " + num(chain.elements) +
                ", " + chain.vectors + ");\n";
    return "";
  }
  // The norm's operands named as the group's launch contract names them.
  size_t m = members.size() - 1;
  std::vector<std::string> operands;
  for (size_t k = 0; k < last.launch.operands.size(); ++k)
    operands.push_back(param(m, k));
  if (std::string error = emitNormFwdWith(last.launch, operands, chain.type,
                                          chain.construct, chain.vectors, code);
      !error.empty())
    return error;
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
