//===- Embedding.cpp - table lookup and its gradient ----------------------===//
//
//   forward   y[i, :] = table[ids[i], :]
//   backward  dtable[ids[i], :] += dy[i, :]   (zeroed first unless
//             accumulating into a gradient accumulator)
//
// With `vocab_offset` the table holds rows [offset, offset + rows) of a
// vocabulary split across ranks: other ids give zero rows forward (the
// ranks' outputs are then summed) and nothing backward.
//
// Ids are checked against the vocabulary where batches are made.
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"

#include <cstring>

namespace strata::runtime::cpu {

using namespace kernels;

void runEmbeddingFwd(const KernelArgs &args) {
  using namespace EmbeddingFwd;
  const float *table = args.f(op::table);
  const int32_t *ids = args.ids(op::ids);
  float *y = args.f(op::y);
  int64_t rows = args.shape(op::table)[0], hidden = args.shape(op::table)[1],
          count = args.count(op::ids), offset = args.i(attr::vocab_offset);
#pragma omp parallel for if (count * hidden > kCheap)
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = int64_t(ids[i]) - offset;
    if (row >= 0 && row < rows)
      std::memcpy(y + i * hidden, table + row * hidden, hidden * sizeof(float));
    else
      std::memset(y + i * hidden, 0, hidden * sizeof(float));
  }
}

void runEmbeddingBwd(const KernelArgs &args) {
  using namespace EmbeddingBwd;
  const float *dy = args.f(op::dy);
  const int32_t *ids = args.ids(op::ids);
  float *table = args.f(op::dtable);
  int64_t rows = args.shape(op::dtable)[0], hidden = args.shape(op::dtable)[1],
          count = args.count(op::ids), offset = args.i(attr::vocab_offset);
  if (!args.flag(attr::accumulate))
    std::memset(table, 0, args.count(op::dtable) * sizeof(float));
    // Columns in parallel: rows with the same id never race, and each sum
    // adds in token order whatever the thread count.
#pragma omp parallel for if (count * hidden > kCheap)
  for (int64_t j = 0; j < hidden; ++j)
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = int64_t(ids[i]) - offset;
      if (row >= 0 && row < rows)
        table[row * hidden + j] += dy[i * hidden + j];
    }
}

} // namespace strata::runtime::cpu
