//===- ExecOps.cpp - the exec dialect -------------------------------------===//
//
// Verifiers check what an op can see on its own: a launch against the kernel
// catalog's counts and attribute kinds (the runtime's catalog, generated
// from Kernels.def, the one definition of each kernel), a gemm's sizes and
// epilogue, a collective's axes, every symbol against the template's buffers,
// events and programs. Dtypes and shapes of the buffers are checked when the
// plan is written, by the runtime's own checker (runtime/plan/PlanCheck.cpp).
//
//===----------------------------------------------------------------------===//
#include "dialects/exec/ExecDialect.h"
#include "runtime/plan/KernelCatalog.h"
#include "runtime/plan/MeshAxes.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/DialectImplementation.h"
#include "mlir/IR/OpImplementation.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/TypeSwitch.h"

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

Stream strata::exec::instructionStream(Operation *op) {
  return llvm::TypeSwitch<Operation *, Stream>(op)
      .Case<GemmOp, LaunchOp, CollectiveOp, SendOp, RecvOp, RecordOp, WaitOp>(
          [](auto instruction) { return instruction.getStreamOrCompute(); })
      .Default([](Operation *) { return Stream::Compute; });
}

LogicalResult strata::exec::verifyPerRank(Operation *op, Attribute value) {
  auto terms = dyn_cast_or_null<DenseI64ArrayAttr>(value);
  bool valid = terms && (terms.size() == 2 || terms.size() == 4);
  for (size_t k = 0; valid && k < terms.size(); k += 2)
    valid = terms[k] >= 0 && terms[k] < mesh::kAxisCount && terms[k + 1] >= 0;
  if (!valid)
    return op->emitOpError()
           << "per_rank must be [axis, stride] or [axis, stride, axis, "
              "stride]: mesh axes 0 (tp), 1 (dp), 2 (pp) or 3 (cp) and "
              "strides >= 0";
  return success();
}

void strata::exec::placeInstruction(Operation *op, Stream stream,
                                    bool lastMicrobatch) {
  MLIRContext *ctx = op->getContext();
  if (stream != Stream::Compute)
    op->setAttr("stream", StreamAttr::get(ctx, stream));
  if (lastMicrobatch)
    op->setAttr("when", ConditionAttr::get(ctx, Condition::LastMicrobatch));
}

RecordOp strata::exec::recordEvent(OpBuilder &at, Location loc, EventOp event,
                                   Stream stream, bool lastMicrobatch) {
  auto op =
      RecordOp::create(at, loc, FlatSymbolRefAttr::get(event.getSymNameAttr()),
                       StreamAttr(), ConditionAttr());
  placeInstruction(op, stream, lastMicrobatch);
  return op;
}

WaitOp strata::exec::waitEvent(OpBuilder &at, Location loc, EventOp event,
                               Stream stream, bool lastMicrobatch) {
  auto op =
      WaitOp::create(at, loc, FlatSymbolRefAttr::get(event.getSymNameAttr()),
                     StreamAttr(), ConditionAttr());
  placeInstruction(op, stream, lastMicrobatch);
  return op;
}

int64_t strata::exec::elementBytes(Type elementType) {
  return elementType.isBF16() ? 2 : 4;
}

SmallVector<FlatSymbolRefAttr> strata::exec::launchOperands(LaunchOp launch) {
  SmallVector<FlatSymbolRefAttr> operands;
  for (ArrayAttr list : {launch.getInputs(), launch.getOutputs()})
    for (Attribute ref : list)
      operands.push_back(cast<FlatSymbolRefAttr>(ref));
  return operands;
}

strata::exec::LaunchArgument strata::exec::launchArgument(LaunchOp launch,
                                                          StringRef name) {
  LaunchArgument argument;
  Attribute value = launch.getArgs().get(name);
  if (auto flag = dyn_cast_or_null<BoolAttr>(value))
    argument.i = flag.getValue();
  else if (auto integer = dyn_cast_or_null<IntegerAttr>(value))
    argument.i = integer.getInt();
  else if (auto real = dyn_cast_or_null<FloatAttr>(value))
    argument.f = real.getValueAsDouble();
  else if (auto list = dyn_cast_or_null<DenseI64ArrayAttr>(value))
    argument.list = list.asArrayRef();
  if (DictionaryAttr perRank = launch.getPerRankAttr())
    argument.perRank = perRank.get(name);
  return argument;
}

