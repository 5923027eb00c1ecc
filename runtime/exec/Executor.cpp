//===- Executor.cpp - one rank's plan on a backend ------------------------===//
#include "runtime/exec/Executor.h"
#include "runtime/exec/StepName.h"
#include "runtime/plan/Dropout.h"
#include "runtime/plan/IoNames.h"
#include "runtime/schedule/PipelineSim.h"

#include <cstring>

namespace strata::runtime {

Executor::Executor(const Plan &plan, uint32_t rankIndex, Backend &backend,
                   Collectives &collectives)
    : whole(plan), rank(plan.ranks.at(rankIndex)), backend(backend),
      collectives(collectives) {}

std::string Executor::load() {
  // What the runtime reads and writes: the batch, the loss (on the stage of
  // the last chunk), the gradient norm and the hyperparameters.
  bool lossStage = whole.stageOf(rank.rank) == whole.lossStage();
  tokens = rank.ioBuffer(io_names::kTokens);
  labels = rank.ioBuffer(io_names::kLabels);
  dropoutKeys = rank.ioBuffer(kDropoutKeys);
  loss = rank.ioBuffer(io_names::kLoss);
  gradNormBuffer = rank.ioBuffer(io_names::kGradNorm);
  hyper = rank.ioBuffer(io_names::kHyper);
  // A pipeline stage reads the inputs its chunks use, but the first embeds
  // the tokens and the last scores the labels: without its input it would
  // train on a buffer nothing writes.
  bool pipelined = !whole.pipelineSchedule.empty();
  struct Input {
    const char *name;
    int index;
    bool stageNeedsIt;
    const char *where;
  };
  for (auto [name, index, stageNeedsIt, where] :
       {Input{io_names::kTokens, tokens, whole.stageOf(rank.rank) == 0,
              " on its first pipeline stage"},
        Input{io_names::kLabels, labels, lossStage,
              " on its last chunk's pipeline stage"}}) {
    if (index < 0 && (!pipelined || stageNeedsIt))
      return std::string("the plan has no '") + name + "' input" +
             (pipelined ? where : "");
    if (index < 0)
      continue;
    const Buffer &b = rank.buffers[index];
    if (b.dtype != DType::I32 ||
        b.elements != int64_t(whole.microBatchSize) * whole.localSeqLength())
      return std::string("the '") + name + "' input is not " +
             std::to_string(whole.microBatchSize) + " x " +
             std::to_string(whole.localSeqLength()) + " ids" +
             (whole.contextParallel > 1 ? " (the rank's share of the sequence)"
                                        : "");
  }
  // A stage that drops out reads each sample's key (any stage may).
  if (dropoutKeys >= 0 &&
      (rank.buffers[dropoutKeys].dtype != DType::I32 ||
       rank.buffers[dropoutKeys].elements != int64_t(whole.microBatchSize)))
    return std::string("the '") + kDropoutKeys + "' input is not " +
           std::to_string(whole.microBatchSize) + " i32 keys";
  auto scalar = [&](int index) {
    return index >= 0 && rank.buffers[index].dtype == DType::F32 &&
           rank.buffers[index].elements == 1;
  };
  if ((lossStage || loss >= 0) && !scalar(loss))
    return "the plan has no f32 'loss' output on its last chunk's pipeline "
           "stage";
  if (!scalar(gradNormBuffer))
    return "the plan has no f32 'grad_norm' output";
  if (hyper < 0 || rank.buffers[hyper].dtype != DType::F32 ||
      rank.buffers[hyper].elements != kHyperSlots)
    return "the plan has no 'hyper' buffer of " + std::to_string(kHyperSlots) +
           " f32 values";
  for (Arena arena : {Arena::Persistent, Arena::Workspace, Arena::Stash})
    if (std::string error = backend.allocate(arena, rank.arenaBytes(arena));
        !error.empty())
      return error;
  backend.createEvents(rank.events);
  fusedKernels = backend.runsFusedKernels();
  if (std::string error = backend.prepare(whole, rank); !error.empty())
    return error;
  if (std::string error = collectives.createGroups(whole, rank.rank);
      !error.empty())
    return error;

  for (const Program &program : rank.programs) {
    ProgramInfo &info = programs.emplace_back();
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const Instruction &instruction = program.instructions[i];
      for (uint32_t in : instruction.buffers())
        info.readsBatch |=
            int(in) == tokens || int(in) == labels || int(in) == dropoutKeys;
      for (uint32_t out : instruction.outputs())
        info.writesLoss |= loss >= 0 && out == uint32_t(loss);
      bool talks = instruction.collective() || instruction.transfer();
      const std::string &location = whole.locations[instruction.location];
      info.where.push_back(talks ? "program " + program.name +
                                       ", instruction " + std::to_string(i) +
                                       (location.empty() ? "" : ", " + location)
                                 : "");
    }
    // What a graph of the body holds: past the compute stream's leading
    // waits and before its trailing records (issued around the replay),
    // only gemms and launches.
    auto computeEvent = [&](size_t i, bool record) {
      const Instruction &instruction = program.instructions[i];
      return instruction.event() && instruction.event()->record == record &&
             instruction.stream == Stream::Compute &&
             instruction.when == Condition::Always;
    };
    size_t begin = program.bodyBegin, end = program.bodyEnd;
    while (begin < end && computeEvent(begin, false))
      ++begin;
    while (end > begin && computeEvent(end - 1, true))
      --end;
    bool only = begin < end;
    for (size_t i = begin; i < end; ++i) {
      const Instruction &instruction = program.instructions[i];
      only &= (instruction.gemm() || instruction.launch()) &&
              instruction.stream == Stream::Compute;
      info.conditional |= instruction.when == Condition::LastMicrobatch;
    }
    if (only) {
      info.graphBegin = begin;
      info.graphEnd = end;
    }
  }
  exchangePoint.assign(rank.schedule.size() + 1, false);
  for (size_t i = 0; i < rank.schedule.size(); ++i)
    exchangePoint[i] = i == 0 || rank.schedule[i].exchange;
  exchangePoint.back() = true;
  return "";
}

