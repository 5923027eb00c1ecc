//===- CudnnAttention.h - attention through cuDNN's fused kernels -*- C++
//-*-===//
//
// An attention launch (forward, or backward from the forward's log-sum-exp)
// as a cuDNN 9 graph that its fused flash-attention engines run: the graph
// cuDNN's frontend builds for scaled dot-product attention, written
// against the C API (CudnnGraph.h). strata's operands are [batch, seq,
// heads, dim]; cuDNN's dims are (batch, heads, seq, dim), so each operand
// is described with its own strides and K (and, in the backward, V) read
// transposed by swapping the last two dims' strides. The forward's
// statistic is the natural-log log-sum-exp of the scaled, masked scores
// per row, (batch, heads, seq) in f32: strata's lse, the same buffer. The
// backward is the deterministic variant (dQ written by one product, no f32
// accumulator added to by atomics), so a run repeated gives the same bits;
// it takes D = rowsum(dO·O) in f32 scratch of its own. A prepared launch
// keeps its graph and execution plan; a run sets the stream, builds the
// variant pack and executes.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUDNNATTENTION_H
#define STRATA_RUNTIME_CUDA_CUDNNATTENTION_H

#include "runtime/cuda/CudnnGraph.h"

#include <memory>

namespace strata::runtime::cuda {

/// An attention launch as cuDNN sees it: q [batch, seq, heads, dim], k and
/// v [batch, keys, kvHeads, dim], query head h reading kv head
/// (queryHeadOffset + h) / groupSize.
struct CudnnAttentionShape {
  int64_t batch = 0, seq = 0, keys = 0, heads = 0, kvHeads = 0, dim = 0;
  int64_t groupSize = 1, queryHeadOffset = 0;
  bool causal = false, backward = false;
  bool bf16 = true; // else fp32: not cuDNN's
  float scale = 1.0f;
  // Context parallelism's size (below 2: none) and the ring's step.
  int64_t context = 0, ringStep = 0;
};

/// "" when cuDNN `version`'s fused attention takes the launch, else why not
/// (a clause: "head dimension 72 is not a multiple of 8").
std::string cudnnAttentionUnsupported(const CudnnAttentionShape &shape,
                                      size_t version);

/// The operands' unique ids in cuDNN's graphs.
namespace attention_uid {
enum : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDout,
  kDq,
  kDk,
  kDv,
  kScale,
  kNegativeInfinity,
  kOne,
  kRowSum,
  kFirstVirtual = 100,
};
} // namespace attention_uid

class CudnnAttention {
public:
  /// Device pointers of a run; the backward's rowSum is f32 scratch of
  /// batch·heads·seq floats, `workspace` workspaceBytes() or more.
  struct Pointers {
    const void *q = nullptr, *k = nullptr, *v = nullptr;
    void *o = nullptr;   // the forward's output, the backward's input
    void *lse = nullptr; // the forward's output, the backward's input
    const void *dout = nullptr;
    void *dq = nullptr, *dk = nullptr, *dv = nullptr;
    void *rowSum = nullptr;
    void *workspace = nullptr;
  };

  CudnnAttention(const CudnnApi &api, CudnnAttentionShape shape);
  ~CudnnAttention();

  /// Builds the graph on `handle`, asks the heuristics for engines and
  /// makes the execution plan of the first deterministic one that builds
  /// with at most `maxWorkspace` bytes. "" or why not, one line.
  std::string prepare(CudnnApi::Handle handle, uint64_t maxWorkspace);
  uint64_t workspaceBytes() const { return workspace; }
  /// Bytes of the backward's rowSum scratch (0 for the forward).
  uint64_t rowSumBytes() const;
  /// Runs on `stream`; "" or cuDNN's error.
  std::string run(CudnnApi::Handle handle, CUstream stream,
                  const Pointers &pointers) const;

private:
  void buildForward();
  void buildBackward();

  const CudnnApi &api;
  CudnnAttentionShape shape;
  std::unique_ptr<CudnnGraphBuilder> graph;
  CudnnApi::Descriptor plan = nullptr;
  uint64_t workspace = 0;
  float scale, negativeInfinity, one = 1.0f; // by-value operands
};

} // namespace strata::runtime::cuda

#endif
