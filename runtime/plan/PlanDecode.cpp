//===- PlanDecode.cpp - load, decode and check a plan ---------------------===//
//
// After the frame's checksum and the FlatBuffers verifier (structure), every
// value a crafted plan could use to make the runtime read or write outside
// its memory is checked here, as carefully as the verifier checks
// structure: sizes that overflow, buffers outside their arena, stash slots
// past the stash, indices out of range, duplicate names, a rank map that
// names no template, templates that disagree about a parameter, and each
// instruction against its contract (PlanCheck.cpp). What depends on a
// rank's coordinates (PerRank values, shards, masters) is checked on the
// rank's resolved copy of its template, for every rank that loads
// (ResolveRank.cpp).
//
//===----------------------------------------------------------------------===//
#include "runtime/base/WholeFile.h"
#include "runtime/plan/Ownership.h"
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanCheck.h"
#include "runtime/plan/PlanFile.h"
#include "runtime/plan/plan_generated.h"

#include <algorithm>
#include <cctype>
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

namespace {

/// CUDA's launch limits (compute capability 8.0 and 9.0 alike) and the
/// most shared memory a block gets on any GPU strata targets (sm_90: 227
/// KiB).
constexpr uint32_t kMaxGridX = 0x7fffffffu, kMaxGridYZ = 65535;
// A generated kernel's source made of shared pieces (plan.fbs
// Code.source_pieces): a piece may be named any number of times, so the
// text is bounded as it is made.
constexpr size_t kMostSourceBytes = size_t(64) << 20;
constexpr uint32_t kMaxSharedBytes = 227 * 1024;

/// A vector of longs copied out byte by byte: FlatBuffers' verifier checks
/// a vector's length field for alignment but not its 8-byte elements, so a
/// crafted plan can place them off 8 (fuzz-plan found it; reading them in
/// place is a misaligned load).
std::vector<int64_t> longs(const flatbuffers::Vector<int64_t> *vector) {
  std::vector<int64_t> out(vector ? vector->size() : 0);
  if (!out.empty())
    std::memcpy(out.data(), vector->Data(), out.size() * sizeof(int64_t));
  return out;
}

bool isIdentifier(const std::string &name) {
  if (name.empty() || name.size() > 256 ||
      !(std::isalpha(static_cast<unsigned char>(name[0])) || name[0] == '_'))
    return false;
  for (char c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '_')
      return false;
  return true;
}

// Limits a sane plan stays far within; past them a value is corrupt.
constexpr uint64_t kMaxArenaBytes = uint64_t(1) << 46; // 64 TiB
constexpr uint32_t kMaxEvents = 1 << 20;

/// Decodes and checks the plan, in the order a reader can follow: the
/// header, the plan-wide tables, then each template.
class Reader {
public:
  std::string read(const plan::Plan &in, Plan &out,
                   const LoadOptions &options) {
    if (std::string error = readHeader(in, out); !error.empty())
      return error;
    if (std::string error = readTables(in, out); !error.empty())
      return error;
    plan = &out;
    if (std::string error = readRankMap(in, out); !error.empty())
      return error;
    readGroupStreams(in, out);
    std::vector<uint32_t> ranks;
    if (options.ranks) {
      for (uint32_t rank : *options.ranks)
        if (rank >= out.world())
          return "the plan is for " + std::to_string(out.world()) + " ranks (" +
                 out.layoutText() + "); rank " + std::to_string(rank) +
                 " is not one of them";
      ranks = *options.ranks;
    } else {
      for (uint32_t rank = 0; rank < out.world(); ++rank)
        ranks.push_back(rank);
    }
    // Only the templates of the ranks loaded are decoded.
    out.templates.resize(in.templates()->size());
    for (uint32_t rank : ranks) {
      std::optional<RankPlan> &stage = out.templates[out.rankTemplates[rank]];
      if (stage)
        continue;
      const plan::Template &written =
          *in.templates()->Get(out.rankTemplates[rank]);
      if (std::string error = readTemplate(written, stage.emplace());
          !error.empty())
        return "template " + std::to_string(out.rankTemplates[rank]) +
               " (stage " + std::to_string(written.stage()) + "): " + error;
    }
    if (std::string error = checkAcrossTemplates(out); !error.empty())
      return error;
    if (!options.resolve)
      return "";
    for (uint32_t rank : ranks)
      if (std::string error = resolveRank(out, rank, out.ranks[rank]);
          !error.empty())
        return error;
    return "";
  }

private:
  /// Each group's streams (Group::streams), from every template's
  /// collectives. Values out of range are left to readTemplate's checks.
  static void readGroupStreams(const plan::Plan &in, Plan &out) {
    for (const plan::Template *written : *in.templates())
      for (const plan::Program *program : *written->programs())
        for (const plan::Instruction *instruction : *program->instructions()) {
          const plan::Collective *c = instruction->op_as_Collective();
          if (c && c->group() < out.groups.size() &&
              instruction->stream() <= plan::Stream::MAX)
            out.groups[c->group()].streams |=
                uint8_t(1u << unsigned(instruction->stream()));
        }
  }

