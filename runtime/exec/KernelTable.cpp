//===- KernelTable.cpp - the kernels a plan may name ----------------------===//
#include "runtime/exec/KernelTable.h"

#include <sstream>

namespace strata::runtime {
namespace {

struct Signature {
  const char *name;
  int inputs;
  int outputs; // -1: checked by the kernel's rule
};

const Signature kSignatures[] = {
    {"fill", 0, 1},
    {"copy", 1, 1},
    {"gemm", 2, 1},
    {"embedding_fwd", 2, 1},
    {"embedding_bwd", 2, 1},
    {"add", 2, 1},
    {"sub", 2, 1},
    {"mul", 2, 1},
    {"scale", 1, 1},
    {"sum_to", 1, 1},
    {"gelu_fwd", 1, 1},
    {"gelu_bwd", 2, 1},
    {"silu_fwd", 1, 1},
    {"silu_bwd", 2, 1},
    {"layer_norm_fwd", 3, 1},
    {"layer_norm_bwd", 3, 3},
    {"rms_norm_fwd", 2, 1},
    {"rms_norm_bwd", 3, 2},
    {"transpose", 1, 1},
    {"rope", 1, 1},
    {"attention_fwd", 3, 1},
    {"attention_bwd", 5, 3},
    {"cross_entropy_fwd", 2, 1},
    {"cross_entropy_bwd", 3, 1},
    {"accumulate", 1, 1},
    {"sum_squares", 1, 1},
    {"clip_coefficient", 1, 2},
    {"adamw", 2, -1},
    {"slice", 1, 1},
    {"logits_max", 1, 1},
    {"logits_target", 2, 1},
    {"logits_sum_exp", 2, 1},
    {"cross_entropy_from_stats", 3, 1},
    {"cross_entropy_grad_from_stats", 5, 1},
    {"all_reduce", 1, 1},
    {"all_gather", 1, 1},
    {"reduce_scatter", 1, 1},
    {"send", 1, 0},
    {"recv", 0, 1},
};
static_assert(sizeof(kSignatures) / sizeof(kSignatures[0]) ==
              static_cast<size_t>(KernelId::Count));

std::string shapeText(const Buffer &b) {
  std::ostringstream os;
  os << dtypeName(b.dtype) << "[";
  for (size_t i = 0; i < b.shape.size(); ++i)
    os << (i ? ", " : "") << b.shape[i];
  os << "]";
  return os.str();
}

/// Collects the first violated rule of one instruction.
class Rules {
public:
  Rules(const Instruction &instruction, const std::vector<Buffer> &buffers,
        const MeshShape &mesh)
      : instruction(instruction), mesh(mesh) {
    for (uint32_t i : instruction.inputs)
      ins.push_back(&buffers[i]);
    for (uint32_t i : instruction.outputs)
      outs.push_back(&buffers[i]);
  }

  const Buffer &in(size_t i) const { return *ins[i]; }
  const Buffer &out(size_t i) const { return *outs[i]; }

  void require(bool ok, const std::string &message) {
    if (!ok && error.empty())
      error = message;
  }
  void isFloat(const Buffer &b) {
    require(b.isFloat(), "'" + b.name + "' must be a float buffer, is " +
                             shapeText(b));
  }
  void isIds(const Buffer &b) {
    require(b.dtype == DType::I32,
            "'" + b.name + "' must hold i32 ids, is " + shapeText(b));
  }
  void isScalar(const Buffer &b) {
    require(b.dtype == DType::F32 && b.elements == 1,
            "'" + b.name + "' must be an f32 scalar, is " + shapeText(b));
  }
  void sameCount(const Buffer &a, const Buffer &b) {
    require(a.elements == b.elements, "'" + a.name + "' " + shapeText(a) +
                                          " and '" + b.name + "' " +
                                          shapeText(b) +
                                          " must have as many elements");
  }
  void attr(const std::string &key, AttrValue::Kind kind) {
    const AttrValue *value = instruction.attr(key);
    require(value && value->kind == kind, "argument '" + key +
                                              "' is missing or of the wrong "
                                              "kind");
  }
  int64_t lastDim(const Buffer &b) {
    require(!b.shape.empty(), "'" + b.name + "' needs a rank >= 1");
    return b.shape.empty() ? 1 : b.shape.back();
  }
  void allFloat() {
    for (const Buffer *b : ins)
      isFloat(*b);
    for (const Buffer *b : outs)
      isFloat(*b);
  }