Operand Executor::operand(uint32_t index, const StashSlots &slots) const {
  if (index == kNoBuffer)
    return {};
  return {address(index, slots), &rank.buffers[index]};
}

void *Executor::address(uint32_t index, const StashSlots &slots) const {
  const Buffer &buffer = rank.buffers[index];
  uint64_t at = buffer.offset;
  // The plan's checks keep every slot a step names inside the arena, and
  // give each stash buffer a program names a slot of its pool.
  int32_t slot = slots[int(buffer.stashPool)];
  if (buffer.arena == Arena::Stash && slot > 0)
    at += buffer.slotStride * uint64_t(slot);
  return backend.arena(buffer.arena) + at;
}

void *Executor::io(const std::string &name) const {
  int index = rank.ioBuffer(name);
  return index < 0 ? nullptr : address(uint32_t(index));
}

double Executor::now() const {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now() - epoch)
      .count();
}

void Executor::runInstruction(const Program &program, size_t index,
                              const Step &step, const std::string &where) {
  const Instruction &instruction = program.instructions[index];
  Stream stream = instruction.stream;
  const StashSlots &slot = step.slots;
  if (const GemmOp *g = instruction.gemm()) {
    Operand operands[5] = {operand(g->a, slot), operand(g->b, slot),
                           operand(g->d, slot), operand(g->bias, slot),
                           operand(g->aux, slot)};
    backend.gemm(stream, *g, operands);
  } else if (const LaunchOp *l = instruction.launch()) {
    scratch.clear();
    for (uint32_t buffer : l->operands)
      scratch.push_back(operand(buffer, slot));
    // A fused kernel takes its members' operands too (the plan's checks
    // keep them launches of the program).
    if (l->fuse > 1 && fusedKernels)
      for (size_t m = 1; m < l->fuse; ++m)
        for (uint32_t buffer :
             program.instructions[index + m].launch()->operands)
          scratch.push_back(operand(buffer, slot));
    backend.launch(stream, *l, scratch);
  } else if (const CollectiveOp *c = instruction.collective()) {
    auto start = std::chrono::steady_clock::now();
    collectives.collective(stream, *c, operand(c->input, slot),
                           operand(c->output, slot), where);
    if (stream == Stream::Compute)
      computeCollectiveSeconds += std::chrono::duration<double>(
                                      std::chrono::steady_clock::now() - start)
                                      .count();
  } else if (const EventOp *e = instruction.event()) {
    if (e->record) {
      backend.record(stream, e->event);
    } else {
      auto start = std::chrono::steady_clock::now();
      backend.wait(stream, e->event);
      if (stream == Stream::Compute)
        stepWaitSeconds += std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();
    }
  }
  // Transfers are posted at exchange points (exchangeAt), never here.
}

