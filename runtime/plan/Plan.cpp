//===- Plan.cpp - load, decode and check a plan ---------------------------===//
//
// After the frame's checksum and the FlatBuffers verifier (structure), every
// value a crafted plan could use to make the runtime read or write outside
// its memory is checked here, as carefully as the verifier checks
// structure: sizes that overflow, buffers outside their arena, stash slots
// past the stash, indices out of range, duplicate names, ranks that
// disagree about a parameter, and each instruction against its contract
// (PlanCheck.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanCheck.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/plan_generated.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <set>

namespace strata::runtime {

const char *dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  }
  return "?";
}

const char *arenaName(Arena arena) {
  switch (arena) {
  case Arena::Persistent:
    return "persistent";
  case Arena::Workspace:
    return "workspace";
  case Arena::Stash:
    return "stash";
  }
  return "?";
}

const char *phaseName(Phase phase) {
  switch (phase) {
  case Phase::Microbatch:
    return "microbatch";
  case Phase::Forward:
    return "forward";
  case Phase::Backward:
    return "backward";
  case Phase::Optimizer:
    return "optimizer";
  }
  return "?";
}

const char *streamName(Stream stream) {
  return stream == Stream::Compute ? "compute" : "comm";
}

const char *collectiveName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduceSum:
    return "all_reduce_sum";
  case CollectiveKind::AllReduceMax:
    return "all_reduce_max";
  case CollectiveKind::AllGather:
    return "all_gather";
  case CollectiveKind::ReduceScatter:
    return "reduce_scatter";
  }
  return "?";
}

std::string Instruction::name() const {
  if (gemm())
    return "gemm";
  if (const LaunchOp *l = launch())
    return kernelName(l->kernel);
  if (const CollectiveOp *c = collective())
    return collectiveName(c->kind);
  if (const TransferOp *t = transfer())
    return t->send ? "send" : "recv";
  return event()->record ? "record" : "wait";
}

std::vector<uint32_t> Instruction::buffers() const {
  std::vector<uint32_t> out;
  auto add = [&](uint32_t index) {
    if (index != kNoBuffer)
      out.push_back(index);
  };
  if (const GemmOp *g = gemm()) {
    for (uint32_t index : {g->a, g->b, g->d, g->bias, g->aux})
      add(index);
  } else if (const LaunchOp *l = launch()) {
    for (uint32_t index : l->operands)
      add(index);
  } else if (const CollectiveOp *c = collective()) {
    add(c->input);
    add(c->output);
  } else if (const TransferOp *t = transfer()) {
    add(t->buffer);
  }
  return out;
}

std::vector<uint32_t> Instruction::outputs() const {
  std::vector<uint32_t> out;
  if (const GemmOp *g = gemm()) {
    out.push_back(g->d);
    if (g->epilogue == Epilogue::BiasGrad)
      out.push_back(g->bias);
    if (g->aux != kNoBuffer)
      out.push_back(g->aux);
  } else if (const LaunchOp *l = launch()) {
    const KernelSpec &spec = kernelSpec(l->kernel);
    for (size_t o = 0; o < l->operands.size(); ++o)
      if (spec.operands[o].output && l->operands[o] != kNoBuffer)
        out.push_back(l->operands[o]);
  } else if (const CollectiveOp *c = collective()) {
    out.push_back(c->output);
  } else if (const TransferOp *t = transfer(); t && !t->send) {
    out.push_back(t->buffer);
  }
  return out;
}

std::vector<int> Plan::groupMembers(uint32_t group, uint32_t rank) const {
  const Group &g = groups[group];
  int64_t sizes[3] = {tensorParallel, dataParallel, pipelineParallel};
  int64_t coords[3], rest = rank;
  for (int a = 0; a < 3; ++a) {
    coords[a] = rest % sizes[a];
    rest /= sizes[a];
  }
  int64_t count = 1;
  for (int axis : g.axes)
    count *= sizes[axis];
  std::vector<int> members;
  for (int64_t k = 0; k < count; ++k) {
    int64_t c[3] = {coords[0], coords[1], coords[2]}, digit = k;
    for (int axis : g.axes) {
      c[axis] = digit % sizes[axis];
      digit /= sizes[axis];
    }
    if (!g.stages.empty() && std::find(g.stages.begin(), g.stages.end(),
                                       uint32_t(c[2])) == g.stages.end())
      continue;
    members.push_back(int(c[0] + sizes[0] * (c[1] + sizes[1] * c[2])));
  }
  return members;
}