  /// Each rank's template: one the plan holds, for the rank's stage.
  std::string readRankMap(const plan::Plan &in, Plan &out) {
    const auto &map = *in.rank_templates();
    if (map.size() != out.world())
      return "the plan maps " + std::to_string(map.size()) +
             " ranks to templates; its layout has " +
             std::to_string(out.world()) + " (" + out.layoutText() + ")";
    size_t count = in.templates()->size();
    out.rankTemplates.assign(map.begin(), map.end());
    for (uint32_t rank = 0; rank < out.world(); ++rank) {
      uint32_t t = out.rankTemplates[rank];
      if (t >= count)
        return "rank " + std::to_string(rank) + " runs template " +
               std::to_string(t) + ", which the plan does not hold (it has " +
               std::to_string(count) + ")";
      uint32_t stage = in.templates()->Get(t)->stage();
      if (stage != out.stageOf(rank))
        return "rank " + std::to_string(rank) + " of stage " +
               std::to_string(out.stageOf(rank)) + " runs template " +
               std::to_string(t) + ", which is stage " + std::to_string(stage) +
               "'s";
    }
    return "";
  }

  std::string readHeader(const plan::Plan &in, Plan &out) {
    out.model = in.model()->str();
    out.microBatchSize = in.micro_batch_size();
    out.globalBatchSize = in.global_batch_size();
    out.numMicrobatches = in.num_microbatches();
    out.seqLength = in.seq_length();
    out.vocabSize = in.vocab_size();
    out.flopsPerIteration = in.flops_per_iteration();
    out.paperFlopsPerIteration = in.paper_flops_per_iteration();
    out.tensorParallel = in.tensor_parallel();
    out.dataParallel = in.data_parallel();
    out.pipelineParallel = in.pipeline_parallel();
    out.contextParallel = in.context_parallel();
    if (in.pipeline_schedule())
      out.pipelineSchedule = in.pipeline_schedule()->str();
    if (in.gelu())
      out.gelu = in.gelu()->str();
    if (out.gelu != "" && out.gelu != "exact" && out.gelu != "tanh" &&
        out.gelu != "exact,tanh")
      return "the model's GELU is '" + out.gelu +
             "', not exact, tanh or exact,tanh";
    // Only reported (a throughput), but a nan or a negative count is no
    // plan strata-compile wrote.
    for (double flops : {out.flopsPerIteration, out.paperFlopsPerIteration})
      if (!std::isfinite(flops) || flops < 0)
        return "the plan's FLOPs per iteration are not a finite, "
               "non-negative number";
    if (out.microBatchSize == 0 || out.numMicrobatches == 0 ||
        out.seqLength == 0 || out.vocabSize == 0)
      return "batch sizes, sequence length and vocabulary must be positive";
    if (out.vocabSize > uint32_t(INT32_MAX))
      return "the vocabulary does not fit 32-bit token ids";
    if (uint64_t(out.microBatchSize) * out.seqLength > uint64_t(INT32_MAX))
      return "a microbatch of " + std::to_string(out.microBatchSize) + " x " +
             std::to_string(out.seqLength) + " tokens is too large";
    if (out.tensorParallel == 0 || out.dataParallel == 0 ||
        out.pipelineParallel == 0 || out.contextParallel == 0)
      return "parallel sizes must be positive";
    if (out.contextParallel > 1 &&
        out.seqLength % (2 * uint64_t(out.contextParallel)) != 0)
      return "the sequence of " + std::to_string(out.seqLength) +
             " tokens does not cut into 2 x " +
             std::to_string(out.contextParallel) +
             " equal chunks for context parallelism";
    uint64_t ranks = uint64_t(out.tensorParallel) * out.contextParallel *
                     out.dataParallel * out.pipelineParallel;
    if (ranks > uint64_t(kMaxWorldSize))
      return "the plan's layout has " + std::to_string(ranks) +
             " ranks, more than " + std::to_string(kMaxWorldSize);
    if (uint64_t(out.globalBatchSize) !=
        uint64_t(out.microBatchSize) * out.numMicrobatches * out.dataParallel)
      return "the global batch " + std::to_string(out.globalBatchSize) +
             " is not micro batch x microbatches x data-parallel size";
    if (in.templates()->size() == 0 ||
        in.templates()->size() > out.pipelineParallel)
      return "the plan has " + std::to_string(in.templates()->size()) +
             " templates; its " + std::to_string(out.pipelineParallel) +
             " pipeline stages need one to " +
             std::to_string(out.pipelineParallel);
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
        valid = valid && g.axes[i] < mesh::kAxisCount &&
                (i == 0 || g.axes[i] > g.axes[i - 1]);
      if (!valid)
        return "communication group " + std::to_string(out.groups.size() - 1) +
               " names mesh axes other than 0 (tp), 1 (dp), 2 (pp), 3 (cp) "
               "in increasing order";
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
    auto text = [](const flatbuffers::String *s) {
      return s ? s->str() : std::string();
    };
    if (in.code())
      for (const plan::Code *code : *in.code()) {
        // The name is the kernel's symbol (cuModuleGetFunction's, the
        // host compiler's on simt): an identifier, nothing a tool could
        // read as more.
        std::string name = code->name()->str();
        if (!isIdentifier(name))
          return "generated code " + std::to_string(out.code.size()) +
                 " is named '" + printable(name) +
                 "', which is not a C identifier";
        std::string source = text(code->source());
        if (code->source_pieces()) {
          // Pieces the plan's codes share (kMostSourceBytes says why the
          // text is bounded).
          const auto *pieces = in.source_pieces();
          for (uint32_t piece : *code->source_pieces()) {
            if (!pieces || piece >= pieces->size())
              return "generated code " + name + " names source piece " +
                     std::to_string(piece) + " of " +
                     std::to_string(pieces ? pieces->size() : 0);
            const flatbuffers::String *text = pieces->Get(piece);
            if (source.size() + text->size() > kMostSourceBytes)
              return "generated code " + name + "'s source is over " +
                     std::to_string(kMostSourceBytes >> 20) + " MiB";
            source.append(text->data(), text->size());
          }
        }
        out.code.push_back(
            {name, text(code->kernel()), std::move(source), text(code->ptx())});
      }
    out.cudaArch = text(in.cuda_arch());
    return "";
  }

