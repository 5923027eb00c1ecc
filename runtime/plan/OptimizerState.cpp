//===- OptimizerState.cpp - where a rank keeps its Adam state -------------===//
#include "runtime/plan/OptimizerState.h"
#include "runtime/plan/Ownership.h"

#include <algorithm>

namespace strata::runtime {

// The optimizer state of each parameter: where the optimizer's adamw
// launch (its windows and the rank's part) keeps the moments, and the fp32
// masters if it has them, of the parameter elements this rank owns.
std::string placeOptimizerState(RankPlan &rank) {
  using namespace kernels;
  const LaunchOp *adam = nullptr;
  for (const Program &program : rank.programs)
    for (const Instruction &instruction : program.instructions)
      if (const LaunchOp *l = instruction.launch();
          l && l->kernel == KernelId::AdamW) {
        if (adam)
          return "two adamw launches keep optimizer state";
        adam = l;
      }
  for (Param &param : rank.params)
    param.state.clear();
  rank.expAvg = rank.expAvgSq = rank.master = rank.gradRegion = kNoBuffer;
  if (!adam)
    return "";
  rank.expAvg = adam->operands[AdamW::op::exp_avg];
  rank.expAvgSq = adam->operands[AdamW::op::exp_avg_sq];
  rank.gradRegion = adam->operands[AdamW::op::grads];
  rank.master = adam->operands[AdamW::op::master];
  const Buffer &region = rank.buffers[adam->operands[AdamW::op::params]];
  uint64_t element = dtypeBytes(region.dtype);
  // Each parameter's range in the region, in the region's order.
  std::vector<std::pair<int64_t, size_t>> order;
  for (size_t p = 0; p < rank.params.size(); ++p) {
    const Buffer &value = rank.buffers[rank.params[p].value];
    if (value.arena != region.arena || value.offset < region.offset ||
        value.offset + value.bytes > region.offset + region.bytes ||
        (value.offset - region.offset) % element != 0)
      return "parameter '" + rank.params[p].name +
             "' lies outside the optimizer's parameter region";
    order.push_back({int64_t((value.offset - region.offset) / element), p});
  }
  std::sort(order.begin(), order.end());
  std::vector<int64_t> ranges;
  for (auto [begin, p] : order)
    ranges.insert(ranges.end(),
                  {begin, rank.buffers[rank.params[p].value].elements});
  for (size_t i = 1; i < order.size(); ++i)
    if (ranges[2 * i] < ranges[2 * i - 2] + ranges[2 * i - 1])
      return "parameters '" + rank.params[order[i - 1].second].name +
             "' and '" + rank.params[order[i].second].name + "' overlap";
  forEachOwned(
      ranges, 2, adam->attrs[AdamW::attr::windows].list,
      adam->attrs[AdamW::attr::part].i,
      [&](int64_t begin, int64_t length, int64_t state, size_t i) {
        auto [paramBegin, p] = order[i];
        rank.params[p].state.push_back({state, begin - paramBegin, length});
      });
  return "";
}

} // namespace strata::runtime
