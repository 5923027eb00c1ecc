//===- Prediction.cpp - a plan's iteration on a modelled cluster ----------===//
#include "runtime/predict/Prediction.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/Text.h"
#include "runtime/exec/Executor.h"
#include "runtime/cluster/Calibration.h"
#include "runtime/predict/ModelledNetwork.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <set>

namespace strata::runtime::predict {

std::vector<uint32_t> simulatedRanks(const Plan &plan, bool everyRank) {
  std::vector<uint32_t> ranks;
  if (everyRank) {
    for (uint32_t r = 0; r < plan.world(); ++r)
      ranks.push_back(r);
    return ranks;
  }
  for (uint32_t stage = 0; stage < plan.pipelineParallel; ++stage)
    ranks.push_back(plan.firstRankOf(stage));
  return ranks;
}

std::string loadForPrediction(
    const std::vector<uint8_t> &bytes, bool everyRank, Plan &plan,
    const std::function<std::string(const Plan &)> &check) {
  LoadOptions header;
  header.ranks = std::vector<uint32_t>{};
  if (std::string error = loadPlanFromBytes(bytes, plan, header);
      !error.empty())
    return error;
  if (check)
    if (std::string error = check(plan); !error.empty())
      return error;
  LoadOptions load;
  load.ranks = simulatedRanks(plan, everyRank);
  plan = Plan();
  return loadPlanFromBytes(bytes, plan, load);
}

std::string predictIteration(const Plan &plan, const ClusterSpec &spec,
                             const PredictOptions &options, Prediction &out) {
  out = Prediction();
  out.timeline = std::make_unique<Timeline>();
  Timeline &timeline = *out.timeline;
  timeline.setWakeSeconds(spec.gpu.streamWakeSeconds);
  CostModel costs(spec, options.freeCommunication);
  std::vector<uint32_t> ranks = simulatedRanks(plan, options.everyRank);
  Rendezvous shared(timeline, costs, std::set<int>(ranks.begin(), ranks.end()));
  // Counted from here: a calibration may have served other predictions.
  size_t hits = options.calibration ? options.calibration->hits : 0,
         misses = options.calibration ? options.calibration->misses : 0;
  for (uint32_t rank : ranks) {
    if (!plan.ranks.count(rank))
      return "rank " + std::to_string(rank) + " is not loaded";
    ModelledDevice device(timeline, costs, options.calibration, int(rank));
    ModelledNetwork network(shared, device);
    Executor executor(plan, rank, device, network);
    if (std::string error = executor.load(); !error.empty())
      return "rank " + std::to_string(rank) + ": " + error;
    executor.runIteration(1, Hyper(), [](int64_t) {});
    device.endSteps();
    RankPrediction &r = out.ranks.emplace_back();
    uint32_t compute = device.lane(Stream::Compute),
             gemm = timeline.label("gemm");
    r.computeLane = compute;
    for (uint32_t i = 0; i < timeline.size(compute); ++i) {
      const Op &op = timeline.op({compute, i});
      if (op.optimizer && (op.work == Work::Compute || op.work == Work::Memory))
        r.optimizerSeconds += op.seconds;
      if (op.label == gemm)
        r.gemmSeconds += op.seconds;
    }
    r.rank = rank;
    r.stage = plan.stageOf(rank);
    for (int a = 0; a < kArenas; ++a)
      r.arenaBytes[a] = device.arenaBytes(Arena(a));
    out.bf16 |= device.multipliesBf16();
  }
  if (std::string error = shared.unmatched(); !error.empty())
    return error;
  if (options.calibration) {
    out.measured = options.calibration->hits - hits;
    out.modelled = options.calibration->misses - misses;
  }
  for (uint32_t lane = 0; lane < timeline.lanes(); ++lane)
    out.operations += timeline.size(lane);
  if (std::string error = timeline.solve(); !error.empty())
    return error;
  out.iterationSeconds = timeline.makespan();
  // Steps are spans of a compute lane: each rank's last before its
  // optimizer ends its pipeline.
  std::map<uint32_t, RankPrediction *> byLane;
  for (RankPrediction &r : out.ranks) {
    byLane[r.computeLane] = &r;
    r.uses = timeline.attribute(r.computeLane, out.iterationSeconds);
  }
  for (const StepSpan &step : timeline.steps()) {
    OpRef last{step.lane, step.end - 1};
    if (!timeline.op(last).optimizer) {
      double &end = byLane.at(step.lane)->pipelineEndSeconds;
      end = std::max(end, timeline.end(last));
    }
  }
  return "";
}

sim::Costs pipelineWorkCosts(const Prediction &prediction, int chunks) {
  sim::Costs costs;
  const Timeline &timeline = *prediction.timeline;
  std::vector<double> *of[] = {&costs.chunkForward, &costs.chunkBackward,
                               &costs.chunkWeight};
  std::vector<int> counted[3];
  for (int phase = 0; phase < 3; ++phase) {
    of[phase]->assign(size_t(chunks), 0);
    counted[phase].assign(size_t(chunks), 0);
  }
  for (const StepSpan &step : timeline.steps()) {
    if (step.chunk < 0 || step.chunk >= chunks || step.phase > 2)
      continue;
    double seconds = 0;
    for (uint32_t i = step.begin; i < step.end; ++i) {
      const Op &op = timeline.op({step.lane, i});
      if (op.work == Work::Compute || op.work == Work::Memory ||
          op.work == Work::TensorComm)
        seconds += op.seconds;
    }
    (*of[step.phase])[size_t(step.chunk)] += seconds;
    ++counted[step.phase][size_t(step.chunk)];
  }
  for (int phase = 0; phase < 3; ++phase)
    for (int c = 0; c < chunks; ++c)
      if (int n = counted[phase][size_t(c)])
        (*of[phase])[size_t(c)] /= n;
  costs.transfer = timeline.meanTransferSeconds();
  return costs;
}

namespace {

std::string format(const char *pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

/// "compute 1.3 ms (86.7%, gemms 0.9 ms, the optimizer 0.1 ms), ...": ms to
/// three significant digits.
std::string usesText(const std::array<double, kUses> &uses, double total,
                     double gemms, double optimizer) {
  std::string text;
  for (int u = 0; u < kUses; ++u)
    text += std::string(u ? ", " : "") + useName(Use(u)) + " " +
            format("%.3g ms", uses[u] * 1e3) + " (" +
            format("%.1f%%", total > 0 ? 100 * uses[u] / total : 0) +
            (u == int(Use::Compute)
                 ? ", gemms " + format("%.3g ms", gemms * 1e3) +
                       ", the optimizer " + format("%.3g ms", optimizer * 1e3)
                 : "") +
            ")";
  return text;
}

} // namespace

std::string describePrediction(const Plan &plan, const ClusterSpec &spec,
                               const Prediction &p) {
  double seconds = p.iterationSeconds;
  auto perGpu = [&](double flops) {
    return seconds > 0 ? flops / seconds / 1e12 / double(plan.world()) : 0;
  };
  double tflops = perGpu(plan.paperFlopsPerIteration),
         modelTflops = perGpu(plan.flopsPerIteration);
  double peak = spec.gpu.peakFlops.at(p.bf16 ? "bf16" : "fp32");
  int64_t nodes = (int64_t(plan.world()) + spec.gpusPerNode - 1) /
                  spec.gpusPerNode;
  std::string text =
      "predicted on " + spec.name + " (" + spec.gpu.name + "): " +
      std::to_string(plan.world()) + " GPUs on " + std::to_string(nodes) +
      " node(s), " + plan.layoutText() + "; " +
      std::to_string(p.ranks.size()) + " rank(s) simulated" +
      (p.ranks.size() < plan.world() ? " (one per pipeline stage, standing "
                                       "for its tensor and data ranks)"
                                     : "") +
      ", " + withThousands(p.operations) + " operations\n";
  if (p.measured + p.modelled > 0)
    text += "calibration: " + withThousands(p.measured) + " of " +
            withThousands(p.measured + p.modelled) +
            " gemms and kernels issued took their measured time, the rest "
            "the model's\n";
  char line[512];
  std::snprintf(line, sizeof line,
                " iteration %8d/%8d | consumed samples: %12lld | elapsed "
                "time per iteration (ms): %.1f | throughput per GPU "
                "(TFLOP/s/GPU): %.1f | global batch size: %5lld |\n",
                1, 1, (long long)plan.globalBatchSize, seconds * 1e3, tflops,
                (long long)plan.globalBatchSize);
  text += line;
  text += "throughput: " + format("%.1f", tflops) +
          " TFLOP/s per GPU by the paper's count (the layers' forward "
          "counted again, as full recomputation runs it, whatever this plan "
          "recomputes), " +
          format("%.1f%%", 100 * tflops * 1e12 / peak) + " of the GPU's " +
          (p.bf16 ? "bf16" : "fp32") + " peak; " + format("%.1f", modelTflops) +
          " by the model's (3 x the forward)\n";
  std::array<double, kUses> mean{};
  double optimizer = 0, gemms = 0;
  for (const RankPrediction &r : p.ranks) {
    for (int u = 0; u < kUses; ++u)
      mean[u] += r.uses[u] / double(p.ranks.size());
    optimizer += r.optimizerSeconds / double(p.ranks.size());
    gemms += r.gemmSeconds / double(p.ranks.size());
  }
  text += "breakdown of the " + format("%.4g ms", seconds * 1e3) +
          " (mean over the simulated ranks): " +
          usesText(mean, seconds, gemms, optimizer) + "\n";
  for (const RankPrediction &r : p.ranks) {
    text += "stage " + std::to_string(r.stage) + " (rank " +
            std::to_string(r.rank) + "): " +
            usesText(r.uses, seconds, r.gemmSeconds, r.optimizerSeconds) +
            "; its last forward or backward ends at " +
            format("%.3g ms", r.pipelineEndSeconds * 1e3) +
            "; memory " + humanBytes(r.arenaBytes[0]) + " persistent + " +
            humanBytes(r.arenaBytes[1]) + " workspace + " +
            humanBytes(r.arenaBytes[2]) + " stash = " +
            humanBytes(r.peakBytes()) + " (" + withThousands(r.peakBytes()) +
            " bytes)" +
            (int64_t(r.peakBytes()) > spec.gpu.hbmBytes
                 ? " (more than the GPU's " +
                       humanBytes(uint64_t(spec.gpu.hbmBytes)) + ")"
                 : "") +
            "\n";
  }
  return text;
}

std::string predictionTrace(const Prediction &p) {
  const Timeline &timeline = *p.timeline;
  // Labels (fused kernels' names) have no bound: no fixed buffers.
  auto span = [](const std::string &name, int pid, unsigned tid,
                 double begin, double end) {
    char times[96];
    std::snprintf(times, sizeof times, "\"ts\":%.3f,\"dur\":%.3f}",
                  begin * 1e6, (end - begin) * 1e6);
    return ",\n{\"name\":" + jsonString(name) +
           ",\"ph\":\"X\",\"pid\":" + std::to_string(pid) +
           ",\"tid\":" + std::to_string(tid) + "," + times;
  };
  auto threadName = [](int pid, unsigned tid, const char *name) {
    return "{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":" +
           std::to_string(pid) + ",\"tid\":" + std::to_string(tid) +
           ",\"args\":{\"name\":\"" + name + "\"}}";
  };
  // A rank's lanes are tracks 0, 1, ... in the order they were added (its
  // streams'), named as the timeline names them less the rank; its steps
  // the track after them.
  std::string json = "{\"traceEvents\":[\n";
  std::map<int, unsigned> tracksOfRank;
  for (uint32_t lane = 0; lane < timeline.lanes(); ++lane) {
    int pid = timeline.rankOf(lane);
    unsigned tid = tracksOfRank[pid]++;
    std::string name = timeline.laneName(lane);
    std::string prefix = "rank " + std::to_string(pid) + " ";
    if (name.rfind(prefix, 0) == 0)
      name = name.substr(prefix.size());
    json += (lane ? ",\n" : "") + threadName(pid, tid, name.c_str());
    for (uint32_t i = 0; i < timeline.size(lane); ++i) {
      OpRef at{lane, i};
      const Op &op = timeline.op(at);
      double begin = timeline.start(at), end = timeline.end(at);
      if (op.work == Work::Record || op.work == Work::Wait || end <= begin)
        continue;
      json += span(timeline.labels()[op.label], pid, tid, begin, end);
    }
  }
  for (const auto &[pid, tracks] : tracksOfRank)
    json += ",\n" + threadName(pid, tracks, "steps");
  for (const StepSpan &step : timeline.steps()) {
    int pid = timeline.rankOf(step.lane);
    json += span(timeline.labels()[step.label], pid, tracksOfRank[pid],
                 timeline.start({step.lane, step.begin}),
                 timeline.end({step.lane, step.end - 1}));
  }
  json += "\n]}\n";
  return json;
}

} // namespace strata::runtime::predict
