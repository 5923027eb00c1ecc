//===- PlanCheck.cpp - every instruction against its contract -------------===//
#include "runtime/plan/PlanCheck.h"

#include <algorithm>
#include <cmath>

namespace strata::runtime {

namespace {

/// The last element index + 1 that a strided, batched matrix touches:
/// (batch − 1)·stride + (rows − 1)·ld + cols, or -1 if it overflows.
int64_t extent(int64_t batch, int64_t stride, int64_t rows, int64_t ld,
               int64_t cols) {
  __int128 end = __int128(batch - 1) * stride + __int128(rows - 1) * ld + cols;
  return end > INT64_MAX ? -1 : int64_t(end);
}

std::string checkGemm(const GemmOp &g, const std::vector<Buffer> &buffers) {
  for (uint32_t index : {g.a, g.b, g.d})
    if (index >= buffers.size() || !buffers[index].isFloat())
      return "gemm operands must be float buffers of the rank";
  const Buffer &a = buffers[g.a], &b = buffers[g.b], &d = buffers[g.d];
  if (a.dtype != b.dtype)
    return "gemm: A " + named(a) + " and B " + named(b) + " must share a dtype";
  if (g.m <= 0 || g.n <= 0 || g.k <= 0 || g.batch <= 0)
    return "gemm sizes must be positive (m=" + std::to_string(g.m) +
           " n=" + std::to_string(g.n) + " k=" + std::to_string(g.k) +
           " batch=" + std::to_string(g.batch) + ")";
  if (g.strideA < 0 || g.strideB < 0 || g.strideD < 0)
    return "gemm strides must be >= 0";
  int64_t rowsA = g.transposeA ? g.k : g.m, colsA = g.transposeA ? g.m : g.k;
  int64_t rowsB = g.transposeB ? g.n : g.k, colsB = g.transposeB ? g.k : g.n;
  if (g.lda < colsA || g.ldb < colsB || g.ldd < g.n)
    return "gemm leading dimensions lda=" + std::to_string(g.lda) +
           " ldb=" + std::to_string(g.ldb) + " ldd=" + std::to_string(g.ldd) +
           " are shorter than the rows they step over";
  int64_t endA = extent(g.batch, g.strideA, rowsA, g.lda, colsA);
  int64_t endB = extent(g.batch, g.strideB, rowsB, g.ldb, colsB);
  int64_t endD = extent(g.batch, g.strideD, g.m, g.ldd, g.n);
  if (endA < 0 || endA > a.elements || endB < 0 || endB > b.elements ||
      endD < 0 || endD > d.elements)
    return "gemm m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
           " k=" + std::to_string(g.k) +
           (g.batch > 1 ? " batch=" + std::to_string(g.batch) : "") +
           " does not fit A " + named(a) + ", B " + named(b) + ", D " +
           named(d);
  if (!std::isfinite(g.alpha) || !std::isfinite(g.beta))
    return "gemm alpha and beta must be finite";
  bool wantsBias = g.epilogue != Epilogue::None;
  bool wantsAux = g.epilogue == Epilogue::GeluBias;
  if ((g.bias != kNoBuffer) != wantsBias || (g.aux != kNoBuffer) != wantsAux)
    return "gemm: the epilogue's operands do not match the epilogue";
  if (wantsBias) {
    if (g.bias >= buffers.size() || !buffers[g.bias].isFloat() ||
        buffers[g.bias].elements != g.n)
      return "gemm: the bias must be a float vector of n = " +
             std::to_string(g.n);
    if (g.batch != 1)
      return "gemm: an epilogue needs an unbatched gemm";
    if (g.epilogue == Epilogue::BiasGrad && buffers[g.bias].dtype != DType::F32)
      return "gemm: a bias gradient must be f32";
  }
  if (wantsAux && (g.aux >= buffers.size() || !buffers[g.aux].isFloat() ||
                   buffers[g.aux].elements < endD))
    return "gemm: the GELU pre-activation must hold all of D";
  return "";
}

std::string checkCollective(const CollectiveOp &c,
                            const std::vector<Buffer> &buffers,
                            const CheckContext &context) {
  const Plan &plan = *context.plan;
  if (c.group >= plan.groups.size())
    return "collective names group " + std::to_string(c.group) + " of " +
           std::to_string(plan.groups.size());
  if (c.input >= buffers.size() || c.output >= buffers.size())
    return "collective names a buffer out of range";
  const Buffer &in = buffers[c.input], &out = buffers[c.output];
  if (!in.isFloat() || in.dtype != c.dtype || out.dtype != c.dtype)
    return std::string(collectiveName(c.kind)) + " of " + dtypeName(c.dtype) +
           " over " + named(in) + " -> " + named(out) +
           ": the buffers must be float and of its dtype";
  const Group &group = plan.groups[c.group];
  if (!group.stages.empty() &&
      std::find(group.stages.begin(), group.stages.end(),
                plan.stageOf(context.rank)) == group.stages.end())
    return std::string(collectiveName(c.kind)) + " over group " +
           std::to_string(c.group) + ", which leaves out this rank's stage";
  int64_t n = plan.groupSize(c.group);
  if (c.kind == CollectiveKind::AllReduceSum ||
      c.kind == CollectiveKind::AllReduceMax) {
    if (in.elements != out.elements)
      return "an all-reduce keeps its size: " + named(in) + " -> " + named(out);
    return "";
  }
  if (c.kind == CollectiveKind::Shift) {
    // A send and a receive posted together (NCCL's group call, MPI's
    // Irecv and Isend) may not share bytes.
    bool shared = in.arena == out.arena && in.offset < out.offset + out.bytes &&
                  out.offset < in.offset + in.bytes;
    if (in.shape != out.shape || c.input == c.output || shared)
      return "a shift sends its input and receives a tensor of its shape "
             "into bytes of its own: " +
             named(in) + " -> " + named(out);
    return "";
  }
  bool gather = c.kind == CollectiveKind::AllGather;
  const Buffer &part = gather ? in : out;
  const Buffer &whole = gather ? out : in;
  bool ok = c.dim >= 0 && c.dim < int32_t(part.shape.size()) &&
            part.shape.size() == whole.shape.size();
  for (size_t d = 0; ok && d < part.shape.size(); ++d)
    ok = int64_t(d) == c.dim ? whole.shape[d] == part.shape[d] * n
                             : whole.shape[d] == part.shape[d];
  if (!ok)
    return std::string(collectiveName(c.kind)) + " over " + std::to_string(n) +
           " ranks along dimension " + std::to_string(c.dim) +
           " does not map " + named(part) + " to " + named(whole);
  return "";
}

std::string checkTransfer(const TransferOp &t,
                          const std::vector<Buffer> &buffers,
                          const CheckContext &context) {
  const char *what = t.send ? "send" : "recv";
  if (t.buffer >= buffers.size() || !buffers[t.buffer].isFloat())
    return std::string(what) + " names no float buffer of the rank";
  if (t.peerStage >= context.plan->pipelineParallel)
    return std::string(what) + " to stage " + std::to_string(t.peerStage) +
           ", but the plan has " +
           std::to_string(context.plan->pipelineParallel) + " stages";
  if (t.channel >= kMaxChannels)
    return std::string(what) + " on channel " + std::to_string(t.channel) +
           ", outside 0.." + std::to_string(kMaxChannels - 1);
  return "";
}

} // namespace

std::string checkInstruction(const Instruction &instruction,
                             const std::vector<Buffer> &buffers,
                             const CheckContext &context) {
  bool compute = instruction.stream == Stream::Compute;
  if (const GemmOp *gemm = instruction.gemm()) {
    if (!compute)
      return "a gemm runs on the compute stream";
    return checkGemm(*gemm, buffers);
  }
  if (const LaunchOp *launch = instruction.launch()) {
    if (!compute)
      return std::string(kernelName(launch->kernel)) +
             " runs on the compute stream";
    return checkLaunch(*launch, buffers, context);
  }
  if (const CollectiveOp *collective = instruction.collective())
    return checkCollective(*collective, buffers, context);
  if (const TransferOp *transfer = instruction.transfer()) {
    if (compute)
      return "pipeline transfers run on the communication stream";
    return checkTransfer(*transfer, buffers, context);
  }
  const EventOp &event = *instruction.event();
  if (event.event >= context.events)
    return std::string(event.record ? "record" : "wait") + " of event " +
           std::to_string(event.event) + ", but the rank has " +
           std::to_string(context.events);
  return "";
}

std::string instructionWhere(const Plan &plan, const Program &program, size_t n,
                             uint32_t location) {
  const std::string &at = plan.locations[location];
  return "program '" + program.name + "', instruction " + std::to_string(n) +
         (at.empty() ? "" : " (" + at + ")") + ": ";
}

} // namespace strata::runtime