  /// A CUDA plan's launch at `at` runs its generated kernel: it must have
  /// one, for its own catalog kernel (a fused group's: for its members'),
  /// compiled, with a launch shape. A group's members, which the first's
  /// code computes, have none; `at` steps past them.
  std::string checkGeneratedLaunch(const Program &program, size_t &at) {
    const Instruction &first = program.instructions[at];
    const LaunchOp &op = *first.launch();
    std::string kernel = kernelName(op.kernel);
    if (op.fuse > 1) {
      std::vector<KernelId> kernels = {op.kernel};
      if (op.fuse > program.instructions.size() - at)
        return "a launch fuses " + std::to_string(op.fuse) +
               " launches, past the end of its program";
      for (size_t i = 1; i < op.fuse; ++i) {
        const Instruction &next = program.instructions[at + i];
        const LaunchOp *member = next.launch();
        if (!member || member->fuse > 1 || member->code >= 0 ||
            !member->grid.empty() || !member->block.empty() ||
            member->sharedBytes || next.when != first.when ||
            next.stream != first.stream)
          return "a launch fuses " + std::to_string(op.fuse) +
                 " launches, but instruction " + std::to_string(i) +
                 " after it is not a launch under the same condition "
                 "without code or launch shape of its own";
        kernels.push_back(member->kernel);
      }
      kernel = fusedKernelName(kernels);
      at += op.fuse - 1;
    }
    if (op.code < 0)
      return "a launch of '" + kernel +
             "' in a CUDA plan has no generated code";
    const CodeObject &code = plan->code[op.code];
    if (code.kernel != kernel)
      return "a launch of '" + kernel + "' names generated code '" + code.name +
             "', made for '" + code.kernel + "'";
    if (code.ptx.empty())
      return "generated code '" + code.name + "' has no PTX";
    auto shaped = [](const std::vector<uint32_t> &dims) {
      return dims.size() == 3 && dims[0] && dims[1] && dims[2];
    };
    if (!shaped(op.grid) || !shaped(op.block) ||
        uint64_t(op.block[0]) * op.block[1] * op.block[2] > 1024)
      return "a launch of '" + code.name +
             "' has no valid launch shape (a grid and a block of three "
             "non-zero dimensions, at most 1024 threads a block)";
    // CUDA's limits on every GPU strata targets, held on every backend
    // (simt would otherwise try to run 2^32 blocks); the GPU's own shared
    // memory limit is checked again when the plan meets it.
    if (op.grid[0] > kMaxGridX || op.grid[1] > kMaxGridYZ ||
        op.grid[2] > kMaxGridYZ || op.block[0] > 1024 || op.block[1] > 1024 ||
        op.block[2] > 64)
      return "a launch of '" + code.name + "' has grid [" +
             std::to_string(op.grid[0]) + ", " + std::to_string(op.grid[1]) +
             ", " + std::to_string(op.grid[2]) + "] and block [" +
             std::to_string(op.block[0]) + ", " + std::to_string(op.block[1]) +
             ", " + std::to_string(op.block[2]) +
             "], past CUDA's limits (grid 2^31-1 x 65535 x 65535, block "
             "1024 x 1024 x 64)";
    if (op.sharedBytes > kMaxSharedBytes)
      return "a launch of '" + code.name + "' asks for " +
             std::to_string(op.sharedBytes) +
             " bytes of shared memory; no GPU strata targets has more than " +
             std::to_string(kMaxSharedBytes) + " a block";
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
    for (int64_t dim : longs(in.shape())) {
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
    if (in.stash_pool() > plan::StashPool::MAX)
      return "buffer '" + out.name + "' names an unknown stash pool";
    out.stashPool = static_cast<StashPool>(in.stash_pool());
    if (std::string error =
            readPerRank(in.per_rank(), in.per_rank_also(), out.perRank);
        !error.empty())
      return "buffer '" + out.name + "': " + error;
    if (out.arena == Arena::Stash &&
        (out.slotStride == 0 || out.slotStride > rank.stashBytes))
      return "stash buffer '" + out.name + "' has a slot stride of " +
             std::to_string(out.slotStride) +
             " bytes, not within the stash's " +
             std::to_string(rank.stashBytes);
    if (out.arena != Arena::Stash &&
        (out.slotStride != 0 || out.stashPool != StashPool::UntilBackward))
      return "buffer '" + out.name +
             "' has a slot stride or stash pool outside the stash";
    if (out.arena == Arena::Stash && out.perRank.varies())
      return "stash buffer '" + out.name + "' moves with the rank";
    return "";
  }

  /// A per-rank value's terms (either may be absent: no term).
  static std::string readPerRank(const plan::PerRank *first,
                                 const plan::PerRank *second, PerRank &out) {
    for (auto [in, term] :
         {std::pair{first, &out.terms[0]}, std::pair{second, &out.terms[1]}}) {
      if (!in)
        continue;
      term->axis = in->axis();
      term->stride = in->stride();
      if (term->axis >= mesh::kAxisCount || term->stride < 0 ||
          term->stride > kMaxDim)
        return "a per-rank value names mesh axis " +
               std::to_string(term->axis) + " or a stride of " +
               std::to_string(term->stride) +
               " (axes are 0 tp, 1 dp, 2 pp, 3 cp; strides within 2^40)";
    }
    return "";
  }

  std::string readInstruction(const plan::Instruction &in, Instruction &out) {
    if (in.stream() > plan::Stream::MAX || in.when() > plan::Condition::MAX)
      return "an instruction has an unknown stream or condition";
    out.stream = in.stream() == plan::Stream::Context
                     ? Stream::Context
                     : static_cast<Stream>(in.stream());
    out.when = static_cast<Condition>(in.when());
    out.location = in.location();
    if (out.location >= plan->locations.size())
      return "an instruction names location " + std::to_string(out.location) +
             " of " + std::to_string(plan->locations.size());
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
          value.list = longs(attr->list());
        if (attr->per_rank() || attr->per_rank_also()) {
          if (std::string error = readPerRank(
                  attr->per_rank(), attr->per_rank_also(), value.perRank);
              !error.empty())
            return error;
          // Strides are within 2^40 and coordinates 2^20: a value within
          // 2^61 cannot wrap when a rank's two terms are added.
          if (value.i > (int64_t(1) << 61) || value.i < -(int64_t(1) << 61))
            return "a per-rank argument of " + std::to_string(value.i) +
                   " is out of range";
        }
      }
      if (l.grid())
        op.grid.assign(l.grid()->begin(), l.grid()->end());
      if (l.block())
        op.block.assign(l.block()->begin(), l.block()->end());
      op.sharedBytes = l.shared_bytes();
      op.code = l.code();
      if (op.code < -1 || op.code >= int32_t(plan->code.size()))
        return "a launch names code object " + std::to_string(op.code) +
               " of " + std::to_string(plan->code.size());
      op.fuse = l.fuse();
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
    // Each section talks to one peer stage: the executor posts it, with its
    // events, on the transfer stream of that direction.
    auto onePeer = [&](size_t from, size_t to) -> std::string {
      const TransferOp *first = nullptr;
      for (size_t i = from; i < to; ++i)
        if (const TransferOp *t = code[i].transfer()) {
          if (first && t->peerStage != first->peerStage)
            return "instruction " + std::to_string(i) + " (" + code[i].name() +
                   ") talks to stage " + std::to_string(t->peerStage) +
                   " where the program's other " +
                   (t->send ? "sends go to stage "
                            : "receives come from stage ") +
                   std::to_string(first->peerStage) +
                   ": a program's receives come from one stage and its sends "
                   "go to one";
          first = first ? first : t;
        }
      return "";
    };
    if (std::string error = onePeer(0, program.bodyBegin); !error.empty())
      return error;
    return onePeer(program.bodyEnd, code.size());
  }