void strata::exec::instructionBuffers(
    Operation *op, SmallVectorImpl<FlatSymbolRefAttr> &reads,
    SmallVectorImpl<FlatSymbolRefAttr> &writes) {
  auto add = [](SmallVectorImpl<FlatSymbolRefAttr> &to, Attribute ref) {
    if (auto symbol = dyn_cast_or_null<FlatSymbolRefAttr>(ref))
      to.push_back(symbol);
  };
  if (auto gemm = dyn_cast<GemmOp>(op)) {
    bool biasGrad = gemm.getEpilogue() == Epilogue::BiasGrad;
    bool accumulates = !gemm.getBeta().isZero();
    add(reads, gemm.getAAttr());
    add(reads, gemm.getBAttr());
    if (accumulates)
      add(reads, gemm.getDAttr());
    if (!biasGrad || accumulates)
      add(reads, gemm.getBiasAttr());
    add(writes, gemm.getDAttr());
    add(writes, gemm.getAuxAttr());
    if (biasGrad)
      add(writes, gemm.getBiasAttr());
  } else if (auto launch = dyn_cast<LaunchOp>(op)) {
    for (Attribute ref : launch.getInputs())
      add(reads, ref);
    for (Attribute ref : launch.getOutputs())
      add(writes, ref);
  } else if (auto collective = dyn_cast<CollectiveOp>(op)) {
    add(reads, collective.getInputAttr());
    add(writes, collective.getOutputAttr());
  } else if (auto send = dyn_cast<SendOp>(op)) {
    add(reads, send.getBufferAttr());
  } else if (auto recv = dyn_cast<RecvOp>(op)) {
    add(writes, recv.getBufferAttr());
  }
}

int64_t BufferOp::getBytes() {
  RankedTensorType type = getTensorType();
  return type.getNumElements() * elementBytes(type.getElementType());
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
  if (getStashPool() && getArena() != Arena::Stash)
    return emitOpError() << "names a stash_pool but is not in the stash";
  return success();
}

LogicalResult ProgramOp::verify() {
  Phase phase = getPhase();
  bool chunked = phase == Phase::Forward || phase == Phase::Backward ||
                 phase == Phase::Weight;
  if (chunked != getChunk().has_value())
    return emitOpError() << "names a chunk exactly when its phase is "
                            "forward, backward or weight";
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
  int id = runtime::findKernel(getKernel().str());
  if (id < 0)
    return emitOpError() << "'" << getKernel()
                         << "' is not a kernel of the catalog";
  const runtime::KernelSpec &spec = runtime::kernelSpec(runtime::KernelId(id));
  int inputs = spec.inputs(), outputs = int(spec.operands.size()) - inputs;
  int optional = 0;
  for (const runtime::OperandSpec &operand : spec.operands)
    optional += operand.optional;
  int given = int(getOutputs().size());
  if (int(getInputs().size()) != inputs || given > outputs ||
      given < outputs - optional)
    return emitOpError() << "'" << getKernel() << "' takes " << inputs
                         << " inputs and " << outputs << " outputs, got "
                         << getInputs().size() << " and " << given;
  if (getStreamOrCompute() != Stream::Compute)
    return emitOpError() << "runs on the compute stream";
  DictionaryAttr args = getArgs();
  for (const runtime::AttrSpec &attr : spec.attrs) {
    Attribute value = args.get(attr.name);
    bool ok = false;
    const char *kind = "";
    switch (attr.kind) {
    case runtime::AttrKind::Int:
      ok = isa_and_nonnull<IntegerAttr>(value) && !isa<BoolAttr>(value);
      kind = "an integer";
      break;
    case runtime::AttrKind::Float:
      ok = isa_and_nonnull<FloatAttr>(value);
      kind = "a float";
      break;
    case runtime::AttrKind::Bool:
      ok = isa_and_nonnull<BoolAttr>(value);
      kind = "a bool";
      break;
    case runtime::AttrKind::Ints:
      ok = isa_and_nonnull<DenseI64ArrayAttr>(value);
      kind = "integers";
      break;
    }
    if (!ok)
      return emitOpError() << "'" << getKernel() << "' needs argument '"
                           << attr.name << "' (" << kind << ")";
  }
  if (args.size() != spec.attrs.size())
    return emitOpError() << "'" << getKernel() << "' takes "
                         << spec.attrs.size() << " arguments, got "
                         << args.size();
  if (DictionaryAttr perRank = getPerRankAttr()) {
    for (NamedAttribute entry : perRank) {
      const runtime::AttrSpec *attr = nullptr;
      for (const runtime::AttrSpec &a : spec.attrs)
        if (entry.getName() == a.name)
          attr = &a;
      if (!attr || attr->kind != runtime::AttrKind::Int)
        return emitOpError() << "per_rank names '" << entry.getName().getValue()
                             << "', which is not an integer argument of '"
                             << getKernel() << "'";
      if (failed(verifyPerRank(getOperation(), entry.getValue())))
        return failure();
    }
  }
  FailureOr<SmallVector<LaunchOp>> group = fusedGroup(*this);
  if (failed(group))
    return failure();
  if (std::optional<StringRef> code = getCode()) {
    std::vector<runtime::KernelId> kernels;
    for (LaunchOp member : *group)
      kernels.push_back(
          runtime::KernelId(runtime::findKernel(member.getKernel().str())));
    std::string computes = runtime::fusedKernelName(kernels);
    // Generated code lives beside the templates, in the module.
    Operation *stage = getOperation()->getParentOfType<TemplateOp>();
    Operation *module = stage ? stage->getParentOp() : nullptr;
    auto generated = module ? dyn_cast_or_null<CodeOp>(
                                  SymbolTable::lookupSymbolIn(module, *code))
                            : CodeOp();
    if (!generated)
      return emitOpError() << "names generated code '" << *code
                           << "', which is no exec.code of the module";
    if (generated.getKernel() != computes)
      return emitOpError() << "launches '" << computes << "' with code '"
                           << *code << "', generated for '"
                           << generated.getKernel() << "'";
    if (!getGrid() || !getBlock() || getGrid()->size() != 3 ||
        getBlock()->size() != 3)
      return emitOpError() << "with generated code needs a grid and a block "
                              "of three dimensions each";
  }
  return success();
}

