//===- ExecOps.cpp - the exec dialect -------------------------------------===//
//
// Verifiers check what an op can see on its own: a launch against the kernel
// catalog's counts and attribute kinds (read from Kernels.def, the one
// definition of each kernel), a gemm's sizes and epilogue, a collective's
// axes, every symbol against the rank's buffers, events and programs.
// Dtypes and shapes of the buffers are checked when the plan is written,
// by the runtime's own checker (runtime/plan/PlanCheck.cpp).
//
//===----------------------------------------------------------------------===//
#include "dialects/exec/ExecDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"

using namespace mlir;
using namespace strata::exec;

#include "dialects/exec/ExecDialect.cpp.inc"
#include "dialects/exec/ExecEnums.cpp.inc"

void ExecDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "dialects/exec/ExecOps.cpp.inc"
      >();
}

/// `(@a, @b)`: the buffers an instruction reads or writes.
static ParseResult parseSymbolList(OpAsmParser &parser, ArrayAttr &list) {
  SmallVector<Attribute> symbols;
  auto parseOne = [&]() -> ParseResult {
    FlatSymbolRefAttr symbol;
    if (parser.parseAttribute(symbol))
      return failure();
    symbols.push_back(symbol);
    return success();
  };
  if (parser.parseCommaSeparatedList(OpAsmParser::Delimiter::Paren, parseOne))
    return failure();
  list = parser.getBuilder().getArrayAttr(symbols);
  return success();
}

static void printSymbolList(OpAsmPrinter &printer, Operation *,
                            ArrayAttr list) {
  printer << "(";
  llvm::interleaveComma(list, printer,
                        [&](Attribute symbol) { printer << symbol; });
  printer << ")";
}

#define GET_OP_CLASSES
#include "dialects/exec/ExecOps.cpp.inc"

namespace {

/// What the verifier knows of a kernel, from the catalog.
struct CatalogEntry {
  enum Kind { Int, Float, Bool, Ints };
  const char *name;
  int inputs = 0, outputs = 0, optionalOutputs = 0;
  SmallVector<std::pair<const char *, Kind>> attrs;
};

const llvm::StringMap<CatalogEntry> &catalog() {
  static const llvm::StringMap<CatalogEntry> entries = [] {
    llvm::StringMap<CatalogEntry> out;
    CatalogEntry *entry = nullptr;
#define KERNEL(Name, text) entry = &out[text], entry->name = text;
#define IN(operand, dtypes) ++entry->inputs;
#define OUT(operand, dtypes) ++entry->outputs;
#define OPT_OUT(operand, dtypes) ++entry->outputs, ++entry->optionalOutputs;
#define INT(a) entry->attrs.push_back({#a, CatalogEntry::Int});
#define FLOAT(a) entry->attrs.push_back({#a, CatalogEntry::Float});
#define BOOL(a) entry->attrs.push_back({#a, CatalogEntry::Bool});
#define INTS(a) entry->attrs.push_back({#a, CatalogEntry::Ints});
#include "runtime/plan/Kernels.def"
    return out;
  }();
  return entries;
}

} // namespace

int64_t BufferOp::getBytes() {
  RankedTensorType type = getTensorType();
  int64_t element = type.getElementType().isBF16() ? 2 : 4;
  return type.getNumElements() * element;
}

LogicalResult BufferOp::verify() {
  auto type = dyn_cast<RankedTensorType>(getType());
  if (!type || !type.hasStaticShape())
    return emitOpError() << "holds a statically shaped tensor, got "
                         << getType();
  Type element = type.getElementType();
  if (!element.isF32() && !element.isBF16() && !element.isSignlessInteger(32))
    return emitOpError() << "element type must be f32, bf16 or i32, got "
                         << element;
  if (getPlacedOffset() < -1)
    return emitOpError() << "offset must be >= 0 (or -1 before planning)";
  if (getArena() == Arena::Stash && !getAlias() && !getStashGroup())
    return emitOpError() << "is in the stash but names no stash_group";
  return success();
}

