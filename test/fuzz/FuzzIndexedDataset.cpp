//===- FuzzIndexedDataset.cpp - Megatron's .idx/.bin reader
//-------------------===//
//
// A dataset's index and tokens travel between machines: any pair of files
// is refused or opened, and then every sequence and document it names can
// be read without a read outside the mapped files.
//
//===----------------------------------------------------------------------===//
#include "FuzzFiles.h"
#include "runtime/data/IndexedDataset.h"

#include <vector>

using namespace strata::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::string_view index, tokens;
  strata::fuzz::splitInput(data, size, index, tokens);
  strata::fuzz::writeFile("data.idx", index);
  strata::fuzz::writeFile("data.bin", tokens);
  IndexedDataset dataset;
  if (!dataset.open(strata::fuzz::scratch() + "/data").empty())
    return 0;
  // What open() promises: every sequence lies inside the .bin, every
  // document's sequences inside the index.
  std::vector<int64_t> out;
  for (uint64_t s = 0; s < dataset.sequences() && s < 4096; ++s) {
    int32_t length = dataset.size(s);
    out.resize(size_t(length));
    dataset.read(s, 0, uint64_t(length), out.data());
  }
  for (uint64_t d = 0; d <= dataset.documents() && d < 4096; ++d)
    (void)dataset.documentIndex(d);
  (void)dataset.tokenRange();
  return 0;
}
