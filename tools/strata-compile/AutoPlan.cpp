//===- AutoPlan.cpp - strata-compile --auto: the layout to train with -----===//
#include "tools/strata-compile/AutoPlan.h"
#include "runtime/base/Text.h"
#include "runtime/base/WholeFile.h"
#include "runtime/cluster/ClusterSpec.h"
#include "runtime/plan/Plan.h"
#include "runtime/predict/CostModel.h"
#include "runtime/predict/Prediction.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <sstream>
#include <thread>

namespace strata {

namespace {

struct LayoutChoice {
  int64_t t = 1, p = 1, d = 1, chunks = 1, mbs = 1;
  Recompute recompute = Recompute::None;
  bool sp = false, distopt = false;
  /// The backward cut in two under a zero-bubble order, instead of 1F1B or
  /// the interleaved schedule: zb-auto's with one chunk a stage, ZB-V's
  /// with two.
  bool zeroBubble = false;

  /// The schedule `--pipeline-schedule` names ("" for the default).
  const char *schedule() const {
    return !zeroBubble ? "" : chunks == 2 ? "zb-v" : "zb-auto";
  }
  /// Its name in reports, and its twin's (the other family's).
  const char *scheduleTitle(bool twin = false) const {
    bool zb = zeroBubble != twin;
    return chunks == 2 ? (zb ? "ZB-V" : "interleaved")
                       : (zb ? "zb-auto" : "1F1B");
  }