FailureOr<SmallVector<LaunchOp>> strata::exec::fusedGroup(LaunchOp launch) {
  SmallVector<LaunchOp> group = {launch};
  std::optional<uint64_t> fuse = launch.getFuse();
  if (!fuse)
    return group;
  if (*fuse < 2)
    return launch.emitOpError()
           << "fuses " << *fuse << " launches: a fused group has two or more";
  Operation *next = launch->getNextNode();
  for (uint64_t i = 1; i < *fuse; ++i, next = next->getNextNode()) {
    auto member = dyn_cast_or_null<LaunchOp>(next);
    if (!member || member.getFuse() || member.getCode() || member.getGrid() ||
        member.getBlock() || member.getSharedBytes() ||
        member.getWhen() != launch.getWhen() ||
        runtime::findKernel(member.getKernel().str()) < 0)
      return launch.emitOpError()
             << "fuses " << *fuse << " launches, but instruction " << i
             << " after it is not a launch of the catalog under the same "
                "condition without code, launch shape or fusion of its own";
    group.push_back(member);
  }
  return group;
}

void strata::exec::clearGeneratedCode(mlir::ModuleOp module) {
  module.walk([](LaunchOp launch) {
    launch.removeCodeAttr();
    launch.removeGridAttr();
    launch.removeBlockAttr();
    launch.removeSharedBytesAttr();
  });
  for (auto code : llvm::make_early_inc_range(module.getOps<CodeOp>()))
    code.erase();
  module->removeAttr(kCudaArchAttr);
}

std::map<std::pair<int64_t, StashPool>, llvm::SmallVector<BufferOp>>
strata::exec::stashMembers(TemplateOp stage) {
  std::map<std::pair<int64_t, StashPool>, llvm::SmallVector<BufferOp>> members;
  for (auto buffer : stage.getBody().front().getOps<BufferOp>())
    if (buffer.getArena() == Arena::Stash && !buffer.getAlias())
      members[{int64_t(buffer.getStashGroup().value_or(0)), buffer.getPool()}]
          .push_back(buffer);
  return members;
}

int64_t strata::exec::stashSlotBytes(llvm::ArrayRef<BufferOp> members) {
  int64_t bytes = 0;
  for (BufferOp buffer : members)
    bytes = alignToArena(bytes + buffer.getBytes());
  return bytes;
}

std::optional<BufferPlace>
strata::exec::bufferPlace(BufferOp buffer,
                          const llvm::StringMap<BufferOp> &byName) {
  // A view's own offset is its root's plus its view offset (memory
  // planning writes it, the plan carries it), and its arena the root's; a
  // view is never of a view. The root says whether it moves per rank and
  // which stash group it is in.
  BufferOp root = buffer;
  if (std::optional<StringRef> alias = buffer.getAlias())
    root = byName.lookup(*alias);
  if (!root || buffer.getPerRank() || root.getPerRank() ||
      buffer.getPlacedOffset() < 0)
    return std::nullopt;
  BufferPlace place;
  place.arena = buffer.getArena();
  place.stashGroup = int64_t(root.getStashGroup().value_or(-1));
  if (place.arena == Arena::Stash)
    place.stashPool = int64_t(root.getPool());
  place.begin = buffer.getPlacedOffset();
  place.end = place.begin + buffer.getBytes();
  place.element = buffer.getTensorType().getElementType();
  return place;
}

