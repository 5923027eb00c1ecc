//===- Plan.cpp - load and check a plan -----------------------------------===//
#include "runtime/plan/Plan.h"
#include "runtime/exec/KernelTable.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/plan_generated.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>

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

std::string withThousands(uint64_t value) {
  std::string digits = std::to_string(value), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0)
      out += ',';
    out += digits[i];
  }
  return out;
}

namespace {

/// The semantic checks, each returning "" or the first thing wrong.
class Reader {
public:
  std::string read(const plan::Plan &in, Plan &out) {
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
    if (out.tensorParallel == 0 || out.dataParallel == 0 ||
        out.pipelineParallel == 0)
      return "parallel sizes must be positive";
    uint64_t ranks = uint64_t(out.tensorParallel) * out.dataParallel *
                     out.pipelineParallel;
    if (in.ranks()->size() != ranks)
      return "the plan has " + std::to_string(in.ranks()->size()) +
             " ranks, its layout needs " + std::to_string(ranks);
    for (const plan::Rank *rank : *in.ranks()) {
      RankPlan &r = out.ranks.emplace_back();
      MeshShape mesh;
      mesh.sizes[0] = out.tensorParallel;
      mesh.sizes[1] = out.dataParallel;
      mesh.sizes[2] = out.pipelineParallel;
      if (std::string error = readRank(*rank, mesh, r); !error.empty())
        return "rank " + std::to_string(rank->rank()) + ": " + error;
      if (r.rank != out.ranks.size() - 1)
        return "ranks are out of order";
    }
    return "";
  }

private:
  static std::string readBuffer(const plan::Buffer &in, const RankPlan &rank,
                                Buffer &out) {
    out.name = in.name()->str();
    if (in.arena() > plan::Arena::MAX || in.dtype() > plan::DType::MAX)
      return "buffer '" + out.name + "' has an unknown arena or dtype";
    out.arena = static_cast<Arena>(in.arena());
    out.dtype = static_cast<DType>(in.dtype());
    out.offset = in.offset();
    int64_t elements = 1;
    for (int64_t dim : *in.shape()) {
      if (dim <= 0 || dim > (int64_t(1) << 40) ||
          elements > std::numeric_limits<int64_t>::max() / dim)
        return "buffer '" + out.name + "' has a bad shape";
      elements *= dim;
      out.shape.push_back(dim);
    }
    out.elements = elements;
    out.bytes = uint64_t(elements) * dtypeBytes(out.dtype);
    out.zeroInit = in.zero_init();
    out.slotStride = in.slot_stride();
    uint64_t arena = out.arena == Arena::Persistent ? rank.persistentBytes
                     : out.arena == Arena::Workspace ? rank.workspaceBytes
                                                     : rank.stashBytes;
    if (out.offset > arena || out.bytes > arena - out.offset)
      return "buffer '" + out.name + "' at offset " +
             std::to_string(out.offset) + " (" + std::to_string(out.bytes) +
             " bytes) lies outside its " +
             (out.arena == Arena::Persistent   ? "persistent"
              : out.arena == Arena::Workspace ? "workspace"
                                              : "stash") +
             " arena of " + std::to_string(arena) + " bytes";
    if (out.arena == Arena::Stash && out.slotStride == 0)
      return "stash buffer '" + out.name + "' has no slot stride";
    if (out.offset % dtypeBytes(out.dtype) != 0)
      return "buffer '" + out.name + "' is misaligned";
    return "";
  }

  static std::string readInstruction(const plan::Instruction &in,
                                     const RankPlan &rank,
                                     const MeshShape &mesh, Instruction &out) {
    out.kernel = in.kernel()->str();
    out.location = in.location() ? in.location()->str() : "";
    out.kernelId = findKernel(out.kernel);
    if (out.kernelId < 0)
      return "unknown kernel '" + out.kernel + "'";
    for (auto [list, target] : {std::pair{in.inputs(), &out.inputs},
                                std::pair{in.outputs(), &out.outputs}}) {
      for (uint32_t index : *list) {
        if (index >= rank.buffers.size())
          return out.kernel + " names buffer " + std::to_string(index) +
                 " of " + std::to_string(rank.buffers.size());
        target->push_back(index);
      }
    }
    if (in.attrs()) {
      for (const plan::Attr *attr : *in.attrs()) {
        AttrValue value;
        switch (attr->kind()) {
        case plan::AttrKind::Int:
          value.kind = AttrValue::Kind::Int;
          value.i = attr->int_value();
          break;
        case plan::AttrKind::Float:
          value.kind = AttrValue::Kind::Float;
          value.f = attr->float_value();
          break;
        case plan::AttrKind::Bool:
          value.kind = AttrValue::Kind::Bool;
          value.i = attr->int_value() != 0;
          break;
        case plan::AttrKind::Ints:
          value.kind = AttrValue::Kind::Ints;
          if (attr->ints())
            value.ints.assign(attr->ints()->begin(), attr->ints()->end());
          break;
        default:
          return "argument '" + attr->key()->str() + "' has an unknown kind";
        }
        out.attrs[attr->key()->str()] = std::move(value);
      }
    }
    return checkInstruction(out, rank.buffers, mesh);
  }

