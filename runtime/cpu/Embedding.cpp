//===- Embedding.cpp - table lookup and its gradient ----------------------===//
//
//   forward   y[i, :] = table[ids[i], :]
//   backward  dtable[ids[i], :] += dy[i, :]   (zeroed first unless
//             accumulating into a gradient accumulator)
//
// Ids are checked against the vocabulary where batches are made.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cstring>

namespace strata::runtime::cpu {

void embeddingFwd(const KernelArgs &args) {
  const float *table = args.inF(0);
  const int32_t *ids = args.ids(1);
  float *y = args.outF(0);
  int64_t hidden = args.inShape(0)[1], count = args.inCount(1);
#pragma omp parallel for if (count * hidden > 65536)
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(y + i * hidden, table + int64_t(ids[i]) * hidden,
                hidden * sizeof(float));
}

void embeddingBwd(const KernelArgs &args) {
  const float *dy = args.inF(0);
  const int32_t *ids = args.ids(1);
  float *table = args.outF(0);
  int64_t hidden = args.outBuffer[0]->shape[1], count = args.inCount(1);
  if (!args.flag("accumulate"))
    std::memset(table, 0, args.outCount(0) * sizeof(float));
  // Columns in parallel: rows with the same id never race, and each sum
  // adds in token order whatever the thread count.
#pragma omp parallel for if (count * hidden > 65536)
  for (int64_t j = 0; j < hidden; ++j)
    for (int64_t i = 0; i < count; ++i)
      table[int64_t(ids[i]) * hidden + j] += dy[i * hidden + j];
}

} // namespace strata::runtime::cpu
