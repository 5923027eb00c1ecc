//===- Elaborate.cpp - model syntax tree to graph IR ----------------------===//
//
// Evaluates constants (with --set overrides), unrolls the repeated block into
// `layers` copies separated by graph.layer_boundary, and builds one graph op
// per tensor operation, checking each with the dialect's shape rules so that
// a mistake is reported at the line that made it.
//
//===----------------------------------------------------------------------===//
#include "frontend/Frontend.h"
#include "frontend/OpCalls.h"
#include "frontend/Parser.h"
#include "frontend/Values.h"

#include "dialects/graph/GraphOps.h"
#include "runtime/plan/Dropout.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/Verifier.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/Path.h"

#include <cmath>

using namespace mlir;

namespace strata::frontend {
namespace {

/// Larger dimensions or repeat counts are surely a typo, and would overflow
/// element counts. Layers: 32 times the paper's deepest model (128); a
/// plan's instructions grow with them, and 100,000 layers ran minutes of
/// autodiff before failing.
using runtime::kDropoutKeys;
constexpr double kMaxDim = double(1LL << 32);
constexpr double kMaxElements = double(1LL << 48);
constexpr double kMaxLayers = 4096;

enum class BindingKind { Const, Input, Param, Activation };

struct Binding {
  BindingKind kind;
  Val value;
  SourceLoc loc;
};

class Elaborator {
public:
  Elaborator(MLIRContext &context, llvm::StringRef filename,
             const std::vector<ConstOverride> &overrides,
             llvm::function_ref<void(const llvm::Twine &)> usageError)
      : context(context), builder(&context), filename(filename),
        overrides(overrides), usageError(usageError) {}

  OwningOpRef<ModuleOp> run(const ModelFile &file);

private:
  Location loc(SourceLoc at) {
    return FileLineColLoc::get(&context, filename, at.line, at.col);
  }
  LogicalResult fail(SourceLoc at, const llvm::Twine &message) {
    return emitError(loc(at)) << message;
  }

  // Constants.
  LogicalResult evaluateConstants(const ModelFile &file);
  LogicalResult applyOverride(const ConstOverride &override);

  // Statements.
  LogicalResult elaborate(const Stmt &stmt);
  LogicalResult declareInput(const Stmt &stmt);
  LogicalResult declareParam(const Stmt &stmt);
  LogicalResult assign(const Stmt &stmt);
  LogicalResult repeat(const Stmt &stmt);
  LogicalResult loss(const Stmt &stmt);
  LogicalResult checkAllUsed();

  // Expressions.
  FailureOr<Val> evaluate(const Expr &expr);
  FailureOr<Val> evaluateBinary(const Expr &expr);
  FailureOr<Val> evaluateCall(const Expr &expr);
  FailureOr<int64_t> evaluateDim(const Expr &expr, llvm::StringRef what);
  FailureOr<SmallVector<int64_t>> evaluateShape(const std::vector<ExprPtr> &,
                                                llvm::StringRef what);

  // Names.
  Binding *lookup(llvm::StringRef name);
  LogicalResult bind(llvm::StringRef name, Binding binding, SourceLoc at);

  MLIRContext &context;
  OpBuilder builder;
  std::string filename;
  const std::vector<ConstOverride> &overrides;
  llvm::function_ref<void(const llvm::Twine &)> usageError;

