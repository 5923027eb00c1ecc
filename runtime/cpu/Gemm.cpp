//===- Gemm.cpp - matrix multiply with epilogues --------------------------===//
//
// D = alpha · op(A) · op(B) + beta · D for each of `batch` matrices, row-major
// with leading dimensions, where op(A) is A [m, k] or, transposed, A stored
// [k, m]; likewise op(B) [k, n] or [n, k]. Then the epilogue:
//   bias       D[i, :] += bias
//   gelu_bias  aux = D + bias (the pre-activation, kept for the backward);
//              D = GELU(aux), the exact erf form
//   bias_grad  bias = beta · bias + Σ_k op(B)[k, :]
// OpenBLAS computes each block of rows; the rows are split across the
// OpenMP threads. OpenBLAS runs single-threaded (CpuBackend.cpp): two thread
// pools on the same cores spin against each other.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <algorithm>
#include <cblas.h>
#include <cmath>
#include <omp.h>

namespace strata::runtime::cpu {

static void matmul(const GemmOp &op, const float *a, const float *b, float *d) {
  int64_t m = op.m, n = op.n, k = op.k;
  bool ta = op.transposeA, tb = op.transposeB;
  // Only split what is worth a thread: about 2 MFLOP per block.
  int64_t blocks = std::min<int64_t>(
      omp_get_max_threads(), std::max<int64_t>(1, 2 * m * n * k / 2000000));
  blocks = std::min(blocks, m);
#pragma omp parallel for num_threads(blocks) if (blocks > 1)
  for (int64_t block = 0; block < blocks; ++block) {
    int64_t begin = m * block / blocks, end = m * (block + 1) / blocks;
    // Rows [begin, end) of op(A): rows of A, or columns of a stored Aᵀ.
    const float *rows = ta ? a + begin : a + begin * op.lda;
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
                tb ? CblasTrans : CblasNoTrans, end - begin, n, k, op.alpha,
                rows, op.lda, b, op.ldb, op.beta, d + begin * op.ldd, op.ldd);
  }
}

void gemm(const GemmOp &op, const float *a, const float *b, float *d,
          float *bias, float *aux) {
  for (int64_t i = 0; i < op.batch; ++i)
    matmul(op, a + i * op.strideA, b + i * op.strideB, d + i * op.strideD);
  int64_t m = op.m, n = op.n;
  switch (op.epilogue) {
  case Epilogue::None:
    return;
  case Epilogue::Bias:
#pragma omp parallel for if (m * n > kCheap)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c)
        d[r * op.ldd + c] += bias[c];
    return;
  case Epilogue::GeluBias:
#pragma omp parallel for if (m * n > kCostly)
    for (int64_t r = 0; r < m; ++r)
      for (int64_t c = 0; c < n; ++c) {
        float x = d[r * op.ldd + c] + bias[c];
        aux[r * op.ldd + c] = x;
        d[r * op.ldd + c] = gelu(x);
      }
    return;
  case Epilogue::BiasGrad: {
    // Column sums of op(B) [k, n], in order over k, per column.
    int64_t k = op.k;
#pragma omp parallel for if (k * n > kCheap)
    for (int64_t c = 0; c < n; ++c) {
      double sum = 0;
      for (int64_t r = 0; r < k; ++r)
        sum += op.transposeB ? b[c * op.ldb + r] : b[r * op.ldb + c];
      bias[c] = op.beta == 0 ? float(sum) : op.beta * bias[c] + float(sum);
    }
    return;
  }
  }
}

} // namespace strata::runtime::cpu
