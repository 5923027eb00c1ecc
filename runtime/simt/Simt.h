//===- Simt.h - a generated kernel compiled and run on the host -*- C++ -*-===//
//
// A kernel unit as strata-compile --target cuda writes it, compiled by the
// host's C++ compiler against SimtRuntime.h (CUDA's builtins, and a fiber
// model of a GPU's blocks) and loaded with dlopen, so that a CUDA plan's
// kernels run on a machine without a GPU. The kernel takes its parameters
// as cuLaunchKernel does: a pointer to each parameter's value
// (runtime/device/KernelArgs.h).
//
// The compiler is STRATA_SIMT_CXX's command if set, else the one strata
// was built with.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_SIMT_SIMT_H
#define STRATA_RUNTIME_SIMT_SIMT_H

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace strata::runtime::simt {

class Kernel {
public:
  /// The kernel `name` of unit `source`, compiled once per process (a
  /// second call with the same unit shares the first's); null with the
  /// reason in `error`.
  static std::shared_ptr<const Kernel>
  build(const std::string &source, const std::string &name, std::string &error);

  /// Runs the kernel; "" or what went wrong (a barrier not every thread
  /// reaches, a shuffle from a lane that took no part in it, ...). One
  /// launch at a time per process: a unit's statics (its shared memory)
  /// are one copy.
  std::string launch(std::array<uint32_t, 3> grid,
                     std::array<uint32_t, 3> block, uint32_t sharedBytes,
                     void **params) const;

  Kernel() = default;
  /// The kernel's name in its unit.
  const std::string &name() const { return kernelName; }
  ~Kernel();
  Kernel(const Kernel &) = delete;
  Kernel &operator=(const Kernel &) = delete;

private:
  std::string compile(const std::string &source, const std::string &name);
  std::string kernelName;
  void *library = nullptr;
  using LaunchFn = int (*)(const unsigned *, const unsigned *, unsigned,
                           void **, char *, size_t);
  LaunchFn entry = nullptr;
};

} // namespace strata::runtime::simt

#endif