  std::vector<llvm::StringMap<Binding>> scopes;
  llvm::StringMap<Val> constants;
  std::string modelName;
  std::string paramPrefix; // "layers.3." inside the repeated block
  bool inRepeat = false;
  bool sawRepeat = false;
  Value lossValue;
  SourceLoc lossLoc;
  // The runtime's per-sample dropout keys, declared by the first dropout,
  // and the dropouts counted so far (each one's site).
  Value dropoutKeys;
  int64_t dropoutSites = 0;
};

//===----------------------------------------------------------------------===//
// Constants
//===----------------------------------------------------------------------===//

bool parseNumber(llvm::StringRef text, Val &out) {
  text = text.trim();
  if (text == "true" || text == "false") {
    out = Val::makeBool(text == "true");
    return true;
  }
  long long integer;
  if (!text.getAsInteger(10, integer)) {
    out = Val::makeNumber(double(integer));
    return true;
  }
  double real;
  if (!text.getAsDouble(real) && std::isfinite(real)) {
    out = Val::makeNumber(real);
    return true;
  }
  return false;
}

LogicalResult Elaborator::evaluateConstants(const ModelFile &file) {
  // `batch` is the micro-batch size: the compiler's to set, not the model's.
  constants["batch"] = Val::makeNumber(1);
  llvm::StringMap<SourceLoc> declared;
  for (const Stmt &stmt : file.statements) {
    if (stmt.kind != Stmt::Kind::Const)
      continue;
    if (stmt.name == "batch")
      return fail(stmt.nameLoc, "'batch' is the micro-batch size, set by "
                                "--micro-batch-size (or --set batch=N); a "
                                "model does not declare it");
    if (!declared.try_emplace(stmt.name, stmt.nameLoc).second)
      return fail(stmt.nameLoc,
                  "constant '" + stmt.name + "' is declared twice");
  }
  // An override replaces a default before any constant is evaluated, so a
  // derived constant (ffn = 4 * hidden) follows it.
  llvm::StringMap<Val> overridden;
  for (const ConstOverride &override : overrides) {
    std::string flag = "--set " + override.name + "=" + override.value;
    if (override.name != "batch" && !declared.count(override.name)) {
      std::string known;
      for (const Stmt &stmt : file.statements)
        if (stmt.kind == Stmt::Kind::Const)
          known += (known.empty() ? "" : ", ") + stmt.name;
      usageError(flag + ": the model has no constant '" + override.name +
                 "'; its constants are: " + known +
                 (known.empty() ? "batch" : ", batch"));
      return failure();
    }
    Val value;
    if (!parseNumber(override.value, value)) {
      usageError(flag + ": '" + override.value + "' is not a number");
      return failure();
    }
    overridden[override.name] = value;
  }
  if (overridden.count("batch"))
    constants["batch"] = overridden["batch"];

  scopes.emplace_back();
  scopes.back()["batch"] = {BindingKind::Const, constants["batch"], {}};
  for (const Stmt &stmt : file.statements) {
    if (stmt.kind != Stmt::Kind::Const)
      continue;
    Val value;
    if (auto it = overridden.find(stmt.name); it != overridden.end()) {
      value = it->second;
    } else {
      FailureOr<Val> evaluated = evaluate(*stmt.value);
      if (failed(evaluated))
        return failure();
      value = *evaluated;
    }
    if (!value.isNumber() && !value.isBool())
      return fail(stmt.value->loc, "constant '" + stmt.name +
                                       "' must be a number or a boolean, "
                                       "not " +
                                       value.describeKind());
    constants[stmt.name] = value;
    scopes.back()[stmt.name] = {BindingKind::Const, value, stmt.nameLoc};
  }
  return success();
}

//===----------------------------------------------------------------------===//
// Names
//===----------------------------------------------------------------------===//

Binding *Elaborator::lookup(llvm::StringRef name) {
  for (auto scope = scopes.rbegin(); scope != scopes.rend(); ++scope)
    if (auto it = scope->find(name); it != scope->end())
      return &it->second;
  return nullptr;
}

static const char *describeBinding(BindingKind kind) {
  switch (kind) {
  case BindingKind::Const:
    return "a constant";
  case BindingKind::Input:
    return "an input";
  case BindingKind::Param:
    return "a parameter";
  case BindingKind::Activation:
    return "a tensor";
  }
  return "a name";
}

LogicalResult Elaborator::bind(llvm::StringRef name, Binding binding,
                               SourceLoc at) {
  if (isOpName(name) || name == "sqrt" || name == "normal" || name == "zeros" ||
      name == "ones")
    return fail(at, "'" + name + "' is the name of a built-in function");
  if (Binding *existing = lookup(name)) {
    // Only tensors computed by assignments may be reassigned: a reassigned
    // parameter or constant would silently change what earlier lines meant.
    if (binding.kind != BindingKind::Activation ||
        existing->kind != BindingKind::Activation)
      return fail(at, "'" + name + "' is already " +
                          describeBinding(existing->kind) + ", declared at " +
                          std::to_string(existing->loc.line) + ":" +
                          std::to_string(existing->loc.col));
    existing->value = binding.value;
    existing->loc = at;
    return success();
  }
  scopes.back()[name] = std::move(binding);
  return success();
}

//===----------------------------------------------------------------------===//
// Expressions
//===----------------------------------------------------------------------===//

FailureOr<Val> Elaborator::evaluate(const Expr &expr) {
  switch (expr.kind) {
  case Expr::Kind::Number:
    if (!std::isfinite(expr.number) || expr.number > 9007199254740992.0)
      return fail(expr.loc, "the number is past 2^53 (9007199254740992), the "
                            "largest the model language computes with "
                            "exactly");
    return Val::makeNumber(expr.number);
  case Expr::Kind::Bool:
    return Val::makeBool(expr.boolean);
  case Expr::Kind::Name: {
    Binding *binding = lookup(expr.name);
    if (!binding) {
      if (isOpName(expr.name))
        return fail(expr.loc, "'" + expr.name +
                                  "' is an op: call it with arguments, " +
                                  opSignature(expr.name));
      return fail(expr.loc, "undefined name '" + expr.name + "'");
    }
    return binding->value;
  }
  case Expr::Kind::List: {
    Val list = Val::makeList();
    for (const ExprPtr &item : expr.operands) {
      FailureOr<Val> value = evaluate(*item);
      if (failed(value))
        return failure();
      list.list.push_back(*value);
    }
    return list;
  }
  case Expr::Kind::Negate: {
    FailureOr<Val> operand = evaluate(*expr.operands[0]);
    if (failed(operand))
      return failure();
    if (!operand->isNumber())
      return fail(expr.loc,
                  "'-' negates a number, not " + operand->describeKind());
    return Val::makeNumber(-operand->number);
  }
  case Expr::Kind::Binary:
    return evaluateBinary(expr);
  case Expr::Kind::Call:
    return evaluateCall(expr);
  }
  return failure();
}

FailureOr<Val> Elaborator::evaluateBinary(const Expr &expr) {
  FailureOr<Val> lhs = evaluate(*expr.operands[0]);
  if (failed(lhs))
    return failure();
  FailureOr<Val> rhs = evaluate(*expr.operands[1]);
  if (failed(rhs))
    return failure();
  char op = expr.op;
  if (lhs->isNumber() && rhs->isNumber()) {
    double a = lhs->number, b = rhs->number;
    double result;
    switch (op) {
    case '+':
      result = a + b;
      break;
    case '-':
      result = a - b;
      break;
    case '*':
      result = a * b;
      break;
    default:
      if (b == 0)
        return fail(expr.loc, "division by zero");
      result = a / b;
      break;
    }
    if (!std::isfinite(result))
      return fail(expr.loc, "the result is past the largest number (it "
                            "overflows a double)");
    return Val::makeNumber(result);
  }
  if (lhs->isTensor() && rhs->isTensor()) {
    if (op == '/')
      return fail(expr.loc, "'/' divides numbers; tensors have no division "
                            "op");
    const char *name = op == '+' ? "add" : op == '-' ? "sub" : "mul";
    FailureOr<Value> result =
        buildBinaryOp(builder, loc(expr.loc), name, lhs->tensor, rhs->tensor);
    if (failed(result))
      return failure();
    return Val::makeTensor(*result);
  }
  return fail(expr.loc, std::string("'") + op +
                            "' needs two numbers or two "
                            "tensors, got " +
                            lhs->describeKind() + " and " +
                            rhs->describeKind());
}

FailureOr<Val> Elaborator::evaluateCall(const Expr &expr) {
  if (expr.name == "sqrt") {
    if (expr.operands.size() != 1 || !expr.keywords.empty())
      return fail(expr.loc, "sqrt takes one number: sqrt(x)");
    FailureOr<Val> x = evaluate(*expr.operands[0]);
    if (failed(x))
      return failure();
    if (!x->isNumber() || x->number < 0)
      return fail(expr.loc, "sqrt takes a number >= 0, got " + x->describe());
    return Val::makeNumber(std::sqrt(x->number));
  }
  if (expr.name == "normal" || expr.name == "zeros" || expr.name == "ones")
    return fail(expr.loc, "'" + expr.name +
                              "' initializes a parameter: param NAME: "
                              "[shape] = " +
                              expr.name +
                              (expr.name == "normal" ? "(std)" : ""));
  if (!isOpName(expr.name)) {
    if (lookup(expr.name))
      return fail(expr.loc, "'" + expr.name + "' is not a function");
    return fail(expr.loc,
                "unknown op '" + expr.name + "'" + suggestOp(expr.name));
  }
  CallArgs args(expr.name, loc(expr.loc));
  for (const ExprPtr &operand : expr.operands) {
    FailureOr<Val> value = evaluate(*operand);
    if (failed(value))
      return failure();
    args.positional.push_back({*value, loc(operand->loc)});
  }
  for (const KeywordArg &keyword : expr.keywords) {
    FailureOr<Val> value = evaluate(*keyword.value);
    if (failed(value))
      return failure();
    for (const auto &seen : args.keywords)
      if (seen.name == keyword.name)
        return fail(keyword.loc,
                    "argument '" + keyword.name + "' is given twice");
    args.keywords.push_back({keyword.name, *value, loc(keyword.loc)});
  }
  args.nextDropoutSite = &dropoutSites;
  args.dropoutKeys = [&]() -> FailureOr<Value> {
    if (!dropoutKeys) {
      int64_t batch = int64_t(constants["batch"].number);
      dropoutKeys = graph::InputOp::create(
          builder, loc(expr.loc),
          RankedTensorType::get({batch}, builder.getI32Type()),
          builder.getStringAttr(kDropoutKeys));
    }
    return dropoutKeys;
  };
  FailureOr<Value> result = buildOpCall(builder, args);
  if (failed(result))
    return failure();
  return Val::makeTensor(*result);
}

FailureOr<int64_t> Elaborator::evaluateDim(const Expr &expr,
                                           llvm::StringRef what) {
  FailureOr<Val> value = evaluate(expr);
  if (failed(value))
    return failure();
  // Too large first: past 2^53 a number is no longer exactly an integer,
  // and "must be a positive integer" would hide what is wrong.
  if (value->isNumber() && value->number > kMaxDim)
    return fail(expr.loc, what + " must be at most 2^32 (4294967296), got " +
                              value->describe());
  if (!value->isNumber() || !value->isInteger || value->number < 1)
    return fail(expr.loc,
                what + " must be a positive integer, got " + value->describe());
  return static_cast<int64_t>(value->number);
}

FailureOr<SmallVector<int64_t>>
Elaborator::evaluateShape(const std::vector<ExprPtr> &dims,
                          llvm::StringRef what) {
  SmallVector<int64_t> shape;
  double elements = 1;
  for (const ExprPtr &dim : dims) {
    FailureOr<int64_t> size = evaluateDim(*dim, "a dimension");
    if (failed(size))
      return failure();
    shape.push_back(*size);
    elements *= double(*size);
  }
  if (elements > kMaxElements)
    return fail(dims.front()->loc, what + " has more than 2^48 elements");
  return shape;
}

//===----------------------------------------------------------------------===//
// Statements
//===----------------------------------------------------------------------===//

LogicalResult Elaborator::declareInput(const Stmt &stmt) {
  if (inRepeat)
    return fail(stmt.loc, "inputs are declared outside the repeated block");
  if (stmt.dims.empty())
    return fail(stmt.loc, "input '" + stmt.name + "' needs a shape");
  if (stmt.name == kDropoutKeys)
    return fail(stmt.nameLoc, std::string("'") + kDropoutKeys +
                                  "' is the input strata declares for "
                                  "dropout; name this one otherwise");
  auto shape = evaluateShape(stmt.dims, "input '" + stmt.name + "'");
  if (failed(shape))
    return failure();
  auto type = RankedTensorType::get(*shape, builder.getI32Type());
  Value value = graph::InputOp::create(builder, loc(stmt.nameLoc), type,
                                       builder.getStringAttr(stmt.name));
  return bind(stmt.name,
              {BindingKind::Input, Val::makeTensor(value), stmt.nameLoc},
              stmt.nameLoc);
}

LogicalResult Elaborator::declareParam(const Stmt &stmt) {
  if (stmt.dims.empty())
    return fail(stmt.loc, "parameter '" + stmt.name + "' needs a shape");
  auto shape = evaluateShape(stmt.dims, "parameter '" + stmt.name + "'");
  if (failed(shape))
    return failure();

  const Expr &init = *stmt.value;
  graph::InitKind kind;
  FloatAttr std;
  bool isCall = init.kind == Expr::Kind::Call;
  bool isName = init.kind == Expr::Kind::Name;
  llvm::StringRef initName =
      (isCall || isName) ? llvm::StringRef(init.name) : llvm::StringRef();
  if (initName == "normal" && isCall) {
    if (init.operands.size() != 1 || !init.keywords.empty())
      return fail(init.loc, "normal takes one argument, the standard "
                            "deviation: normal(0.02)");
    FailureOr<Val> value = evaluate(*init.operands[0]);
    if (failed(value))
      return failure();
    if (!value->isNumber() || !(value->number > 0))
      return fail(init.operands[0]->loc,
                  "the standard deviation must be a positive number, got " +
                      value->describe());
    kind = graph::InitKind::Normal;
    std = builder.getF64FloatAttr(value->number);
  } else if ((initName == "zeros" || initName == "ones") &&
             (isName || (init.operands.empty() && init.keywords.empty()))) {
    kind = initName == "zeros" ? graph::InitKind::Zeros : graph::InitKind::Ones;
  } else {
    return fail(init.loc, "a parameter's initializer is normal(std), zeros or "
                          "ones");
  }
  std::string fullName = paramPrefix + stmt.name;
  auto type = RankedTensorType::get(*shape, builder.getF32Type());
  Value value = graph::ParamOp::create(
      builder, loc(stmt.nameLoc), type, builder.getStringAttr(fullName),
      graph::InitKindAttr::get(&context, kind), std);
  return bind(stmt.name,
              {BindingKind::Param, Val::makeTensor(value), stmt.nameLoc},
              stmt.nameLoc);
}

LogicalResult Elaborator::assign(const Stmt &stmt) {
  FailureOr<Val> value = evaluate(*stmt.value);
  if (failed(value))
    return failure();
  if (!value->isTensor())
    return fail(stmt.value->loc,
                "'" + stmt.name + "' = " + value->describe() +
                    ": assignments bind tensors; declare numbers with const");
  return bind(stmt.name, {BindingKind::Activation, *value, stmt.nameLoc},
              stmt.nameLoc);
}

/// Names an expression reads, in order of first appearance.
namespace {
/// Names in order of first appearance, each once.
struct NameList {
  std::vector<std::string> names;
  llvm::StringSet<> seen;
  void insert(const std::string &name) {
    if (seen.insert(name).second)
      names.push_back(name);
  }
};
} // namespace

static void collectNames(const Expr &expr, NameList &out) {
  if (expr.kind == Expr::Kind::Name)
    out.insert(expr.name);
  for (const ExprPtr &operand : expr.operands)
    collectNames(*operand, out);
  for (const KeywordArg &keyword : expr.keywords)
    collectNames(*keyword.value, out);
}

static void collectNames(const std::vector<Stmt> &body, NameList &out) {
  for (const Stmt &stmt : body) {
    if (stmt.value)
      collectNames(*stmt.value, out);
    for (const ExprPtr &dim : stmt.dims)
      collectNames(*dim, out);
    if (stmt.kind == Stmt::Kind::Assign)
      out.insert(stmt.name);
    collectNames(stmt.body, out);
  }
}

LogicalResult Elaborator::repeat(const Stmt &stmt) {
  if (inRepeat)
    return fail(stmt.loc, "repeat blocks do not nest");
  if (sawRepeat)
    return fail(stmt.loc, "a model has one repeated block: pipeline stages "
                          "are cut between its layers");
  sawRepeat = true;
  FailureOr<Val> count = evaluate(*stmt.value);
  if (failed(count))
    return failure();
  if (!count->isNumber() || !count->isInteger || count->number < 1 ||
      count->number > kMaxLayers)
    return fail(stmt.value->loc, "the repeat count must be an integer from 1 "
                                 "to 4096, got " +
                                     count->describe());
  int64_t layers = static_cast<int64_t>(count->number);

  // The activations that flow through the layers: names from before the
  // block that the block reads or reassigns.
  NameList names;
  collectNames(stmt.body, names);
  SmallVector<std::string> carried;
  for (const std::string &name : names.names)
    if (Binding *binding = lookup(name);
        binding && binding->kind == BindingKind::Activation)
      carried.push_back(name);
  if (carried.empty())
    return fail(stmt.loc, "the repeated block reads no tensor computed "
                          "before it: each layer must transform the "
                          "activations, as in x = x + ...");

  auto crossBoundary = [&](int64_t index) {
    SmallVector<Value> values;
    for (const std::string &name : carried)
      values.push_back(lookup(name)->value.tensor);
    auto boundary = graph::LayerBoundaryOp::create(
        builder, loc(stmt.loc), values, builder.getI64IntegerAttr(index));
    for (auto [name, result] : llvm::zip(carried, boundary.getResults()))
      lookup(name)->value = Val::makeTensor(result);
  };

  inRepeat = true;
  for (int64_t layer = 0; layer < layers; ++layer) {
    crossBoundary(layer);
    paramPrefix = "layers." + std::to_string(layer) + ".";
    scopes.emplace_back();
    for (const Stmt &inner : stmt.body)
      if (failed(elaborate(inner)))
        return failure();
    scopes.pop_back();
  }
  crossBoundary(layers);
  paramPrefix.clear();
  inRepeat = false;
  return success();
}

LogicalResult Elaborator::loss(const Stmt &stmt) {
  if (inRepeat)
    return fail(stmt.loc, "the loss is computed after the repeated block");
  if (lossValue)
    return fail(stmt.loc, "a model has one loss; the first is at " +
                              std::to_string(lossLoc.line) + ":" +
                              std::to_string(lossLoc.col));
  FailureOr<Val> value = evaluate(*stmt.value);
  if (failed(value))
    return failure();
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  if (!value->isTensor() || value->tensor.getType() != scalar)
    return fail(stmt.value->loc, "the loss must be a scalar f32 tensor "
                                 "(cross_entropy gives one), got " +
                                     value->describe());
  lossValue = value->tensor;
  lossLoc = stmt.loc;
  return success();
}

LogicalResult Elaborator::elaborate(const Stmt &stmt) {
  switch (stmt.kind) {
  case Stmt::Kind::Model:
    if (inRepeat)
      return fail(stmt.loc, "'model' names the model at the top level");
    if (!modelName.empty())
      return fail(stmt.loc, "the model is already named '" + modelName + "'");
    modelName = stmt.name;
    return success();
  case Stmt::Kind::Const:
    if (inRepeat)
      return fail(stmt.loc, "constants are declared outside the repeated "
                            "block");
    return success(); // evaluated up front
  case Stmt::Kind::Input:
    return declareInput(stmt);
  case Stmt::Kind::Param:
    return declareParam(stmt);
  case Stmt::Kind::Assign:
    return assign(stmt);
  case Stmt::Kind::Repeat:
    return repeat(stmt);
  case Stmt::Kind::Loss:
    return loss(stmt);
  }
  return failure();
}

LogicalResult Elaborator::checkAllUsed() {
  LogicalResult result = success();
  lossValue.getParentBlock()->getParentOp()->walk([&](Operation *op) {
    if (failed(result) || !op->use_empty())
      return;
    if (auto param = dyn_cast<graph::ParamOp>(op))
      result = emitError(op->getLoc())
               << "parameter '" << param.getName()
               << "' is never used: it would get no gradient";
    else if (auto input = dyn_cast<graph::InputOp>(op))
      result = emitError(op->getLoc())
               << "input '" << input.getName() << "' is never used";
  });
  return result;
}

OwningOpRef<ModuleOp> Elaborator::run(const ModelFile &file) {
  auto module = ModuleOp::create(loc({1, 1}));
  OwningOpRef<ModuleOp> owned(module);
  builder.setInsertionPointToEnd(module.getBody());
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  auto func = func::FuncOp::create(builder, loc({1, 1}), "model",
                                   builder.getFunctionType({}, {scalar}));
  builder.setInsertionPointToEnd(func.addEntryBlock());

  if (failed(evaluateConstants(file)))
    return nullptr;
  for (const Stmt &stmt : file.statements)
    if (failed(elaborate(stmt)))
      return nullptr;
  if (!lossValue) {
    (void)fail(file.end, "the model has no loss: end it with "
                         "'loss cross_entropy(logits, labels)'");
    return nullptr;
  }
  func::ReturnOp::create(builder, loc(lossLoc), lossValue);
  if (failed(checkAllUsed()))
    return nullptr;

  if (modelName.empty())
    modelName = llvm::sys::path::stem(filename).str();
  module->setAttr("strata.model", builder.getStringAttr(modelName));
  if (failed(mlir::verify(module)))
    return nullptr;
  return owned;
}

} // namespace

bool parseOverride(llvm::StringRef text, ConstOverride &out) {
  auto [name, value] = text.split('=');
  if (name.trim().empty() || value.trim().empty() ||
      text.find('=') == llvm::StringRef::npos)
    return false;
  out.name = name.trim().str();
  out.value = value.trim().str();
  return true;
}

OwningOpRef<ModuleOp>
buildModel(MLIRContext &context, llvm::SourceMgr &sourceMgr,
           const std::vector<ConstOverride> &overrides,
           llvm::function_ref<void(const llvm::Twine &)> usageError) {
  context.loadDialect<graph::GraphDialect, func::FuncDialect>();
  const llvm::MemoryBuffer *buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID());
  std::string filename = buffer->getBufferIdentifier().str();
  std::optional<ModelFile> file =
      parseModel(buffer->getBuffer(), [&](SourceLoc at, const std::string &m) {
        emitError(FileLineColLoc::get(&context, filename, at.line, at.col))
            << m;
      });
  if (!file)
    return nullptr;
  return Elaborator(context, filename, overrides, usageError).run(*file);
}

} // namespace strata::frontend
