//===- Dropout.cpp - dropout, drawn the same on every layout --------------===//
//
// x [batch, ...]: each element kept with probability 1 - rate and scaled
// by 1 / (1 - rate), or zeroed; whether is runtime/plan/Dropout.h's
// function of the sample's key, the site and the element's index within
// its sample in the unsplit tensor (dimension split_dim holds this rank's
// share at split_offset of split_size). A negative key leaves the sample
// as it is (evaluation).
//
//===----------------------------------------------------------------------===//
#include "runtime/cpu/Kernels.h"
#include "runtime/plan/Dropout.h"

namespace strata::runtime::cpu {

void runDropout(const KernelArgs &args) {
  using namespace kernels::Dropout;
  const float *x = args.f(op::x);
  const int32_t *keys = args.ids(op::keys);
  float *y = args.f(op::y);
  const auto &shape = args.shape(op::x);
  uint64_t samples = uint64_t(shape[0]);
  uint64_t perSample = uint64_t(args.count(op::x)) / samples;
  double rate = args.real(attr::rate), scale = 1.0 / (1.0 - rate);
  uint32_t threshold = dropoutThreshold(rate);
  uint32_t site = uint32_t(args.i(attr::site));
  int64_t dim = args.i(attr::split_dim);
  // Index within the sample: (outer · size + offset + at) · inner + rest,
  // `at` the position along the split dimension.
  uint64_t inner = 1, local = 1, size = 1, offset = 0;
  if (dim > 0) {
    for (size_t d = size_t(dim) + 1; d < shape.size(); ++d)
      inner *= uint64_t(shape[d]);
    local = uint64_t(shape[size_t(dim)]);
    size = uint64_t(args.i(attr::split_size));
    offset = uint64_t(args.i(attr::split_offset));
  }
#pragma omp parallel for if (args.count(op::x) > kCheap)
  for (uint64_t b = 0; b < samples; ++b) {
    int32_t key = keys[b];
    for (uint64_t r = 0; r < perSample; ++r) {
      uint64_t i = b * perSample + r;
      if (key < 0) {
        y[i] = x[i];
        continue;
      }
      uint64_t index = r;
      if (dim > 0) {
        uint64_t outer = r / (local * inner), rest = r % (local * inner);
        index = (outer * size + offset + rest / inner) * inner + rest % inner;
      }
      y[i] = dropoutKeeps(uint32_t(key), site, uint32_t(index), threshold)
                 ? float(double(x[i]) * scale)
                 : 0.0f;
    }
  }
}

} // namespace strata::runtime::cpu
