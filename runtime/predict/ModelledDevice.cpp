//===- ModelledDevice.cpp - a rank's GPU as a cost model ------------------===//
#include "runtime/predict/ModelledDevice.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/schedule/PipelineSim.h"

#include <algorithm>

namespace strata::runtime::predict {

ModelledDevice::ModelledDevice(Timeline &timeline, const CostModel &costs,
                               int rank)
    : timeline(timeline), costs(costs) {
  lanes[int(Stream::Compute)] =
      timeline.addLane(rank, "rank " + std::to_string(rank) + " compute");
  lanes[int(Stream::Comm)] = timeline.addLane(
      rank, "rank " + std::to_string(rank) + " communication");
  gemmLabel = timeline.label("gemm");
  recordLabel = timeline.label("record");
  waitLabel = timeline.label("wait");
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

void ModelledDevice::gemm(Stream stream, const GemmOp &op,
                          const Operand operands[5]) {
  const Buffer *a = operands[0].buffer, *b = operands[1].buffer,
               *d = operands[2].buffer;
  double batch = double(op.batch), m = double(op.m), n = double(op.n),
         k = double(op.k);
  // Each operand once; D read too when it accumulates.
  double moved = batch * (m * k * double(dtypeBytes(a->dtype)) +
                          k * n * double(dtypeBytes(b->dtype)) +
                          m * n * double(dtypeBytes(d->dtype)) *
                              (op.beta != 0 ? 2 : 1));
  bf16 |= a->dtype == DType::BF16;
  Op modelled;
  modelled.work = Work::Compute;
  modelled.seconds = costs.gemm(op, a->dtype, moved);
  modelled.label = gemmLabel;
  add(stream, modelled);
}

void ModelledDevice::launch(Stream stream, const LaunchOp &op,
                            const std::vector<Operand> &operands) {
  // Each distinct buffer once (a fused group's members share some).
  std::vector<const Buffer *> buffers;
  buffers.reserve(operands.size());
  for (const Operand &operand : operands)
    buffers.push_back(operand.buffer);
  double flops = launchFlops(op, buffers.data(), buffers.size());
  std::vector<std::pair<const void *, const Buffer *>> distinct;
  for (const Operand &operand : operands)
    if (operand.buffer)
      distinct.emplace_back(operand.data, operand.buffer);
  std::sort(distinct.begin(), distinct.end());
  distinct.erase(std::unique(distinct.begin(), distinct.end()),
                 distinct.end());
  double moved = 0;
  DType dtype = DType::F32;
  for (auto [data, buffer] : distinct) {
    moved += double(buffer->bytes);
    if (buffer->dtype == DType::BF16)
      dtype = DType::BF16;
  }
  if (kernelLabels.size() <= size_t(op.kernel))
    kernelLabels.resize(size_t(op.kernel) + 1, kNone);
  uint32_t &label = kernelLabels[size_t(op.kernel)];
  if (label == kNone)
    label = timeline.label(kernelName(op.kernel));
  Op modelled;
  modelled.work = Work::Compute;
  modelled.seconds = costs.kernel(flops, moved, dtype);
  modelled.label = label;
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

OpRef ModelledDevice::add(Stream stream, Op op) {
  op.optimizer = optimizerStep;
  return timeline.add(lane(stream), op);
}

void ModelledDevice::noteStep(const Program &program, const Step &at) {
  endSteps();
  optimizerStep = program.phase == Phase::Optimizer;
  // The schedule simulator's names: F3.1 (microbatch 3 on chunk 1), B3.1,
  // M3 (a whole microbatch), optimizer.
  std::string name;
  switch (program.phase) {
  case Phase::Forward:
  case Phase::Backward:
    name = sim::describe({program.phase == Phase::Forward ? sim::Phase::Forward
                                                          : sim::Phase::Backward,
                          program.chunk, int(at.microbatch)});
    break;
  case Phase::Microbatch:
    name = "M" + std::to_string(at.microbatch);
    break;
  case Phase::Optimizer:
    name = "optimizer";
    break;
  }
  step.lane = lane(Stream::Compute);
  step.label = timeline.label(name);
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

void ModelledDevice::copyIn(Stream stream, void *, const void *,
                            size_t size) {
  memoryOp(stream, copyInLabel, double(size));
}

void ModelledDevice::copyOut(Stream stream, void *, const void *,
                             size_t size) {
  memoryOp(stream, copyOutLabel, double(size));
}

void ModelledDevice::fillZero(Stream stream, void *, size_t size) {
  memoryOp(stream, fillLabel, double(size));
}

} // namespace strata::runtime::predict
