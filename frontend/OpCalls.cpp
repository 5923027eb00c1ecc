//===- OpCalls.cpp - the model language's ops -----------------------------===//
#include "frontend/OpCalls.h"

#include "dialects/graph/GraphOps.h"
#include "dialects/graph/GraphShapes.h"

using namespace mlir;

namespace strata::frontend {
namespace {

/// A positional argument: a tensor, or a list of integers (a shape, a
/// permutation). Each argument's kind is checked before any op is built.
struct Argument {
  const char *name;
  bool list = false;
};

struct OpInfo {
  const char *name;
  std::vector<Argument> arguments;
  std::vector<std::pair<const char *, const char *>> keywords; // name, default
};

const std::vector<OpInfo> &ops() {
  static const std::vector<OpInfo> table = {
      {"attention", {{"q"}, {"k"}, {"v"}}, {{"causal", "true"}, {"dropout", "0"}}},
      {"cross_entropy", {{"logits"}, {"labels"}}, {}},
      {"dropout", {{"x"}}, {{"rate", "0.1"}}},
      {"embedding", {{"table"}, {"ids"}}, {}},
      {"gelu", {{"x"}}, {{"tanh", "false"}}},
      {"layer_norm", {{"x"}, {"weight"}, {"bias"}}, {{"eps", "1e-5"}}},
      {"matmul", {{"a"}, {"b"}}, {{"transpose_b", "false"}}},
      {"reshape", {{"x"}, {"shape", true}}, {}},
      {"rms_norm", {{"x"}, {"weight"}}, {{"eps", "1e-5"}}},
      {"rope", {{"x"}}, {{"base", "10000"}}},
      {"silu", {{"x"}}, {}},
      {"transpose", {{"x"}, {"permutation", true}}, {}},
  };
  return table;
}

const OpInfo *findOp(StringRef name) {
  for (const OpInfo &info : ops())
    if (name == info.name)
      return &info;
  return nullptr;
}

/// Reads arguments and reports misuse at the call, "matmul: ...".
class CallReader {
public:
  CallReader(const CallArgs &args, const OpInfo &info)
      : args(args), info(info) {}

  InFlightDiagnostic error() {
    InFlightDiagnostic diag = emitError(args.location);
    diag << args.callee << ": ";
    return diag;
  }
  InFlightDiagnostic errorAt(Location loc) {
    InFlightDiagnostic diag = emitError(loc);
    diag << args.callee << ": ";
    return diag;
  }

  LogicalResult checkArity() {
    if (args.positional.size() != info.arguments.size())
      return error() << "takes " << info.arguments.size() << " argument"
                     << (info.arguments.size() == 1 ? "" : "s") << ", got "
                     << args.positional.size() << "; call it as "
                     << opSignature(info.name);
    for (const KeywordValue &keyword : args.keywords) {
      bool known = llvm::any_of(info.keywords, [&](const auto &k) {
        return keyword.name == k.first;
      });
      if (!known)
        return errorAt(keyword.loc)
               << "no argument named '" << keyword.name << "'; call it as "
               << opSignature(info.name);
    }
    return success();
  }

  FailureOr<Value> tensor(size_t i) {
    const PositionalArg &arg = args.positional[i];
    if (!arg.value.isTensor()) {
      errorAt(arg.loc) << "argument '" << info.arguments[i].name
                       << "' must be a tensor, got " << arg.value.describe();
      return failure();
    }
    return arg.value.tensor;
  }

  /// A list of integers; `allowMinusOne` for reshape's inferred dimension.
  FailureOr<SmallVector<int64_t>> integers(size_t i, bool allowMinusOne) {
    const PositionalArg &arg = args.positional[i];
    if (!arg.value.isList()) {
      errorAt(arg.loc) << "argument '" << info.arguments[i].name
                       << "' must be a list of integers like [2, 16], got "
                       << arg.value.describe();
      return failure();
    }
    SmallVector<int64_t> values;
    for (const Val &item : arg.value.list) {
      bool ok = item.isNumber() && item.isInteger &&
                (item.number >= 0 || (allowMinusOne && item.number == -1)) &&
                item.number < double(1LL << 48);
      if (!ok) {
        errorAt(arg.loc) << "argument '" << info.arguments[i].name
                         << "' must hold integers"
                         << (allowMinusOne ? " (or one -1)" : "") << ", got "
                         << item.describe();
        return failure();
      }
      values.push_back(static_cast<int64_t>(item.number));
    }
    return values;
  }

  const KeywordValue *keyword(StringRef name) {
    for (const KeywordValue &keyword : args.keywords)
      if (keyword.name == name)
        return &keyword;
    return nullptr;
  }

  FailureOr<double> number(StringRef name, double fallback) {
    const KeywordValue *k = keyword(name);
    if (!k)
      return fallback;
    if (!k->value.isNumber()) {
      errorAt(k->loc) << "'" << name << "' must be a number, got "
                      << k->value.describe();
      return failure();
    }
    return k->value.number;
  }