LogicalResult ProgramOp::verify() {
  StringRef phase = getPhase();
  bool chunked = phase == "forward" || phase == "backward";
  if (!chunked && phase != "microbatch" && phase != "optimizer")
    return emitOpError() << "phase must be microbatch, forward, backward or "
                            "optimizer, got '"
                         << phase << "'";
  if (chunked != getChunk().has_value())
    return emitOpError() << "names a chunk exactly when its phase is "
                            "forward or backward";
  return success();
}

LogicalResult GemmOp::verify() {
  if (getM() <= 0 || getN() <= 0 || getK() <= 0 || getBatch() <= 0)
    return emitOpError() << "sizes must be positive";
  if (getStreamOrCompute() != Stream::Compute)
    return emitOpError() << "runs on the compute stream";
  bool bias = getEpilogue() != Epilogue::None;
  bool aux = getEpilogue() == Epilogue::GeluBias;
  if (bias != getBias().has_value() || aux != getAux().has_value())
    return emitOpError() << "epilogue " << stringifyEpilogue(getEpilogue())
                         << " takes " << (bias ? "a bias" : "no bias")
                         << (aux ? " and an aux buffer" : "");
  return success();
}

LogicalResult LaunchOp::verify() {
  auto it = catalog().find(getKernel());
  if (it == catalog().end())
    return emitOpError() << "'" << getKernel()
                         << "' is not a kernel of the catalog";
  const CatalogEntry &entry = it->second;
  int outputs = int(getOutputs().size());
  if (int(getInputs().size()) != entry.inputs || outputs > entry.outputs ||
      outputs < entry.outputs - entry.optionalOutputs)
    return emitOpError() << "'" << getKernel() << "' takes " << entry.inputs
                         << " inputs and " << entry.outputs << " outputs, got "
                         << getInputs().size() << " and " << outputs;
  if (getStreamOrCompute() != Stream::Compute)
    return emitOpError() << "runs on the compute stream";
  DictionaryAttr args = getArgs();
  for (auto [name, kind] : entry.attrs) {
    Attribute value = args.get(name);
    bool ok = false;
    switch (kind) {
    case CatalogEntry::Int:
      ok = isa_and_nonnull<IntegerAttr>(value) && !isa<BoolAttr>(value);
      break;
    case CatalogEntry::Float:
      ok = isa_and_nonnull<FloatAttr>(value);
      break;
    case CatalogEntry::Bool:
      ok = isa_and_nonnull<BoolAttr>(value);
      break;
    case CatalogEntry::Ints:
      ok = isa_and_nonnull<DenseI64ArrayAttr>(value);
      break;
    }
    if (!ok)
      return emitOpError() << "'" << getKernel() << "' needs argument '" << name
                           << "' ("
                           << (kind == CatalogEntry::Int     ? "an integer"
                               : kind == CatalogEntry::Float ? "a float"
                               : kind == CatalogEntry::Bool  ? "a bool"
                                                             : "integers")
                           << ")";
  }
  if (args.size() != entry.attrs.size())
    return emitOpError() << "'" << getKernel() << "' takes "
                         << entry.attrs.size() << " arguments, got "
                         << args.size();
  return success();
}

LogicalResult CollectiveOp::verify() {
  ArrayRef<int64_t> axes = getAxes();
  bool valid = !axes.empty();
  for (size_t i = 0; i < axes.size(); ++i)
    valid = valid && axes[i] >= 0 && axes[i] < 3 &&
            (i == 0 || axes[i] > axes[i - 1]);
  if (!valid)
    return emitOpError() << "names mesh axes 0 (tp), 1 (dp), 2 (pp), in "
                            "increasing order";
  if (getStages() && !llvm::is_contained(axes, 2))
    return emitOpError() << "lists stages but does not span the pipeline";
  if (static_cast<int64_t>(getDim()) < 0)
    return emitOpError() << "dimension must be >= 0";
  return success();
}

