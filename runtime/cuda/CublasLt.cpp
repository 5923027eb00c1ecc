//===- CublasLt.cpp - a rank's GEMMs through cuBLASLt ---------------------===//
#include "runtime/cuda/CublasLt.h"

#include <cublasLt.h>
#include <dlfcn.h>
#include <mutex>
#include <stdexcept>

namespace strata::runtime::cuda {

namespace {

#define STRATA_CUBLASLT_ENTRIES(X)                                             \
  X(cublasLtCreate)                                                            \
  X(cublasLtDestroy)                                                           \
  X(cublasLtGetStatusName)                                                     \
  X(cublasLtMatmul)                                                            \
  X(cublasLtMatmulDescCreate)                                                  \
  X(cublasLtMatmulDescDestroy)                                                 \
  X(cublasLtMatmulDescSetAttribute)                                            \
  X(cublasLtMatrixLayoutCreate)                                                \
  X(cublasLtMatrixLayoutDestroy)                                               \
  X(cublasLtMatrixLayoutSetAttribute)                                          \
  X(cublasLtMatmulPreferenceCreate)                                            \
  X(cublasLtMatmulPreferenceDestroy)                                           \
  X(cublasLtMatmulPreferenceSetAttribute)                                      \
  X(cublasLtMatmulAlgoGetHeuristic)                                            \
  X(cublasLtGetVersion)

struct Library {
#define STRATA_DECLARE(name) decltype(&::name) name = nullptr;
  STRATA_CUBLASLT_ENTRIES(STRATA_DECLARE)
#undef STRATA_DECLARE
};

Library lt;
std::string loadError;
FoundLibrary found; // where cuBLASLt was loaded from
std::once_flag loadOnce;

std::string load() {
  std::string error;
  found = openCudaLibrary(LibrarySearch::fromEnvironment(),
                          {"libcublasLt.so.13", "libcublasLt.so"},
                          "the cuda backend needs cuBLASLt of CUDA 13", error);
  if (!found.handle)
    return error;
  void *library = found.handle;
#define STRATA_LOOKUP(name)                                                    \
  lt.name = reinterpret_cast<decltype(lt.name)>(dlsym(library, #name));        \
  if (!lt.name)                                                                \
    return "libcublasLt lacks " #name;
  STRATA_CUBLASLT_ENTRIES(STRATA_LOOKUP)
#undef STRATA_LOOKUP
  return "";
}

std::string statusText(cublasStatus_t status, const char *call) {
  const char *name =
      lt.cublasLtGetStatusName ? lt.cublasLtGetStatusName(status) : nullptr;
  return std::string(call) + ": " +
         (name ? name : "cuBLAS status " + std::to_string(int(status)));
}

cudaDataType_t dataType(DType dtype) {
  return dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
}

template <typename T>
cublasStatus_t setDesc(cublasLtMatmulDesc_t desc,
                       cublasLtMatmulDescAttributes_t attr, T value) {
  return lt.cublasLtMatmulDescSetAttribute(desc, attr, &value, sizeof value);
}

} // namespace

ColumnMajorGemm columnMajor(const GemmOp &op) {
  ColumnMajorGemm g;
  uint64_t m = uint64_t(op.m), n = uint64_t(op.n), k = uint64_t(op.k);
  // op(B)ᵀ [n, k]: B stored [k, n] reads as [n, k] column-major; stored
  // [n, k] (transposed) it reads as [k, n] and is transposed again.
  g.transposeFirst = op.transposeB;
  g.first = {op.transposeB ? k : n, op.transposeB ? n : k, op.ldb, op.strideB};
  // op(A)ᵀ [k, m] likewise.
  g.transposeSecond = op.transposeA;
  g.second = {op.transposeA ? m : k, op.transposeA ? k : m, op.lda, op.strideA};
  g.d = {n, m, op.ldd, op.strideD};
  g.batch = op.batch;
  return g;
}

uint32_t bufferAlignment(const Buffer &buffer) {
  uint64_t bits = buffer.offset | buffer.slotStride | 256;
  return uint32_t(bits & ~(bits - 1));
}

std::string loadCublasLt() {
  std::call_once(loadOnce, [] { loadError = load(); });
  return loadError;
}

const FoundLibrary &cublasLtLibrary() { return found; }

size_t cublasLtVersion() {
  return lt.cublasLtGetVersion ? lt.cublasLtGetVersion() : 0;
}

struct GemmRunner::Prepared {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t first = nullptr, second = nullptr, d = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Prepared() {
    if (desc)
      lt.cublasLtMatmulDescDestroy(desc);
    for (cublasLtMatrixLayout_t layout : {first, second, d})
      if (layout)
        lt.cublasLtMatrixLayoutDestroy(layout);
  }
};

GemmRunner::GemmRunner() = default;

GemmRunner::~GemmRunner() {
  prepared.clear();
  if (handle)
    lt.cublasLtDestroy(static_cast<cublasLtHandle_t>(handle));
}

std::string GemmRunner::create() {
  cublasLtHandle_t h = nullptr;
  if (cublasStatus_t s = lt.cublasLtCreate(&h); s != CUBLAS_STATUS_SUCCESS)
    return statusText(s, "cublasLtCreate");
  handle = h;
  return "";
}

std::string GemmRunner::prepare(const GemmOp &op,
                                const std::vector<Buffer> &buffers) {
  const Buffer &a = buffers[op.a], &b = buffers[op.b], &d = buffers[op.d];
  if (op.epilogue != Epilogue::None && op.epilogue != Epilogue::Bias)
    return std::string("gemm epilogue ") +
           (op.epilogue == Epilogue::GeluBias ? "gelu_bias" : "bias_grad") +
           ": the cuda backend runs gemms with no epilogue or a bias (a "
           "plan made by strata-compile --target cuda has no other)";
  if (a.dtype != b.dtype)
    return "gemm of " + a.name + " (" + dtypeName(a.dtype) + ") and " + b.name +
           " (" + dtypeName(b.dtype) +
           "): cuBLASLt needs both operands of one dtype";
  auto fresh = std::make_unique<Prepared>();
  ColumnMajorGemm g = columnMajor(op);
  auto fail = [&](cublasStatus_t s, const char *call) {
    return "gemm into " + d.name + ": " + statusText(s, call);
  };
  cublasStatus_t s =
      lt.cublasLtMatmulDescCreate(&fresh->desc, CUBLAS_COMPUTE_32F, CUDA_R_32F);
  if (s != CUBLAS_STATUS_SUCCESS)
    return fail(s, "cublasLtMatmulDescCreate");
  s = setDesc<int32_t>(fresh->desc, CUBLASLT_MATMUL_DESC_TRANSA,
                       g.transposeFirst ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = setDesc<int32_t>(fresh->desc, CUBLASLT_MATMUL_DESC_TRANSB,
                         g.transposeSecond ? CUBLAS_OP_T : CUBLAS_OP_N);
  if (s == CUBLAS_STATUS_SUCCESS && op.epilogue == Epilogue::Bias) {
    s = setDesc<uint32_t>(fresh->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                          CUBLASLT_EPILOGUE_BIAS);
    if (s == CUBLAS_STATUS_SUCCESS)
      s = setDesc<int32_t>(fresh->desc, CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE,
                           dataType(buffers[op.bias].dtype));
  }
  if (s != CUBLAS_STATUS_SUCCESS)
    return fail(s, "cublasLtMatmulDescSetAttribute");
  auto layout = [&](const ColumnMajorGemm::Layout &l, DType dtype,
                    cublasLtMatrixLayout_t &out) {
    cublasStatus_t r = lt.cublasLtMatrixLayoutCreate(&out, dataType(dtype),
                                                     l.rows, l.cols, l.ld);
    if (r == CUBLAS_STATUS_SUCCESS && g.batch > 1) {
      int32_t count = int32_t(g.batch);
      int64_t stride = l.stride;
      r = lt.cublasLtMatrixLayoutSetAttribute(
          out, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count);
      if (r == CUBLAS_STATUS_SUCCESS)
        r = lt.cublasLtMatrixLayoutSetAttribute(
            out, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride,
            sizeof stride);
    }
    return r;
  };
  if ((s = layout(g.first, b.dtype, fresh->first)) != CUBLAS_STATUS_SUCCESS ||
      (s = layout(g.second, a.dtype, fresh->second)) != CUBLAS_STATUS_SUCCESS ||
      (s = layout(g.d, d.dtype, fresh->d)) != CUBLAS_STATUS_SUCCESS)
    return fail(s, "cublasLtMatrixLayoutCreate");

  cublasLtMatmulPreference_t preference = nullptr;
  if ((s = lt.cublasLtMatmulPreferenceCreate(&preference)) !=
      CUBLAS_STATUS_SUCCESS)
    return fail(s, "cublasLtMatmulPreferenceCreate");
  uint64_t workspace = kWorkspaceBytes;
  uint32_t alignFirst = bufferAlignment(b), alignSecond = bufferAlignment(a),
           alignD = bufferAlignment(d);
  struct {
    cublasLtMatmulPreferenceAttributes_t attr;
    const void *value;
    size_t size;
  } preferences[] = {
      {CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace, 8},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &alignFirst, 4},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &alignSecond, 4},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &alignD, 4},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &alignD, 4}};
  for (const auto &p : preferences)
    if (s == CUBLAS_STATUS_SUCCESS)
      s = lt.cublasLtMatmulPreferenceSetAttribute(preference, p.attr, p.value,
                                                  p.size);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.cublasLtMatmulAlgoGetHeuristic(
        static_cast<cublasLtHandle_t>(handle), fresh->desc, fresh->first,
        fresh->second, fresh->d, fresh->d, preference, 1, &result, &found);
  lt.cublasLtMatmulPreferenceDestroy(preference);
  if (s != CUBLAS_STATUS_SUCCESS)
    return fail(s, "cublasLtMatmulAlgoGetHeuristic");
  if (found == 0)
    return "gemm into " + d.name + " [" + std::to_string(op.m) + " x " +
           std::to_string(op.n) + " x " + std::to_string(op.k) + ", " +
           dtypeName(a.dtype) + " -> " + dtypeName(d.dtype) +
           "]: cuBLASLt has no algorithm for it";
  fresh->algo = result.algo;
  prepared[&op] = std::move(fresh);
  return "";
}

void GemmRunner::run(const GemmOp &op, CUstream stream, const void *a,
                     const void *b, void *d, const void *bias,
                     void *workspace) {
  auto it = prepared.find(&op);
  if (it == prepared.end())
    throw std::logic_error("a gemm ran that the plan's load did not prepare");
  Prepared &p = *it->second;
  cublasStatus_t s = CUBLAS_STATUS_SUCCESS;
  if (op.epilogue == Epilogue::Bias)
    s = setDesc<const void *>(p.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, bias);
  if (s == CUBLAS_STATUS_SUCCESS)
    s = lt.cublasLtMatmul(static_cast<cublasLtHandle_t>(handle), p.desc,
                          &op.alpha, b, p.first, a, p.second, &op.beta, d, p.d,
                          d, p.d, &p.algo, workspace, kWorkspaceBytes,
                          reinterpret_cast<cudaStream_t>(stream));
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(statusText(s, "cublasLtMatmul"));
}

} // namespace strata::runtime::cuda
