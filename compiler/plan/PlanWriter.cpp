//===- PlanWriter.cpp - exec IR to a plan file ----------------------------===//
#include "compiler/plan/PlanWriter.h"
#include "dialects/exec/ExecDialect.h"
#include "runtime/plan/KernelCatalog.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/plan_generated.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

using namespace mlir;

namespace strata {
namespace {

namespace fb = ::flatbuffers;

/// Term `term` (0 or 1) of a `per_rank` [axis, stride (, axis, stride)] as
/// the plan's PerRank, or none.
static std::optional<plan::PerRank> perRankOf(Attribute value, size_t term) {
  auto terms = dyn_cast_or_null<DenseI64ArrayAttr>(value);
  if (!terms || terms.size() < 2 * (term + 1))
    return std::nullopt;
  return plan::PerRank(uint8_t(terms[2 * term]), terms[2 * term + 1]);
}

/// Builds the plan's tables: each template's, and the plan-wide ones they
/// index (kernel names, communication groups, locations), each entry once.
class Writer {
public:
  LogicalResult stageTemplate(exec::TemplateOp stage);
  fb::FlatBufferBuilder builder{1 << 16};
  std::vector<fb::Offset<plan::Template>> templates;
  std::vector<uint32_t> stages; // each template's stage
  std::string pipelineSchedule; // the exec.schedule's kind, if any
  std::vector<std::string> kernels, locations = {""};
  llvm::StringMap<int32_t> codeIndex; // exec.code by name, as written
  std::vector<std::pair<std::vector<uint8_t>, std::vector<uint32_t>>> groups;

private:
  uint32_t indexOf(std::vector<std::string> &table,
                   llvm::StringMap<uint32_t> &index, StringRef key) {
    auto [it, fresh] = index.try_emplace(key, table.size());
    if (fresh)
      table.push_back(key.str());
    return it->second;
  }
  uint32_t location(Location loc) {
    // Locations are uniqued by the context: each is spelled once.
    auto [it, fresh] = locationOf.try_emplace(loc.getAsOpaquePointer(), 0);
    if (!fresh)
      return it->second;
    if (auto file = dyn_cast<FileLineColLoc>(loc)) {
      std::string text = file.getFilename().str() + ":" +
                         std::to_string(file.getLine()) + ":" +
                         std::to_string(file.getColumn());
      it->second = indexOf(locations, locationIndex, text);
    }
    return it->second;
  }
  uint32_t group(ArrayRef<int64_t> axes,
                 std::optional<ArrayRef<int64_t>> stages) {
    std::pair<std::vector<uint8_t>, std::vector<uint32_t>> key;
    for (int64_t axis : axes)
      key.first.push_back(uint8_t(axis));
    if (stages)
      for (int64_t stage : *stages)
        key.second.push_back(uint32_t(stage));
    auto it = std::find(groups.begin(), groups.end(), key);
    if (it != groups.end())
      return uint32_t(it - groups.begin());
    groups.push_back(key);
    return uint32_t(groups.size() - 1);
  }
  LogicalResult instruction(Operation &op,
                            const llvm::StringMap<uint32_t> &buffers,
                            const llvm::StringMap<plan::DType> &dtypes,
                            const llvm::StringMap<uint32_t> &events,
                            std::vector<fb::Offset<plan::Instruction>> &out);

