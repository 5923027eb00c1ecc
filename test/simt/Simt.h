//===- Simt.h - a generated kernel compiled and run on the host -*- C++ -*-===//
//
// A kernel unit as strata-compile --target cuda writes it, compiled by the
// host's C++ compiler against SimtRuntime.h and run by its fiber model of
// a GPU block, so that tests check generated kernels on machines without a
// GPU. The kernel takes its parameters as cuLaunchKernel does: a pointer to
// each parameter's value (runtime/cuda/LaunchArgs.h).
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_TEST_SIMT_SIMT_H
#define STRATA_TEST_SIMT_SIMT_H

#include <array>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::simt {

class Kernel {
public:
  /// Compiles the unit `source` whose kernel is `name`; "" or why not.
  std::string build(const std::string &source, const std::string &name);

  /// Runs the kernel; "" or what went wrong (a barrier not every thread
  /// reaches, a shuffle across lanes that did not all take part, ...).
  std::string launch(std::array<uint32_t, 3> grid,
                     std::array<uint32_t, 3> block, uint32_t sharedBytes,
                     void **params) const;

  ~Kernel();

private:
  void *library = nullptr;
  using LaunchFn = int (*)(const unsigned *, const unsigned *, unsigned,
                           void **, char *, size_t);
  LaunchFn entry = nullptr;
};

/// The unit as the host compiles it: dynamic shared memory declarations
/// made pointers into the model's buffer, and an entry that unpacks
/// cuLaunchKernel-style parameters appended; "" in `error` or why the
/// kernel's signature cannot be read.
std::string hostUnit(const std::string &source, const std::string &name,
                     std::string &error);

} // namespace strata::simt

#endif
