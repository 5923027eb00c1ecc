//===- ModelledDevice.cpp - a rank's GPU as a cost model ------------------===//
#include "runtime/predict/ModelledDevice.h"
#include "runtime/exec/StepName.h"
#include "runtime/schedule/PipelineSim.h"

#include <algorithm>

namespace strata::runtime::predict {

ModelledDevice::ModelledDevice(Timeline &timeline, const CostModel &costs,
                               const Calibration *calibration, int rank)
    : timeline(timeline), costs(costs), calibration(calibration) {
  // The plan's streams, then the transfers': the trace's track order.
  constexpr Stream kOrder[] = {Stream::Compute,         Stream::Comm,
                               Stream::Context,         Stream::ActivationsUp,
                               Stream::ActivationsDown, Stream::GradientsUp,
                               Stream::GradientsDown};
  static_assert(std::size(kOrder) == kStreams, "a lane for every stream");
  for (Stream stream : kOrder)
    lanes[int(stream)] = timeline.addLane(rank, "rank " + std::to_string(rank) +
                                                    " " + streamName(stream));
  gemmLabel = timeline.label("gemm");
  recordLabel = timeline.label("record");
  waitLabel = timeline.label("wait");
  issueLabel = timeline.label("issued by the host");
  copyInLabel = timeline.label("copy in");
  copyOutLabel = timeline.label("copy out");
  fillLabel = timeline.label("fill");
}

std::string ModelledDevice::allocate(Arena arena, uint64_t size) {
  bytes[int(arena)] = size;
  return "";
}

uint8_t *ModelledDevice::arena(Arena arena) const {
  // A placeholder per arena, far apart; no instruction here reads it.
  return reinterpret_cast<uint8_t *>(uintptr_t(int(arena) + 1) << 52);
}

void ModelledDevice::createEvents(uint32_t count) {
  lastRecord.assign(count, OpRef());
}

const InstructionCost &ModelledDevice::costOf(const void *op) {
  return instructionCosts.at(op);
}

double ModelledDevice::seconds(const InstructionCost &cost, double modelled) {
  double measured =
      calibration ? calibration->secondsPerCall(cost.name, cost.shape) : -1;
  return measured >= 0 ? measured : modelled;
}

void ModelledDevice::gemm(Stream stream, const GemmOp &op,
                          const Operand operands[5]) {
  const InstructionCost &cost = costOf(&op);
  DType dtype = operands[0].buffer->dtype;
  bf16 |= dtype == DType::BF16;
  Op modelled;
  modelled.work = Work::Compute;
  modelled.seconds = seconds(cost, costs.gemm(op, dtype, cost.bytes));
  modelled.label = gemmLabel;
  add(stream, modelled);
}

void ModelledDevice::launch(Stream stream, const LaunchOp &op,
                            const std::vector<Operand> &operands) {
  const InstructionCost &cost = costOf(&op);
  DType dtype = DType::F32;
  for (const Operand &operand : operands)
    if (operand.buffer && operand.buffer->dtype == DType::BF16)
      dtype = DType::BF16;
  auto [label, fresh] = costLabels.try_emplace(cost.name, 0);
  if (fresh)
    label->second = timeline.label(cost.name);
  Op modelled;
  modelled.work = Work::Compute;
  modelled.seconds = seconds(cost, costs.kernel(cost, dtype));
  modelled.label = label->second;
  add(stream, modelled);
}

void ModelledDevice::record(Stream stream, uint32_t event) {
  Op op;
  op.work = Work::Record;
  op.label = recordLabel;
  lastRecord.at(event) = add(stream, op);
}

void ModelledDevice::wait(Stream stream, uint32_t event) {
  Op op;
  op.work = Work::Wait;
  op.label = waitLabel;
  op.waitsFor = lastRecord.at(event);
  add(stream, op);
}

void ModelledDevice::memoryOp(Stream stream, uint32_t label, double size) {
  Op op;
  op.work = Work::Memory;
  op.seconds = costs.memory(size);
  op.label = label;
  add(stream, op);
}

void ModelledDevice::issue(Stream stream) {
  uint32_t compute = lane(Stream::Compute), issued = timeline.size(compute);
  if (stream == Stream::Compute || !costs.cluster().gpu.synchronousCompute ||
      issued == 0 || issuedAfter[int(stream)] == issued)
    return;
  issuedAfter[int(stream)] = issued;
  Op op;
  op.work = Work::Wait;
  op.label = issueLabel;
  op.waitsFor = {compute, issued - 1};
  op.optimizer = optimizerStep;
  timeline.add(lane(stream), op);
}

OpRef ModelledDevice::add(Stream stream, Op op) {
  issue(stream);
  op.optimizer = optimizerStep;
  return timeline.add(lane(stream), op);
}

void ModelledDevice::noteStep(const Program &program, const Step &at) {
  endSteps();
  if (!costed[&program]) {
    // The same figures --profile-json reports: a fused group as one kernel
    // over its members' buffers (this device runs fused kernels).
    costed[&program] = true;
    const auto &instructions = program.instructions;
    for (size_t i = 0; i < instructions.size(); ++i) {
      const Instruction &instruction = instructions[i];
      const void *op = instruction.gemm()
                           ? static_cast<const void *>(instruction.gemm())
                           : static_cast<const void *>(instruction.launch());
      if (!op)
        continue;
      size_t span = instruction.launch() && instruction.launch()->fuse > 1
                        ? instruction.launch()->fuse
                        : 1;
      instructionCosts[op] = instructionCost(*rankPlan, program, i, span);
    }
  }
  optimizerStep = program.phase == Phase::Optimizer;
  step.lane = lane(Stream::Compute);
  // The schedule simulator's names: F3.1 (microbatch 3 on chunk 1), B3.1,
  // W3.1, M3 (a whole microbatch), optimizer.
  step.label = timeline.label(stepName(program, at.microbatch));
  std::optional<sim::Work> work = workOf(program, at.microbatch);
  step.chunk = work ? work->chunk : -1;
  step.phase = work ? uint8_t(work->phase) : 0;
  step.begin = timeline.size(step.lane);
  inStep = true;
}

void ModelledDevice::endSteps() {
  if (!inStep)
    return;
  step.end = timeline.size(step.lane);
  if (step.end > step.begin)
    timeline.addStep(step);
  inStep = false;
}

void ModelledDevice::copyIn(Stream stream, void *, const void *, size_t size) {
  memoryOp(stream, copyInLabel, double(size));
}

void ModelledDevice::copyOut(Stream stream, void *, const void *, size_t size) {
  memoryOp(stream, copyOutLabel, double(size));
}

void ModelledDevice::fillZero(Stream stream, void *, size_t size) {
  memoryOp(stream, fillLabel, double(size));
}

} // namespace strata::runtime::predict
