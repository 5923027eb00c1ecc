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

static int64_t vocabOffset(const KernelArgs &args) {
  const AttrValue *offset = args.instruction.attr("vocab_offset");
  return offset ? offset->i : 0;
}

void embeddingFwd(const KernelArgs &args) {
  const float *table = args.inF(0);
  const int32_t *ids = args.ids(1);
  float *y = args.outF(0);
  int64_t rows = args.inShape(0)[0], hidden = args.inShape(0)[1],
          count = args.inCount(1), offset = vocabOffset(args);
#pragma omp parallel for if (count * hidden > 65536)
  for (int64_t i = 0; i < count; ++i) {
    int64_t row = int64_t(ids[i]) - offset;
    if (row >= 0 && row < rows)
      std::memcpy(y + i * hidden, table + row * hidden,
                  hidden * sizeof(float));
    else
      std::memset(y + i * hidden, 0, hidden * sizeof(float));
  }
}

void embeddingBwd(const KernelArgs &args) {
  const float *dy = args.inF(0);
  const int32_t *ids = args.ids(1);
  float *table = args.outF(0);
  int64_t rows = args.outBuffer[0]->shape[0],
          hidden = args.outBuffer[0]->shape[1], count = args.inCount(1),
          offset = vocabOffset(args);
  if (!args.flag("accumulate"))
    std::memset(table, 0, args.outCount(0) * sizeof(float));
  // Columns in parallel: rows with the same id never race, and each sum
  // adds in token order whatever the thread count.
#pragma omp parallel for if (count * hidden > 65536)
  for (int64_t j = 0; j < hidden; ++j)
    for (int64_t i = 0; i < count; ++i) {
      int64_t row = int64_t(ids[i]) - offset;
      if (row >= 0 && row < rows)
        table[row * hidden + j] += dy[i * hidden + j];
    }
}

} // namespace strata::runtime::cpu
