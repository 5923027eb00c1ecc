//===- EmitDropout.cpp - dropout, drawn the same on every layout ----------===//
//
// The dropout kernel is cuda/dropout.cuh's template (the mask
// runtime/plan/Dropout.h's function written again there, 8 elements a
// thread); this writes the stub: the sample's size and the split's shape
// as constants. The site and the rank's share of a split dimension are
// read at run time, so that the layers' dropouts share one kernel.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Emitters.h"
#include "runtime/plan/Dropout.h"

namespace strata::codegen {

using namespace runtime::kernels;

std::string emitDropout(const LaunchDesc &launch, KernelCode &code) {
  View v{launch};
  const std::vector<int64_t> &shape = v.shape(Dropout::op::x);
  int64_t count = v.count(Dropout::op::x);
  int64_t perSample = count / shape[0];
  int64_t dim = v.attr(Dropout::attr::split_dim).i;
  int64_t inner = 1, local = 1, size = 1;
  if (dim > 0) {
    for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
      inner *= shape[d];
    local = shape[size_t(dim)];
    size = v.attr(Dropout::attr::split_size).i;
  }
  double rate = v.attr(Dropout::attr::rate).f;
  code.sources = {"dropout.cuh"};
  code.block = {kThreads, 1, 1};
  code.grid = {blocksFor((count + 7) / 8, kThreads), 1, 1};
  code.body = "  dropout<" + num(perSample) + ", DropoutSplit<" +
              (dim > 0 ? "true" : "false") + ", " + num(local) + ", " +
              num(inner) + ", " + num(size) + ">>(\n      x, keys, y, " +
              num(count) + ", site, split_offset, " +
              std::to_string(runtime::dropoutThreshold(rate)) + "u, " +
              f64(1.0 / (1.0 - rate)) +
              ",\n      aligned16(x) && aligned16(y));\n";
  return "";
}

} // namespace strata::codegen
