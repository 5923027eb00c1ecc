//===- Gemm.cpp - matrix multiply -----------------------------------------===//
//
// C[m, n] = op(A) · op(B) (+ C when accumulating), row-major, where op(A) is
// A [m, k] or, transposed, A stored [k, m]; likewise B [k, n] or [n, k].
// OpenBLAS computes each block of rows; the rows are split across the
// OpenMP threads. OpenBLAS runs single-threaded (CpuBackend.cpp): two thread
// pools on the same cores spin against each other.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cblas.h>
#include <omp.h>

namespace strata::runtime::cpu {

void gemm(const KernelArgs &args) {
  const Instruction &i = args.instruction;
  int64_t m = i.intAttr("m"), n = i.intAttr("n"), k = i.intAttr("k");
  bool ta = args.flag("transpose_a"), tb = args.flag("transpose_b");
  float beta = args.flag("accumulate") ? 1.0f : 0.0f;
  const float *a = args.inF(0), *b = args.inF(1);
  float *c = args.outF(0);
  int64_t lda = ta ? m : k, ldb = tb ? k : n;
  // Only split what is worth a thread: about 2 MFLOP per block.
  int64_t blocks = std::min<int64_t>(omp_get_max_threads(),
                                     std::max<int64_t>(1, 2 * m * n * k / 2000000));
  blocks = std::min(blocks, m);
#pragma omp parallel for num_threads(blocks) if (blocks > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    int64_t begin = m * block / blocks, end = m * (block + 1) / blocks;
    // Rows [begin, end) of op(A): rows of A, or columns of a stored Aᵀ.
    const float *rows = ta ? a + begin : a + begin * lda;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, end - begin, n, k, 1.0f, rows,
                lda, b, ldb, beta, c + begin * n, n);
  }
}

} // namespace strata::runtime::cpu