  static std::string readRank(const plan::Rank &in, const MeshShape &mesh,
                              RankPlan &out) {
    out.rank = in.rank();
    out.persistentBytes = in.persistent_bytes();
    out.workspaceBytes = in.workspace_bytes();
    out.stashBytes = in.stash_bytes();
    constexpr uint64_t kMaxArena = uint64_t(1) << 46;
    if (out.persistentBytes > kMaxArena || out.workspaceBytes > kMaxArena ||
        out.stashBytes > kMaxArena)
      return "an arena is larger than 64 TiB";
    for (const plan::Buffer *buffer : *in.buffers()) {
      Buffer &b = out.buffers.emplace_back();
      if (std::string error = readBuffer(*buffer, out, b); !error.empty())
        return error;
    }
    auto bufferIndex = [&](uint32_t index) { return index < out.buffers.size(); };
    for (const plan::Program *program : *in.programs()) {
      Program &p = out.programs.emplace_back();
      p.name = program->name()->str();
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
        if (std::string error = readInstruction(*instruction, out, mesh, i);
            !error.empty())
          return "program '" + p.name + "', instruction " +
                 std::to_string(p.instructions.size() - 1) +
                 (i.location.empty() ? "" : " (" + i.location + ")") + ": " +
                 error;
      }
    }
    for (const plan::Param *param : *in.params()) {
      Param &p = out.params.emplace_back();
      p.name = param->name()->str();
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
      const Buffer &value = out.buffers[p.value];
      if (p.globalShape.size() != value.shape.size() ||
          p.paddedShape.size() != value.shape.size() ||
          p.shardOffset.size() != value.shape.size())
        return "parameter '" + p.name + "' has a shard of another rank";
      for (size_t d = 0; d < value.shape.size(); ++d)
        if (p.globalShape[d] < 1 || p.paddedShape[d] < p.globalShape[d] ||
            p.shardOffset[d] < 0 ||
            p.shardOffset[d] > p.paddedShape[d] - value.shape[d])
          return "parameter '" + p.name + "' has a shard outside its tensor";
      const Buffer &grad = out.buffers[p.grad];
      if (grad.elements != value.elements || grad.dtype != DType::F32)
        return "parameter '" + p.name + "' has a gradient of the wrong size";
      if (param->masters()) {
        for (const plan::MasterSegment *segment : *param->masters()) {
          MasterSegment m{segment->buffer(), segment->begin()};
          if (!bufferIndex(m.buffer) ||
              out.buffers[m.buffer].dtype != DType::F32 || m.begin < 0 ||
              m.begin + out.buffers[m.buffer].elements > value.elements)
            return "parameter '" + p.name + "' has a bad master segment";
          p.masters.push_back(m);
        }
      }
    }
    for (const plan::Io *io : *in.io()) {
      if (io->buffer() >= out.buffers.size())
        return "io '" + io->name()->str() + "' names a buffer out of range";
      out.io.push_back({io->name()->str(), io->buffer()});
    }
    for (const plan::Step *step : *in.schedule()) {
      if (step->program() >= out.programs.size())
        return "the schedule names program " +
               std::to_string(step->program()) + " of " +
               std::to_string(out.programs.size());
      const Program &program = out.programs[step->program()];
      bool chunked = program.phase == Phase::Forward ||
                     program.phase == Phase::Backward;
      if (chunked != (step->slot() >= 0))
        return "the schedule runs program '" + program.name + "' " +
               (chunked ? "without" : "with") + " a stash slot";
      out.schedule.push_back(
          {step->program(), step->microbatch(), step->slot()});
    }
    // Every stash buffer a program names must fit in the highest slot the
    // schedule runs it in.
    std::vector<int32_t> highest(out.programs.size(), -1);
    for (const Step &step : out.schedule)
      highest[step.program] = std::max(highest[step.program], step.slot);
    for (size_t p = 0; p < out.programs.size(); ++p) {
      if (highest[p] < 0)
        continue;
      for (const Instruction &instruction : out.programs[p].instructions)
        for (const auto *list : {&instruction.inputs, &instruction.outputs})
          for (uint32_t index : *list) {
            const Buffer &b = out.buffers[index];
            uint64_t at = b.offset + b.slotStride * uint64_t(highest[p]);
            if (b.arena == Arena::Stash && at + b.bytes > out.stashBytes)
              return "the schedule runs program '" + out.programs[p].name +
                     "' in stash slot " + std::to_string(highest[p]) +
                     ", past the stash arena's " +
                     std::to_string(out.stashBytes) + " bytes";
          }
    }
    return "";
  }
};

} // namespace

std::string loadPlanFromBytes(const std::vector<uint8_t> &bytes, Plan &out) {
  const uint8_t *payload = nullptr;
  size_t size = 0;
  if (std::string error = plan::decodePlanFile(bytes, payload, size);
      !error.empty())
    return error;
  flatbuffers::Verifier verifier(payload, size);
  if (!plan::VerifyPlanBuffer(verifier))
    return "the plan's structure does not verify (corrupt FlatBuffer)";
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
