//===- AttentionRunner.h - a rank's attention launches through cuDNN -*- C++
//-*-===//
//
// strata-run --attention-backend auto|cudnn|strata (Megatron's flag name):
// which of a CUDA plan's attention launches run through cuDNN's fused
// attention (CudnnAttention.h) instead of the plan's own kernels, which
// every plan keeps. `auto` takes cuDNN where it is found and takes the
// launch, else strata's kernels; `cudnn` refuses, in one line naming the
// reason, where it cannot; `strata` never loads cuDNN. A forward and a
// backward of one layer always run on the same backend (the choice is the
// shape's, and their shapes are the same), so a statistic of one is never
// read by the other. Prepared when the plan loads, as the gemms are: each
// launch's graph and plan; a run uses the stream's cuBLASLt workspace
// (gemms and attention on one stream run in turn) and one f32 scratch for
// the backward's D.
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
  /// Decides `op`'s backend and, for cuDNN, prepares it with at most
  /// `maxWorkspace` bytes of workspace; `rowSumBytes` grows to what the
  /// backward's scratch needs. "" or (for `cudnn`) why it cannot.
  std::string prepare(const LaunchOp &op, const std::vector<Buffer> &buffers,
                      uint64_t maxWorkspace, uint64_t &rowSumBytes);
  /// Whether `op` runs through cuDNN.
  bool runs(const LaunchOp &op) const { return prepared.count(&op) != 0; }
  /// Runs a prepared launch on `stream`; "" or cuDNN's error.
  std::string run(const LaunchOp &op, CUstream stream,
                  const std::vector<Operand> &operands, void *workspace,
                  void *rowSum) const;
  /// What runs the rank's attention: "attention: cuDNN 9.19.0 (at ...) for
  /// 4 launches" or "attention: strata's kernels (why)".
  std::string report() const;

private:
  AttentionBackend choice;
  const CudnnApi *api = nullptr;
  CudnnApi::Handle handle = nullptr;
  std::string unavailable; // why cuDNN is not used (auto)
  std::map<const LaunchOp *, std::unique_ptr<CudnnAttention>> prepared;
  size_t ownKernels = 0; // attention launches left to strata's kernels
  std::string firstReason;
};

} // namespace strata::runtime::cuda

#endif