std::string withThousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

std::string humanBytes(uint64_t bytes) {
  const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = double(bytes);
  int unit = 0;
  while (value >= 1024.0 && unit < 5) {
    value /= 1024.0;
    ++unit;
  }
  char text[32];
  std::snprintf(text, sizeof text, "%.2f %s", value, units[unit]);
  return text;
}

namespace {

// Limits a sane plan stays far within; past them a value is corrupt.
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 46; // 64 TiB
constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr uint32_t kMaxEvents = 1 << 20;
constexpr uint32_t kMaxWorld = 1 << 20;

/// Decodes and checks the plan, in the order a reader can follow: the
/// header, the plan-wide tables, then each rank.
class Reader {
public:
  std::string read(const plan::Plan &in, Plan &out) {
    if (std::string error = readHeader(in, out); !error.empty())
      return error;
    if (std::string error = readTables(in, out); !error.empty())
      return error;
    context.plan = &out;
    context.vocabSize = out.vocabSize;
    for (const plan::Rank *rank : *in.ranks()) {
      RankPlan &r = out.ranks.emplace_back();
      context.rank = rank->rank();
      if (std::string error = readRank(*rank, r); !error.empty())
        return "rank " + std::to_string(rank->rank()) + ": " + error;
      if (r.rank != out.ranks.size() - 1)
        return "ranks are out of order";
    }
    return checkAcrossRanks(out);
  }

private:
  std::string readHeader(const plan::Plan &in, Plan &out) {
    out.model = in.model()->str();
    out.microBatchSize = in.micro_batch_size();
    out.globalBatchSize = in.global_batch_size();
    out.numMicrobatches = in.num_microbatches();
    out.seqLength = in.seq_length();
    out.vocabSize = in.vocab_size();
    out.flopsPerIteration = in.flops_per_iteration();
    out.tensorParallel = in.tensor_parallel();
    out.dataParallel = in.data_parallel();
    out.pipelineParallel = in.pipeline_parallel();
    if (in.pipeline_schedule())
      out.pipelineSchedule = in.pipeline_schedule()->str();
    if (out.microBatchSize == 0 || out.numMicrobatches == 0 ||
        out.seqLength == 0 || out.vocabSize == 0)
      return "batch sizes, sequence length and vocabulary must be positive";
    if (out.vocabSize > uint32_t(INT32_MAX))
      return "the vocabulary does not fit 32-bit token ids";
    if (uint64_t(out.microBatchSize) * out.seqLength > uint64_t(INT32_MAX))
      return "a microbatch of " + std::to_string(out.microBatchSize) + " x " +
             std::to_string(out.seqLength) + " tokens is too large";
    if (out.tensorParallel == 0 || out.dataParallel == 0 ||
        out.pipelineParallel == 0)
      return "parallel sizes must be positive";
    uint64_t ranks =
        uint64_t(out.tensorParallel) * out.dataParallel * out.pipelineParallel;
    if (ranks > kMaxWorld)
      return "the plan's layout has " + std::to_string(ranks) +
             " ranks, more than " + std::to_string(kMaxWorld);
    if (uint64_t(out.globalBatchSize) !=
        uint64_t(out.microBatchSize) * out.numMicrobatches * out.dataParallel)
      return "the global batch " + std::to_string(out.globalBatchSize) +
             " is not micro batch x microbatches x data-parallel size";
    if (in.ranks()->size() != ranks)
      return "the plan has " + std::to_string(in.ranks()->size()) +
             " ranks, its layout needs " + std::to_string(ranks);
    return "";
  }