void Executor::runBody(const Step &step) {
  const Program &program = rank.programs[step.program];
  const ProgramInfo &info = programs[step.program];
  if (!graphs || tracing || profiling || info.graphBegin == info.graphEnd) {
    runRange(step, program.bodyBegin, program.bodyEnd);
    return;
  }
  // Addresses differ between stash slots, and conditional instructions
  // between the last microbatch and the others: a graph for each.
  bool last =
      info.conditional && step.microbatch == int32_t(whole.numMicrobatches) - 1;
  runRange(step, program.bodyBegin, info.graphBegin);
  auto [entry, fresh] =
      recorded.try_emplace({step.program, step.slots, last}, 0);
  if (fresh) {
    backend.beginGraph();
    runRange(step, info.graphBegin, info.graphEnd);
    entry->second = backend.endGraph();
  }
  backend.replayGraph(entry->second);
  ++replays;
  runRange(step, info.graphEnd, program.bodyEnd);
}

void Executor::runRange(const Step &step, size_t begin, size_t end) {
  const Program &program = rank.programs[step.program];
  const ProgramInfo &info = programs[step.program];
  bool last = step.microbatch == int32_t(whole.numMicrobatches) - 1;
  // A fused group on a backend that runs fused kernels is its first
  // launch: the members share its condition and are run by its kernel.
  auto span = [&](const Instruction &instruction) -> size_t {
    const LaunchOp *launch = instruction.launch();
    return launch && launch->fuse > 1 && fusedKernels ? launch->fuse : 1;
  };
  for (size_t i = begin; i < end; i += span(program.instructions[i])) {
    const Instruction &instruction = program.instructions[i];
    if (instruction.when == Condition::LastMicrobatch && !last)
      continue;
    bool timed =
        (tracing || profiling) && instruction.stream == Stream::Compute;
    if (!timed) {
      runInstruction(program, i, step, info.where[i]);
      continue;
    }
    if (deviceTiming) {
      // The device's time: marks around it, read after the iteration.
      TimedSpan timedSpan;
      timedSpan.begin = mark();
      runInstruction(program, i, step, info.where[i]);
      timedSpan.end = mark();
      if (tracing) {
        TraceEvent event;
        event.name = timedName(instruction);
        trace.push_back(std::move(event));
        timedSpan.traceEvent = int64_t(trace.size()) - 1;
      }
      timedSpan.profiled = profiling;
      timedSpan.program = step.program;
      timedSpan.index = i;
      timedSpan.width = span(instruction);
      spans.push_back(timedSpan);
      continue;
    }
    double start = now();
    runInstruction(program, i, step, info.where[i]);
    double duration = now() - start;
    if (profiling)
      addProfile(step.program, i, span(instruction), duration * 1e-6);
    if (tracing) {
      TraceEvent event;
      event.name = timedName(instruction);
      event.startUs = start;
      event.durationUs = duration;
      trace.push_back(std::move(event));
    }
  }
}

uint32_t Executor::mark() {
  uint32_t index = backend.markTime(Stream::Compute);
  if (index == 0)
    firstMarkHostUs = now();
  return index;
}

std::string Executor::libraryOf(const Instruction &instruction) const {
  const LaunchOp *launch = instruction.launch();
  return launch ? backend.launchLibrary(*launch) : "";
}

std::string Executor::timedName(const Instruction &instruction) const {
  std::string library = libraryOf(instruction);
  return library.empty() ? instruction.name()
                         : instruction.name() + " (" + library + ")";
}

void Executor::addProfile(uint32_t program, size_t index, size_t width,
                          double seconds) {
  const Instruction &instruction = rank.programs[program].instructions[index];
  auto &[total, calls] = kernelTime[timedName(instruction)];
  total += seconds;
  ++calls;
  if (!instruction.gemm() && !instruction.launch())
    return;
  auto &[last, lastCalls] = lastIteration[{program, index, width}];
  last += seconds;
  ++lastCalls;
}

std::map<std::string, Executor::ProfileEntry> Executor::profileDetail() const {
  std::map<std::string, ProfileEntry> byShape;
  for (const auto &[at, time] : lastIteration) {
    auto [program, index, width] = at;
    InstructionCost cost =
        instructionCost(rank, rank.programs[program], index, width);
    std::string library = libraryOf(rank.programs[program].instructions[index]);
    ProfileEntry &entry = byShape[cost.name + " " + cost.shape + " " + library];
    entry.cost = std::move(cost);
    entry.library = std::move(library);
    entry.seconds += time.first;
    entry.calls += time.second;
  }
  return byShape;
}

