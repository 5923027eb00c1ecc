//===- Emitters.h - what the kernel emitters share --------------*- C++ -*-===//
//
// One emitter per kernel of the catalog, emit<Name> (a kernel without one
// does not link), grouped by family in the Emit*.cpp files, and the
// helpers they write their text with.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_CODEGEN_EMITTERS_H
#define STRATA_COMPILER_CODEGEN_EMITTERS_H

#include "compiler/codegen/CudaKernel.h"

#include <functional>
#include <initializer_list>
#include <string_view>
#include <utility>

namespace strata::codegen {

/// `pattern` with each `$NAME` replaced by its value (longest names are
/// not special: names must not be prefixes of each other).
std::string
fill(std::string_view pattern,
     std::initializer_list<std::pair<std::string_view, std::string>> values);

/// Literals: an integer, an f32 constant, an f64 constant (exact).
std::string num(int64_t value);
std::string f32(double value);
std::string f64(double value);

/// The C type an operand's elements are stored as.
const char *ctype(runtime::DType dtype);

/// Threads per block of the one-dimensional kernels.
inline constexpr uint32_t kThreads = 256;

/// A grid of blocks of `threads` covering `n` items, at most `cap` blocks
/// (kernels loop when there are more).
uint32_t blocksFor(int64_t n, uint32_t threads, uint32_t cap = 65535);

/// A launch's operands and attributes by catalog position.
struct View {
  const LaunchDesc &launch;
  const OperandDesc &op(unsigned i) const { return launch.operands[i]; }
  int64_t count(unsigned i) const { return op(i).elements(); }
  const std::vector<int64_t> &shape(unsigned i) const { return op(i).shape; }
  int64_t lastDim(unsigned i) const {
    return shape(i).empty() ? 1 : shape(i).back();
  }
  const AttrDesc &attr(unsigned i) const { return launch.attrs[i]; }
  bool flag(unsigned i) const { return attr(i).i != 0; }
};

/// The body of a loop over `n` items, `i` the item: a grid-stride loop.
std::string forEach(int64_t n, std::string_view body);

/// What every unit starts with: a line that says where it comes from and
/// cuda/common.cuh (bf16 loads and stores, reductions).
std::string unitPrelude();

/// The kernels isPointwise names, listed once.
#define STRATA_POINTWISE_KERNELS(X)                                            \
  X(Copy)                                                                      \
  X(Add)                                                                       \
  X(Sub)                                                                       \
  X(Mul)                                                                       \
  X(Scale)                                                                     \
  X(Accumulate) X(GeluFwd) X(GeluBwd) X(GeluTanhFwd) X(GeluTanhBwd) X(SiluFwd) \
      X(SiluBwd)

/// Appends to a kernel's parameter list the pointer to launch operand
/// `index` (const for an input), called `name`.
void addPointerParam(std::string &params, const LaunchDesc &launch,
                     size_t index, const std::string &name);

/// A unit's text: the math of the catalog kernels it computes (their
/// MATH in Kernels.def), the prelude, the code's globals and its kernel
/// `name` with `params`.
std::string unitText(const KernelCode &code,
                     const std::vector<runtime::KernelId> &kernels,
                     const std::string &name, const std::string &params);

/// A pointwise kernel's output at element `i`, from C expressions of its
/// inputs' elements in catalog order (accumulate's then its output's
/// current value); "" for a kernel that is not pointwise.
std::string pointwiseValue(const LaunchDesc &launch,
                           const std::vector<std::string> &inputs);
/// Which element of input `input` element `i` of the output reads: `i`,
/// or `i % width` for an operand broadcast over the output's rows.
std::string pointwiseIndex(const LaunchDesc &launch, unsigned input);

/// A chain of pointwise kernels as the unit's functor `Chain`, whose call
/// runs the members on V elements from i (EmitFused.cpp).
struct ChainCode {
  std::string type;      // the struct, for the unit's globals
  std::string construct; // "Chain{x, y, z}": made from the kernel's parameters
  std::string vectors;   // whether 8 elements may move as one 16-byte vector
  int64_t elements = 0;
};
/// The kernel parameter that holds member m's operand k.
using ChainNames = std::function<std::string(size_t member, size_t operand)>;

/// Members [0, count) as a chain; the call's result is the values of buffer
/// `closingInput` (a norm's input that closes a group) or, for -1, the last
/// member's output. "" or why the members cannot be one chain.
std::string emitChain(const std::vector<FusedMember> &members, size_t count,
                      const ChainNames &names, int closingInput,
                      ChainCode &chain);

/// A norm's forward (LayerNorm or RMSNorm) whose rows come from `input`, a
/// functor expression (cuda/norms.cuh's NormInput, or a chain of the members
/// before it in a fused group) that `globals` declares; `operands` the
/// kernel parameters of the norm's operands, `inputVectors` whether the
/// input's pointers allow 16-byte vectors.
std::string emitNormFwdWith(const LaunchDesc &launch,
                            const std::vector<std::string> &operands,
                            const std::string &globals,
                            const std::string &input,
                            const std::string &inputVectors, KernelCode &code);

#define KERNEL(Name, text)                                                     \
  std::string emit##Name(const LaunchDesc &launch, KernelCode &code);
#include "runtime/plan/Kernels.def"

} // namespace strata::codegen

#endif