  std::string readTemplate(const plan::Template &in, RankPlan &out) {
    out.persistentBytes = in.persistent_bytes();
    out.workspaceBytes = in.workspace_bytes();
    out.stashBytes = in.stash_bytes();
    out.events = in.events();
    if (out.persistentBytes > kMaxArenaBytes ||
        out.workspaceBytes > kMaxArenaBytes || out.stashBytes > kMaxArenaBytes)
      return "an arena is larger than 64 TiB";
    if (out.events > kMaxEvents)
      return "the template declares " + std::to_string(out.events) +
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
      if (chunked(p.phase) != (p.chunk >= 0))
        return "program '" + p.name +
               "' names a chunk exactly when it is a forward, backward or "
               "weight";
      for (const plan::Instruction *instruction : *program->instructions()) {
        Instruction &i = p.instructions.emplace_back();
        // Checked against its contract once resolved for a rank.
        if (std::string error = readInstruction(*instruction, i);
            !error.empty())
          return instructionWhere(
                     *plan, p, p.instructions.size() - 1,
                     i.location < plan->locations.size() ? i.location : 0) +
                 error;
      }
      if (std::string error = findBody(p); !error.empty())
        return "program '" + p.name + "': " + error;
      for (size_t i = 0; !plan->cudaArch.empty() && i < p.instructions.size();
           ++i) {
        size_t at = i;
        if (p.instructions[i].launch())
          if (std::string error = checkGeneratedLaunch(p, i); !error.empty())
            return instructionWhere(*plan, p, at,
                                    p.instructions[at].location <
                                            plan->locations.size()
                                        ? p.instructions[at].location
                                        : 0) +
                   error;
      }
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

  std::string readParams(const plan::Template &in, RankPlan &out) {
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
      p.globalShape = longs(param->global_shape());
      p.paddedShape = longs(param->padded_shape());
      p.splitDim = param->split_dim();
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
          p.paddedShape.size() != value.shape.size() || p.splitDim < -1 ||
          p.splitDim >= int(value.shape.size()))
        return "parameter '" + p.name + "' has a shard of another rank";
      int64_t globalElements = 1;
      for (size_t d = 0; d < value.shape.size(); ++d) {
        if (p.globalShape[d] < 1 || p.globalShape[d] > kMaxDim ||
            p.paddedShape[d] < p.globalShape[d] || p.paddedShape[d] > kMaxDim)
          return "parameter '" + p.name + "' has a shard outside its tensor";
        if (globalElements > kMaxDim / p.globalShape[d])
          return "parameter '" + p.name + "' has more than 2^40 elements";
        globalElements *= p.globalShape[d];
      }
      const Buffer &grad = out.buffers[p.grad];
      if (grad.elements != value.elements || grad.dtype != DType::F32)
        return "parameter '" + p.name + "' has a gradient of the wrong size";
    }
    return "";
  }