void Executor::resolveDeviceTimes() {
  if (!spans.empty()) {
    std::vector<double> at = backend.markTimes();
    for (const TimedSpan &timed : spans) {
      double duration = at[timed.end] - at[timed.begin];
      if (timed.traceEvent >= 0) {
        trace[size_t(timed.traceEvent)].startUs =
            firstMarkHostUs + at[timed.begin];
        trace[size_t(timed.traceEvent)].durationUs = duration;
      }
      if (timed.profiled)
        addProfile(timed.program, timed.index, timed.width, duration * 1e-6);
    }
  }
  spans.clear();
  backend.clearMarks();
}

void Executor::exchangeAt(size_t at, std::vector<size_t> &pending) {
  // A group per transfer stream (activations and gradients, up and down
  // the stages), each with the records of the sections it carries.
  struct Group {
    std::vector<Transfer> sends, receives;
    std::vector<uint32_t> records;
  };
  Group groups[kTransferStreamCount];
  uint32_t me = rank.rank, stage = whole.stageOf(me);
  auto transfer = [&](const Instruction &instruction, const Step &step,
                      const std::string &where) {
    const TransferOp &t = *instruction.transfer();
    Transfer out;
    out.buffer = operand(t.buffer, step.slots);
    out.peer = int(whole.onStage(me, t.peerStage));
    out.tag = transferTag(t.channel, step.microbatch);
    // Only a receive waits, so only its timeout needs the words.
    if (!t.send)
      out.where = "recv of channel " + std::to_string(t.channel) +
                  " for microbatch " + std::to_string(step.microbatch) + " (" +
                  where + ")";
    return out;
  };
  // A section's events go around its group on its transfer stream (the
  // plan's events of the communication stream that bracket transfers):
  // their waits before it, their records after it. A section talks to one
  // peer stage and carries one kind, so all of its transfers take one
  // stream (the plan's checks keep it so).
  auto section = [&](size_t s, size_t begin, size_t end, bool sending) {
    const Step &step = rank.schedule[s];
    const Program &program = rank.programs[step.program];
    int l = 0;
    for (size_t i = begin; i < end; ++i)
      if (const TransferOp *t = program.instructions[i].transfer()) {
        l = transferStreamIndex(transferStream(
            t->send, stage, t->peerStage, program.phase == Phase::Backward));
        break;
      }
    for (size_t i = begin; i < end; ++i) {
      const Instruction &instruction = program.instructions[i];
      if (instruction.transfer())
        (sending ? groups[l].sends : groups[l].receives)
            .push_back(
                transfer(instruction, step, programs[step.program].where[i]));
      else if (instruction.event()->record)
        groups[l].records.push_back(instruction.event()->event);
      else
        backend.wait(kTransferStreams[l], instruction.event()->event);
    }
  };
  // The trailing sections of the steps since the last point, then the
  // leading sections of the steps up to the next.
  for (size_t s : pending) {
    const Program &program = rank.programs[rank.schedule[s].program];
    section(s, program.bodyEnd, program.instructions.size(), true);
  }
  pending.clear();
  for (size_t s = at; s < rank.schedule.size(); ++s) {
    if (s > at && exchangePoint[s])
      break;
    section(s, 0, rank.programs[rank.schedule[s].program].bodyBegin, false);
  }
  for (int l = 0; l < kTransferStreamCount; ++l) {
    collectives.exchange(kTransferStreams[l], std::move(groups[l].sends),
                         std::move(groups[l].receives));
    for (uint32_t event : groups[l].records)
      backend.record(kTransferStreams[l], event);
  }
}

float Executor::runIteration(int64_t iteration, const Hyper &h,
                             const LoadBatch &loadBatch) {
  hyperValues(h, hyperHost);
  backend.copyIn(Stream::Compute, address(uint32_t(hyper)), hyperHost,
                 sizeof hyperHost);
  if (profiling)
    lastIteration.clear();
  runSteps(iteration, loadBatch, /*optimizer=*/true);
  backend.copyOut(Stream::Compute, &gradNormHost,
                  address(uint32_t(gradNormBuffer)), 4);
  backend.synchronizeCompute();
  if (deviceTiming)
    resolveDeviceTimes();
  return lossSum();
}