  llvm::StringMap<uint32_t> kernelIndex, locationIndex;
  llvm::DenseMap<const void *, uint32_t> locationOf;
};

static plan::StashPool stashPoolOf(exec::StashPool pool) {
  switch (pool) {
  case exec::StashPool::UntilBackward:
    return plan::StashPool::UntilBackward;
  case exec::StashPool::Held:
    return plan::StashPool::Held;
  case exec::StashPool::Passed:
    return plan::StashPool::Passed;
  }
  return plan::StashPool::UntilBackward;
}

static plan::Stream streamOf(exec::Stream stream) {
  switch (stream) {
  case exec::Stream::Comm:
    return plan::Stream::Comm;
  case exec::Stream::Context:
    return plan::Stream::Context;
  case exec::Stream::Compute:
    break;
  }
  return plan::Stream::Compute;
}

LogicalResult
Writer::instruction(Operation &op, const llvm::StringMap<uint32_t> &buffers,
                    const llvm::StringMap<plan::DType> &dtypes,
                    const llvm::StringMap<uint32_t> &events,
                    std::vector<fb::Offset<plan::Instruction>> &out) {
  auto index = [&](FlatSymbolRefAttr ref) {
    return ref ? buffers.lookup(ref.getValue()) : runtime::kNoBuffer;
  };
  auto when = [](std::optional<exec::Condition> condition) {
    return condition == exec::Condition::LastMicrobatch
               ? plan::Condition::LastMicrobatch
               : plan::Condition::Always;
  };
  auto emit = [&](plan::Op type, fb::Offset<void> value,
                  std::optional<exec::Condition> condition) {
    out.push_back(plan::CreateInstruction(
        builder, type, value, streamOf(exec::instructionStream(&op)),
        when(condition), location(op.getLoc())));
  };
  if (auto gemm = dyn_cast<exec::GemmOp>(op)) {
    plan::Epilogue epilogue =
        static_cast<plan::Epilogue>(static_cast<int>(gemm.getEpilogue()));
    auto value = plan::CreateGemm(
        builder, index(gemm.getAAttr()), index(gemm.getBAttr()),
        index(gemm.getDAttr()), index(gemm.getBiasAttr()),
        index(gemm.getAuxAttr()), gemm.getM(), gemm.getN(), gemm.getK(),
        gemm.getTransposeA(), gemm.getTransposeB(), gemm.getLda(),
        gemm.getLdb(), gemm.getLdd(), gemm.getBatch(), gemm.getStrideA(),
        gemm.getStrideB(), gemm.getStrideD(), gemm.getAlpha().convertToFloat(),
        gemm.getBeta().convertToFloat(), epilogue);
    emit(plan::Op::Gemm, value.Union(), gemm.getWhen());
    return success();
  }
  if (auto launch = dyn_cast<exec::LaunchOp>(op)) {
    int id = runtime::findKernel(launch.getKernel().str());
    if (id < 0)
      return launch.emitOpError()
             << "'" << launch.getKernel() << "' is not a kernel of the catalog";
    const runtime::KernelSpec &spec =
        runtime::kernelSpec(runtime::KernelId(id));
    std::vector<uint32_t> operands;
    for (FlatSymbolRefAttr ref : exec::launchOperands(launch))
      operands.push_back(index(ref));
    // Absent optional outputs, at the end.
    while (operands.size() < spec.operands.size())
      operands.push_back(runtime::kNoBuffer);
    std::vector<fb::Offset<plan::Attr>> attrs;
    for (const runtime::AttrSpec &attrSpec : spec.attrs) {
      exec::LaunchArgument argument =
          exec::launchArgument(launch, attrSpec.name);
      fb::Offset<fb::Vector<int64_t>> list;
      if (attrSpec.kind == runtime::AttrKind::Ints)
        list = builder.CreateVector(argument.list.data(), argument.list.size());
      std::optional<plan::PerRank> perRank = perRankOf(argument.perRank, 0),
                                   also = perRankOf(argument.perRank, 1);
      attrs.push_back(plan::CreateAttr(builder, argument.i, argument.f, list,
                                       perRank ? &*perRank : nullptr,
                                       also ? &*also : nullptr));
    }
    auto vector = [&](std::optional<ArrayRef<int64_t>> values) {
      std::vector<uint32_t> out;
      if (values)
        for (int64_t v : *values)
          out.push_back(uint32_t(v));
      return builder.CreateVector(out);
    };
    int32_t code = -1;
    if (std::optional<StringRef> name = launch.getCode()) {
      auto it = codeIndex.find(*name);
      if (it == codeIndex.end())
        return launch.emitOpError()
               << "names generated code '" << *name << "' the module lacks";
      code = it->second;
    }
    auto value = plan::CreateLaunch(
        builder, uint16_t(indexOf(kernels, kernelIndex, spec.name)),
        builder.CreateVector(operands), builder.CreateVector(attrs),
        vector(launch.getGrid()), vector(launch.getBlock()),
        uint32_t(launch.getSharedBytes().value_or(0)), code,
        uint32_t(launch.getFuse().value_or(0)));
    emit(plan::Op::Launch, value.Union(), launch.getWhen());
    return success();
  }
  if (auto collective = dyn_cast<exec::CollectiveOp>(op)) {
    uint32_t input = index(collective.getInputAttr());
    plan::DType dtype = dtypes.lookup(collective.getInput());
    auto value = plan::CreateCollective(
        builder,
        static_cast<plan::CollectiveKind>(
            static_cast<int>(collective.getKind())),
        group(collective.getAxes(), collective.getStages()), input,
        index(collective.getOutputAttr()), int32_t(collective.getDim()), dtype);
    emit(plan::Op::Collective, value.Union(), collective.getWhen());
    return success();
  }
  if (auto send = dyn_cast<exec::SendOp>(op)) {
    auto value = plan::CreateSend(builder, index(send.getBufferAttr()),
                                  uint32_t(send.getPeerStage()),
                                  uint32_t(send.getChannel()));
    emit(plan::Op::Send, value.Union(), std::nullopt);
    return success();
  }
  if (auto recv = dyn_cast<exec::RecvOp>(op)) {
    auto value = plan::CreateRecv(builder, index(recv.getBufferAttr()),
                                  uint32_t(recv.getPeerStage()),
                                  uint32_t(recv.getChannel()));
    emit(plan::Op::Recv, value.Union(), std::nullopt);
    return success();
  }
  if (auto record = dyn_cast<exec::RecordOp>(op)) {
    auto value = plan::CreateRecord(
        builder, events.lookup(record.getEventAttr().getValue()));
    emit(plan::Op::Record, value.Union(), record.getWhen());
    return success();
  }
  if (auto wait = dyn_cast<exec::WaitOp>(op)) {
    auto value = plan::CreateWait(
        builder, events.lookup(wait.getEventAttr().getValue()));
    emit(plan::Op::Wait, value.Union(), wait.getWhen());
    return success();
  }
  return op.emitOpError() << "is not an instruction the plan can hold";
}

LogicalResult Writer::stageTemplate(exec::TemplateOp stage) {
  if (!stage.getPersistentBytes() || !stage.getWorkspaceBytes())
    return stage.emitError() << "is not memory-planned: run "
                                "--strata-plan-memory first";
  llvm::StringMap<uint32_t> index, events;
  llvm::StringMap<plan::DType> dtypes;
  std::vector<fb::Offset<plan::Buffer>> buffers;
  std::vector<fb::Offset<plan::Param>> params;
  std::vector<fb::Offset<plan::Io>> io;
  std::vector<fb::Offset<plan::Program>> programs;
  std::vector<plan::Step> schedule;
  llvm::StringMap<uint32_t> programIndex;
  Block &body = stage.getBody().front();

  for (auto buffer : body.getOps<exec::BufferOp>()) {
    RankedTensorType type = buffer.getTensorType();
    Type element = type.getElementType();
    plan::DType dtype = element.isBF16()  ? plan::DType::BF16
                        : element.isF32() ? plan::DType::F32
                                          : plan::DType::I32;
    if (buffer.getPlacedOffset() < 0)
      return buffer.emitOpError() << "has no offset: run --strata-plan-memory";
    index[buffer.getSymName()] = buffers.size();
    dtypes[buffer.getSymName()] = dtype;
    auto shape =
        builder.CreateVector(type.getShape().data(), type.getShape().size());
    plan::Arena arena =
        buffer.getArena() == exec::Arena::Persistent  ? plan::Arena::Persistent
        : buffer.getArena() == exec::Arena::Workspace ? plan::Arena::Workspace
                                                      : plan::Arena::Stash;
    std::optional<plan::PerRank> perRank =
                                     perRankOf(buffer.getPerRankAttr(), 0),
                                 also = perRankOf(buffer.getPerRankAttr(), 1);
    buffers.push_back(plan::CreateBuffer(
        builder, builder.CreateString(buffer.getSymName().str()), arena,
        buffer.getPlacedOffset(), dtype, shape, buffer.getZeroInit(),
        buffer.getSlotStride().value_or(0), perRank ? &*perRank : nullptr,
        stashPoolOf(buffer.getPool()), also ? &*also : nullptr));
  }
  for (auto event : body.getOps<exec::EventOp>())
    events[event.getSymName()] = events.size();
  auto indexOf = [&](FlatSymbolRefAttr ref) {
    return index.lookup(ref.getValue());
  };
  for (auto param : body.getOps<exec::ParamOp>()) {
    auto global = param.getGlobalShape();
    auto padded = param.getPaddedShape();
    params.push_back(plan::CreateParam(
        builder, builder.CreateString(param.getName().str()),
        indexOf(param.getValueAttr()), indexOf(param.getGradAttr()),
        builder.CreateVector(global.data(), global.size()),
        builder.CreateVector(padded.data(), padded.size()),
        param.getSplitDim() ? int32_t(*param.getSplitDim()) : -1,
        builder.CreateString(param.getInit().str()),
        param.getStd().convertToDouble()));
  }
  for (auto entry : body.getOps<exec::IoOp>())
    io.push_back(plan::CreateIo(builder,
                                builder.CreateString(entry.getName().str()),
                                indexOf(entry.getBufferAttr())));
  for (auto program : body.getOps<exec::ProgramOp>()) {
    programIndex[program.getSymName()] = programs.size();
    std::vector<fb::Offset<plan::Instruction>> instructions;
    for (Operation &op : program.getBody().front())
      if (failed(instruction(op, index, dtypes, events, instructions)))
        return failure();
    plan::Phase kind = plan::Phase::Microbatch;
    switch (program.getPhase()) {
    case exec::Phase::Microbatch:
      kind = plan::Phase::Microbatch;
      break;
    case exec::Phase::Forward:
      kind = plan::Phase::Forward;
      break;
    case exec::Phase::Backward:
      kind = plan::Phase::Backward;
      break;
    case exec::Phase::Optimizer:
      kind = plan::Phase::Optimizer;
      break;
    case exec::Phase::Weight:
      kind = plan::Phase::Weight;
      break;
    }
    programs.push_back(plan::CreateProgram(
        builder, builder.CreateString(program.getSymName().str()),
        builder.CreateVector(instructions), kind,
        program.getChunk() ? int32_t(*program.getChunk()) : -1));
  }
  for (auto schedules : body.getOps<exec::ScheduleOp>()) {
    if (std::optional<StringRef> kind = schedules.getKind())
      pipelineSchedule = kind->str();
    for (auto run : schedules.getBody().front().getOps<exec::RunOp>())
      schedule.push_back(plan::Step(
          programIndex.lookup(run.getProgram()),
          run.getMicrobatch() ? int32_t(*run.getMicrobatch()) : -1,
          run.getSlot() ? int32_t(*run.getSlot()) : -1, run.getExchange(),
          run.getHeldSlot() ? int32_t(*run.getHeldSlot()) : -1,
          run.getPassedSlot() ? int32_t(*run.getPassedSlot()) : -1));
  }

  stages.push_back(uint32_t(stage.getStage()));
  templates.push_back(plan::CreateTemplate(
      builder, uint32_t(stage.getStage()), *stage.getPersistentBytes(),
      *stage.getWorkspaceBytes(), stage.getStashBytes().value_or(0),
      uint32_t(events.size()), builder.CreateVector(buffers),
      builder.CreateVector(programs), builder.CreateVector(params),
      builder.CreateVector(io), builder.CreateVectorOfStructs(schedule)));
  return success();
}

} // namespace

void setPlanHeader(ModuleOp module, const PlanHeader &header) {
  Builder b(module.getContext());
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  SmallVector<NamedAttribute> fields = {
      b.getNamedAttr("model", b.getStringAttr(header.model)),
      b.getNamedAttr("num_microbatches", i64(header.numMicrobatches)),
      b.getNamedAttr("seq_length", i64(header.seqLength)),
      b.getNamedAttr("vocab_size", i64(header.vocabSize)),
      b.getNamedAttr("flops_per_iteration",
                     b.getF64FloatAttr(header.flopsPerIteration)),
      b.getNamedAttr("paper_flops_per_iteration",
                     b.getF64FloatAttr(header.paperFlopsPerIteration)),
      b.getNamedAttr("gelu", b.getStringAttr(header.gelu))};
  struct Write {
    Builder &b;
    SmallVector<NamedAttribute> &fields;
    void operator()(StringRef key, int64_t value, Layout::Field) {
      fields.push_back(b.getNamedAttr(key, b.getI64IntegerAttr(value)));
    }
    void operator()(StringRef key, bool value, Layout::Field) {
      fields.push_back(b.getNamedAttr(key, b.getBoolAttr(value)));
    }
    void operator()(StringRef key, const std::string &value, Layout::Field) {
      fields.push_back(b.getNamedAttr(key, b.getStringAttr(value)));
    }
    void operator()(StringRef key, Recompute value, Layout::Field) {
      fields.push_back(
          b.getNamedAttr(key, b.getStringAttr(recomputeName(value))));
    }
  };
  Layout::forEachField(static_cast<const Layout &>(header), Write{b, fields});
  module->setAttr("strata.plan", b.getDictionaryAttr(fields));
}

namespace {

/// Reads the `strata.plan` attribute's fields (Layout::forEachField's
/// visitor): a size must be there, positive and below 2^32 (something
/// divides by it; the plan holds it in 32 bits); a setting absent (IR
/// written before it) keeps its default, one of another type or value is
/// an error. The first error is emitted and `ok` turns false.
struct HeaderReader {
  DictionaryAttr dict;
  ModuleOp module;
  bool ok = true;