  std::string readSchedule(const plan::Template &in, RankPlan &out) {
    for (const plan::Step *step : *in.schedule()) {
      if (step->program() >= out.programs.size())
        return "the schedule names program " + std::to_string(step->program()) +
               " of " + std::to_string(out.programs.size());
      const Program &program = out.programs[step->program()];
      StashSlots slots = {step->slot(), step->held_slot(), step->passed_slot()};
      bool slotted = false;
      for (int32_t slot : slots) {
        if (slot < -1)
          return "the schedule runs program '" + program.name +
                 "' in stash slot " + std::to_string(slot);
        slotted |= slot >= 0;
      }
      // A chunk's program may name no slot where its pools keep nothing (a
      // pool of no bytes has none); checkStashSlots asks each stash buffer
      // it names for its pool's.
      if (slotted && !chunked(program.phase))
        return "the schedule runs program '" + program.name +
               "' with a stash slot";
      bool perMicrobatch = program.phase != Phase::Optimizer;
      if (perMicrobatch != (step->microbatch() >= 0) ||
          step->microbatch() >= int32_t(plan->numMicrobatches))
        return "the schedule runs program '" + program.name +
               "' for microbatch " + std::to_string(step->microbatch()) +
               " of " + std::to_string(plan->numMicrobatches);
      out.schedule.push_back(
          {step->program(), step->microbatch(), slots, step->exchange()});
    }
    return checkStashSlots(out);
  }

