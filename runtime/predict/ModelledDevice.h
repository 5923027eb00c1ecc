//===- ModelledDevice.h - a rank's GPU as a cost model ----------*- C++ -*-===//
//
// The Backend of `strata-run --backend sim`: it holds no data. Each gemm,
// kernel, fill and copy becomes an operation of its stream's lane in the
// Timeline, with its cost from the CostModel; events become records and
// waits that the Timeline orders as CUDA would. Arenas are only counted
// (their addresses are distinct placeholders that nothing reads). A gemm's
// or kernel's bytes and FLOPs are exec/KernelCost.h's, the figures
// --profile-json reports, and a measured time (Calibration) for its name
// and shape replaces the model's.
//
//===----------------------------------------------------------------------===//
#ifndef STRATA_RUNTIME_PREDICT_MODELLEDDEVICE_H
#define STRATA_RUNTIME_PREDICT_MODELLEDDEVICE_H

#include "runtime/device/Backend.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/cluster/Calibration.h"
#include "runtime/predict/CostModel.h"
#include "runtime/predict/Timeline.h"

#include <unordered_map>

namespace strata::runtime::predict {

class ModelledDevice : public Backend {
public:
  /// `calibration` may be null (the model alone).
  ModelledDevice(Timeline &timeline, const CostModel &costs,
                 const Calibration *calibration, int rank);

  uint32_t lane(Stream stream) const { return lanes[int(stream)]; }
  uint64_t arenaBytes(Arena arena) const { return bytes[int(arena)]; }
  /// Whether any gemm multiplied bf16 (the peak to compare with).
  bool multipliesBf16() const { return bf16; }

  std::string allocate(Arena arena, uint64_t bytes) override;
  uint8_t *arena(Arena arena) const override;
  void createEvents(uint32_t count) override;
  std::string prepare(const Plan &, const RankPlan &rank) override {
    rankPlan = &rank;
    return "";
  }
  void gemm(Stream stream, const GemmOp &op,
            const Operand operands[5]) override;
  void launch(Stream stream, const LaunchOp &op,
              const std::vector<Operand> &operands) override;
  /// A fused group costs one kernel over its members' buffers.
  bool runsFusedKernels() const override { return true; }
  void record(Stream stream, uint32_t event) override;
  void wait(Stream stream, uint32_t event) override;
  void copyIn(Stream stream, void *, const void *, size_t bytes) override;
  void copyOut(Stream stream, void *, const void *, size_t bytes) override;
  void fillZero(Stream stream, void *, size_t bytes) override;
  void noteStep(const Program &program, const Step &step) override;
  /// Closes the last step's span (after the iteration).
  void endSteps();
  /// The host issues an instruction to `stream`. Where the compute stream
  /// runs on the host (the spec's synchronous_compute), the stream takes
  /// it only once the compute issued before it has run: a wait for that.
  void issue(Stream stream);
  void synchronize() override {}
  void synchronizeStream(Stream) override {}

private:
  void memoryOp(Stream stream, uint32_t label, double bytes);
  /// The cost of the gemm or launch at `op` (its address in the program
  /// noteStep named), computed once per program.
  const InstructionCost &costOf(const void *op);
  /// Seconds: measured, else `modelled`.
  double seconds(const InstructionCost &cost, double modelled);
  OpRef add(Stream stream, Op op);

  Timeline &timeline;
  const CostModel &costs;
  const Calibration *calibration;
  const RankPlan *rankPlan = nullptr;
  // Each program's gemms and launches by their op's address.
  std::unordered_map<const Program *, bool> costed;
  std::unordered_map<const void *, InstructionCost> instructionCosts;
  std::unordered_map<std::string, uint32_t> costLabels;
  uint32_t lanes[kStreams];
  // Per stream, how many compute ops its last issue() waited for.
  uint32_t issuedAfter[kStreams] = {};
  uint64_t bytes[kArenas] = {};
  bool bf16 = false;
  bool optimizerStep = false;
  StepSpan step;   // the step being issued, on the compute lane
  bool inStep = false;
  std::vector<OpRef> lastRecord; // by event
  uint32_t copyInLabel = 0, copyOutLabel = 0, fillLabel = 0;
  uint32_t gemmLabel = 0, recordLabel = 0, waitLabel = 0, issueLabel = 0;
};

} // namespace strata::runtime::predict

#endif
