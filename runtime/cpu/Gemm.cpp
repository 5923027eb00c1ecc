//===- Gemm.cpp - matrix multiply -----------------------------------------===//
//
// C[m, n] = op(A) · op(B) (+ C when accumulating), row-major, where op(A) is
// A [m, k] or, transposed, A stored [k, m]; likewise B [k, n] or [n, k].
// OpenBLAS does the work.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cblas.h>

namespace strata::runtime::cpu {

void gemm(const KernelArgs &args) {
  const Instruction &i = args.instruction;
  int64_t m = i.intAttr("m"), n = i.intAttr("n"), k = i.intAttr("k");
  bool ta = args.flag("transpose_a"), tb = args.flag("transpose_b");
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans,
              tb ? CblasTrans : CblasNoTrans, m, n, k, 1.0f, args.inF(0),
              ta ? m : k, args.inF(1), tb ? k : n,
              args.flag("accumulate") ? 1.0f : 0.0f, args.outF(0), n);
}

} // namespace strata::runtime::cpu
