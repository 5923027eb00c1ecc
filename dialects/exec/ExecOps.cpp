//===- ExecOps.cpp - the exec dialect -------------------------------------===//
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

/// One pass over the rank: every symbol an op names is a buffer (or, for
/// exec.run, a program). Done here rather than per op so that a rank with
/// many thousands of buffers is checked in linear time.
LogicalResult RankOp::verifyRegions() {
  llvm::StringMap<Operation *> symbols;
  for (Operation &op : getBody().front())
    if (auto name = op.getAttrOfType<StringAttr>(
            mlir::SymbolTable::getSymbolAttrName()))
      symbols[name.getValue()] = &op;
  auto expect = [&](Operation *user, FlatSymbolRefAttr ref,
                    bool program) -> LogicalResult {
    Operation *target = symbols.lookup(ref.getValue());
    if (program ? isa_and_nonnull<ProgramOp>(target)
                : isa_and_nonnull<BufferOp>(target))
      return success();
    return user->emitOpError() << ref << " is not "
                               << (program ? "a program" : "a buffer")
                               << " of rank " << getRank();
  };
  WalkResult result = walk([&](Operation *op) -> WalkResult {
    if (auto buffer = dyn_cast<BufferOp>(op); buffer && buffer.getAlias()) {
      if (failed(expect(op, buffer.getAliasAttr(), false)))
        return WalkResult::interrupt();
      auto root = cast<BufferOp>(symbols.lookup(*buffer.getAlias()));
      int64_t start = static_cast<int64_t>(buffer.getViewOffset().value_or(0));
      if (root.getAlias())
        return buffer.emitOpError() << "views " << buffer.getAliasAttr()
                                    << ", itself a view";
      if (start < 0 || start + buffer.getBytes() > root.getBytes() ||
          root.getArena() != buffer.getArena())
        return buffer.emitOpError()
               << "views bytes " << start << ".." << start + buffer.getBytes()
               << " of " << buffer.getAliasAttr() << " ("
               << root.getBytes() << " bytes) or another arena";
    } else if (auto kernel = dyn_cast<KernelOp>(op)) {
      for (Attribute ref : kernel.getInputs())
        if (failed(expect(op, cast<FlatSymbolRefAttr>(ref), false)))
          return WalkResult::interrupt();
      for (Attribute ref : kernel.getOutputs())
        if (failed(expect(op, cast<FlatSymbolRefAttr>(ref), false)))
          return WalkResult::interrupt();
    } else if (auto param = dyn_cast<ParamOp>(op)) {
      SmallVector<FlatSymbolRefAttr> refs = {param.getValueAttr(),
                                             param.getGradAttr()};
      for (Attribute master : param.getMasters())
        refs.push_back(cast<FlatSymbolRefAttr>(master));
      for (FlatSymbolRefAttr ref : refs)
        if (failed(expect(op, ref, false)))
          return WalkResult::interrupt();
      if (param.getMasters().size() != param.getMasterOffsets().size())
        return param.emitOpError() << "needs one offset per master";
    } else if (auto io = dyn_cast<IoOp>(op)) {
      if (failed(expect(op, io.getBufferAttr(), false)))
        return WalkResult::interrupt();
    } else if (auto run = dyn_cast<RunOp>(op)) {
      if (failed(expect(op, run.getProgramAttr(), true)))
        return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}
