//===- KernelCost.cpp - what a timed instruction is and must cost ---------===//
#include "runtime/exec/KernelCost.h"
#include "runtime/plan/KernelCatalog.h"

#include <algorithm>
#include <set>

namespace strata::runtime {

namespace {

InstructionCost gemmCost(const RankPlan &rank, const GemmOp &g) {
  const Buffer &a = rank.buffers[g.a], &b = rank.buffers[g.b],
               &d = rank.buffers[g.d];
  InstructionCost cost;
  cost.name = "gemm";
  const char *epilogues[] = {"", " bias", " gelu_bias", " bias_grad"};
  cost.shape = "m=" + std::to_string(g.m) + " n=" + std::to_string(g.n) +
               " k=" + std::to_string(g.k) +
               (g.batch > 1 ? " batch=" + std::to_string(g.batch) : "") + " " +
               dtypeName(a.dtype) + (a.dtype != d.dtype
                                         ? std::string("->") + dtypeName(d.dtype)
                                         : "") +
               " " + (g.transposeA ? "t" : "n") + (g.transposeB ? "t" : "n") +
               (g.beta != 0 ? " accumulate" : "") + epilogues[int(g.epilogue)];
  double batch = double(g.batch), m = double(g.m), n = double(g.n),
         k = double(g.k);
  cost.flops = 2 * m * n * k * batch;
  // D is read as well as written when it accumulates.
  cost.bytes = batch * (m * k * double(dtypeBytes(a.dtype)) +
                        k * n * double(dtypeBytes(b.dtype)) +
                        m * n * double(dtypeBytes(d.dtype)) * (g.beta != 0 ? 2 : 1));
  return cost;
}

bool isAttention(const LaunchOp &l) {
  return l.kernel == KernelId::AttentionFwd || l.kernel == KernelId::AttentionBwd;
}

/// An attention launch's causal attribute (forward and backward share its
/// position).
bool causalAttention(const LaunchOp &l) {
  using namespace kernels::AttentionFwd;
  return l.attrs.size() > attr::causal && l.attrs[attr::causal].i != 0;
}

/// The FLOPs of launch `l` whose operands (in its kernel's order; null
/// where absent) are `operands`: attention's; 0 for the memory-bound rest.
double launchFlops(const LaunchOp &l, const Buffer *const *operands,
                   size_t count) {
  using namespace kernels::AttentionFwd;
  if (!isAttention(l) || count <= std::max<size_t>(op::q, op::k) ||
      !operands[op::q] || !operands[op::k])
    return 0;
  const Buffer &q = *operands[op::q], &k = *operands[op::k];
  if (q.shape.size() != 4 || k.shape.size() != 4)
    return 0;
  // Causal or full attention: QK^T and PV, 2 FLOPs a multiply-add; the
  // backward five such products to the forward's two.
  double batch = double(q.shape[0]), seqQ = double(q.shape[1]),
         heads = double(q.shape[2]), dim = double(q.shape[3]),
         seqK = double(k.shape[1]);
  double forward =
      4 * batch * heads * seqQ * seqK * dim * (causalAttention(l) ? 0.5 : 1);
  return l.kernel == KernelId::AttentionBwd ? 2.5 * forward : forward;
}

} // namespace

std::vector<const Buffer *> launchOperands(const RankPlan &rank,
                                           const LaunchOp &l) {
  std::vector<const Buffer *> operands;
  for (uint32_t buffer : l.operands)
    operands.push_back(buffer == kNoBuffer ? nullptr : &rank.buffers[buffer]);
  return operands;
}

KernelWork kernelWork(const LaunchOp &l, const Buffer *const *operands,
                      size_t count) {
  KernelWork work{l.kernel};
  work.flops = launchFlops(l, operands, count);
  for (size_t i = 0; i < count; ++i)
    if (operands[i])
      work.work = std::max(work.work, double(operands[i]->elements));
  if (work.flops > 0)
    work.work = work.flops;
  return work;
}

bool epilogueWork(const GemmOp &op, KernelWork &out) {
  double batch = double(op.batch);
  switch (op.epilogue) {
  case Epilogue::Bias:
    out = {KernelId::Add, double(op.m) * double(op.n) * batch, 0};
    return true;
  case Epilogue::GeluBias:
    out = {KernelId::GeluFwd, double(op.m) * double(op.n) * batch, 0};
    return true;
  case Epilogue::BiasGrad:
    out = {KernelId::SumTo, double(op.k) * double(op.n) * batch, 0};
    return true;
  default:
    return false;
  }
}

InstructionCost instructionCost(const RankPlan &rank, const Program &program,
                                size_t index, size_t span) {
  const Instruction &first = program.instructions[index];
  if (const GemmOp *g = first.gemm())
    return gemmCost(rank, *g);
  InstructionCost cost;
  const LaunchOp *launch = first.launch();
  if (!launch) {
    cost.name = first.name();
    return cost;
  }
  // A fused group reads and writes each distinct buffer of its members.
  std::vector<KernelId> members;
  std::set<uint32_t> touched;
  for (size_t i = index; i < index + span && i < program.instructions.size();
       ++i) {
    const LaunchOp *l = program.instructions[i].launch();
    if (!l)
      continue;
    members.push_back(l->kernel);
    for (uint32_t buffer : l->operands)
      if (buffer != kNoBuffer)
        touched.insert(buffer);
    std::vector<const Buffer *> operands = launchOperands(rank, *l);
    cost.members.push_back(kernelWork(*l, operands.data(), operands.size()));
    cost.flops += cost.members.back().flops;
  }
  cost.name = fusedKernelName(members);
  for (uint32_t buffer : touched)
    cost.bytes += double(rank.buffers[buffer].bytes);
  if (!launch->operands.empty() && launch->operands.front() != kNoBuffer) {
    const Buffer &lead = rank.buffers[launch->operands.front()];
    cost.shape = shapeText(lead.shape) + " " + dtypeName(lead.dtype);
  }
  if (isAttention(*launch) && causalAttention(*launch))
    cost.shape += " causal";
  return cost;
}

} // namespace strata::runtime