  std::string readTables(const plan::Plan &in, Plan &out) {
    for (const flatbuffers::String *name : *in.kernels()) {
      int id = findKernel(name->str());
      if (id < 0)
        return "unknown kernel '" + name->str() +
               "': the plan is for another strata-run";
      kernelIds.push_back(KernelId(id));
    }
    for (const plan::Group *group : *in.groups()) {
      Group &g = out.groups.emplace_back();
      for (uint8_t axis : *group->axes())
        g.axes.push_back(axis);
      bool valid = !g.axes.empty();
      for (size_t i = 0; i < g.axes.size(); ++i)
        valid = valid && g.axes[i] < 3 && (i == 0 || g.axes[i] > g.axes[i - 1]);
      if (!valid)
        return "communication group " + std::to_string(out.groups.size() - 1) +
               " names mesh axes other than 0 (tp), 1 (dp), 2 (pp) in "
               "increasing order";
      if (group->stages()) {
        for (uint32_t stage : *group->stages()) {
          if (stage >= out.pipelineParallel ||
              std::find(g.stages.begin(), g.stages.end(), stage) !=
                  g.stages.end())
            return "communication group " +
                   std::to_string(out.groups.size() - 1) + " lists stage " +
                   std::to_string(stage) + " twice or of none of the plan's " +
                   std::to_string(out.pipelineParallel) + " stages";
          g.stages.push_back(stage);
        }
        bool overPipeline =
            std::find(g.axes.begin(), g.axes.end(), 2) != g.axes.end();
        if (!g.stages.empty() && !overPipeline)
          return "communication group " +
                 std::to_string(out.groups.size() - 1) +
                 " lists stages but does not span the pipeline axis";
      }
    }
    for (const flatbuffers::String *location : *in.locations())
      out.locations.push_back(location->str());
    if (out.locations.empty())
      out.locations.push_back("");
    if (in.code())
      for (const plan::Code *code : *in.code())
        out.code.push_back({code->name()->str(),
                            code->source() ? code->source()->str() : "",
                            code->ptx() ? code->ptx()->str() : ""});
    return "";
  }

  std::string readBuffer(const plan::Buffer &in, const RankPlan &rank,
                         Buffer &out) {
    out.name = in.name()->str();
    if (in.arena() > plan::Arena::MAX || in.dtype() > plan::DType::MAX)
      return "buffer '" + out.name + "' has an unknown arena or dtype";
    out.arena = static_cast<Arena>(in.arena());
    out.dtype = static_cast<DType>(in.dtype());
    out.offset = in.offset();
    int64_t elements = 1;
    for (int64_t dim : *in.shape()) {
      if (dim <= 0 || dim > kMaxDim || elements > kMaxDim / dim)
        return "buffer '" + out.name +
               "' has a shape of more than 2^40 "
               "elements or a dimension that is not positive";
      elements *= dim;
      out.shape.push_back(dim);
    }
    out.elements = elements;
    out.bytes = uint64_t(elements) * dtypeBytes(out.dtype);
    out.zeroInit = in.zero_init();
    out.slotStride = in.slot_stride();
    uint64_t arena = rank.arenaBytes(out.arena);
    if (out.offset > arena || out.bytes > arena - out.offset)
      return "buffer '" + out.name + "' at offset " +
             std::to_string(out.offset) + " (" + std::to_string(out.bytes) +
             " bytes) lies outside its " + arenaName(out.arena) + " arena of " +
             std::to_string(arena) + " bytes";
    if (out.arena == Arena::Stash &&
        (out.slotStride == 0 || out.slotStride > rank.stashBytes))
      return "stash buffer '" + out.name + "' has a slot stride of " +
             std::to_string(out.slotStride) +
             " bytes, not within the stash's " +
             std::to_string(rank.stashBytes);
    if (out.arena != Arena::Stash && out.slotStride != 0)
      return "buffer '" + out.name + "' has a slot stride outside the stash";
    if (out.offset % dtypeBytes(out.dtype) != 0)
      return "buffer '" + out.name + "' is misaligned";
    return "";
  }

