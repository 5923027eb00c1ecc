//===- AttentionRunner.cpp - a rank's attention launches through cuDNN ----===//
#include "runtime/cuda/AttentionRunner.h"
#include "runtime/cuda/CublasLt.h"
#include "runtime/plan/KernelCatalog.h"

#include <cmath>

namespace strata::runtime::cuda {

bool parseAttentionBackend(const std::string &text, AttentionBackend &out) {
  if (text == "auto")
    out = AttentionBackend::Auto;
  else if (text == "cudnn")
    out = AttentionBackend::Cudnn;
  else if (text == "strata")
    out = AttentionBackend::Strata;
  else
    return false;
  return true;
}

CudnnAttentionShape cudnnShapeOf(const LaunchOp &op,
                                 const std::vector<Buffer> &buffers,
                                 bool &aligned) {
  namespace fwd = kernels::AttentionFwd;
  namespace bwd = kernels::AttentionBwd;
  // The two kernels' q, k, v and attributes come in the same order.
  static_assert(
      unsigned(fwd::op::q) == unsigned(bwd::op::q) &&
      unsigned(fwd::op::k) == unsigned(bwd::op::k) &&
      unsigned(fwd::attr::causal) == unsigned(bwd::attr::causal) &&
      unsigned(fwd::attr::group_size) == unsigned(bwd::attr::group_size) &&
      unsigned(fwd::attr::query_head_offset) ==
          unsigned(bwd::attr::query_head_offset) &&
      unsigned(fwd::attr::context_parallel) ==
          unsigned(bwd::attr::context_parallel) &&
      unsigned(fwd::attr::ring_step) == unsigned(bwd::attr::ring_step));
  CudnnAttentionShape s;
  const Buffer &q = buffers.at(op.operands.at(fwd::op::q));
  const Buffer &k = buffers.at(op.operands.at(fwd::op::k));
  s.batch = q.shape.at(0);
  s.seq = q.shape.at(1);
  s.heads = q.shape.at(2);
  s.dim = q.shape.at(3);
  s.keys = k.shape.at(1);
  s.kvHeads = k.shape.at(2);
  s.causal = op.attrs.at(fwd::attr::causal).i != 0;
  s.groupSize = op.attrs.at(fwd::attr::group_size).i;
  s.queryHeadOffset = op.attrs.at(fwd::attr::query_head_offset).i;
  s.context = op.attrs.at(fwd::attr::context_parallel).i;
  s.ringStep = op.attrs.at(fwd::attr::ring_step).i;
  s.backward = op.kernel == KernelId::AttentionBwd;
  s.scale = float(attentionScale(s.dim));
  // bf16 when every operand but the f32 log-sum-exp is.
  unsigned lse = s.backward ? unsigned(bwd::op::lse) : unsigned(fwd::op::lse);
  s.bf16 = true;
  aligned = true;
  for (unsigned i = 0; i < op.operands.size(); ++i) {
    const Buffer &b = buffers.at(op.operands[i]);
    if (i != lse && b.dtype != DType::BF16)
      s.bf16 = false;
    aligned &= bufferAlignment(b) >= 16;
  }
  return s;
}

AttentionRunner::~AttentionRunner() { release(); }

void AttentionRunner::release() {
  prepared.clear();
  plans.clear(); // the plans before the handle
  if (handle)
    api->cudnnDestroy(handle);
  handle = nullptr;
}

AttentionRunner::Key AttentionRunner::keyOf(const CudnnAttentionShape &s) {
  return {s.batch,   s.seq,      s.keys,      s.heads,
          s.kvHeads, s.dim,      s.groupSize, s.queryHeadOffset,
          s.causal,  s.backward, s.bf16};
}

std::string AttentionRunner::create() {
  if (choice == AttentionBackend::Strata)
    return "";
  std::string error;
  api = loadCudnn(error);
  if (api) {
    if (int status = api->cudnnCreate(&handle)) {
      error = api->error(status, "cudnnCreate");
      handle = nullptr;
      api = nullptr;
    }
  }
  if (!api) {
    if (choice == AttentionBackend::Cudnn)
      return "--attention-backend cudnn: " + error;
    unavailable = error;
  }
  return "";
}

std::string AttentionRunner::prepare(const LaunchOp &op,
                                     const std::vector<Buffer> &buffers,
                                     uint64_t &workspaceBytes,
                                     uint64_t &rowSumBytes) {
  // A fused group's members run in their first launch's code: never
  // attention today, and never cuDNN's.
  if ((op.kernel != KernelId::AttentionFwd &&
       op.kernel != KernelId::AttentionBwd) ||
      op.fuse > 1 || op.code < 0)
    return "";
  if (prepared.count(&op))
    return "";
  auto ownKernel = [&](const std::string &why) -> std::string {
    if (choice == AttentionBackend::Cudnn)
      return "--attention-backend cudnn: cuDNN cannot run this attention "
             "launch: " +
             why;
    ++ownKernels;
    if (firstReason.empty())
      firstReason = why;
    return "";
  };
  if (!api)
    return choice == AttentionBackend::Strata ? "" : ownKernel(unavailable);
  bool aligned = true;
  CudnnAttentionShape shape = cudnnShapeOf(op, buffers, aligned);
  std::string why = cudnnAttentionUnsupported(shape, api->version);
  if (why.empty() && !aligned)
    why = "an operand is not 16-byte aligned";
  if (!why.empty())
    return ownKernel(why);
  Key key = keyOf(shape);
  if (auto refused = refusals.find(key); refused != refusals.end())
    return ownKernel(refused->second);
  std::unique_ptr<CudnnAttention> &attention = plans[key];
  if (!attention) {
    auto made = std::make_unique<CudnnAttention>(*api, shape);
    if (std::string error = made->prepare(handle, kMaxWorkspaceBytes);
        !error.empty()) {
      plans.erase(key);
      refusals[key] = error;
      return ownKernel(error);
    }
    attention = std::move(made);
  }
  workspaceBytes = std::max(workspaceBytes, attention->workspaceBytes());
  rowSumBytes = std::max(rowSumBytes, attention->rowSumBytes());
  prepared[&op] = attention.get();
  return "";
}

std::string AttentionRunner::run(const LaunchOp &op, CUstream stream,
                                 const std::vector<Operand> &operands,
                                 void *workspace, void *rowSum) const {
  namespace fwd = kernels::AttentionFwd;
  namespace bwd = kernels::AttentionBwd;
  const CudnnAttention &attention = *prepared.at(&op);
  CudnnAttention::Pointers p;
  p.workspace = workspace;
  if (op.kernel == KernelId::AttentionFwd) {
    p.q = operands.at(fwd::op::q).data;
    p.k = operands.at(fwd::op::k).data;
    p.v = operands.at(fwd::op::v).data;
    p.o = operands.at(fwd::op::o).data;
    p.lse = operands.at(fwd::op::lse).data;
  } else {
    p.q = operands.at(bwd::op::q).data;
    p.k = operands.at(bwd::op::k).data;
    p.v = operands.at(bwd::op::v).data;
    p.o = operands.at(bwd::op::o).data;
    p.lse = operands.at(bwd::op::lse).data;
    p.dout = operands.at(bwd::op::dout).data;
    p.dq = operands.at(bwd::op::dq).data;
    p.dk = operands.at(bwd::op::dk).data;
    p.dv = operands.at(bwd::op::dv).data;
    p.rowSum = rowSum;
  }
  return attention.run(handle, stream, p);
}

std::string AttentionRunner::report() const {
  if (choice == AttentionBackend::Strata)
    return "attention: strata's kernels (--attention-backend strata)";
  std::string text;
  if (!prepared.empty())
    text = "attention: cuDNN " + cudnnVersionText(api->version) + " (" +
           api->library.path + ") for " + std::to_string(prepared.size()) +
           " launch" + (prepared.size() == 1 ? "" : "es") + " (" +
           std::to_string(plans.size()) + " plan" +
           (plans.size() == 1 ? "" : "s") + ")";
  if (ownKernels > 0)
    text += (text.empty() ? "attention: " : "; ") +
            std::string("strata's kernels for ") + std::to_string(ownKernels) +
            " (" + firstReason + ")";
  return text.empty() ? "attention: no attention launches" : text;
}

} // namespace strata::runtime::cuda
