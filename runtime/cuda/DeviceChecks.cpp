//===- DeviceChecks.cpp - whether a plan can run on a GPU -----------------===//
#include "runtime/cuda/DeviceChecks.h"

namespace strata::runtime::cuda {

namespace {

std::string capabilityText(int major, int minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

} // namespace

std::string checkCudaPlan(const Plan &plan) {
  if (plan.cudaArch.empty())
    return "the plan has no CUDA kernels: make it with strata-compile "
           "--target cuda";
  return "";
}

std::string checkArchitecture(const std::string &arch,
                              const DeviceInfo &device) {
  // sm_XY or sm_XYa: compute capability X.Y.
  bool specific = !arch.empty() && arch.back() == 'a';
  std::string digits = arch.substr(0, arch.size() - (specific ? 1 : 0));
  if (digits.size() < 5 || digits.size() > 6 || digits.rfind("sm_", 0) != 0 ||
      digits.find_first_not_of("0123456789", 3) != std::string::npos)
    return "the plan's CUDA architecture '" + arch +
           "' is not one strata knows";
  int number = std::stoi(digits.substr(3));
  int major = number / 10, minor = number % 10;
  int own = device.major * 10 + device.minor;
  bool fits = specific ? own == number : own >= number;
  if (fits)
    return "";
  std::string remedy = own == 90   ? "recompile with --cuda-arch sm_90a"
                       : own >= 80 ? "recompile with --cuda-arch sm_80"
                                   : "strata needs compute capability 8.0 "
                                     "or later";
  return "the plan was compiled for " + arch + " (compute capability " +
         capabilityText(major, minor) + (specific ? " only" : " or later") +
         "); this GPU is " + device.name + " (compute capability " +
         capabilityText(device.major, device.minor) + "): " + remedy;
}

std::string checkDeviceMemory(const Plan &plan, uint32_t first, uint32_t ranks,
                              uint64_t extraPerRank, const DeviceInfo &device) {
  uint64_t needed = 0;
  for (uint32_t r = first; r < first + ranks; ++r)
    needed += plan.ranks.at(r).peakBytes() + extraPerRank;
  if (needed <= device.freeBytes)
    return "";
  return std::string(ranks > 1 ? "the " + std::to_string(ranks) +
                                     " ranks on this GPU need "
                               : "rank " + std::to_string(first) + " needs ") +
         humanBytes(needed) + " (" + withThousands(needed) +
         " bytes: persistent, workspace and stash arenas and cuBLASLt's "
         "workspaces); " +
         device.name + " has " + humanBytes(device.freeBytes) + " free";
}

std::string checkSharedMemory(const Plan &plan, const RankPlan &rank,
                              const DeviceInfo &device) {
  for (const Program &program : rank.programs)
    for (const Instruction &instruction : program.instructions)
      if (const LaunchOp *launch = instruction.launch();
          launch && launch->code >= 0 &&
          launch->sharedBytes > device.sharedPerBlockOptIn)
        return "kernel " + plan.code[launch->code].name + " needs " +
               withThousands(launch->sharedBytes) +
               " bytes of shared memory; " + device.name + " allows " +
               withThousands(device.sharedPerBlockOptIn);
  return "";
}

} // namespace strata::runtime::cuda