  /// An optional integer argument must be an Int when given.
  void optionalInt(const std::string &key) {
    const AttrValue *value = instruction.attr(key);
    require(!value || value->kind == AttrValue::Kind::Int,
            "argument '" + key + "' must be an integer");
  }
  /// The group a collective's `axes` name: its size, or 0 if they are bad.
  int64_t group() {
    attr("axes", AttrValue::Kind::Ints);
    if (!error.empty())
      return 0;
    const auto &axes = instruction.attr("axes")->ints;
    bool valid = !axes.empty();
    for (size_t i = 0; i < axes.size(); ++i)
      valid = valid && axes[i] >= 0 && axes[i] < 3 &&
              (i == 0 || axes[i] > axes[i - 1]);
    require(valid, "a collective names mesh axes 0 (tp), 1 (dp), 2 (pp), in "
                   "increasing order");
    return valid ? mesh.groupSize(axes) : 0;
  }

  const Instruction &instruction;
  const MeshShape &mesh;
  std::vector<const Buffer *> ins, outs;
  std::string error;
};

void checkAttention(Rules &r, bool backward) {
  const Buffer &q = r.in(0), &k = r.in(1), &v = r.in(2);
  r.attr("causal", AttrValue::Kind::Bool);
  r.optionalInt("group_size");
  r.optionalInt("query_head_offset");
  const AttrValue *group = r.instruction.attr("group_size");
  r.allFloat();
  bool ranks = q.shape.size() == 4 && k.shape.size() == 4 &&
               v.shape.size() == 4;
  r.require(ranks, "attention operands must be [batch, seq, heads, dim]");
  if (!ranks)
    return;
  bool grouped = true;
  if (group && group->kind == AttrValue::Kind::Int) {
    // Query heads [offset, offset + H) read kv heads (offset + i) / group.
    const AttrValue *first = r.instruction.attr("query_head_offset");
    int64_t offset = first ? first->i : 0;
    grouped = group->i > 0 && offset >= 0 &&
              (offset + q.shape[2] - 1) / group->i < k.shape[2];
  } else {
    grouped = k.shape[2] > 0 && q.shape[2] % k.shape[2] == 0;
  }
  r.require(k.shape == v.shape && q.shape[0] == k.shape[0] &&
                q.shape[3] == k.shape[3] && grouped,
            "attention shapes disagree: q " + shapeText(q) + ", k " +
                shapeText(k) + ", v " + shapeText(v));
  if (r.instruction.attr("causal") && r.instruction.boolAttr("causal"))
    r.require(q.shape[1] == k.shape[1],
              "causal attention needs equal query and key lengths");
  if (!backward) {
    r.sameCount(q, r.out(0));
    return;
  }
  r.sameCount(q, r.in(3));
  r.sameCount(q, r.in(4));
  r.sameCount(q, r.out(0));
  r.sameCount(k, r.out(1));
  r.sameCount(v, r.out(2));
}

void checkRules(KernelId id, Rules &r) {
  using K = AttrValue::Kind;
  switch (id) {
  case KernelId::Fill:
    r.attr("value", K::Float);
    r.isFloat(r.out(0));
    return;
  case KernelId::Copy:
  case KernelId::Accumulate:
  case KernelId::GeluFwd:
  case KernelId::SiluFwd:
    r.allFloat();
    r.sameCount(r.in(0), r.out(0));
    return;
  case KernelId::Scale:
    r.attr("factor", K::Float);
    r.allFloat();
    r.sameCount(r.in(0), r.out(0));
    return;
  case KernelId::GeluBwd:
  case KernelId::SiluBwd:
    r.allFloat();
    r.sameCount(r.in(0), r.in(1));
    r.sameCount(r.in(0), r.out(0));
    return;
  case KernelId::Gemm: {
    for (const char *key : {"m", "n", "k"})
      r.attr(key, K::Int);
    for (const char *key : {"transpose_a", "transpose_b", "accumulate"})
      r.attr(key, K::Bool);
    r.allFloat();
    if (!r.error.empty())
      return;
    int64_t m = r.instruction.intAttr("m"), n = r.instruction.intAttr("n"),
            k = r.instruction.intAttr("k");
    r.require(m > 0 && n > 0 && k > 0, "gemm sizes must be positive");
    r.require(r.in(0).elements == m * k && r.in(1).elements == k * n &&
                  r.out(0).elements == m * n,
              "gemm m=" + std::to_string(m) + " n=" + std::to_string(n) +
                  " k=" + std::to_string(k) + " does not fit " +
                  shapeText(r.in(0)) + " x " + shapeText(r.in(1)) + " -> " +
                  shapeText(r.out(0)));
    r.require(r.in(0).dtype == r.in(1).dtype,
              "gemm operands must share a dtype");
    return;
  }
  case KernelId::EmbeddingFwd: {
    r.optionalInt("vocab_offset");
    const Buffer &table = r.in(0);
    r.isFloat(table);
    r.isIds(r.in(1));
    r.isFloat(r.out(0));
    r.require(table.shape.size() == 2, "the table must be [vocab, hidden]");
    if (table.shape.size() == 2)
      r.require(r.out(0).elements == r.in(1).elements * table.shape[1],
                "the embedding output must be ids x hidden");
    return;
  }
  case KernelId::EmbeddingBwd: {
    r.optionalInt("vocab_offset");
    const Buffer &table = r.out(0);
    r.attr("accumulate", K::Bool);
    r.isFloat(r.in(0));
    r.isIds(r.in(1));
    r.isFloat(table);
    r.require(table.shape.size() == 2, "the table must be [vocab, hidden]");
    if (table.shape.size() == 2)
      r.require(r.in(0).elements == r.in(1).elements * table.shape[1],
                "the gradient must be ids x hidden");
    return;
  }
  case KernelId::Add:
  case KernelId::Sub:
  case KernelId::Mul:
    r.allFloat();
    r.sameCount(r.in(0), r.out(0));
    r.require(r.in(1).elements > 0 &&
                  r.in(0).elements % r.in(1).elements == 0,
              "the right operand must broadcast over the left");
    return;
  case KernelId::SumTo:
    r.attr("accumulate", K::Bool);
    r.allFloat();
    r.require(r.out(0).elements > 0 &&
                  r.in(0).elements % r.out(0).elements == 0,
              "sum_to needs a whole number of rows");
    return;
  case KernelId::LayerNormFwd:
  case KernelId::RmsNormFwd: {
    r.attr("epsilon", K::Float);
    r.allFloat();
    int64_t cols = r.lastDim(r.in(0));
    r.require(r.in(1).elements == cols, "the weight must match the last "
                                        "dimension");
    if (id == KernelId::LayerNormFwd)
      r.require(r.in(2).elements == cols, "the bias must match the last "
                                          "dimension");
    r.sameCount(r.in(0), r.out(0));
    return;
  }
  case KernelId::LayerNormBwd:
  case KernelId::RmsNormBwd: {
    r.attr("epsilon", K::Float);
    r.allFloat();
    int64_t cols = r.lastDim(r.in(0));
    r.require(r.in(1).elements == cols && r.out(1).elements == cols,
              "the weight and its gradient must match the last dimension");
    if (id == KernelId::LayerNormBwd)
      r.require(r.out(2).elements == cols, "the bias gradient must match "
                                           "the last dimension");
    r.sameCount(r.in(0), r.in(2));
    r.sameCount(r.in(0), r.out(0));
    return;
  }
  case KernelId::Transpose: {
    r.attr("permutation", K::Ints);
    r.allFloat();
    if (!r.error.empty())
      return;
    const auto &perm = r.instruction.attr("permutation")->ints;
    const Buffer &x = r.in(0);
    bool valid = perm.size() == x.shape.size();
    std::vector<int64_t> shape;
    std::vector<bool> seen(x.shape.size(), false);
    for (int64_t p : perm) {
      if (!valid || p < 0 || p >= static_cast<int64_t>(x.shape.size()) ||
          seen[p]) {
        valid = false;
        break;
      }
      seen[p] = true;
      shape.push_back(x.shape[p]);
    }
    r.require(valid && shape == r.out(0).shape,
              "transpose permutation does not map " + shapeText(x) + " to " +
                  shapeText(r.out(0)));
    return;
  }
  case KernelId::Rope:
    r.attr("base", K::Float);
    r.attr("inverse", K::Bool);
    r.allFloat();
    r.require(r.in(0).shape.size() == 4 && r.in(0).shape[3] % 2 == 0,
              "rope needs [batch, seq, heads, even head_dim]");
    r.sameCount(r.in(0), r.out(0));
    return;
  case KernelId::AttentionFwd:
    checkAttention(r, false);
    return;
  case KernelId::AttentionBwd:
    checkAttention(r, true);
    return;
  case KernelId::CrossEntropyFwd:
  case KernelId::CrossEntropyBwd: {
    r.optionalInt("vocab_size");
    const Buffer &logits = r.in(0);
    r.isFloat(logits);
    r.isIds(r.in(1));
    int64_t vocab = r.lastDim(logits);
    r.require(r.in(1).elements * vocab == logits.elements,
              "the labels must be the logits without the vocabulary");
    if (id == KernelId::CrossEntropyFwd) {
      r.isScalar(r.out(0));
    } else {
      r.isScalar(r.in(2));
      r.isFloat(r.out(0));
      r.sameCount(logits, r.out(0));
    }
    return;
  }
  case KernelId::SumSquares:
    r.isFloat(r.in(0));
    r.isScalar(r.out(0));
    return;
  case KernelId::ClipCoefficient:
    r.isScalar(r.in(0));
    r.isScalar(r.out(0));
    r.isScalar(r.out(1));
    return;
  case KernelId::AdamW: {
    r.attr("weight_decay", K::Bool);
    r.require(r.outs.size() == 3 || r.outs.size() == 4,
              "adamw writes the value, both moments and maybe a master");
    if (!r.error.empty())
      return;
    r.require(r.in(0).dtype == DType::F32, "the gradient must be f32");
    r.isScalar(r.in(1));
    for (size_t i = 0; i < r.outs.size(); ++i) {
      r.isFloat(r.out(i));
      r.sameCount(r.in(0), r.out(i));
    }
    for (size_t i = 1; i < r.outs.size(); ++i)
      r.require(r.out(i).dtype == DType::F32,
                "moments and master weights must be f32");
    r.require(r.outs.size() == 4 || r.out(0).dtype == DType::F32,
              "a bf16 parameter needs an f32 master");
    return;
  }
  case KernelId::Slice: {
    for (const char *key : {"dim", "part", "parts"})
      r.attr(key, K::Int);
    r.allFloat();
    if (!r.error.empty())
      return;
    const Instruction &i = r.instruction;
    int64_t dim = i.intAttr("dim"), part = i.intAttr("part"),
            parts = i.intAttr("parts");
    const Buffer &x = r.in(0), &y = r.out(0);
    bool ok = dim >= 0 && dim < int64_t(x.shape.size()) && parts > 0 &&
              part >= 0 && part < parts && x.shape.size() == y.shape.size();
    for (size_t d = 0; ok && d < x.shape.size(); ++d)
      ok = int64_t(d) == dim ? x.shape[d] == y.shape[d] * parts
                             : x.shape[d] == y.shape[d];
    r.require(ok, "slice of " + shapeText(x) + " into " + shapeText(y) +
                      " does not fit its part");
    return;
  }
  case KernelId::LogitsMax:
  case KernelId::LogitsTarget:
  case KernelId::LogitsSumExp:
  case KernelId::CrossEntropyGradFromStats: {
    r.attr("vocab_size", K::Int);
    r.attr("vocab_offset", K::Int);
    const Buffer &logits = r.in(0);
    r.isFloat(logits);
    int64_t rows = logits.elements / r.lastDim(logits);
    auto isRows = [&](const Buffer &b) {
      r.require(b.dtype == DType::F32 && b.elements == rows,
                "'" + b.name + "' must be one f32 per row of the logits");
    };
    if (id == KernelId::LogitsTarget || id == KernelId::CrossEntropyGradFromStats)
      r.require(r.in(1).dtype == DType::I32 && r.in(1).elements == rows,
                "the labels must be one id per row of the logits");
    if (id == KernelId::LogitsSumExp)
      isRows(r.in(1));
    if (id == KernelId::CrossEntropyGradFromStats) {
      isRows(r.in(2));
      isRows(r.in(3));
      r.isScalar(r.in(4));
      r.isFloat(r.out(0));
      r.sameCount(logits, r.out(0));
    } else {
      isRows(r.out(0));
    }
    return;
  }
  case KernelId::CrossEntropyFromStats:
    r.require(r.in(0).dtype == DType::F32 &&
                  r.in(1).elements == r.in(0).elements &&
                  r.in(2).elements == r.in(0).elements,
              "the statistics must be f32 rows of one length");
    r.isScalar(r.out(0));
    return;
  case KernelId::Send:
  case KernelId::Recv: {
    r.attr("peer", K::Int);
    r.attr("channel", K::Int);
    r.allFloat();
    if (!r.error.empty())
      return;
    int64_t peer = r.instruction.intAttr("peer");
    int64_t channel = r.instruction.intAttr("channel");
    r.require(peer >= 0 && peer < r.mesh.world(),
              "peer " + std::to_string(peer) + " is not one of the plan's " +
                  std::to_string(r.mesh.world()) + " ranks");
    r.require(channel >= 0 && channel < kMaxChannels,
              "channel " + std::to_string(channel) + " is outside 0.." +
                  std::to_string(kMaxChannels - 1));
    return;
  }
  case KernelId::AllReduce: {
    r.attr("reduction", K::Int);
    r.group();
    const AttrValue *stages = r.instruction.attr("stages");
    if (stages && r.error.empty()) {
      // Among some pipeline stages only (a tied parameter's).
      bool valid = stages->kind == K::Ints && !stages->ints.empty() &&
                   r.instruction.attr("axes")->ints ==
                       std::vector<int64_t>{2};
      for (int64_t stage : stages->ints)
        valid = valid && stage >= 0 && stage < r.mesh.sizes[2];
      r.require(valid, "'stages' must list pipeline stages of an all_reduce "
                       "over pp");
    }
    r.allFloat();
    r.sameCount(r.in(0), r.out(0));
    r.require(r.in(0).dtype == r.out(0).dtype,
              "an all-reduce keeps its dtype");
    return;
  }
  case KernelId::AllGather:
  case KernelId::ReduceScatter: {
    r.attr("dim", K::Int);
    int64_t n = r.group();
    r.allFloat();
    if (!r.error.empty() || n == 0)
      return;
    bool gather = id == KernelId::AllGather;
    const Buffer &part = gather ? r.in(0) : r.out(0);
    const Buffer &whole = gather ? r.out(0) : r.in(0);
    int64_t dim = r.instruction.intAttr("dim");
    bool ok = dim >= 0 && dim < int64_t(part.shape.size()) &&
              part.shape.size() == whole.shape.size() &&
              part.dtype == whole.dtype;
    for (size_t d = 0; ok && d < part.shape.size(); ++d)
      ok = int64_t(d) == dim ? whole.shape[d] == part.shape[d] * n
                             : whole.shape[d] == part.shape[d];
    r.require(ok, std::string(gather ? "all_gather" : "reduce_scatter") +
                      " over " + std::to_string(n) + " ranks does not map " +
                      shapeText(part) + " to " + shapeText(whole));
    return;
  }
  case KernelId::Count:
    return;
  }
}

} // namespace

int findKernel(const std::string &name) {
  for (int i = 0; i < static_cast<int>(KernelId::Count); ++i)
    if (name == kSignatures[i].name)
      return i;
  return -1;
}

const char *kernelName(KernelId id) {
  return kSignatures[static_cast<int>(id)].name;
}

std::string checkInstruction(const Instruction &instruction,
                             const std::vector<Buffer> &buffers,
                             const MeshShape &mesh) {
  const Signature &sig = kSignatures[instruction.kernelId];
  auto count = [](size_t n) { return std::to_string(n); };
  if (static_cast<int>(instruction.inputs.size()) != sig.inputs)
    return std::string(sig.name) + " takes " + count(sig.inputs) +
           " inputs, the plan gives " + count(instruction.inputs.size());
  if (sig.outputs >= 0 &&
      static_cast<int>(instruction.outputs.size()) != sig.outputs)
    return std::string(sig.name) + " writes " + count(sig.outputs) +
           " outputs, the plan gives " + count(instruction.outputs.size());
  Rules rules(instruction, buffers, mesh);
  checkRules(static_cast<KernelId>(instruction.kernelId), rules);
  return rules.error.empty() ? "" : std::string(sig.name) + ": " + rules.error;
}

} // namespace strata::runtime
