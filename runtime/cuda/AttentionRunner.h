//===- AttentionRunner.h - a rank's attention launches through cuDNN -*- C++
//-*-===//
//
// strata-run --attention-backend auto|cudnn|strata (Megatron's flag name):
// which of a CUDA plan's attention launches run through cuDNN's fused
// attention (CudnnAttention.h) instead of the plan's own kernels, which
// every plan keeps. `auto` takes cuDNN where it is found and takes the
// launch, else strata's kernels; `cudnn` refuses, in one line naming the
// reason, where it cannot; `strata` never loads cuDNN. A forward and its
// backward may run on different backends (the backward has more operands
// to align, and its own engines): both keep the same statistic, the
// natural-log log-sum-exp of the scaled, masked scores per row, so either
// reads the other's. Prepared when the plan loads, as the gemms are: a
// graph and execution plan per distinct shape, shared by the launches of
// that shape (building a plan compiles kernels); a run uses one workspace
// (the largest plan's, at most kMaxWorkspaceBytes) and one f32 scratch for
// the backward's D, both the cuda backend's, on the compute stream.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_ATTENTIONRUNNER_H
#define STRATA_RUNTIME_CUDA_ATTENTIONRUNNER_H

#include "runtime/cuda/CudnnAttention.h"
#include "runtime/device/Backend.h"
#include "runtime/plan/Plan.h"

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace strata::runtime::cuda {

enum class AttentionBackend { Auto, Cudnn, Strata };

/// "auto", "cudnn" or "strata" into `out`; false for anything else.
bool parseAttentionBackend(const std::string &text, AttentionBackend &out);

/// The launch as cuDNN would take it (its operands' shapes and types, the
/// attributes, the scale strata's kernels use), and whether its operands
/// are all 16-byte aligned.
CudnnAttentionShape cudnnShapeOf(const LaunchOp &op,
                                 const std::vector<Buffer> &buffers,
                                 bool &aligned);

class AttentionRunner {
public:
  explicit AttentionRunner(AttentionBackend choice) : choice(choice) {}
  ~AttentionRunner();

  /// Loads cuDNN and makes its handle unless the choice is strata; for
  /// `auto`, a cuDNN that is not there is not an error. "" or why not.
  std::string create();
  /// The most workspace a cuDNN plan may take (its deterministic
  /// backward's grows with batch·heads·seq²: 512 MiB for the 1.3B GPT's
  /// microbatch of 4 at sequence 2048).
  static constexpr uint64_t kMaxWorkspaceBytes = 1ull << 30;

  /// Decides `op`'s backend and, for cuDNN, prepares it (or finds its
  /// shape's plan); `workspaceBytes` and `rowSumBytes` grow to what it
  /// needs. "" or (for `cudnn`) why it cannot.
  std::string prepare(const LaunchOp &op, const std::vector<Buffer> &buffers,
                      uint64_t &workspaceBytes, uint64_t &rowSumBytes);
  /// Whether `op` runs through cuDNN.
  bool runs(const LaunchOp &op) const { return prepared.count(&op) != 0; }
  /// Runs a prepared launch on `stream`; "" or cuDNN's error.
  std::string run(const LaunchOp &op, CUstream stream,
                  const std::vector<Operand> &operands, void *workspace,
                  void *rowSum) const;
  /// What runs the rank's attention: "attention: cuDNN 9.19.0 (at ...) for
  /// 4 launches (2 plans)" or "attention: strata's kernels (why)".
  std::string report() const;
  /// Destroys the plans and the handle (while the context is current and
  /// the streams are there); the destructor does it otherwise.
  void release();

private:
  /// A launch's shape as the key of its plan.
  using Key = std::vector<int64_t>;
  static Key keyOf(const CudnnAttentionShape &shape);

  AttentionBackend choice;
  const CudnnApi *api = nullptr;
  CudnnApi::Handle handle = nullptr;
  std::string unavailable; // why cuDNN is not used (auto)
  std::map<Key, std::unique_ptr<CudnnAttention>> plans;
  std::map<Key, std::string> refusals; // shapes cuDNN did not take, why
  std::map<const LaunchOp *, const CudnnAttention *> prepared;
  size_t ownKernels = 0; // attention launches left to strata's kernels
  std::string firstReason;
};

} // namespace strata::runtime::cuda

#endif
