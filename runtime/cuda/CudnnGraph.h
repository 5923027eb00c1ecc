//===- CudnnGraph.h - cuDNN's backend descriptors, built ---------*- C++
//-*-===//
//
// What strata builds cuDNN graphs from: cuDNN's numbers for the descriptor
// types, attributes and modes it uses (as cudnn_graph_v9.h has them; the
// runtime builds without that header), and a builder that creates, sets
// and finalizes descriptors through the loaded table (Cudnn.h), owns them
// and keeps the first failure as one line naming the call and the
// descriptor ("cudnnBackendFinalize(operation graph): CUDNN_STATUS_...").
// After a failure every call is a no-op: a graph is written straight
// through and its error read once at the end.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUDNNGRAPH_H
#define STRATA_RUNTIME_CUDA_CUDNNGRAPH_H

#include "runtime/cuda/Cudnn.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace strata::runtime::cuda {

namespace cudnn {

enum DescriptorType : int {
  kPointwise = 0,
  kEngine = 2,
  kEngineConfig = 3,
  kEngineHeuristics = 4,
  kExecutionPlan = 5,
  kOperationPointwise = 13,
  kOperationGraph = 15,
  kVariantPack = 16,
  kTensor = 17,
  kMatmul = 18,
  kOperationMatmul = 19,
  kReduction = 21,
  kOperationReduction = 22,
  kOperationReshape = 31,
};

enum AttributeType : int {
  kTypeHandle = 0,
  kTypeDataType = 1,
  kTypeBoolean = 2,
  kTypeInt64 = 3,
  kTypeFloat = 4,
  kTypeVoidPtr = 6,
  kTypeHeuristicMode = 8,
  kTypeNumericalNote = 11,
  kTypePointwiseMode = 14,
  kTypeDescriptor = 15,
  kTypeReductionOperator = 18,
};

enum Attribute : int {
  kPointwiseMode = 0,
  kPointwiseMathPrecision = 1,
  kPointwiseAxis = 9,
  kEngineHeuristicsMode = 200,
  kEngineHeuristicsGraph = 201,
  kEngineHeuristicsResults = 202,
  kEngineConfigEngine = 300,
  kPlanEngineConfig = 401,
  kPlanWorkspaceSize = 402,
  kOperationPointwiseDescriptor = 750,
  kOperationPointwiseX = 751,
  kOperationPointwiseB = 752,
  kOperationPointwiseY = 753,
  kOperationPointwiseAlpha1 = 754,
  kOperationPointwiseAlpha2 = 755,
  kOperationPointwiseT = 758,
  kOperationGraphHandle = 800,
  kOperationGraphOps = 801,
  kTensorAlignment = 900,
  kTensorDataType = 901,
  kTensorDimensions = 902,
  kTensorStrides = 903,
  kTensorUid = 906,
  kTensorIsVirtual = 907,
  kTensorIsByValue = 908,
  kVariantPackUids = 1000,
  kVariantPackPointers = 1001,
  kVariantPackWorkspace = 1003,
  kEngineNumericalNote = 1303,
  kMatmulComputeType = 1500,
  kOperationMatmulA = 1520,
  kOperationMatmulB = 1521,
  kOperationMatmulC = 1522,
  kOperationMatmulDescriptor = 1523,
  kReductionOperator = 1600,
  kReductionComputeType = 1601,
  kReductionIsDeterministic = 1602,
  kOperationReductionX = 1610,
  kOperationReductionY = 1611,
  kOperationReductionDescriptor = 1612,
  kOperationReshapeX = 2200,
  kOperationReshapeY = 2201,
};

enum DataType : int {
  kFloat = 0,
  kHalf = 2,
  kInt32 = 4,
  kBfloat16 = 9,
  kBoolean = 11,
};

enum PointwiseMode : int {
  kAdd = 0,
  kMul = 1,
  kDiv = 6,
  kSub = 9,
  kExp = 13,
  kLog = 15,
  kIdentity = 21,
  kCompareGreaterEqual = 303,
  kGenerateIndex = 501,
  kBinarySelect = 601,
};

enum ReductionOperator : int { kReduceAdd = 0, kReduceMax = 3 };

constexpr int kHeuristicsModeA = 3;
constexpr int kNumericalNoteNondeterministic = 4;

/// Whether a status is of the "not supported" kind (3000 to 3999): the
/// graph or shape is not one cuDNN runs, as opposed to a fault.
inline bool notSupported(int status) { return status / 1000 == 3; }

} // namespace cudnn

/// A 4-d tensor's dims or strides.
using Dims4 = std::array<int64_t, 4>;

class CudnnGraphBuilder {
public:
  using Descriptor = CudnnApi::Descriptor;

  explicit CudnnGraphBuilder(const CudnnApi &api) : api(api) {}
  ~CudnnGraphBuilder();
  CudnnGraphBuilder(const CudnnGraphBuilder &) = delete;
  CudnnGraphBuilder &operator=(const CudnnGraphBuilder &) = delete;

  /// A finalized tensor descriptor (16-byte aligned).
  Descriptor tensor(int64_t uid, cudnn::DataType type, const Dims4 &dims,
                    const Dims4 &strides, bool isVirtual, bool byValue = false);
  /// Pointwise `mode` of x (and b, and t for a select) into y, at f32, or
  /// at `precision`; `axis` for an index (-1: none). Added to ops().
  void pointwise(cudnn::PointwiseMode mode, Descriptor x, Descriptor b,
                 Descriptor t, Descriptor y, int64_t axis = -1,
                 cudnn::DataType precision = cudnn::kFloat);
  /// c = a·b over the last two dims, f32 accumulation.
  void matmul(Descriptor a, Descriptor b, Descriptor c);
  /// y = x reduced by `op` over the dims where y has 1.
  void reduction(cudnn::ReductionOperator op, Descriptor x, Descriptor y);
  /// y is x viewed with other dims and strides.
  void reshape(Descriptor x, Descriptor y);

  /// Descriptors of `type`, created (and, by finalize, finalized) here.
  Descriptor create(cudnn::DescriptorType type, const char *what);
  void set(Descriptor d, cudnn::Attribute name, cudnn::AttributeType type,
           int64_t count, const void *elements, const char *what);
  void finalize(Descriptor d, const char *what);
  /// Reads an attribute; false (with error() set) when the call fails.
  bool get(Descriptor d, cudnn::Attribute name, cudnn::AttributeType type,
           int64_t requested, int64_t *count, void *elements, const char *what);

  /// Records a failure of `call` on `what` with `status` (the first
  /// one is kept); returns false.
  bool fail(int status, const char *call, const char *what);

  const std::vector<Descriptor> &ops() const { return operations; }
  bool ok() const { return failure.empty(); }
  /// The first failure, "" while none.
  const std::string &error() const { return failure; }

private:
  const CudnnApi &api;
  std::vector<Descriptor> owned, operations;
  std::string failure;
};

} // namespace strata::runtime::cuda

#endif
