//===- PlanWriter.cpp - exec IR to a plan file ----------------------------===//
#include "compiler/plan/PlanWriter.h"
#include "dialects/exec/ExecDialect.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/plan_generated.h"

#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

namespace strata {
namespace {

namespace fb = ::flatbuffers;

class Writer {
public:
  LogicalResult rank(exec::RankOp rank);
  fb::FlatBufferBuilder builder{1 << 16};
  std::vector<fb::Offset<plan::Rank>> ranks;
  std::string pipelineSchedule; // the exec.schedule's kind, if any

private:
  LogicalResult attr(NamedAttribute named,
                     std::vector<fb::Offset<plan::Attr>> &out);
  static std::string location(Location loc) {
    if (auto file = dyn_cast<FileLineColLoc>(loc))
      return (file.getFilename().str() + ":" +
              std::to_string(file.getLine()) + ":" +
              std::to_string(file.getColumn()));
    return "";
  }
};

LogicalResult Writer::attr(NamedAttribute named,
                           std::vector<fb::Offset<plan::Attr>> &out) {
  auto key = builder.CreateString(named.getName().str());
  Attribute value = named.getValue();
  if (auto b = dyn_cast<BoolAttr>(value)) {
    out.push_back(plan::CreateAttr(builder, key, plan::AttrKind::Bool,
                                   b.getValue() ? 1 : 0));
  } else if (auto i = dyn_cast<IntegerAttr>(value)) {
    out.push_back(
        plan::CreateAttr(builder, key, plan::AttrKind::Int, i.getInt()));
  } else if (auto f = dyn_cast<FloatAttr>(value)) {
    out.push_back(plan::CreateAttr(builder, key, plan::AttrKind::Float, 0,
                                   f.getValueAsDouble()));
  } else if (auto ints = dyn_cast<DenseI64ArrayAttr>(value)) {
    auto vector = builder.CreateVector(ints.asArrayRef().data(),
                                       ints.asArrayRef().size());
    out.push_back(plan::CreateAttr(builder, key, plan::AttrKind::Ints, 0, 0,
                                   vector));
  } else {
    return emitError(UnknownLoc::get(value.getContext()))
           << "kernel argument '" << named.getName()
           << "' has a kind the plan cannot hold: " << value;
  }
  return success();
}

LogicalResult Writer::rank(exec::RankOp rank) {
  if (!rank.getPersistentBytes() || !rank.getWorkspaceBytes())
    return rank.emitError() << "is not memory-planned: run "
                               "--strata-plan-memory first";
  llvm::StringMap<uint32_t> index;
  std::vector<fb::Offset<plan::Buffer>> buffers;
  std::vector<fb::Offset<plan::Param>> params;
  std::vector<fb::Offset<plan::Io>> io;
  std::vector<fb::Offset<plan::Program>> programs;
  std::vector<plan::Step> schedule;
  llvm::StringMap<uint32_t> programIndex;
  Block &body = rank.getBody().front();

  for (auto buffer : body.getOps<exec::BufferOp>()) {
    RankedTensorType type = buffer.getTensorType();
    Type element = type.getElementType();
    plan::DType dtype = element.isBF16()  ? plan::DType::BF16
                        : element.isF32() ? plan::DType::F32
                                          : plan::DType::I32;
    if (buffer.getPlacedOffset() < 0)
      return buffer.emitOpError() << "has no offset: run --strata-plan-memory";
    index[buffer.getSymName()] = buffers.size();
    auto shape = builder.CreateVector(type.getShape().data(),
                                      type.getShape().size());
    plan::Arena arena = buffer.getArena() == exec::Arena::Persistent
                            ? plan::Arena::Persistent
                        : buffer.getArena() == exec::Arena::Workspace
                            ? plan::Arena::Workspace
                            : plan::Arena::Stash;
    buffers.push_back(plan::CreateBuffer(
        builder, builder.CreateString(buffer.getSymName().str()), arena,
        buffer.getPlacedOffset(), dtype, shape, buffer.getZeroInit(),
        buffer.getSlotStride().value_or(0)));
  }
  auto indexOf = [&](FlatSymbolRefAttr ref) {
    return index.lookup(ref.getValue());
  };
  for (auto param : body.getOps<exec::ParamOp>()) {
    auto global = param.getGlobalShape();
    auto padded = param.getPaddedShape();
    auto offset = param.getShardOffset();
    std::vector<plan::MasterSegment> masters;
    for (auto [master, begin] :
         llvm::zip(param.getMasters(), param.getMasterOffsets()))
      masters.push_back(
          plan::MasterSegment(indexOf(cast<FlatSymbolRefAttr>(master)), begin));
    params.push_back(plan::CreateParam(
        builder, builder.CreateString(param.getName().str()),
        indexOf(param.getValueAttr()), indexOf(param.getGradAttr()),
        builder.CreateVectorOfStructs(masters),
        builder.CreateVector(global.data(), global.size()),
        builder.CreateVector(padded.data(), padded.size()),
        builder.CreateVector(offset.data(), offset.size()),
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
    for (auto kernel : program.getBody().front().getOps<exec::KernelOp>()) {
      std::vector<uint32_t> ins, outs;
      for (Attribute ref : kernel.getInputs())
        ins.push_back(indexOf(cast<FlatSymbolRefAttr>(ref)));
      for (Attribute ref : kernel.getOutputs())
        outs.push_back(indexOf(cast<FlatSymbolRefAttr>(ref)));
      std::vector<fb::Offset<plan::Attr>> attrs;
      for (NamedAttribute named : kernel->getDiscardableAttrs())
        if (failed(attr(named, attrs)))
          return failure();
      instructions.push_back(plan::CreateInstruction(
          builder, builder.CreateString(kernel.getKernel().str()),
          builder.CreateVector(ins), builder.CreateVector(outs),
          builder.CreateVector(attrs),
          builder.CreateString(location(kernel.getLoc()))));
    }
    StringRef phase = program.getPhase();
    plan::Phase kind = phase == "forward"     ? plan::Phase::Forward
                       : phase == "backward"  ? plan::Phase::Backward
                       : phase == "optimizer" ? plan::Phase::Optimizer
                                              : plan::Phase::Microbatch;
    programs.push_back(plan::CreateProgram(
        builder, builder.CreateString(program.getSymName().str()),
        builder.CreateVector(instructions), kind,
        program.getChunk() ? int32_t(*program.getChunk()) : -1));
  }
  for (auto schedules : body.getOps<exec::ScheduleOp>()) {
    if (auto kind = schedules->getAttrOfType<StringAttr>("kind"))
      pipelineSchedule = kind.str();
    for (auto run : schedules.getBody().front().getOps<exec::RunOp>())
      schedule.push_back(plan::Step(
          programIndex.lookup(run.getProgram()),
          run.getMicrobatch() ? int32_t(*run.getMicrobatch()) : -1,
          run.getSlot() ? int32_t(*run.getSlot()) : -1));
  }

  ranks.push_back(plan::CreateRank(
      builder, rank.getRank(), *rank.getPersistentBytes(),
      *rank.getWorkspaceBytes(), rank.getStashBytes().value_or(0),
      builder.CreateVector(buffers),
      builder.CreateVector(programs), builder.CreateVector(params),
      builder.CreateVector(io), builder.CreateVectorOfStructs(schedule)));
  return success();
}

} // namespace

void setPlanHeader(ModuleOp module, const PlanHeader &header) {
  Builder b(module.getContext());
  auto i64 = [&](int64_t v) { return b.getI64IntegerAttr(v); };
  module->setAttr(
      "strata.plan",
      b.getDictionaryAttr({
          b.getNamedAttr("model", b.getStringAttr(header.model)),
          b.getNamedAttr("micro_batch_size", i64(header.microBatchSize)),
          b.getNamedAttr("global_batch_size", i64(header.globalBatchSize)),
          b.getNamedAttr("num_microbatches", i64(header.numMicrobatches)),
          b.getNamedAttr("seq_length", i64(header.seqLength)),
          b.getNamedAttr("vocab_size", i64(header.vocabSize)),
          b.getNamedAttr("flops_per_iteration",
                         b.getF64FloatAttr(header.flopsPerIteration)),
          b.getNamedAttr("tensor_parallel", i64(header.tensorParallel)),
          b.getNamedAttr("data_parallel", i64(header.dataParallel)),
          b.getNamedAttr("pipeline_parallel", i64(header.pipelineParallel)),
          b.getNamedAttr("bf16", b.getBoolAttr(header.bf16)),
          b.getNamedAttr("sequence_parallel",
                         b.getBoolAttr(header.sequenceParallel)),
          b.getNamedAttr("distributed_optimizer",
                         b.getBoolAttr(header.distributedOptimizer)),
          b.getNamedAttr("layers_per_virtual_stage",
                         i64(header.layersPerVirtualStage)),
          b.getNamedAttr("first_stage_layers", i64(header.firstStageLayers)),
          b.getNamedAttr("last_stage_layers", i64(header.lastStageLayers)),
          b.getNamedAttr("pipeline_schedule",
                         b.getStringAttr(header.pipelineSchedule)),
          b.getNamedAttr("recompute", b.getStringAttr(header.recompute)),
      }));
}

FailureOr<PlanHeader> getPlanHeader(ModuleOp module) {
  auto dict = module->getAttrOfType<DictionaryAttr>("strata.plan");
  if (!dict)
    return module.emitError() << "has no strata.plan header";
  PlanHeader header;
  auto model = dict.getAs<StringAttr>("model");
  if (!model)
    return module.emitError() << "strata.plan has no model name";
  header.model = model.str();
  for (auto [key, field] :
       {std::pair{"micro_batch_size", &header.microBatchSize},
        std::pair{"global_batch_size", &header.globalBatchSize},
        std::pair{"num_microbatches", &header.numMicrobatches},
        std::pair{"seq_length", &header.seqLength},
        std::pair{"vocab_size", &header.vocabSize},
        std::pair{"tensor_parallel", &header.tensorParallel},
        std::pair{"data_parallel", &header.dataParallel},
        std::pair{"pipeline_parallel", &header.pipelineParallel}}) {
    auto value = dict.getAs<IntegerAttr>(key);
    if (!value || value.getInt() < 0 || value.getInt() > UINT32_MAX)
      return module.emitError() << "strata.plan needs a " << key;
    *field = static_cast<uint32_t>(value.getInt());
  }
  auto flops = dict.getAs<FloatAttr>("flops_per_iteration");
  if (!flops)
    return module.emitError() << "strata.plan needs flops_per_iteration";
  header.flopsPerIteration = flops.getValueAsDouble();
  auto flag = [&](StringRef key) {
    auto value = dict.getAs<BoolAttr>(key);
    return value && value.getValue();
  };
  header.bf16 = flag("bf16");
  header.sequenceParallel = flag("sequence_parallel");
  header.distributedOptimizer = flag("distributed_optimizer");
  // Pipeline options: absent in IR written before them means none.
  auto integer = [&](StringRef key, int64_t otherwise) {
    auto value = dict.getAs<IntegerAttr>(key);
    return value ? value.getInt() : otherwise;
  };
  header.layersPerVirtualStage = integer("layers_per_virtual_stage", 0);
  header.firstStageLayers = integer("first_stage_layers", -1);
  header.lastStageLayers = integer("last_stage_layers", -1);
  if (auto value = dict.getAs<StringAttr>("pipeline_schedule"))
    header.pipelineSchedule = value.str();
  if (auto value = dict.getAs<StringAttr>("recompute"))
    header.recompute = value.str();
  return header;
}

LogicalResult writePlan(ModuleOp module, std::vector<uint8_t> &bytes) {
  FailureOr<PlanHeader> parsed = getPlanHeader(module);
  if (failed(parsed))
    return failure();
  const PlanHeader &header = *parsed;
  Writer writer;
  for (auto rank : module.getOps<exec::RankOp>())
    if (failed(writer.rank(rank)))
      return failure();
  if (writer.ranks.empty())
    return module.emitError() << "has no exec.rank to write";
  fb::FlatBufferBuilder &b = writer.builder;
  auto root = plan::CreatePlan(
      b, b.CreateString(header.model), header.microBatchSize,
      header.globalBatchSize, header.numMicrobatches, header.seqLength,
      header.vocabSize, header.flopsPerIteration, header.tensorParallel,
      header.dataParallel, header.pipelineParallel,
      b.CreateVector(writer.ranks),
      writer.pipelineSchedule.empty()
          ? 0
          : b.CreateString(writer.pipelineSchedule));
  plan::FinishPlanBuffer(b, root);
  bytes = plan::encodePlanFile(b.GetBufferPointer(), b.GetSize());
  return success();
}

} // namespace strata