  std::string readInstruction(const plan::Instruction &in, Instruction &out) {
    if (in.stream() > plan::Stream::MAX || in.when() > plan::Condition::MAX)
      return "an instruction has an unknown stream or condition";
    out.stream = static_cast<Stream>(in.stream());
    out.when = static_cast<Condition>(in.when());
    out.location = in.location();
    if (out.location >= context.plan->locations.size())
      return "an instruction names location " + std::to_string(out.location) +
             " of " + std::to_string(context.plan->locations.size());
    switch (in.op_type()) {
    case plan::Op::Gemm: {
      const plan::Gemm &g = *in.op_as_Gemm();
      if (g.epilogue() > plan::Epilogue::MAX)
        return "a gemm has an unknown epilogue";
      GemmOp op;
      op.a = g.a();
      op.b = g.b();
      op.d = g.d();
      op.bias = g.bias();
      op.aux = g.aux();
      op.m = g.m();
      op.n = g.n();
      op.k = g.k();
      op.transposeA = g.transpose_a();
      op.transposeB = g.transpose_b();
      op.lda = g.lda();
      op.ldb = g.ldb();
      op.ldd = g.ldd();
      op.batch = g.batch();
      op.strideA = g.stride_a();
      op.strideB = g.stride_b();
      op.strideD = g.stride_d();
      op.alpha = g.alpha();
      op.beta = g.beta();
      op.epilogue = static_cast<Epilogue>(g.epilogue());
      out.op = op;
      return "";
    }
    case plan::Op::Launch: {
      const plan::Launch &l = *in.op_as_Launch();
      if (l.kernel() >= kernelIds.size())
        return "a launch names kernel " + std::to_string(l.kernel()) +
               " of the plan's " + std::to_string(kernelIds.size());
      LaunchOp op;
      op.kernel = kernelIds[l.kernel()];
      op.operands.assign(l.operands()->begin(), l.operands()->end());
      for (const plan::Attr *attr : *l.attrs()) {
        AttrValue &value = op.attrs.emplace_back();
        value.i = attr->i();
        value.f = attr->f();
        if (attr->list())
          value.list.assign(attr->list()->begin(), attr->list()->end());
      }
      if (l.grid())
        op.grid.assign(l.grid()->begin(), l.grid()->end());
      if (l.block())
        op.block.assign(l.block()->begin(), l.block()->end());
      op.sharedBytes = l.shared_bytes();
      op.code = l.code();
      if (op.code < -1 || op.code >= int32_t(context.plan->code.size()))
        return "a launch names code object " + std::to_string(op.code) +
               " of " + std::to_string(context.plan->code.size());
      out.op = std::move(op);
      return "";
    }
    case plan::Op::Collective: {
      const plan::Collective &c = *in.op_as_Collective();
      if (c.kind() > plan::CollectiveKind::MAX || c.dtype() > plan::DType::MAX)
        return "a collective has an unknown kind or dtype";
      CollectiveOp op;
      op.kind = static_cast<CollectiveKind>(c.kind());
      op.group = c.group();
      op.input = c.input();
      op.output = c.output();
      op.dim = c.dim();
      op.dtype = static_cast<DType>(c.dtype());
      out.op = op;
      return "";
    }
    case plan::Op::Send:
    case plan::Op::Recv: {
      bool send = in.op_type() == plan::Op::Send;
      TransferOp op;
      op.send = send;
      op.buffer = send ? in.op_as_Send()->buffer() : in.op_as_Recv()->buffer();
      op.peerStage =
          send ? in.op_as_Send()->peer_stage() : in.op_as_Recv()->peer_stage();
      op.channel =
          send ? in.op_as_Send()->channel() : in.op_as_Recv()->channel();
      out.op = op;
      return "";
    }
    case plan::Op::Record:
      out.op = EventOp{true, in.op_as_Record()->event()};
      return "";
    case plan::Op::Wait:
      out.op = EventOp{false, in.op_as_Wait()->event()};
      return "";
    default:
      return "an instruction of an unknown kind";
    }
  }