  std::string name() const {
    return "t" + std::to_string(t) + " p" + std::to_string(p) + " v" +
           std::to_string(chunks) + " d" + std::to_string(d) + " mbs" +
           std::to_string(mbs) + " recompute-" + recomputeName(recompute) +
           (sp ? " sp" : "") + (distopt ? " distopt" : "") +
           (zeroBubble ? " zb" : "");
  }
  bool operator==(const LayoutChoice &o) const {
    return t == o.t && p == o.p && d == o.d && chunks == o.chunks &&
           mbs == o.mbs && recompute == o.recompute && sp == o.sp &&
           distopt == o.distopt && zeroBubble == o.zeroBubble;
  }
  /// The same layout under the other family of schedules.
  bool scheduleTwinOf(const LayoutChoice &o) const {
    LayoutChoice other = o;
    other.zeroBubble = !o.zeroBubble;
    return *this == other;
  }
  /// Whether this layout needs at least `o`'s memory on every stage: the
  /// same sizes, chunks and recomputation, a micro-batch as large or
  /// larger, and neither sequence parallelism nor the distributed
  /// optimizer where `o` has not got them (each of those only adds to
  /// what a stage keeps: checked against the compiler's figures over 204
  /// layouts of GPT-3 175B and every layout of gpt-tiny and llama-tiny on
  /// 4 GPUs). Not so recomputation: selective's buffers for the
  /// recomputed attention can outweigh what it saves on a small model
  /// (gpt-tiny t1 p1 mbs1: 4,593,028 bytes with it, 4,580,808 without).
  bool needsAtLeast(const LayoutChoice &o) const {
    return t == o.t && p == o.p && d == o.d && chunks == o.chunks &&
           mbs >= o.mbs && recompute == o.recompute && (o.sp || !sp) &&
           (o.distopt || !distopt) && zeroBubble == o.zeroBubble;
  }
  /// Whether this layout is `o` recomputing more: it does all of `o`'s
  /// work and more, in the same schedule, so it is not faster (every
  /// layout of gpt-tiny on 4 GPUs, no exception; auto-plan.test checks
  /// the top). Not so sequence parallelism or the distributed optimizer,
  /// which trade work for collectives: either can be slower (gpt-tiny t4
  /// full recomputation: 4.13 ms with sp, 3.83 without; GPT-3 175B t2 p2
  /// mbs2 full: 23.93 s with distopt, 23.73 without).
  bool slowerTwinOf(const LayoutChoice &o) const {
    return t == o.t && p == o.p && d == o.d && chunks == o.chunks &&
           mbs == o.mbs && sp == o.sp && distopt == o.distopt &&
           zeroBubble == o.zeroBubble && kept(recompute) < kept(o.recompute);
  }
  /// How much of a layer's activations a recomputation keeps.
  static int kept(Recompute recompute) {
    return recompute == Recompute::None        ? 2
           : recompute == Recompute::Selective ? 1
                                               : 0;
  }
};

/// "t8,p8,v2,mbs1,full,sp,distopt" (d follows from the GPUs; v, mbs and
/// the rest default to 1, none and off); "" or what is wrong.
std::string parseLayout(const std::string &text, int64_t gpus,
                        LayoutChoice &out) {
  std::stringstream words(text);
  std::string word;
  auto number = [&](const std::string &w, size_t from, int64_t &field) {
    try {
      size_t used = 0;
      long long value = std::stoll(w.substr(from), &used);
      // Past any layout strata plans: not a layout (and no overflow).
      if (used != w.size() - from || value < 1 || value > kMaxWorldSize)
        return false;
      field = value;
      return true;
    } catch (...) {
      return false;
    }
  };
  while (std::getline(words, word, ',')) {
    bool ok = true;
    if (std::optional<Recompute> recompute = parseRecompute(word))
      out.recompute = *recompute;
    else if (word == "sp")
      out.sp = true;
    else if (word == "distopt")
      out.distopt = true;
    else if (word == "zb")
      out.zeroBubble = true;
    else if (word.rfind("mbs", 0) == 0)
      ok = number(word, 3, out.mbs);
    else if (!word.empty() && (word[0] == 't' || word[0] == 'p' ||
                               word[0] == 'v' || word[0] == 'd'))
      ok = number(word, 1,
                  word[0] == 't'   ? out.t
                  : word[0] == 'p' ? out.p
                  : word[0] == 'v' ? out.chunks
                                   : out.d);
    else
      ok = false;
    if (!ok)
      return "--explain: '" + word +
             "' is not part of a layout (tN, pN, vN, "
             "dN, mbsN, none, selective, full, sp, distopt, zb; as in "
             "t8,p8,v2,mbs1,full,sp,distopt)";
  }
  if (out.t * out.p <= gpus && out.d == 1)
    out.d = std::max<int64_t>(1, gpus / (out.t * out.p));
  return "";
}

struct Candidate {
  LayoutChoice layout;
  CompileOptions options;
  double bound = 0;    // seconds no simulation of it can beat
  std::string verdict; // why it was rejected ("" if not)
  bool simulated = false;
  double seconds = 0, tflops = 0;
  uint64_t peakBytes = 0;
  std::array<double, runtime::predict::kUses> uses{};
  std::vector<uint8_t> bytes; // kept for the best only
};

std::string gib(uint64_t bytes) { return runtime::humanBytes(bytes); }

std::string format(const char *pattern, double value) {
  char text[64];
  std::snprintf(text, sizeof text, pattern, value);
  return text;
}

/// TFLOP/s as Megatron prints them, one decimal; three significant digits
/// below 10 (a CPU's, strata-fit-cpu's spec, is a few hundredths).
std::string tflopsText(double tflops) {
  return format(tflops < 10 ? "%.3g" : "%.1f", tflops);
}

/// The layouts of `gpus` for the model: every factorization with tensor
/// sizes that are powers of two within a node.
std::vector<LayoutChoice> enumerate(int64_t gpus, int64_t layers, int64_t node,
                                    int64_t globalBatch) {
  std::vector<LayoutChoice> all;
  for (int64_t t = 1; t <= std::min(gpus, node); t *= 2) {
    if (gpus % t)
      continue;
    for (int64_t p = 1; p <= std::min(layers, gpus / t); ++p) {
      if (layers % p || (gpus / t) % p)
        continue;
      int64_t d = gpus / (t * p);
      std::vector<int64_t> chunkChoices = {1};
      for (int64_t k = 2; p > 1 && k <= layers / p; ++k)
        if ((layers / p) % k == 0)
          chunkChoices.push_back(k);
      for (int64_t chunks : chunkChoices)
        for (int64_t mbs = 1; mbs <= 16; mbs *= 2) {
          if (globalBatch % (d * mbs))
            continue;
          for (Recompute recompute :
               {Recompute::None, Recompute::Selective, Recompute::Full})
            // Sequence parallelism and the distributed optimizer first:
            // among layouts of equal bound they need the least memory, and
            // one that does not fit rules out those that need more.
            for (bool sp : {true, false})
              for (bool distopt : {true, false})
                // A zero-bubble schedule where one chunk a stage pipelines
                // (zb-auto) or two (ZB-V).
                for (bool zeroBubble : {false, true}) {
                  if ((sp && t == 1) || (distopt && d == 1) ||
                      (zeroBubble && (p == 1 || chunks > 2)))
                    continue;
                  all.push_back({t, p, d, chunks, mbs, recompute, sp, distopt,
                                 zeroBubble});
                }
        }
    }
  }
  return all;
}

CompileOptions optionsOf(const CompileOptions &base, const LayoutChoice &l,
                         int64_t layers) {
  CompileOptions o = base;
  o.tensorParallel = l.t;
  o.pipelineParallel = l.p;
  o.dataParallel = l.d;
  o.microBatchSize = l.mbs;
  o.layersPerVirtualStage = l.chunks > 1 ? layers / (l.p * l.chunks) : 0;
  o.recompute = l.recompute;
  o.recomputeWholeLayers =
      base.recomputeWholeLayers && l.recompute == Recompute::Full;
  o.sequenceParallel = l.sp;
  o.distributedOptimizer = l.distopt;
  o.pipelineSchedule = l.schedule();
  return o;
}

} // namespace

int autoPlan(const AutoPlanRequest &request, const CompileOptions &base,
             const ModelStats &stats, const CompileCandidate &compile,
             const std::string &output, std::ostream &out, std::ostream &err) {
  using namespace runtime;
  auto fail = [&](const std::string &message) {
    err << "strata-compile: error: " << message << "\n";
    return 1;
  };
  auto started = std::chrono::steady_clock::now();
  ClusterSpec spec;
  if (std::string error = loadClusterSpec(request.clusterPath, spec);
      !error.empty())
    return fail(error);
  if (request.gpus < 1 || request.gpus > kMaxWorldSize)
    return fail("--gpus must be between 1 and " +
                std::to_string(kMaxWorldSize));
  if (request.top < 1 || request.top > 100)
    return fail("--top must be between 1 and 100");
  if (stats.layers < 1)
    return fail("--auto needs a model with layers (a model file)");
  LayoutChoice wanted;
  bool explaining = !request.explain.empty();
  if (explaining)
    if (std::string error = parseLayout(request.explain, request.gpus, wanted);
        !error.empty())
      return fail(error);

  // Every layout, with a bound: the GPU's share of the FLOPs (with the
  // forward recomputed under full recomputation) at the spec's gemm rate,
  // stretched by the bubble of its schedule, (p - 1) / (v m).
  double peak = spec.gpu.peakFlops.at(base.bf16 ? "bf16" : "fp32") *
                spec.gpu.gemmEfficiency;
  predict::CostModel costs(spec);
  std::vector<Candidate> candidates;
  for (const LayoutChoice &l :
       enumerate(request.gpus, stats.layers, spec.gpusPerNode,
                 base.globalBatchSize)) {
    Candidate &c = candidates.emplace_back();
    c.layout = l;
    c.options = optionsOf(base, l, stats.layers);
    double microbatches = double(base.globalBatchSize) / double(l.d * l.mbs);
    // The matmuls' FLOPs alone (attention's kernels do less than the
    // counted full score matrix when causal), forward and backward, and
    // their forward again under full recomputation; ModelStats counts a
    // microbatch of the model's own micro-batch size.
    double matmuls = double(stats.forwardFlops - stats.attentionFlops);
    double flops = (3 * matmuls + (l.recompute == Recompute::Full
                                       ? matmuls - double(stats.logitFlops)
                                       : 0)) *
                   double(base.globalBatchSize) / double(base.microBatchSize);
    // Tensor parallelism's all-reduces (or reduce-scatter and all-gather
    // pairs) run on the compute stream: two a layer forward, two backward,
    // two more when the forward is recomputed, each of a micro-batch's
    // activations, within a node.
    double tensorComm = 0;
    if (l.t > 1 && stats.hidden > 0) {
      std::vector<int> group;
      for (int64_t r = 0; r < l.t; ++r)
        group.push_back(int(r));
      double bytes = double(l.mbs) * double(stats.seqLength) *
                     double(stats.hidden) * (base.bf16 ? 2 : 4);
      double perLayer = l.recompute == Recompute::Full ? 6 : 4;
      tensorComm = microbatches * double(stats.layers) / double(l.p) *
                   perLayer *
                   costs.collective(CollectiveKind::AllReduceSum, group, bytes);
    }
    // Stretched by the schedule's bubble as it is for equal stages; a
    // zero-bubble order still waits (p - 1) forwards of a chunk for the
    // first to reach the last stage, at least a quarter of a chunk's
    // microbatch work (B and W cost at most three forwards, one of them
    // recomputed).
    double bubble =
        l.zeroBubble
            ? double(l.p - 1) / (4 * double(l.chunks) * microbatches)
            : double(l.p - 1) / (double(l.chunks) * microbatches);
    c.bound = (flops / double(request.gpus) / peak + tensorComm) * (1 + bubble);
    if (std::string error = checkOptions(c.options); !error.empty()) {
      c.verdict = error;
      continue;
    }
    // What no stage can do without, before compiling: its share of the
    // parameters (the largest stage holds at least the mean) with their
    // gradients (fp32), masters and Adam's moments (fp32, split over the
    // data-parallel ranks with the distributed optimizer).
    double state = base.bf16 ? 12 : 8,
           perParam = (base.bf16 ? 2 : 4) + 4 +
                      (l.distopt ? state / double(l.d) : state);
    double least = double(stats.parameters) / double(l.t * l.p) * perParam;
    // And each layer's input, kept for the backward whatever is
    // recomputed, for the microbatches the first stage has in flight (1F1B
    // keeps up to p; split over the tensor ranks with sequence parallelism).
    double layerInput = double(l.mbs) * double(stats.seqLength) *
                        double(stats.hidden) * (base.bf16 ? 2 : 4) /
                        double(l.sp ? l.t : 1);
    least += std::min(double(l.p), microbatches) * double(stats.layers) /
             double(l.p) * layerInput;
    if (least > double(spec.gpu.hbmBytes))
      c.verdict = "needs at least " + gib(uint64_t(least)) +
                  " for its parameters, gradients, optimizer state and "
                  "layer inputs; " +
                  spec.gpu.name + " has " + gib(uint64_t(spec.gpu.hbmBytes));
  }
  if (explaining &&
      std::none_of(candidates.begin(), candidates.end(),
                   [&](const Candidate &c) { return c.layout == wanted; }))
    return fail("--explain: " + wanted.name() + " is not a layout of " +
                std::to_string(request.gpus) + " GPUs for a global batch of " +
                std::to_string(base.globalBatchSize) +
                " (d = GPUs / (t p), the micro-batch times d must divide "
                "the batch, v must divide the layers of a stage, t is a "
                "power of two within a node, zb needs p > 1 and v of 1, "
                "zb-auto's, or 2, ZB-V's)");
  std::vector<Candidate *> order;
  for (Candidate &c : candidates)
    order.push_back(&c);
  std::stable_sort(order.begin(), order.end(),
                   [](const Candidate *a, const Candidate *b) {
                     return a->bound < b->bound;
                   });

  // Compile and simulate in the bound's order; a layout whose bound is
  // slower than the K-th best simulated is left out.
  std::vector<Candidate *> best; // simulated, fastest first
  size_t compiled = 0, simulatedCount = 0, pruned = 0;
  // Layouts the compiler's figure did not fit: any layout that needs at
  // least as much is rejected without compiling it.
  std::vector<const Candidate *> tooLarge;
  auto outgrows = [&](Candidate &c) {
    for (const Candidate *large : tooLarge)
      if (c.layout.needsAtLeast(large->layout)) {
        c.verdict = "needs at least the " + gib(large->peakBytes) + " of " +
                    large->layout.name() +
                    " on its largest stage (a larger micro-batch, no "
                    "sequence parallelism or no distributed optimizer "
                    "only adds); " +
                    spec.gpu.name + " has " + gib(uint64_t(spec.gpu.hbmBytes));
        return true;
      }
    return false;
  };
  // One candidate compiled, its simulated ranks loaded, its memory checked
  // against the GPU's and its iteration simulated; it touches `c` alone,
  // so that candidates are evaluated on several threads at once.
  enum class Outcome { Refused, TooLarge, Simulated };
  auto evaluate = [&](Candidate &c) {
    if (std::string error = compile(c.options, /*verify=*/false, spec, c.bytes);
        !error.empty()) {
      c.verdict = error;
      c.bytes.clear();
      return Outcome::Refused;
    }
    Plan plan;
    if (std::string error = predict::loadForPrediction(c.bytes, false, plan);
        !error.empty()) {
      c.verdict = "the plan does not load: " + error;
      return Outcome::Refused;
    }
    for (const auto &[rank, rankPlan] : plan.ranks)
      c.peakBytes = std::max(c.peakBytes, rankPlan.peakBytes());
    if (int64_t(c.peakBytes) > spec.gpu.hbmBytes) {
      c.verdict = "needs " + gib(c.peakBytes) + " on its largest stage; " +
                  spec.gpu.name + " has " + gib(uint64_t(spec.gpu.hbmBytes));
      c.bytes.clear();
      return Outcome::TooLarge;
    }
    predict::Prediction prediction;
    if (std::string e = predict::predictIteration(
            plan, spec, predict::PredictOptions(), prediction);
        !e.empty()) {
      c.verdict = "the simulation failed: " + e;
      return Outcome::Refused;
    }
    c.simulated = true;
    c.seconds = prediction.iterationSeconds;
    c.tflops =
        plan.paperFlopsPerIteration / c.seconds / 1e12 / double(request.gpus);
    for (const auto &r : prediction.ranks)
      for (int u = 0; u < predict::kUses; ++u)
        c.uses[u] += r.uses[u] / double(prediction.ranks.size());
    return Outcome::Simulated;
  };
  auto evaluateSafely = [&](Candidate &c) {
    try {
      return evaluate(c);
    } catch (const std::exception &error) {
      c.verdict = std::string("the compiler failed: ") + error.what();
      c.bytes.clear();
      return Outcome::Refused;
    }
  };
  // What an outcome tells the search (under the lock when threads run).
  auto record = [&](Candidate &c, Outcome outcome) {
    ++compiled;
    if (outcome == Outcome::TooLarge)
      tooLarge.push_back(&c);
    if (outcome != Outcome::Simulated)
      return;
    ++simulatedCount;
    // Its slower twins take its time as their bound.
    for (Candidate &other : candidates)
      if (other.layout.slowerTwinOf(c.layout))
        other.bound = std::max(other.bound, c.seconds);
    best.insert(std::upper_bound(best.begin(), best.end(), &c,
                                 [](const Candidate *a, const Candidate *b) {
                                   return a->seconds < b->seconds;
                                 }),
                &c);
    // Only the best plan's bytes are written.
    for (size_t i = 1; i < best.size(); ++i)
      std::vector<uint8_t>().swap(best[i]->bytes);
  };
  auto lastSaid = std::chrono::steady_clock::now();
  size_t looked = 0;
  bool stopped = false;
  // The layouts in the order of their bound, taken by as many threads as
  // the machine has cores: each compiles and simulates outside the lock. A
  // layout whose twin or memory twin is being evaluated waits for it (its
  // result may prune it), and the thread takes the next one meanwhile.
  // Which layouts a bound prunes can depend on which finished first; the
  // top K cannot (the bounds are lower bounds).
  std::mutex lock;
  std::condition_variable finished;
  std::vector<bool> taken(order.size(), false);
  std::vector<const Candidate *> inFlight;
  size_t cursor = 0; // the first layout not taken
  auto waitsFor = [&](const Candidate &c) {
    for (const Candidate *other : inFlight)
      if (c.layout.slowerTwinOf(other->layout) ||
          c.layout.needsAtLeast(other->layout))
        return true;
    return false;
  };
  auto work = [&] {
    std::unique_lock<std::mutex> held(lock);
    while (!stopped) {
      while (cursor < order.size() && taken[cursor])
        ++cursor;
      if (cursor == order.size())
        break;
      // A long search says how far it is, every 10 s.
      auto now = std::chrono::steady_clock::now();
      if (request.seconds > 0 &&
          std::chrono::duration<double>(now - started).count() >
              request.seconds) {
        stopped = true;
        break;
      }
      if (now - lastSaid > std::chrono::seconds(10)) {
        lastSaid = now;
        err << "auto-plan: " << looked << " of " << order.size()
            << " layouts looked at, " << compiled << " compiled, "
            << simulatedCount << " simulated"
            << (best.empty()
                    ? std::string()
                    : ", the best so far " + tflopsText(best.front()->tflops) +
                          " TFLOP/s per GPU")
            << "\n";
      }
      // The first layout not taken that need not wait, a few ahead at most.
      size_t at = cursor;
      for (size_t ahead = 0; at < order.size() && ahead < 64; ++at) {
        if (taken[at])
          continue;
        ++ahead;
        if (!waitsFor(*order[at]))
          break;
      }
      if (at == order.size() || taken[at] || waitsFor(*order[at])) {
        finished.wait(held);
        continue;
      }
      Candidate *c = order[at];
      taken[at] = true;
      ++looked;
      if (!c->verdict.empty() || outgrows(*c))
        continue;
      if (best.size() >= size_t(request.top) &&
          c->bound > best[size_t(request.top) - 1]->seconds) {
        ++pruned;
        continue;
      }
      inFlight.push_back(c);
      held.unlock();
      Outcome outcome = evaluateSafely(*c);
      held.lock();
      inFlight.erase(std::find(inFlight.begin(), inFlight.end(), c));
      record(*c, outcome);
      finished.notify_all();
    }
    finished.notify_all();
  };
  {
    unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
    std::vector<std::thread> workers;
    for (unsigned i = 1; i < threads; ++i)
      workers.emplace_back(work);
    work();
    for (std::thread &worker : workers)
      worker.join();
  }
  // --explain: a layout the bound or the time limit left out is simulated
  // to say where it ranks (and is the best if it beats them).
  Candidate *explained = nullptr;
  if (explaining) {
    for (Candidate &candidate : candidates)
      if (candidate.layout == wanted)
        explained = &candidate;
    if (explained->verdict.empty() && !explained->simulated &&
        !outgrows(*explained))
      record(*explained, evaluateSafely(*explained));
    // And its twin under the other schedule, to say which wins.
    for (Candidate &twin : candidates)
      if (twin.layout.scheduleTwinOf(wanted) && twin.verdict.empty() &&
          !twin.simulated && !outgrows(twin))
        record(twin, evaluateSafely(twin));
  }

  size_t rejected = 0;
  for (const Candidate &c : candidates)
    rejected += !c.verdict.empty();
  double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started)
          .count();
  out << "auto-plan: " << stats.name << " on " << request.gpus << " GPUs of "
      << spec.name << ", global batch " << base.globalBatchSize << ": "
      << candidates.size() << " layouts, " << rejected << " rejected, "
      << simulatedCount << " simulated, " << pruned
      << " left out by the bound (" << format("%.1f", seconds) << " s)\n";
  if (stopped)
    out << "stopped by --auto-seconds after " << looked << " of "
        << order.size()
        << " layouts (looked at in the order of their bound; the rest "
           "are not simulated)\n";
  auto line = [&](const Candidate &c) {
    std::string text = c.layout.name() + ": " + tflopsText(c.tflops) +
                       " TFLOP/s per GPU, " + format("%.3g", c.seconds) +
                       " s an iteration, " + gib(c.peakBytes) +
                       " on its largest stage;";
    for (int u = 0; u < predict::kUses; ++u)
      text += std::string(u ? "," : "") + " " +
              predict::useName(predict::Use(u)) + " " +
              format("%.1f%%", 100 * c.uses[u] / c.seconds);
    return text;
  };
  // Whether the zero-bubble schedule won, and by how much: the best
  // against its twin under the other schedule, where both were simulated.
  auto twinText = [&](const Candidate &c) -> std::string {
    if (c.layout.p == 1 || c.layout.chunks > 2)
      return "";
    for (const Candidate &other : candidates)
      if (other.layout.scheduleTwinOf(c.layout)) {
        const Candidate &zb = c.layout.zeroBubble ? c : other;
        const Candidate &plain = c.layout.zeroBubble ? other : c;
        if (!other.simulated)
          return "  its twin under " +
                 std::string(c.layout.scheduleTitle(true)) +
                 " was not simulated" +
                 (other.verdict.empty() ? " (left out by the bound)"
                                        : ": " + other.verdict) +
                 "\n";
        return "  " + std::string(zb.layout.scheduleTitle()) + " against " +
               plain.layout.scheduleTitle() + " on this layout: " +
               format("%+.1f%%", 100 * (plain.seconds / zb.seconds - 1)) +
               " throughput (" + format("%.3g", zb.seconds) + " s against " +
               format("%.3g", plain.seconds) + " s), " + gib(zb.peakBytes) +
               " against " + gib(plain.peakBytes) + " on the largest stage\n";
      }
    return "";
  };
  for (size_t i = 0; i < best.size() && i < size_t(request.top); ++i)
    out << " " << i + 1 << ". " << line(*best[i]) << "\n";
  if (!best.empty())
    out << twinText(*best.front());
  if (explained && !explained->verdict.empty()) {
    out << "explain " << explained->layout.name()
        << ": rejected: " << explained->verdict << "\n";
  } else if (explained) {
    size_t rank = 1 + size_t(std::find(best.begin(), best.end(), explained) -
                             best.begin());
    out << "explain " << explained->layout.name() << ": ranks " << rank
        << " of " << best.size() << " simulated; " << line(*explained) << "\n";
    if (best.front() != explained)
      out << "  against the best (" << best.front()->layout.name() << "): "
          << format("%.1f%%",
                    100 * (explained->seconds / best.front()->seconds - 1))
          << " slower\n"
          << twinText(*explained);
  }
  if (best.empty())
    return fail(
        "no layout of " + std::to_string(request.gpus) +
        " GPUs was simulated: " + std::to_string(rejected) + " rejected" +
        (stopped ? ", the rest not looked at within --auto-seconds" : "") +
        " (--explain with a layout says why one was rejected)");
  if (!output.empty() && output != "-") {
    // The plan written is compiled as any other is, verified after each
    // pass; the search's copy, compiled without, must be the same.
    std::vector<uint8_t> verified;
    if (std::string error =
            compile(best.front()->options, /*verify=*/true, spec, verified);
        !error.empty())
      return fail(best.front()->layout.name() +
                  " does not compile with the verifier on: " + error);
    if (verified != best.front()->bytes)
      return fail(best.front()->layout.name() +
                  " compiled to a different plan with the verifier on");
    if (std::string error = writeFileWhole(output, best.front()->bytes);
        !error.empty())
      return fail(error);
    out << "wrote " << output << " (" << best.front()->layout.name() << ", "
        << withThousands(best.front()->bytes.size()) << " bytes)\n";
  }
  return 0;
}

} // namespace strata