  /// A dropout rate: a number in [0, 1), reported at its keyword.
  FailureOr<double> rate(StringRef name, double fallback) {
    FailureOr<double> value = number(name, fallback);
    if (failed(value) || (*value >= 0 && *value < 1))
      return value;
    const KeywordValue *k = keyword(name);
    errorAt(k->loc) << "'" << name << "' must be in [0, 1), got "
                    << k->value.describe();
    return failure();
  }

  FailureOr<bool> boolean(StringRef name, bool fallback) {
    const KeywordValue *k = keyword(name);
    if (!k)
      return fallback;
    if (!k->value.isBool()) {
      errorAt(k->loc) << "'" << name << "' must be true or false, got "
                      << k->value.describe();
      return failure();
    }
    return k->value.boolean;
  }

private:
  const CallArgs &args;
  const OpInfo &info;
};

/// Runs a shape rule with messages prefixed by the op's name.
template <typename Rule>
FailureOr<RankedTensorType> infer(CallReader &reader, Rule rule) {
  return rule([&] { return reader.error(); });
}

} // namespace

bool isOpName(StringRef name) { return findOp(name) != nullptr; }

std::string opSignature(StringRef name) {
  const OpInfo *info = findOp(name);
  if (!info)
    return name.str();
  std::string text = std::string(info->name) + "(";
  bool first = true;
  for (const Argument &argument : info->arguments) {
    text += (first ? "" : ", ") + std::string(argument.name);
    first = false;
  }
  for (auto [keyword, fallback] : info->keywords) {
    text += (first ? "" : ", ") + std::string(keyword) + "=" + fallback;
    first = false;
  }
  return text + ")";
}

std::string suggestOp(StringRef name) {
  const OpInfo *best = nullptr;
  unsigned bestDistance = 3; // suggest only close misspellings
  for (const OpInfo &info : ops()) {
    unsigned distance = name.edit_distance(info.name);
    if (distance < bestDistance) {
      bestDistance = distance;
      best = &info;
    }
  }
  if (best)
    return std::string("; did you mean '") + best->name + "'?";
  std::string list;
  for (const OpInfo &info : ops())
    list += (list.empty() ? "" : ", ") + std::string(info.name);
  return "; the ops are: " + list;
}

FailureOr<Value> buildBinaryOp(OpBuilder &builder, Location loc, StringRef name,
                               Value lhs, Value rhs) {
  auto type = graph::inferBroadcastType(
      [&] {
        InFlightDiagnostic diag = emitError(loc);
        diag << name << ": ";
        return diag;
      },
      lhs.getType(), rhs.getType());
  if (failed(type))
    return failure();
  if (name == "add")
    return graph::AddOp::create(builder, loc, *type, lhs, rhs).getResult();
  if (name == "sub")
    return graph::SubOp::create(builder, loc, *type, lhs, rhs).getResult();
  return graph::MulOp::create(builder, loc, *type, lhs, rhs).getResult();
}

FailureOr<Value> buildOpCall(OpBuilder &builder, const CallArgs &args) {
  const OpInfo *info = findOp(args.callee);
  assert(info && "caller checks isOpName");
  CallReader reader(args, *info);
  if (failed(reader.checkArity()))
    return failure();
  StringRef name = args.callee;
  Location loc = args.location;
  // Every argument of the kind its op declares, before anything is built:
  // a list where a tensor belongs once reached the op builders.
  SmallVector<Value> tensors;
  SmallVector<int64_t> list; // reshape's shape, transpose's permutation
  for (size_t i = 0; i < args.positional.size(); ++i) {
    if (info->arguments[i].list) {
      FailureOr<SmallVector<int64_t>> integers =
          reader.integers(i, /*allowMinusOne=*/name == "reshape");
      if (failed(integers))
        return failure();
      list = std::move(*integers);
      continue;
    }
    FailureOr<Value> tensor = reader.tensor(i);
    if (failed(tensor))
      return failure();
    tensors.push_back(*tensor);
  }

  if (name == "embedding") {
    auto type = infer(reader, [&](auto e) {
      return graph::inferEmbeddingType(e, tensors[0].getType(),
                                       tensors[1].getType());
    });
    if (failed(type))
      return failure();
    return graph::EmbeddingOp::create(builder, loc, *type, tensors[0],
                                      tensors[1])
        .getResult();
  }
  if (name == "matmul") {
    FailureOr<bool> transposeB = reader.boolean("transpose_b", false);
    if (failed(transposeB))
      return failure();
    auto type = infer(reader, [&](auto e) {
      return graph::inferMatmulType(e, tensors[0].getType(),
                                    tensors[1].getType(), *transposeB);
    });
    if (failed(type))
      return failure();
    return graph::MatmulOp::create(builder, loc, *type, tensors[0], tensors[1],
                                   *transposeB ? builder.getUnitAttr()
                                               : UnitAttr())
        .getResult();
  }
  if (name == "gelu" || name == "silu") {
    // gelu's tanh=true is GPT-2's form (Megatron's --openai-gelu).
    FailureOr<bool> tanh = reader.boolean("tanh", false);
    if (failed(tanh))
      return failure();
    auto type = infer(reader, [&](auto e) {
      return graph::inferUnaryType(e, tensors[0].getType());
    });
    if (failed(type))
      return failure();
    if (name == "gelu")
      return graph::GeluOp::create(builder, loc, tensors[0], *tanh).getResult();
    return graph::SiluOp::create(builder, loc, tensors[0]).getResult();
  }
  if (name == "layer_norm" || name == "rms_norm") {
    FailureOr<double> eps = reader.number("eps", 1e-5);
    if (failed(eps))
      return failure();
    if (!(*eps > 0))
      return reader.error() << "eps must be positive, got " << *eps;
    bool layerNorm = name == "layer_norm";
    auto type = infer(reader, [&](auto e) {
      return graph::inferNormType(e, tensors[0].getType(), tensors[1].getType(),
                                  layerNorm ? tensors[2].getType() : Type());
    });
    if (failed(type))
      return failure();
    FloatAttr epsAttr = builder.getF64FloatAttr(*eps);
    if (layerNorm)
      return graph::LayerNormOp::create(builder, loc, *type, tensors[0],
                                        tensors[1], tensors[2], epsAttr)
          .getResult();
    return graph::RmsNormOp::create(builder, loc, *type, tensors[0], tensors[1],
                                    epsAttr)
        .getResult();
  }
  if (name == "reshape" || name == "transpose") {
    bool reshape = name == "reshape";
    auto type = infer(reader, [&](auto e) {
      return reshape ? graph::inferReshapeType(e, tensors[0].getType(), list)
                     : graph::inferTransposeType(e, tensors[0].getType(), list);
    });
    if (failed(type))
      return failure();
    if (reshape)
      return graph::ReshapeOp::create(builder, loc, *type, tensors[0])
          .getResult();
    return graph::TransposeOp::create(builder, loc, *type, tensors[0],
                                      builder.getDenseI64ArrayAttr(list))
        .getResult();
  }
  if (name == "rope") {
    FailureOr<double> base = reader.number("base", 10000);
    if (failed(base))
      return failure();
    if (!(*base > 1))
      return reader.error() << "base must be greater than 1, got " << *base;
    auto type = infer(reader, [&](auto e) {
      return graph::inferRopeType(e, tensors[0].getType());
    });
    if (failed(type))
      return failure();
    return graph::RopeOp::create(builder, loc, *type, tensors[0],
                                 builder.getF64FloatAttr(*base),
                                 /*inverse=*/UnitAttr())
        .getResult();
  }
  if (name == "attention") {
    FailureOr<bool> causal = reader.boolean("causal", true);
    if (failed(causal))
      return failure();
    FailureOr<double> rate = reader.rate("dropout", 0);
    if (failed(rate))
      return failure();
    Value keys;
    if (*rate > 0) {
      FailureOr<Value> made = args.dropoutKeys();
      if (failed(made))
        return failure();
      keys = *made;
    }
    auto type = infer(reader, [&](auto e) {
      return graph::inferAttentionType(e, tensors[0].getType(),
                                       tensors[1].getType(),
                                       tensors[2].getType(), *causal);
    });
    if (failed(type))
      return failure();
    return graph::AttentionOp::create(
               builder, loc, *type, graph::attentionLseType(*type), tensors[0],
               tensors[1], tensors[2], keys,
               *causal ? builder.getUnitAttr() : UnitAttr(),
               /*group_size=*/IntegerAttr(), /*unfused=*/UnitAttr(),
               keys ? builder.getF64FloatAttr(*rate) : FloatAttr(),
               keys ? builder.getI64IntegerAttr((*args.nextDropoutSite)++)
                    : IntegerAttr())
        .getResult();
  }
  if (name == "dropout") {
    FailureOr<double> rate = reader.rate("rate", 0.1);
    if (failed(rate))
      return failure();
    if (*rate == 0)
      return tensors[0]; // nothing dropped: no op, no keys
    FailureOr<Value> keys = args.dropoutKeys();
    if (failed(keys))
      return failure();
    return graph::DropoutOp::create(builder, loc, tensors[0], *keys, *rate,
                                    (*args.nextDropoutSite)++)
        .getResult();
  }
  if (name == "cross_entropy") {
    auto type = infer(reader, [&](auto e) {
      return graph::inferCrossEntropyType(e, tensors[0].getType(),
                                          tensors[1].getType());
    });
    if (failed(type))
      return failure();
    return graph::CrossEntropyOp::create(builder, loc, *type, tensors[0],
                                         tensors[1],
                                         /*vocab_size=*/IntegerAttr())
        .getResult();
  }
  llvm_unreachable("every op in the table is built above");
}

} // namespace strata::frontend