  /// Where the program's leading receives end and trailing sends begin
  /// (each with the communication stream's events around them); transfers
  /// anywhere else are an error.
  static std::string findBody(Program &program) {
    auto leading = [](const Instruction &i) {
      const TransferOp *t = i.transfer();
      return (t && !t->send) || (i.event() && i.stream == Stream::Comm);
    };
    auto trailing = [](const Instruction &i) {
      const TransferOp *t = i.transfer();
      return (t && t->send) || (i.event() && i.stream == Stream::Comm);
    };
    const std::vector<Instruction> &code = program.instructions;
    size_t begin = 0, end = code.size();
    while (begin < end && leading(code[begin]))
      ++begin;
    while (end > begin && trailing(code[end - 1]))
      --end;
    // A leading record or trailing wait without transfers is part of the
    // body (a gradient reduction's events).
    bool anyRecv = false, anySend = false;
    for (size_t i = 0; i < begin; ++i)
      anyRecv |= code[i].transfer() != nullptr;
    for (size_t i = end; i < code.size(); ++i)
      anySend |= code[i].transfer() != nullptr;
    program.bodyBegin = anyRecv ? begin : 0;
    program.bodyEnd = anySend ? end : code.size();
    for (size_t i = program.bodyBegin; i < program.bodyEnd; ++i)
      if (code[i].transfer())
        return "instruction " + std::to_string(i) + " (" + code[i].name() +
               ") is a pipeline transfer inside the program's body: "
               "receives lead a program and sends trail it";
    return "";
  }

  std::string readRank(const plan::Rank &in, RankPlan &out) {
    out.rank = in.rank();
    out.persistentBytes = in.persistent_bytes();
    out.workspaceBytes = in.workspace_bytes();
    out.stashBytes = in.stash_bytes();
    out.events = in.events();
    context.events = out.events;
    if (out.persistentBytes > kMaxArenaBytes ||
        out.workspaceBytes > kMaxArenaBytes || out.stashBytes > kMaxArenaBytes)
      return "an arena is larger than 64 TiB";
    if (out.events > kMaxEvents)
      return "the rank declares " + std::to_string(out.events) +
             " events, more than " + std::to_string(kMaxEvents);
    std::set<std::string> names;
    for (const plan::Buffer *buffer : *in.buffers()) {
      Buffer &b = out.buffers.emplace_back();
      if (std::string error = readBuffer(*buffer, out, b); !error.empty())
        return error;
      if (!names.insert(b.name).second)
        return "two buffers are named '" + b.name + "'";
    }
    names.clear();
    for (const plan::Program *program : *in.programs()) {
      Program &p = out.programs.emplace_back();
      p.name = program->name()->str();
      if (!names.insert(p.name).second)
        return "two programs are named '" + p.name + "'";
      if (program->phase() > plan::Phase::MAX)
        return "program '" + p.name + "' has an unknown phase";
      p.phase = static_cast<Phase>(program->phase());
      p.chunk = program->chunk();
      bool chunked = p.phase == Phase::Forward || p.phase == Phase::Backward;
      if (chunked != (p.chunk >= 0))
        return "program '" + p.name +
               "' names a chunk exactly when it is a forward or backward";
      for (const plan::Instruction *instruction : *program->instructions()) {
        Instruction &i = p.instructions.emplace_back();
        std::string error = readInstruction(*instruction, i);
        if (error.empty())
          error = checkInstruction(i, out.buffers, context);
        if (!error.empty()) {
          const std::vector<std::string> &locations = context.plan->locations;
          std::string where =
              i.location < locations.size() ? locations[i.location] : "";
          return "program '" + p.name + "', instruction " +
                 std::to_string(p.instructions.size() - 1) +
                 (where.empty() ? "" : " (" + where + ")") + ": " + error;
        }
      }
      if (std::string error = findBody(p); !error.empty())
        return "program '" + p.name + "': " + error;
    }
    if (std::string error = readParams(in, out); !error.empty())
      return error;
    names.clear();
    for (const plan::Io *io : *in.io()) {
      std::string name = io->name()->str();
      if (io->buffer() >= out.buffers.size())
        return "io '" + name + "' names a buffer out of range";
      if (!names.insert(name).second)
        return "two io entries are named '" + name + "'";
      out.io.push_back({name, io->buffer()});
    }
    return readSchedule(in, out);
  }