  /// Every stash buffer a program names has a slot of its pool in every
  /// step that runs the program, and fits in the highest, without the
  /// address arithmetic wrapping (stash buffers never move with the rank:
  /// checked once per template).
  static std::string checkStashSlots(const RankPlan &stage) {
    size_t programs = stage.programs.size();
    std::vector<StashSlots> highest(programs, kNoSlots), lowest(programs);
    for (size_t p = 0; p < programs; ++p)
      lowest[p].fill(std::numeric_limits<int32_t>::max());
    for (const Step &step : stage.schedule)
      for (int q = 0; q < kStashPools; ++q) {
        int32_t &high = highest[step.program][q],
                &low = lowest[step.program][q];
        high = std::max(high, step.slots[q]);
        low = std::min(low, step.slots[q]);
      }
    for (size_t p = 0; p < programs; ++p) {
      for (const Instruction &instruction : stage.programs[p].instructions)
        for (uint32_t index : instruction.buffers()) {
          // An index out of range is refused with its instruction.
          if (index >= stage.buffers.size() ||
              stage.buffers[index].arena != Arena::Stash)
            continue;
          const Buffer &b = stage.buffers[index];
          int q = int(b.stashPool);
          if (lowest[p][q] == std::numeric_limits<int32_t>::max())
            continue; // the schedule never runs it
          if (lowest[p][q] < 0)
            return "the schedule runs program '" + stage.programs[p].name +
                   "' without a slot for its stash buffer '" + b.name + "'";
          __int128 end = __int128(b.offset) +
                         __int128(b.slotStride) * highest[p][q] + b.bytes;
          if (end > __int128(stage.stashBytes))
            return "the schedule runs program '" + stage.programs[p].name +
                   "' in stash slot " + std::to_string(highest[p][q]) +
                   ", past the stash arena's " +
                   std::to_string(stage.stashBytes) + " bytes";
        }
    }
    return "";
  }

