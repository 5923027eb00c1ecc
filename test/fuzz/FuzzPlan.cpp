//===- FuzzPlan.cpp - the plan loader and checker
//-----------------------------===//
//
// Plans travel between machines: any bytes are refused by the loader (the
// frame, the FlatBuffers verifier, every value against what it indexes)
// or loaded, and a loaded plan passes or fails the per-rank check, without
// a crash, an unchecked size or a read outside the buffer. The input is
// the FlatBuffer: framed here with a good checksum, so that mutations
// reach the verifier and the value checks rather than the CRC (the frame
// itself is tested by corrupt_plans.py). The seeds are real plans'
// payloads (test/fuzz/corpus/plan).
//
//===----------------------------------------------------------------------===//
#include "runtime/plan/Plan.h"
#include "runtime/plan/PlanFile.h"

#include <cstdint>
#include <vector>

using namespace strata::runtime;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::vector<uint8_t> bytes = strata::plan::encodePlanFile(data, size);
  Plan plan;
  LoadOptions load;
  load.resolve = false; // a template per stage; checkEveryRank resolves
  if (!loadPlanFromBytes(bytes, plan, load).empty())
    return 0;
  // Plans of thousands of ranks resolve each one: keep the fuzzer fast.
  if (plan.world() <= 64)
    (void)checkEveryRank(plan);
  return 0;
}