/// One pass over the rank: every symbol an op names is a buffer (an event,
/// a program). Done here rather than per op so that a rank with many
/// thousands of buffers is checked in linear time.
LogicalResult RankOp::verifyRegions() {
  llvm::StringMap<Operation *> symbols;
  for (Operation &op : getBody().front())
    if (auto name = op.getAttrOfType<StringAttr>(
            mlir::SymbolTable::getSymbolAttrName()))
      symbols[name.getValue()] = &op;
  enum class Want { Buffer, Event, Program };
  auto expect = [&](Operation *user, FlatSymbolRefAttr ref,
                    Want want) -> LogicalResult {
    Operation *target = symbols.lookup(ref.getValue());
    bool ok = want == Want::Buffer  ? isa_and_nonnull<BufferOp>(target)
              : want == Want::Event ? isa_and_nonnull<EventOp>(target)
                                    : isa_and_nonnull<ProgramOp>(target);
    if (ok)
      return success();
    return user->emitOpError() << ref << " is not "
                               << (want == Want::Buffer  ? "a buffer"
                                   : want == Want::Event ? "an event"
                                                         : "a program")
                               << " of rank " << getRank();
  };
  auto buffers = [&](Operation *op,
                     ArrayRef<FlatSymbolRefAttr> refs) -> LogicalResult {
    for (FlatSymbolRefAttr ref : refs)
      if (ref && failed(expect(op, ref, Want::Buffer)))
        return failure();
    return success();
  };
  auto list = [](ArrayAttr refs) {
    SmallVector<FlatSymbolRefAttr> out;
    for (Attribute ref : refs)
      out.push_back(cast<FlatSymbolRefAttr>(ref));
    return out;
  };
  WalkResult result = walk([&](Operation *op) -> WalkResult {
    LogicalResult ok = success();
    if (auto buffer = dyn_cast<BufferOp>(op); buffer && buffer.getAlias()) {
      if (failed(expect(op, buffer.getAliasAttr(), Want::Buffer)))
        return WalkResult::interrupt();
      auto root = cast<BufferOp>(symbols.lookup(*buffer.getAlias()));
      int64_t start = static_cast<int64_t>(buffer.getViewOffset().value_or(0));
      if (root.getAlias())
        ok = buffer.emitOpError()
             << "views " << buffer.getAliasAttr() << ", itself a view";
      else if (start < 0 || start + buffer.getBytes() > root.getBytes() ||
               root.getArena() != buffer.getArena())
        ok = buffer.emitOpError()
             << "views bytes " << start << ".." << start + buffer.getBytes()
             << " of " << buffer.getAliasAttr() << " (" << root.getBytes()
             << " bytes) or another arena";
    } else if (auto gemm = dyn_cast<GemmOp>(op)) {
      ok = buffers(op, {gemm.getAAttr(), gemm.getBAttr(), gemm.getDAttr(),
                        gemm.getBiasAttr(), gemm.getAuxAttr()});
    } else if (auto launch = dyn_cast<LaunchOp>(op)) {
      if (succeeded(buffers(op, list(launch.getInputs()))))
        ok = buffers(op, list(launch.getOutputs()));
      else
        ok = failure();
    } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
      ok = buffers(op, {collective.getInputAttr(), collective.getOutputAttr()});
    } else if (auto send = dyn_cast<SendOp>(op)) {
      ok = buffers(op, {send.getBufferAttr()});
    } else if (auto recv = dyn_cast<RecvOp>(op)) {
      ok = buffers(op, {recv.getBufferAttr()});
    } else if (auto record = dyn_cast<RecordOp>(op)) {
      ok = expect(op, record.getEventAttr(), Want::Event);
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      ok = expect(op, wait.getEventAttr(), Want::Event);
    } else if (auto param = dyn_cast<ParamOp>(op)) {
      SmallVector<FlatSymbolRefAttr> refs = {param.getValueAttr(),
                                             param.getGradAttr()};
      for (Attribute master : param.getMasters())
        refs.push_back(cast<FlatSymbolRefAttr>(master));
      ok = buffers(op, refs);
      if (succeeded(ok) &&
          param.getMasters().size() != param.getMasterOffsets().size())
        ok = param.emitOpError() << "needs one offset per master";
    } else if (auto io = dyn_cast<IoOp>(op)) {
      ok = buffers(op, {io.getBufferAttr()});
    } else if (auto run = dyn_cast<RunOp>(op)) {
      ok = expect(op, run.getProgramAttr(), Want::Program);
    }
    return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}
