//===- CudnnGraph.cpp - cuDNN's backend descriptors, built ----------------===//
#include "runtime/cuda/CudnnGraph.h"

namespace strata::runtime::cuda {

using namespace cudnn;

CudnnGraphBuilder::~CudnnGraphBuilder() {
  for (auto it = owned.rbegin(); it != owned.rend(); ++it)
    api.cudnnBackendDestroyDescriptor(*it);
}

bool CudnnGraphBuilder::fail(int status, const char *call, const char *what) {
  if (failure.empty()) {
    failure = api.error(status, call);
    failure.insert(std::string(call).size(), std::string("(") + what + ")");
  }
  return false;
}

CudnnGraphBuilder::Descriptor CudnnGraphBuilder::create(DescriptorType type,
                                                        const char *what) {
  if (!ok())
    return nullptr;
  Descriptor d = nullptr;
  if (int status = api.cudnnBackendCreateDescriptor(type, &d)) {
    fail(status, "cudnnBackendCreateDescriptor", what);
    return nullptr;
  }
  owned.push_back(d);
  return d;
}

void CudnnGraphBuilder::set(Descriptor d, Attribute name, AttributeType type,
                            int64_t count, const void *elements,
                            const char *what) {
  if (!ok())
    return;
  if (int status = api.cudnnBackendSetAttribute(d, name, type, count, elements))
    fail(status, "cudnnBackendSetAttribute", what);
}

void CudnnGraphBuilder::finalize(Descriptor d, const char *what) {
  if (!ok())
    return;
  if (int status = api.cudnnBackendFinalize(d))
    fail(status, "cudnnBackendFinalize", what);
}

bool CudnnGraphBuilder::get(Descriptor d, Attribute name, AttributeType type,
                            int64_t requested, int64_t *count, void *elements,
                            const char *what) {
  if (!ok())
    return false;
  if (int status = api.cudnnBackendGetAttribute(d, name, type, requested, count,
                                                elements))
    return fail(status, "cudnnBackendGetAttribute", what);
  return true;
}

CudnnGraphBuilder::Descriptor
CudnnGraphBuilder::tensor(int64_t uid, DataType type, const Dims4 &dims,
                          const Dims4 &strides, bool isVirtual, bool byValue) {
  Descriptor d = create(kTensor, "tensor");
  const int64_t alignment = 16;
  const bool yes = true;
  set(d, kTensorDataType, kTypeDataType, 1, &type, "tensor");
  set(d, kTensorDimensions, kTypeInt64, 4, dims.data(), "tensor");
  set(d, kTensorStrides, kTypeInt64, 4, strides.data(), "tensor");
  set(d, kTensorUid, kTypeInt64, 1, &uid, "tensor");
  set(d, kTensorAlignment, kTypeInt64, 1, &alignment, "tensor");
  if (isVirtual)
    set(d, kTensorIsVirtual, kTypeBoolean, 1, &yes, "tensor");
  if (byValue)
    set(d, kTensorIsByValue, kTypeBoolean, 1, &yes, "tensor");
  finalize(d, "tensor");
  return d;
}

void CudnnGraphBuilder::pointwise(PointwiseMode mode, Descriptor x,
                                  Descriptor b, Descriptor t, Descriptor y,
                                  int64_t axis, DataType precision) {
  Descriptor pw = create(kPointwise, "pointwise");
  set(pw, kPointwiseMode, kTypePointwiseMode, 1, &mode, "pointwise");
  set(pw, kPointwiseMathPrecision, kTypeDataType, 1, &precision, "pointwise");
  if (axis >= 0)
    set(pw, kPointwiseAxis, kTypeInt64, 1, &axis, "pointwise");
  finalize(pw, "pointwise");
  Descriptor op = create(kOperationPointwise, "pointwise operation");
  const float one = 1.0f;
  set(op, kOperationPointwiseDescriptor, kTypeDescriptor, 1, &pw,
      "pointwise operation");
  set(op, kOperationPointwiseX, kTypeDescriptor, 1, &x, "pointwise operation");
  if (b)
    set(op, kOperationPointwiseB, kTypeDescriptor, 1, &b,
        "pointwise operation");
  if (t)
    set(op, kOperationPointwiseT, kTypeDescriptor, 1, &t,
        "pointwise operation");
  set(op, kOperationPointwiseY, kTypeDescriptor, 1, &y, "pointwise operation");
  set(op, kOperationPointwiseAlpha1, kTypeFloat, 1, &one,
      "pointwise operation");
  set(op, kOperationPointwiseAlpha2, kTypeFloat, 1, &one,
      "pointwise operation");
  finalize(op, "pointwise operation");
  if (ok())
    operations.push_back(op);
}

void CudnnGraphBuilder::matmul(Descriptor a, Descriptor b, Descriptor c) {
  Descriptor mm = create(kMatmul, "matmul");
  const DataType f32 = kFloat;
  set(mm, kMatmulComputeType, kTypeDataType, 1, &f32, "matmul");
  finalize(mm, "matmul");
  Descriptor op = create(kOperationMatmul, "matmul operation");
  set(op, kOperationMatmulA, kTypeDescriptor, 1, &a, "matmul operation");
  set(op, kOperationMatmulB, kTypeDescriptor, 1, &b, "matmul operation");
  set(op, kOperationMatmulC, kTypeDescriptor, 1, &c, "matmul operation");
  set(op, kOperationMatmulDescriptor, kTypeDescriptor, 1, &mm,
      "matmul operation");
  finalize(op, "matmul operation");
  if (ok())
    operations.push_back(op);
}

void CudnnGraphBuilder::reduction(ReductionOperator reduce, Descriptor x,
                                  Descriptor y) {
  Descriptor r = create(kReduction, "reduction");
  const DataType f32 = kFloat;
  set(r, kReductionOperator, kTypeReductionOperator, 1, &reduce, "reduction");
  set(r, kReductionComputeType, kTypeDataType, 1, &f32, "reduction");
  // cuDNN's frontend says so from 9.11 on: the fused attention engines
  // match a graph whose reductions say it.
  if (api.version >= 91100) {
    const bool no = false;
    set(r, kReductionIsDeterministic, kTypeBoolean, 1, &no, "reduction");
  }
  finalize(r, "reduction");
  Descriptor op = create(kOperationReduction, "reduction operation");
  set(op, kOperationReductionDescriptor, kTypeDescriptor, 1, &r,
      "reduction operation");
  set(op, kOperationReductionX, kTypeDescriptor, 1, &x, "reduction operation");
  set(op, kOperationReductionY, kTypeDescriptor, 1, &y, "reduction operation");
  finalize(op, "reduction operation");
  if (ok())
    operations.push_back(op);
}

void CudnnGraphBuilder::reshape(Descriptor x, Descriptor y) {
  Descriptor op = create(kOperationReshape, "reshape operation");
  set(op, kOperationReshapeX, kTypeDescriptor, 1, &x, "reshape operation");
  set(op, kOperationReshapeY, kTypeDescriptor, 1, &y, "reshape operation");
  finalize(op, "reshape operation");
  if (ok())
    operations.push_back(op);
}

} // namespace strata::runtime::cuda