  /// Templates that share a parameter agree on what it is.
  static std::string checkAcrossTemplates(const Plan &plan) {
    std::map<std::string, std::pair<const Param *, uint32_t>> first;
    for (size_t t = 0; t < plan.templates.size(); ++t) {
      if (!plan.templates[t])
        continue;
      for (const Param &param : plan.templates[t]->params) {
        auto [it, fresh] = first.try_emplace(param.name, &param, uint32_t(t));
        const Param &other = *it->second.first;
        if (!fresh && (other.globalShape != param.globalShape ||
                       other.paddedShape != param.paddedShape ||
                       other.init != param.init || other.std != param.std))
          return "templates " + std::to_string(it->second.second) + " and " +
                 std::to_string(t) + " disagree about parameter '" +
                 param.name + "' (its global shape or initializer)";
      }
    }
    return "";
  }

  const Plan *plan = nullptr;
  std::vector<KernelId> kernelIds; // Plan.kernels resolved
};

} // namespace

std::string loadPlanFromBytes(const std::vector<uint8_t> &bytes, Plan &out,
                              const LoadOptions &options) {
  const uint8_t *payload = nullptr;
  size_t size = 0;
  if (std::string error = plan::decodePlanFile(bytes, payload, size);
      !error.empty())
    return error;
  if (size >= FLATBUFFERS_MAX_BUFFER_SIZE)
    return "the plan is " + withThousands(size) +
           " bytes, past the format's limit of " +
           withThousands(FLATBUFFERS_MAX_BUFFER_SIZE - 1);
  // The verifier's limits raised knowingly: a plan of any size the format
  // holds has at most one table per 4 bytes, and nests no deeper than its
  // schema (Plan > Template > Program > Instruction > op).
  flatbuffers::Verifier::Options verify;
  verify.max_tables = std::numeric_limits<flatbuffers::uoffset_t>::max();
  flatbuffers::Verifier verifier(payload, size, verify);
  if (!plan::VerifyPlanBuffer(verifier))
    return "the plan's structure does not verify (corrupt FlatBuffer)";
  out = Plan();
  return Reader().read(*plan::GetPlan(payload), out, options);
}

std::string loadPlan(const std::string &path, Plan &out,
                     const LoadOptions &options) {
  std::vector<uint8_t> bytes;
  if (std::string error = readFileWhole(path, bytes, kPlanFile); !error.empty())
    return error;
  return loadPlanFromBytes(bytes, out, options);
}
} // namespace strata::runtime