  template <class Field> void size(StringRef key, Field &field) {
    if (!ok)
      return;
    auto value = dict.getAs<IntegerAttr>(key);
    if (!value) {
      module.emitError() << "strata.plan needs a " << key;
      ok = false;
    } else if (value.getInt() < 1 || value.getInt() > UINT32_MAX) {
      module.emitError() << "strata.plan's " << key
                         << " must be a positive integer below 2^32, got "
                         << value.getInt();
      ok = false;
    } else {
      field = Field(value.getInt());
    }
  }
  /// The setting `key` as an `Attr`, or null where it is absent or
  /// wrong (then an error).
  template <class Attr> Attr setting(StringRef key) {
    Attribute value = dict.get(key);
    if (!value || !ok)
      return nullptr;
    if (auto typed = dyn_cast<Attr>(value))
      return typed;
    unknown(key, value);
    return nullptr;
  }
  void unknown(StringRef key, Attribute value) {
    module.emitError() << "strata.plan's " << key
                       << " is not one strata knows: " << value;
    ok = false;
  }

  void operator()(StringRef key, int64_t &field, Layout::Field kind) {
    if (kind == Layout::Field::Size)
      size(key, field);
    else if (auto value = setting<IntegerAttr>(key))
      field = value.getInt();
  }
  void operator()(StringRef key, bool &field, Layout::Field) {
    if (auto value = setting<BoolAttr>(key))
      field = value.getValue();
  }
  void operator()(StringRef key, std::string &field, Layout::Field) {
    if (auto value = setting<StringAttr>(key))
      field = value.str();
  }
  void operator()(StringRef key, Recompute &field, Layout::Field) {
    if (auto value = setting<StringAttr>(key)) {
      if (std::optional<Recompute> kind = parseRecompute(value.getValue()))
        field = *kind;
      else
        unknown(key, value);
    }
  }
};

} // namespace

FailureOr<PlanHeader> getPlanHeader(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>("strata.plan");
  if (!dict)
    return module.emitError() << "has no strata.plan header";
  PlanHeader header;
  auto model = dict.getAs<StringAttr>("model");
  if (!model)
    return module.emitError() << "strata.plan has no model name";
  header.model = model.str();
  HeaderReader read{dict, module};
  read.size("num_microbatches", header.numMicrobatches);
  read.size("seq_length", header.seqLength);
  read.size("vocab_size", header.vocabSize);
  Layout::forEachField(static_cast<Layout &>(header), read);
  if (!read.ok)
    return failure();
  auto flops = dict.getAs<FloatAttr>("flops_per_iteration");
  if (!flops)
    return module.emitError() << "strata.plan needs flops_per_iteration";
  header.flopsPerIteration = flops.getValueAsDouble();
  auto paperFlops = dict.getAs<FloatAttr>("paper_flops_per_iteration");
  if (!paperFlops)
    return module.emitError() << "strata.plan needs paper_flops_per_iteration";
  header.paperFlopsPerIteration = paperFlops.getValueAsDouble();
  if (auto gelu = dict.getAs<StringAttr>("gelu"))
    header.gelu = gelu.str();
  return header;
}

LogicalResult writePlan(ModuleOp module, std::vector<uint8_t> &bytes) {
  FailureOr<PlanHeader> parsed = getPlanHeader(module);
  if (failed(parsed))
    return failure();
  const PlanHeader &header = *parsed;
  Writer writer;
  auto stagesToWrite = module.getOps<exec::TemplateOp>();
  size_t count = std::distance(stagesToWrite.begin(), stagesToWrite.end());
  // Generated code first: the launches index it. A unit's source is
  // written as pieces, split before each "// ---- " line (where the CUDA
  // files a unit holds begin, and its own code: codegen/CudaSources.h), so
  // what units share is in the plan once.
  std::vector<fb::Offset<plan::Code>> codes;
  std::vector<std::string> pieces;
  std::map<std::string, uint32_t, std::less<>> pieceIndex;
  for (auto code : module.getOps<exec::CodeOp>()) {
    if (!code.getPtx())
      return code.emitError()
             << "has no PTX: strata-compile --target cuda compiles it";
    fb::FlatBufferBuilder &b = writer.builder;
    writer.codeIndex[code.getSymName()] = int32_t(codes.size());
    std::vector<uint32_t> parts;
    StringRef source = code.getSource();
    while (!source.empty()) {
      size_t next = source.find("\n// ---- ", 1);
      StringRef piece =
          source.take_front(next == StringRef::npos ? source.size() : next + 1);
      source = source.drop_front(piece.size());
      auto [it, fresh] =
          pieceIndex.try_emplace(piece.str(), uint32_t(pieces.size()));
      if (fresh)
        pieces.push_back(piece.str());
      parts.push_back(it->second);
    }
    codes.push_back(plan::CreateCode(b, b.CreateString(code.getSymName().str()),
                                     b.CreateString(code.getKernel().str()), 0,
                                     b.CreateString(code.getPtx()->str()),
                                     b.CreateVector(parts)));
  }
  // A CUDA plan: the loader's check holds each launch to its code.
  auto arch = module->getAttrOfType<StringAttr>(exec::kCudaArchAttr);
  for (auto stage : stagesToWrite) {
    size_t before = writer.builder.GetSize();
    if (failed(writer.stageTemplate(stage)))
      return failure();
    // The format holds under 2 GiB: stop with the size, well before the
    // builder would have to refuse.
    size_t after = writer.builder.GetSize();
    if (after + 2 * (after - before) >= FLATBUFFERS_MAX_BUFFER_SIZE)
      return module.emitError()
             << "the plan is " << after << " bytes after "
             << writer.templates.size() << " of its " << count
             << " templates: more than a plan file holds ("
             << FLATBUFFERS_MAX_BUFFER_SIZE - 1 << " bytes)";
  }
  if (writer.templates.empty())
    return module.emitError() << "has no exec.template to write";
  // Each rank runs its stage's template.
  uint32_t perStage = uint32_t(header.ranksPerStage());
  std::vector<uint32_t> rankTemplates;
  for (uint32_t stage = 0; stage < header.pipelineParallel; ++stage) {
    auto it = llvm::find(writer.stages, stage);
    if (it == writer.stages.end())
      return module.emitError()
             << "has no exec.template for pipeline stage " << stage;
    rankTemplates.insert(rankTemplates.end(), perStage,
                         uint32_t(it - writer.stages.begin()));
  }
  fb::FlatBufferBuilder &b = writer.builder;
  std::vector<fb::Offset<plan::Group>> groups;
  for (auto &[axes, stages] : writer.groups)
    groups.push_back(plan::CreateGroup(
        b, b.CreateVector(axes), stages.empty() ? 0 : b.CreateVector(stages)));
  auto root = plan::CreatePlan(
      b, b.CreateString(header.model), header.microBatchSize,
      header.globalBatchSize, header.numMicrobatches, header.seqLength,
      header.vocabSize, header.flopsPerIteration, header.tensorParallel,
      header.dataParallel, header.pipelineParallel,
      b.CreateVector(writer.templates), b.CreateVector(rankTemplates),
      writer.pipelineSchedule.empty() ? 0
                                      : b.CreateString(writer.pipelineSchedule),
      b.CreateVectorOfStrings(writer.kernels), b.CreateVector(groups),
      b.CreateVectorOfStrings(writer.locations),
      codes.empty() ? 0 : b.CreateVector(codes),
      arch ? b.CreateString(arch.str()) : 0,
      header.gelu.empty() ? 0 : b.CreateString(header.gelu),
      header.paperFlopsPerIteration,
      pieces.empty() ? 0 : b.CreateVectorOfStrings(pieces),
      uint32_t(header.contextParallel));
  plan::FinishPlanBuffer(b, root);
  bytes = plan::encodePlanFile(b.GetBufferPointer(), b.GetSize());
  return success();
}

} // namespace strata
