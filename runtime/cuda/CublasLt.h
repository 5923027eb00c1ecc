//===- CublasLt.h - a rank's GEMMs through cuBLASLt -------------*- C++ -*-===//
//
// libcublasLt is loaded with dlopen with the rest of the cuda backend. The
// plan's gemms are row-major; cuBLASLt's are column-major, and a row-major
// matrix is its transpose read column-major. So D = op(A)·op(B) [m, n] is
// computed as Dᵀ = op(B)ᵀ·op(A)ᵀ [n, m]: the plan's B is cuBLASLt's first
// operand, A its second, and a bias per column of D is cuBLASLt's bias
// per row of Dᵀ. Each gemm's descriptors and algorithm (cuBLASLt's
// heuristic, once, with the operands' real alignment) are made when the
// plan loads; a run only sets the bias pointer and calls cublasLtMatmul.
// fp32 runs as fp32 (CUBLAS_COMPUTE_32F: no TF32), bf16 with fp32
// accumulation. The epilogues are none and bias: a CUDA plan has no
// others (--strata-fuse-epilogues=bias-only).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CUDA_CUBLASLT_H
#define STRATA_RUNTIME_CUDA_CUBLASLT_H

#include "runtime/base/LibrarySearch.h"
#include "runtime/plan/Plan.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>

typedef struct CUstream_st *CUstream;

namespace strata::runtime::cuda {

/// A gemm of the plan as cuBLASLt's column-major problem.
struct ColumnMajorGemm {
  struct Layout {
    uint64_t rows = 0, cols = 0;
    int64_t ld = 0, stride = 0;
  };
  bool transposeFirst = false, transposeSecond = false;
  Layout first, second, d; // the plan's B, A and D
  int64_t batch = 1;
};
ColumnMajorGemm columnMajor(const GemmOp &op);

/// The largest power of two, up to 256, that divides every address a
/// buffer may have: its offset in a 256-byte aligned arena, and its stash
/// slots.
uint32_t bufferAlignment(const Buffer &buffer);

/// "" or why libcublasLt cannot be used (loaded once per process).
std::string loadCublasLt();

/// After a successful loadCublasLt: where it was found, and its version
/// (cublasLtGetVersion: 130100 for 13.1.0).
const FoundLibrary &cublasLtLibrary();
size_t cublasLtVersion();

/// One rank's gemms: a cuBLASLt handle, one workspace per stream, and each
/// gemm instruction's descriptors and algorithm.
class GemmRunner {
public:
  static constexpr uint64_t kWorkspaceBytes = 32ull << 20;

  GemmRunner();
  ~GemmRunner();
  /// The handle; "" or why not.
  std::string create();
  /// Chooses the algorithm of `op` over `buffers` (for a workspace of
  /// kWorkspaceBytes); "" or why cuBLASLt cannot run it.
  std::string prepare(const GemmOp &op, const std::vector<Buffer> &buffers);
  /// Runs a prepared gemm on `stream` with `workspace`. `bias` may be null
  /// when the epilogue has none.
  void run(const GemmOp &op, CUstream stream, const void *a, const void *b,
           void *d, const void *bias, void *workspace);

private:
  struct Prepared;
  void *handle = nullptr;
  std::map<const GemmOp *, std::unique_ptr<Prepared>> prepared;
};

} // namespace strata::runtime::cuda

#endif
