//===- Layout.h - the batch and parallel layout of a plan ------*- C++ -*-===//
//
// What strata-compile's flags choose and a plan's header (the module's
// `strata.plan` attribute) carries: the batch, the precision, the
// parallelism and how the pipeline is cut. One list of fields: the
// header's attribute is written and read back by walking it
// (forEachField), and CompileOptions and PlanHeader are each a Layout, so
// copying one into the other is an assignment.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_COMPILER_LAYOUT_H
#define STRATA_COMPILER_LAYOUT_H

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace strata {

/// What the backward recomputes instead of keeping (Megatron's
/// --recompute-granularity): nothing, the attention core, or all of each
/// layer but its input.
enum class Recompute { None, Selective, Full };

inline constexpr std::pair<Recompute, const char *> kRecomputeNames[] = {
    {Recompute::None, "none"},
    {Recompute::Selective, "selective"},
    {Recompute::Full, "full"}};

/// "none", "selective" or "full" to its kind; nullopt for anything else.
inline std::optional<Recompute> parseRecompute(std::string_view name) {
  for (auto [kind, text] : kRecomputeNames)
    if (name == text)
      return kind;
  return std::nullopt;
}
inline const char *recomputeName(Recompute kind) {
  for (auto [known, text] : kRecomputeNames)
    if (known == kind)
      return text;
  return "none"; // every kind has a name
}

struct Layout {
  int64_t microBatchSize = 1;
  int64_t globalBatchSize = 1;
  bool bf16 = false;
  int64_t tensorParallel = 1;
  int64_t dataParallel = 1;
  int64_t pipelineParallel = 1;
  int64_t contextParallel = 1; // the sequence in 2c chunks over c ranks
  bool sequenceParallel = false;
  bool distributedOptimizer = false;
  int64_t layersPerVirtualStage = 0;                   // 0: one chunk per stage
  int64_t firstStageLayers = -1, lastStageLayers = -1; // -1: even
  std::string pipelineSchedule; // "": interleaved if v > 1, else 1f1b
  Recompute recompute = Recompute::None;

  /// How the header holds a field: a size that must be there and be
  /// positive, or a setting whose absence (IR written before it) means
  /// its default.
  enum class Field { Size, Setting };

  /// Calls visit(key, field, kind) on every field, in the header's order,
  /// with its key in the `strata.plan` attribute.
  template <class Self, class Visit>
  static void forEachField(Self &layout, Visit &&visit) {
    visit("micro_batch_size", layout.microBatchSize, Field::Size);
    visit("global_batch_size", layout.globalBatchSize, Field::Size);
    visit("tensor_parallel", layout.tensorParallel, Field::Size);
    visit("data_parallel", layout.dataParallel, Field::Size);
    visit("pipeline_parallel", layout.pipelineParallel, Field::Size);
    visit("bf16", layout.bf16, Field::Setting);
    visit("sequence_parallel", layout.sequenceParallel, Field::Setting);
    visit("distributed_optimizer", layout.distributedOptimizer, Field::Setting);
    visit("layers_per_virtual_stage", layout.layersPerVirtualStage,
          Field::Setting);
    visit("first_stage_layers", layout.firstStageLayers, Field::Setting);
    visit("last_stage_layers", layout.lastStageLayers, Field::Setting);
    visit("pipeline_schedule", layout.pipelineSchedule, Field::Setting);
    visit("recompute", layout.recompute, Field::Setting);
    visit("context_parallel", layout.contextParallel, Field::Setting);
  }

  /// The ranks of a pipeline stage: tp · cp · dp.
  int64_t ranksPerStage() const {
    return tensorParallel * contextParallel * dataParallel;
  }
};

} // namespace strata

#endif