  std::string readParams(const plan::Rank &in, RankPlan &out) {
    std::set<std::string> names;
    auto bufferIndex = [&](uint32_t index) {
      return index < out.buffers.size();
    };
    for (const plan::Param *param : *in.params()) {
      Param &p = out.params.emplace_back();
      p.name = param->name()->str();
      if (!names.insert(p.name).second)
        return "parameter '" + p.name + "' is declared twice";
      p.value = param->value();
      p.grad = param->grad();
      p.globalShape.assign(param->global_shape()->begin(),
                           param->global_shape()->end());
      p.paddedShape.assign(param->padded_shape()->begin(),
                           param->padded_shape()->end());
      p.shardOffset.assign(param->shard_offset()->begin(),
                           param->shard_offset()->end());
      p.init = param->init()->str();
      p.std = param->std();
      if (!bufferIndex(p.value) || !bufferIndex(p.grad))
        return "parameter '" + p.name + "' names a buffer out of range";
      if (p.init != "normal" && p.init != "zeros" && p.init != "ones")
        return "parameter '" + p.name + "' has an unknown initializer '" +
               p.init + "'";
      if (!std::isfinite(p.std) || p.std < 0)
        return "parameter '" + p.name + "' has a bad standard deviation";
      const Buffer &value = out.buffers[p.value];
      if (!value.isFloat())
        return "parameter '" + p.name + "' is not a float buffer";
      if (p.globalShape.size() != value.shape.size() ||
          p.paddedShape.size() != value.shape.size() ||
          p.shardOffset.size() != value.shape.size())
        return "parameter '" + p.name + "' has a shard of another rank";
      int64_t globalElements = 1;
      for (size_t d = 0; d < value.shape.size(); ++d) {
        if (p.globalShape[d] < 1 || p.globalShape[d] > kMaxDim ||
            p.paddedShape[d] < p.globalShape[d] || p.paddedShape[d] > kMaxDim ||
            p.shardOffset[d] < 0 ||
            p.shardOffset[d] > p.paddedShape[d] - value.shape[d])
          return "parameter '" + p.name + "' has a shard outside its tensor";
        if (globalElements > kMaxDim / p.globalShape[d])
          return "parameter '" + p.name + "' has more than 2^40 elements";
        globalElements *= p.globalShape[d];
      }
      const Buffer &grad = out.buffers[p.grad];
      if (grad.elements != value.elements || grad.dtype != DType::F32)
        return "parameter '" + p.name + "' has a gradient of the wrong size";
      if (param->masters()) {
        for (const plan::MasterSegment *segment : *param->masters()) {
          MasterSegment m{segment->buffer(), segment->begin()};
          if (!bufferIndex(m.buffer) ||
              out.buffers[m.buffer].dtype != DType::F32 || m.begin < 0 ||
              m.begin > value.elements - out.buffers[m.buffer].elements)
            return "parameter '" + p.name + "' has a bad master segment";
          p.masters.push_back(m);
        }
      }
    }
    return "";
  }