float Executor::evaluate(int64_t iteration, const LoadBatch &loadBatch) {
  // Not training: no trace events (strata-inspect reads the schedule of an
  // iteration from them) and no kernel times.
  bool traced = tracing, profiled = profiling;
  tracing = profiling = false;
  runSteps(iteration, loadBatch, /*optimizer=*/false);
  tracing = traced;
  profiling = profiled;
  // Every stream, the gradients' reductions on the communication one too,
  // before the accumulators are zeroed.
  backend.synchronize();
  if (rank.gradRegion != kNoBuffer) {
    backend.fillZero(Stream::Compute, address(rank.gradRegion),
                     rank.buffers[rank.gradRegion].bytes);
    backend.synchronizeCompute();
  }
  return lossSum();
}

float Executor::lossSum() const {
  float sum = 0;
  for (float value : lossHost)
    sum += value;
  return sum;
}

void Executor::runSteps(int64_t iteration, const LoadBatch &loadBatch,
                        bool optimizer) {
  lossHost.clear();
  lossHost.reserve(rank.schedule.size());
  std::vector<size_t> pending; // steps whose sends are not yet posted
  for (size_t s = 0; s < rank.schedule.size(); ++s) {
    const Step &step = rank.schedule[s];
    const Program &program = rank.programs[step.program];
    const ProgramInfo &info = programs[step.program];
    if (exchangePoint[s])
      exchangeAt(s, pending);
    if (!optimizer && program.phase == Phase::Optimizer)
      continue;
    if (program.phase == Phase::Optimizer && iteration == poisonAt &&
        rank.gradRegion != kNoBuffer) {
      // After every reduction into the gradients: all of them, so that
      // each element's owner (the distributed optimizer) sees one. 0x7f80
      // is inf as bf16; twice, a nan as f32.
      backend.synchronize();
      std::vector<uint16_t> infinite(rank.buffers[rank.gradRegion].bytes / 2,
                                     0x7f80);
      backend.copyIn(Stream::Compute, address(rank.gradRegion), infinite.data(),
                     infinite.size() * 2);
      backend.synchronizeCompute(); // `infinite` is read by then
      poisonAt = -1;
    }
    backend.noteStep(program, step);
    if (step.microbatch >= 0 && info.readsBatch)
      loadBatch(step.microbatch);
    double start = tracing ? now() : 0;
    uint32_t startMark = tracing && deviceTiming ? mark() : 0;
    size_t first = trace.size();
    stepWaitSeconds = 0;
    runBody(step);
    if (program.bodyEnd < program.instructions.size())
      pending.push_back(s);
    if (info.writesLoss) {
      lossHost.push_back(0);
      backend.copyOut(Stream::Compute, &lossHost.back(),
                      address(uint32_t(loss)), 4);
    }
    if (tracing) {
      // A step's name as the schedule simulator writes it (F3.1:
      // microbatch 3 on chunk 1), M3 a whole microbatch, then optimizer.
      TraceEvent event;
      event.step = true;
      event.name = stepName(program, step.microbatch);
      event.phase = phaseName(program.phase);
      event.chunk = program.chunk;
      event.microbatch = step.microbatch;
      event.iteration = iteration;
      event.startUs = start;
      event.durationUs = now() - start;
      event.waitUs = stepWaitSeconds * 1e6;
      // Before its instructions, as trace viewers like them.
      trace.insert(trace.begin() + first, std::move(event));
      if (deviceTiming) {
        for (auto it = spans.rbegin();
             it != spans.rend() && it->traceEvent >= int64_t(first); ++it)
          ++it->traceEvent;
        TimedSpan stepSpan;
        stepSpan.begin = startMark;
        stepSpan.end = mark();
        stepSpan.traceEvent = int64_t(first);
        spans.push_back(stepSpan);
      }
    }
  }
  exchangeAt(rank.schedule.size(), pending);
}

float Executor::gradNorm() { return gradNormHost; }

void Executor::enableTrace(std::chrono::steady_clock::time_point at) {
  tracing = true;
  deviceTiming = backend.timesDevice();
  epoch = at;
  backend.traceCommunication(at);
}

std::vector<TraceEvent> Executor::takeTrace() { return std::move(trace); }

double Executor::exposedCommunicationSeconds() const {
  return computeCollectiveSeconds + backend.exposedSeconds();
}

} // namespace strata::runtime