LogicalResult CollectiveOp::verify() {
  ArrayRef<int64_t> axes = getAxes();
  bool valid = !axes.empty();
  for (size_t i = 0; i < axes.size(); ++i)
    valid = valid && axes[i] >= 0 && axes[i] < mesh::kAxisCount &&
            (i == 0 || axes[i] > axes[i - 1]);
  if (!valid)
    return emitOpError() << "names mesh axes 0 (tp), 1 (dp), 2 (pp), 3 (cp), "
                            "in increasing order";
  if (getStages() && !llvm::is_contained(axes, int64_t(mesh::kPipeline)))
    return emitOpError() << "lists stages but does not span the pipeline";
  if (static_cast<int64_t>(getDim()) < 0)
    return emitOpError() << "dimension must be >= 0";
  return success();
}

/// One pass over the template: every symbol an op names is a buffer (an
/// event, a program). Done here rather than per op so that a template with
/// many thousands of buffers is checked in linear time.
DenseI64ArrayAttr TemplateOp::getSlotsOf(StashPool pool) {
  switch (pool) {
  case StashPool::UntilBackward:
    return getStashSlotsAttr();
  case StashPool::Held:
    return getHeldSlotsAttr();
  case StashPool::Passed:
    return getPassedSlotsAttr();
  }
  return {};
}

void TemplateOp::setSlotsOf(StashPool pool, DenseI64ArrayAttr slots) {
  switch (pool) {
  case StashPool::UntilBackward:
    return setStashSlotsAttr(slots);
  case StashPool::Held:
    return setHeldSlotsAttr(slots);
  case StashPool::Passed:
    return setPassedSlotsAttr(slots);
  }
}

LogicalResult TemplateOp::verifyRegions() {
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
                               << " of the template of stage " << getStage();
  };
  auto buffers = [&](Operation *op,
                     ArrayRef<FlatSymbolRefAttr> refs) -> LogicalResult {
    for (FlatSymbolRefAttr ref : refs)
      if (ref && failed(expect(op, ref, Want::Buffer)))
        return failure();
    return success();
  };
  WalkResult result = walk([&](Operation *op) -> WalkResult {
    LogicalResult ok = success();
    if (auto buffer = dyn_cast<BufferOp>(op); buffer && buffer.getAlias()) {
      if (failed(expect(op, buffer.getAliasAttr(), Want::Buffer)))
        return WalkResult::interrupt();
      auto root = cast<BufferOp>(symbols.lookup(*buffer.getAlias()));
      int64_t start = static_cast<int64_t>(buffer.getViewOffset().value_or(0));
      // A per-rank view is checked here at coordinate 0; the plan's loader
      // checks every rank's against its arena (the mesh's sizes are the
      // plan's, not the template's).
      if (buffer.getPerRankAttr() &&
          failed(verifyPerRank(op, buffer.getPerRankAttr())))
        ok = failure();
      else if (root.getAlias())
        ok = buffer.emitOpError()
             << "views " << buffer.getAliasAttr() << ", itself a view";
      else if (start < 0 || start + buffer.getBytes() > root.getBytes() ||
               root.getArena() != buffer.getArena())
        ok = buffer.emitOpError()
             << "views bytes " << start << ".." << start + buffer.getBytes()
             << " of " << buffer.getAliasAttr() << " (" << root.getBytes()
             << " bytes) or another arena";
    } else if (isa<GemmOp, LaunchOp, CollectiveOp, SendOp, RecvOp>(op)) {
      SmallVector<FlatSymbolRefAttr> refs;
      instructionBuffers(op, refs, refs);
      ok = buffers(op, refs);
    } else if (auto record = dyn_cast<RecordOp>(op)) {
      ok = expect(op, record.getEventAttr(), Want::Event);
    } else if (auto wait = dyn_cast<WaitOp>(op)) {
      ok = expect(op, wait.getEventAttr(), Want::Event);
    } else if (auto param = dyn_cast<ParamOp>(op)) {
      ok = buffers(op, {param.getValueAttr(), param.getGradAttr()});
      if (succeeded(ok) && param.getSplitDim() &&
          int64_t(*param.getSplitDim()) >=
              int64_t(param.getGlobalShape().size()))
        ok = param.emitOpError()
             << "splits dimension " << *param.getSplitDim() << " of a "
             << param.getGlobalShape().size() << "-d tensor";
    } else if (auto io = dyn_cast<IoOp>(op)) {
      ok = buffers(op, {io.getBufferAttr()});
    } else if (auto run = dyn_cast<RunOp>(op)) {
      ok = expect(op, run.getProgramAttr(), Want::Program);
    }
    return failed(ok) ? WalkResult::interrupt() : WalkResult::advance();
  });
  return failure(result.wasInterrupted());
}
