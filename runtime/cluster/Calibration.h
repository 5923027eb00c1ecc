//===- Calibration.h - measured kernel times for the simulator --*- C++ -*-===//
//
// `strata-run --backend sim --calibration FILE`: gemms and kernels whose
// name and shape (exec/KernelCost.h's, as --profile-json and the GPU
// check write them: "gemm" "m=8192 n=2304 k=768 bf16 nt bias") were
// measured take their measured time per call instead of the cost model's.
// FILE is strata-run's --profile-json ({"entries": [...]}) or the GPU
// check's calibration.json ({"plans": {"name": [...]}}); an entry seen in
// several plans takes the mean time per call. The file travels: every
// entry is checked (a name and a shape, whole calls >= 1, finite seconds
// >= 0), and fields it does not need are skipped.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_CLUSTER_CALIBRATION_H
#define STRATA_RUNTIME_CLUSTER_CALIBRATION_H

#include <map>
#include <string>
#include <string_view>

namespace strata::runtime {

class Calibration {
public:
  /// "" or what is wrong with `text`.
  std::string parse(std::string_view text);
  /// "" or what is wrong with the file at `path`, naming it.
  std::string load(const std::string &path);

  /// Seconds per call measured for (name, shape), or -1.
  double secondsPerCall(const std::string &name,
                        const std::string &shape) const;
  size_t size() const { return measured.size(); }
  /// How many lookups found a measurement, and how many did not.
  mutable size_t hits = 0, misses = 0;

private:
  struct Sum {
    double seconds = 0;
    int64_t calls = 0;
  };
  std::map<std::pair<std::string, std::string>, Sum> measured;
};

} // namespace strata::runtime

#endif