  std::string readSchedule(const plan::Rank &in, RankPlan &out) {
    for (const plan::Step *step : *in.schedule()) {
      if (step->program() >= out.programs.size())
        return "the schedule names program " + std::to_string(step->program()) +
               " of " + std::to_string(out.programs.size());
      const Program &program = out.programs[step->program()];
      bool chunked =
          program.phase == Phase::Forward || program.phase == Phase::Backward;
      if (chunked != (step->slot() >= 0))
        return "the schedule runs program '" + program.name + "' " +
               (chunked ? "without" : "with") + " a stash slot";
      bool perMicrobatch = program.phase != Phase::Optimizer;
      if (perMicrobatch != (step->microbatch() >= 0) ||
          step->microbatch() >= int32_t(context.plan->numMicrobatches))
        return "the schedule runs program '" + program.name +
               "' for microbatch " + std::to_string(step->microbatch()) +
               " of " + std::to_string(context.plan->numMicrobatches);
      out.schedule.push_back({step->program(), step->microbatch(), step->slot(),
                              step->exchange()});
    }
    // Every stash buffer a program names must fit in the highest slot the
    // schedule runs it in, without the address arithmetic wrapping.
    std::vector<int32_t> highest(out.programs.size(), -1);
    for (const Step &step : out.schedule)
      highest[step.program] = std::max(highest[step.program], step.slot);
    for (size_t p = 0; p < out.programs.size(); ++p) {
      if (highest[p] < 0)
        continue;
      for (const Instruction &instruction : out.programs[p].instructions)
        for (uint32_t index : instruction.buffers()) {
          const Buffer &b = out.buffers[index];
          if (b.arena != Arena::Stash)
            continue;
          __int128 end = __int128(b.offset) +
                         __int128(b.slotStride) * highest[p] + b.bytes;
          if (end > __int128(out.stashBytes))
            return "the schedule runs program '" + out.programs[p].name +
                   "' in stash slot " + std::to_string(highest[p]) +
                   ", past the stash arena's " +
                   std::to_string(out.stashBytes) + " bytes";
        }
    }
    return "";
  }

  /// Ranks that share a parameter agree on what it is.
  static std::string checkAcrossRanks(const Plan &plan) {
    std::map<std::string, std::pair<const Param *, uint32_t>> first;
    for (const RankPlan &rank : plan.ranks)
      for (const Param &param : rank.params) {
        auto [it, fresh] = first.try_emplace(param.name, &param, rank.rank);
        const Param &other = *it->second.first;
        if (!fresh && (other.globalShape != param.globalShape ||
                       other.paddedShape != param.paddedShape ||
                       other.init != param.init || other.std != param.std))
          return "ranks " + std::to_string(it->second.second) + " and " +
                 std::to_string(rank.rank) + " disagree about parameter '" +
                 param.name + "' (its global shape or initializer)";
      }
    return "";
  }

  CheckContext context;
  std::vector<KernelId> kernelIds; // Plan.kernels resolved
};

} // namespace

std::string loadPlanFromBytes(const std::vector<uint8_t> &bytes, Plan &out) {
  const uint8_t *payload = nullptr;
  size_t size = 0;
  if (std::string error = plan::decodePlanFile(bytes, payload, size);
      !error.empty())
    return error;
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return "the plan is " + withThousands(size) +
           " bytes, past the format's limit of " +
           withThousands(FLATBUFFERS_MAX_BUFFER_SIZE - 1);
  // The table limit raised knowingly: a large plan holds millions.
  flatbuffers::Verifier::Options options;
  options.max_tables = std::numeric_limits<flatbuffers::uoffset_t>::max();
  flatbuffers::Verifier verifier(payload, size, options);
  if (!plan::VerifyPlanBuffer(verifier))
    return "the plan's structure does not verify (corrupt FlatBuffer)";
  out = Plan();
  return Reader().read(*plan::GetPlan(payload), out);
}

std::string loadPlan(const std::string &path, Plan &out) {
  std::ifstream file(path, std::ios::binary);
  if (!file)
    return "cannot open plan '" + path + "': " + std::strerror(errno);
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(file)),
                             std::istreambuf_iterator<char>());
  if (file.bad())
    return "cannot read plan '" + path + "'";
  return loadPlanFromBytes(bytes, out);
}

} // namespace strata::runtime
