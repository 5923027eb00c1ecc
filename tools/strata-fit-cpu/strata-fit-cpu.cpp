//===- strata-fit-cpu.cpp - a cluster spec of this machine's CPU ----------===//
//
//   strata-fit-cpu PLAN... [[--ranks N] -o SPEC]... [--threads N]
//                  [--passes P] [--name TEXT]
//
// Measures what `strata-run --backend sim` needs to predict strata-run's
// CPU ranks on this machine, and writes it as a cluster spec
// (runtime/cluster/ClusterSpec.h) in which a "GPU" is one CPU rank with N
// kernel threads (strata-run --threads N) and a "node" is this process:
// - the gemm rate: OpenBLAS sgemm through the CPU backend's own gemm on a
//   grid of shapes, fitted by least squares (relative error) to the
//   spec's model, a peak rate and a fixed cost per tile the equal of
//   gemm_k_overhead more of k (a tile is one element: no quantization);
// - memory bandwidth: the copy kernel over 1 MiB, read and written;
// - the launch overhead: a one-element kernel through the backend;
// - kernel_rates: every kernel the PLANs launch (each stage's first
//   rank's: a small model's), each distinct launch run alone at the
//   plan's shapes (up to 256 MiB of operands); a
//   kernel's rate is its work (exec/KernelCost.h) over its time, summed
//   over its launches as often as the plans make them. The kernels a
//   gemm's epilogue is priced as (add, gelu_fwd, sum_to) are measured too
//   when the plans launch none;
// - stream_wake_s: how long the CPU backend's stream that waits for
//   another's event takes to go on once it is recorded (and the compute
//   stream runs on the thread that issues: synchronous_compute);
// - the thread-to-thread link: two ranks as threads that compute and then
//   all-reduce over the ring of the local transport, as CPU ranks do, from
//   1 KiB to 4 MiB: what a round takes beyond the computing, as bus
//   bandwidth by size; the fastest is the link's rate, and half the
//   smallest's time the latency of one of its two steps.
// A measurement cycles through copies of its operands that together
// exceed a core's own caches, as a step's kernels find theirs, and takes
// the median of repeated calls. The whole is measured --passes times
// (3), each pass's kernels on the next core this process may use, each
// figure on each core the fastest of its passes: a shared machine slows
// now and then, a core at a time. Each -o SPEC is the spec for the
// --ranks N before it (1): ranks as threads go as fast as the slowest
// core they run on, so a figure is the slowest of the N fastest cores'.
//
//===----------------------------------------------------------------------===//
#include "runtime/base/WholeFile.h"
#include "runtime/cluster/ClusterSpec.h"
#include "runtime/comm/RingCollectives.h"
#include "runtime/comm/Transport.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/cpu/Kernels.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/plan/Hyper.h"
#include "runtime/plan/KernelCatalog.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>
#include <vector>

#include <malloc.h>
#include <sched.h>

using namespace strata::runtime;

namespace {

const char *kUsage =
    "usage: strata-fit-cpu PLAN... [[--ranks N] -o SPEC]... [--threads N]\n"
    "                      [--passes P] [--name TEXT]\n"
    "  measures this machine's CPU (gemm rate, memory bandwidth, launch\n"
    "  overhead, the rate of each kernel the PLANs launch, a stream's\n"
    "  wake-up, an all-reduce between two threads) and writes a cluster\n"
    "  spec for strata-run --backend sim (stdout without -o); --threads is\n"
    "  strata-run's (1); each figure is the fastest of --passes (3), a\n"
    "  pass's kernels on the next core; each -o is the spec for the\n"
    "  --ranks N before it (1): the slowest of the N fastest cores\n";

int fail(const std::string &message) {
  std::cerr << "strata-fit-cpu: error: " << message << "\n";
  return 1;
}

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// Spins for `seconds` (a rank's compute).
void spin(double seconds) {
  double until = now() + seconds;
  while (now() < until) {
  }
}

double median(std::vector<double> times) {
  size_t middle = times.size() / 2;
  std::nth_element(times.begin(), times.begin() + long(middle), times.end());
  return times[middle];
}

/// The median seconds of one call of `work`, over calls that together take
/// about `budget` seconds (at least 5, at most 2000), after one to warm.
double medianSeconds(const std::function<void()> &work, double budget = 0.02) {
  work();
  double start = now();
  work();
  double once = std::max(now() - start, 1e-7);
  int calls = int(std::clamp(budget / once, 5.0, 2000.0));
  std::vector<double> times;
  for (int i = 0; i < calls; ++i) {
    double t = now();
    work();
    times.push_back(now() - t);
  }
  return median(times);
}

/// Bytes the copies of a measurement's operands take together at least,
/// so that each call finds its operands out of the core's own caches, as
/// a training step's kernels do (a small model's step works on a few MiB).
constexpr double kRotatedBytes = 8 << 20;

/// How many copies of operands of `bytes` a measurement cycles through.
size_t copiesFor(double bytes) {
  return size_t(
      std::clamp(std::ceil(kRotatedBytes / std::max(bytes, 1.0)), 1.0, 64.0));
}

/// Where the copies of a measurement's operands lie, one after another:
/// allocated once for all the measurements (the first touch of fresh
/// memory costs more than the measurements themselves on a virtual
/// machine) and filled anew for each.
class Pool {
public:
  /// Starts a measurement that takes `total` floats in all.
  void start(size_t total) {
    if (total > floats.size())
      floats.resize(total);
    used = 0;
  }
  /// The next `count` of them.
  float *take(size_t count) {
    float *at = floats.data() + used;
    used += count;
    return at;
  }

private:
  std::vector<float> floats;
  size_t used = 0;
};

/// Fills `values` uniformly in [-1, 1): values a kernel's arithmetic
/// treats as any other (many MiB of them, so a cheap generator).
void fillRandom(float *values, size_t n, uint32_t &state) {
  for (size_t i = 0; i < n; ++i) {
    state ^= state << 13;
    state ^= state >> 17;
    state ^= state << 5;
    values[i] = float(state >> 8) * (2.0f / 16777216.0f) - 1.0f;
  }
}

/// A figure's time on each core it was measured on, the fastest of that
/// core's passes. Cores may differ for a while (a shared machine's), and
/// ranks as threads go as fast as the slowest core they run on: N ranks'
/// figure is the slowest of the N fastest cores.
class Timed {
public:
  void keep(size_t core, double seconds) {
    if (byCore.size() <= core)
      byCore.resize(core + 1, 0);
    double &kept = byCore[core];
    kept = kept > 0 ? std::min(kept, seconds) : seconds;
  }
  /// The figure for `ranks` ranks (the slowest measured if fewer cores).
  double forRanks(int ranks) const {
    std::vector<double> measured;
    for (double seconds : byCore)
      if (seconds > 0)
        measured.push_back(seconds);
    std::sort(measured.begin(), measured.end());
    return measured[std::min(size_t(ranks), measured.size()) - 1];
  }

private:
  std::vector<double> byCore;
};

//===----------------------------------------------------------------------===//
// Gemm
//===----------------------------------------------------------------------===//

struct GemmShape {
  int64_t m, n, k;
  Timed seconds;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

std::vector<GemmShape> gemmGrid() {
  std::vector<GemmShape> grid;
  for (int64_t m : {64, 128, 256, 512})
    for (int64_t n : {64, 128, 256, 512})
      for (int64_t k : {16, 64, 256, 512})
        grid.push_back({m, n, k});
  return grid;
}

void timeGemm(GemmShape &shape, size_t core, Pool &pool, uint32_t &state) {
  GemmOp op;
  op.m = shape.m;
  op.n = shape.n;
  op.k = shape.k;
  op.lda = shape.k;
  op.ldb = shape.n;
  op.ldd = shape.n;
  size_t a = size_t(shape.m * shape.k), b = size_t(shape.k * shape.n),
         d = size_t(shape.m * shape.n);
  size_t copies = copiesFor(4.0 * double(a + b + d));
  std::vector<std::array<float *, 3>> sets(copies);
  pool.start(copies * (a + b + d));
  for (std::array<float *, 3> &set : sets)
    for (size_t i = 0; i < 3; ++i) {
      size_t n = i == 0 ? a : i == 1 ? b : d;
      set[i] = pool.take(n);
      fillRandom(set[i], n, state);
    }
  size_t next = 0;
  shape.seconds.keep(core, medianSeconds(
                               [&] {
                                 auto [x, y, z] = sets[next];
                                 cpu::gemm(op, x, y, z, nullptr, nullptr);
                                 next = (next + 1) % copies;
                               },
                               0.005));
}

struct GemmFit {
  double peak = 0, kOverhead = 0;
  double worstError = 0; // the fit's largest relative error
};

/// t = F/P + (F/k)·(k0/P): linear in a = 1/P and b = k0/P, fitted to
/// minimize the squared relative error; the times `ranks` ranks see.
GemmFit fitGemm(const std::vector<GemmShape> &grid, int ranks) {
  // Normal equations of (F/t)·a + (F/(k t))·b ≈ 1.
  double saa = 0, sab = 0, sbb = 0, sa = 0, sb = 0;
  for (const GemmShape &g : grid) {
    double x = g.flops() / g.seconds.forRanks(ranks), y = x / double(g.k);
    saa += x * x;
    sab += x * y;
    sbb += y * y;
    sa += x;
    sb += y;
  }
  double det = saa * sbb - sab * sab;
  double a = det > 0 ? (sa * sbb - sb * sab) / det : 0,
         b = det > 0 ? (saa * sb - sab * sa) / det : 0;
  if (!(a > 0) || b < 0) { // no fixed cost measurable: the peak alone
    b = 0;
    a = sa / saa;
  }
  GemmFit fit;
  fit.peak = 1 / a;
  fit.kOverhead = b / a;
  for (const GemmShape &g : grid)
    fit.worstError = std::max(
        fit.worstError, std::abs((a * g.flops() + b * g.flops() / double(g.k)) /
                                     g.seconds.forRanks(ranks) -
                                 1));
  return fit;
}

//===----------------------------------------------------------------------===//
// Kernels
//===----------------------------------------------------------------------===//

/// The bytes of `operands` as the measurements hold them (f32 or i32).
double operandBytes(const std::vector<const Buffer *> &operands) {
  double bytes = 0;
  for (const Buffer *operand : operands)
    if (operand)
      bytes += double(operand->elements) * 4;
  return bytes;
}

/// A launch run alone: its operands on buffers of their own, several
/// copies of them used in turn.
class LoneLaunch {
public:
  LoneLaunch(const LaunchOp &op, const std::vector<const Buffer *> &operands,
             Pool &pool, uint32_t &state)
      : op(op), buffers(operands) {
    const KernelSpec &spec = kernelSpec(op.kernel);
    // Each operand's floats: the hyper operand has at least its slots.
    std::vector<size_t> counts;
    size_t total = 0;
    for (size_t i = 0; i < operands.size(); ++i) {
      size_t n = operands[i] ? size_t(operands[i]->elements) : 0;
      if (operands[i] && std::strcmp(spec.operands[i].name, "hyper") == 0) {
        hyper = i;
        n = std::max<size_t>(n, kHyperSlots);
      }
      counts.push_back(n);
      total += n;
    }
    sets.assign(copiesFor(operandBytes(operands)), {});
    pool.start(sets.size() * total);
    for (std::vector<void *> &pointers : sets)
      for (size_t i = 0; i < operands.size(); ++i)
        pointers.push_back(operands[i] ? fill(i, pool.take(counts[i]), state)
                                       : nullptr);
  }
  void run() {
    cpu::KernelArgs args{op, sets[next], buffers};
    next = (next + 1) % sets.size();
    cpu::kernelFunction(op.kernel)(args);
  }

private:
  /// Operand `i`'s values written at `values`.
  float *fill(size_t i, float *values, uint32_t &state) const {
    size_t n = size_t(buffers[i]->elements);
    if (buffers[i]->dtype == DType::I32) {
      std::memset(values, 0, n * 4); // ids 0: inside every table
    } else if (i == hyper) {
      Hyper settings;
      settings.lr = 1e-4;
      hyperValues(settings, values);
    } else {
      // Not negative: an optimizer's second moment never is (the square
      // root of a negative takes the library's slow path).
      fillRandom(values, n, state);
      for (size_t e = 0; e < n; ++e)
        values[e] = 0.1f * std::abs(values[e]);
    }
    return values;
  }

  const LaunchOp &op;
  std::vector<const Buffer *> buffers;
  size_t hyper = SIZE_MAX; // the optimizer's settings, if it reads them
  std::vector<std::vector<void *>> sets;
  size_t next = 0;
};

/// A distinct launch of the plans (or an epilogue's kernel).
struct Launch {
  const LaunchOp *op = nullptr;
  std::vector<const Buffer *> operands;
  int occurrences = 0;
  Timed seconds;
};

/// The key of a distinct launch: its kernel, every operand's shape and
/// dtype, and its attributes.
std::string launchKey(const LaunchOp &launch,
                      const std::vector<const Buffer *> &operands) {
  std::string key = kernelName(launch.kernel);
  for (const Buffer *operand : operands)
    key += operand ? " " + shapeText(operand->shape) + " " +
                         dtypeName(operand->dtype)
                   : std::string(" -");
  for (const AttrValue &attr : launch.attrs) {
    key += " " + std::to_string(attr.i) + "/" + std::to_string(attr.f);
    for (int64_t v : attr.list)
      key += "," + std::to_string(v);
  }
  return key;
}

/// The most bytes a launch's operands may take to be measured: a plan
/// travels, and one of a large model would have the tool allocate its
/// tensors (its kernels' rates come from its smaller launches).
constexpr double kMostMeasuredBytes = 256 << 20;

/// Every distinct launch of `rank`'s programs into `launches`; how many
/// were too large to measure.
int collectLaunches(const RankPlan &rank,
                    std::map<std::string, Launch> &launches) {
  int tooLarge = 0;
  for (const Program &program : rank.programs)
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const LaunchOp *op = program.instructions[i].launch();
      if (!op)
        continue;
      std::vector<const Buffer *> operands = launchOperands(rank, *op);
      if (operandBytes(operands) > kMostMeasuredBytes) {
        ++tooLarge;
        continue;
      }
      Launch &launch = launches[launchKey(*op, operands)];
      if (!launch.op) {
        launch.op = op;
        launch.operands = std::move(operands);
      }
      ++launch.occurrences;
    }
  return tooLarge;
}

/// A launch of `kernel` over f32 buffers of `shapes`, its attributes 0:
/// the kernels a gemm's epilogue is priced as, where no plan launches
/// them, and the copy and fill the memory and launch figures time.
struct LoneKernel {
  LaunchOp op;
  std::vector<Buffer> buffers;
};

std::unique_ptr<LoneKernel>
loneKernel(KernelId kernel, const std::vector<std::vector<int64_t>> &shapes) {
  auto made = std::make_unique<LoneKernel>();
  made->op.kernel = kernel;
  made->op.attrs.resize(kernelSpec(kernel).attrs.size());
  for (const std::vector<int64_t> &shape : shapes) {
    Buffer b;
    b.dtype = DType::F32;
    b.shape = shape;
    b.elements = 1;
    for (int64_t d : shape)
      b.elements *= d;
    b.bytes = b.elements * 4;
    made->buffers.push_back(b);
  }
  return made;
}

/// Work per second by kernel: each launch's work over its time, as often
/// as the plans make it.
std::map<std::string, double>
kernelRates(const std::map<std::string, Launch> &launches, int ranks) {
  std::map<std::string, std::pair<double, double>> sums; // work, seconds
  for (const auto &[key, launch] : launches) {
    KernelWork work =
        kernelWork(*launch.op, launch.operands.data(), launch.operands.size());
    auto &[totalWork, seconds] = sums[kernelName(launch.op->kernel)];
    totalWork += work.work * launch.occurrences;
    seconds += launch.seconds.forRanks(ranks) * launch.occurrences;
  }
  std::map<std::string, double> rates;
  for (const auto &[kernel, sum] : sums)
    if (sum.first > 0 && sum.second > 0)
      rates[kernel] = sum.first / sum.second;
  return rates;
}

//===----------------------------------------------------------------------===//
// Memory, launches, streams and the link between threads
//===----------------------------------------------------------------------===//

/// A one-element fill through the CPU backend, as the executor launches;
/// -1 if the backend cannot allocate its arena.
double launchSeconds(int threads) {
  cpu::CpuBackend backend(false, threads);
  if (!backend.allocate(Arena::Persistent, 256).empty())
    return -1;
  auto fill = loneKernel(KernelId::Fill, {{1}});
  std::vector<Operand> operands = {
      {backend.arena(Arena::Persistent), &fill->buffers[0]}};
  return medianSeconds(
      [&] { backend.launch(Stream::Compute, fill->op, operands); });
}

/// The compute stream works 200 us while the transfer stream's thread
/// sleeps, waiting for work; then a record is issued to the transfer
/// stream (its thread woken) and the compute stream waits for it (the
/// issuing thread asleep until the record wakes it): two wake-ups.
double streamWake(int threads) {
  cpu::CpuBackend backend(false, threads);
  backend.createEvents(1);
  std::vector<double> times;
  for (int i = 0; i < 201; ++i) {
    spin(200e-6);
    double start = now();
    backend.record(Stream::ActivationsUp, 0);
    backend.wait(Stream::Compute, 0);
    times.push_back(now() - start);
  }
  return median(times) / 2;
}

std::vector<double> linkSizes() {
  std::vector<double> sizes;
  for (double bytes = 1024; bytes <= 4 * 1048576; bytes *= 4)
    sizes.push_back(bytes);
  return sizes;
}

/// Two ranks as threads, each computing (spinning) 150 us and then
/// all-reducing, round after round; per size, the median of what a round
/// takes beyond the computing.
std::vector<double> allReduceSeconds(const std::vector<double> &sizes) {
  auto hub = makeLocalHub(2);
  const int rounds = 41;
  const double compute = 150e-6;
  std::vector<double> seconds(sizes.size());
  auto rank = [&](int r) {
    auto transport = makeLocalTransport(hub, r);
    RingCollectives ring(*transport, runNow, std::chrono::seconds(60));
    for (size_t s = 0; s < sizes.size(); ++s) {
      std::vector<float> values(static_cast<size_t>(sizes[s] / 4), 1.0f);
      std::vector<double> times;
      double start = now();
      for (int i = 0; i < rounds; ++i) {
        spin(compute);
        ring.hostAllReduce({0, 1}, values.data(), values.size(), "fit");
        double end = now();
        times.push_back(std::max(end - start - compute, 1e-7));
        start = end;
      }
      if (r == 0)
        seconds[s] = median(times);
    }
  };
  std::thread other(rank, 1);
  rank(0);
  other.join();
  return seconds;
}

std::string number(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%.4g", value);
  return text;
}

/// The floats the copy kernel copies to time the memory: 1 MiB.
constexpr int64_t kCopyFloats = 262144;

/// What a pass measures, each the fastest pass's.
struct Measured {
  std::vector<GemmShape> gemms = gemmGrid();
  std::map<std::string, Launch> launches;
  Timed copySeconds, launchSeconds;
  // Of threads that go where the system puts them: the fastest pass's.
  Timed wakeSeconds;
  std::vector<double> linkSizes = ::linkSizes();
  std::vector<Timed> linkSeconds = std::vector<Timed>(linkSizes.size());
};

/// What the measurements give `ranks` ranks: the gemm's fit, the kernels'
/// rates, the memory's bandwidth, the launch overhead, a stream's wake-up,
/// and the link's bus bandwidth by size, rate and step latency.
struct Fitted {
  int ranks = 1;
  GemmFit gemm;
  std::map<std::string, double> rates;
  double bandwidth = 0, launch = 0, wake = 0;
  std::vector<double> busBandwidth; // by the measured link sizes
  double linkRate = 0, linkLatency = 0;
};

Fitted fit(const Measured &m, int ranks) {
  Fitted f;
  f.ranks = ranks;
  f.gemm = fitGemm(m.gemms, ranks);
  f.rates = kernelRates(m.launches, ranks);
  f.bandwidth = 2.0 * kCopyFloats * 4 / m.copySeconds.forRanks(ranks);
  f.launch = m.launchSeconds.forRanks(ranks);
  f.wake = m.wakeSeconds.forRanks(1);
  // Two ranks: an all-reduce moves 2(n-1)/n = 1 times its bytes per rank,
  // in 2(n-1) = 2 steps.
  for (size_t s = 0; s < m.linkSizes.size(); ++s) {
    f.busBandwidth.push_back(m.linkSizes[s] / m.linkSeconds[s].forRanks(1));
    f.linkRate = std::max(f.linkRate, f.busBandwidth.back());
  }
  f.linkLatency = m.linkSeconds.front().forRanks(1) / 2;
  return f;
}

/// The spec of what was measured, as JSON.
std::string specText(const Measured &m, const Fitted &f,
                     const std::string &name, int threads, int passes) {
  std::string threadsText =
      std::to_string(threads) + (threads == 1 ? " thread" : " threads");
  std::ostringstream out;
  out << "{\n  \"name\": \"" << name << "\",\n"
      << "  \"source\": \"measured by strata-fit-cpu, the fastest of " << passes
      << " passes, for " << f.ranks
      << " ranks (each figure the slowest of that many fastest cores): a "
         "GPU is one CPU rank with "
      << threadsText << " (strata-run --threads " << threads
      << "), a node this process's ranks as threads\",\n"
      << "  \"gpus_per_node\": "
      << std::clamp(std::thread::hardware_concurrency(), 1u, 1024u) << ",\n"
      << "  \"gpu\": {\n    \"name\": \"a CPU rank, " << threadsText
      << "\",\n    \"source\": \"gemm: " << m.gemms.size()
      << " OpenBLAS sgemm shapes (m, n 64 to 512, k 16 to 512) fitted by "
         "least squares to a peak rate and a fixed cost per tile the "
         "equal of more k, worst error "
      << number(100 * f.gemm.worstError)
      << "%; memory: the copy kernel over 1 MiB; launch: a one-element "
         "kernel through the CPU backend; stream_wake_s: a stream asleep "
         "in a wait, woken by another's record; kernel_rates: each launch "
         "of the plans run alone at its shapes, a kernel's work per "
         "second\",\n"
      << "    \"peak_flops\": { \"bf16\": " << number(f.gemm.peak)
      << ", \"fp32\": " << number(f.gemm.peak) << " },\n"
      << "    \"hbm_bytes_per_s\": " << number(f.bandwidth) << ",\n"
      << "    \"hbm_bytes\": "
      << std::max<uint64_t>(1, cpu::availableHostBytes()) << ",\n"
      << "    \"launch_overhead_s\": " << number(f.launch) << ",\n"
      << "    \"stream_wake_s\": " << number(f.wake) << ",\n"
      << "    \"synchronous_compute\": true,\n"
      << "    \"sm_count\": 1,\n    \"gemm_tile\": [1, 1],\n"
      << "    \"gemm_waves\": \"balanced\",\n"
      << "    \"gemm_efficiency\": 1,\n"
      << "    \"gemm_k_overhead\": " << number(std::max(f.gemm.kOverhead, 1e-6))
      << ",\n    \"hbm_efficiency\": 1,\n    \"kernel_rates\": {";
  bool first = true;
  for (const auto &[kernel, rate] : f.rates) {
    out << (first ? "\n" : ",\n") << "      \"" << kernel
        << "\": " << number(rate);
    first = false;
  }
  out << "\n    }\n  },\n  \"levels\": [\n"
      << "    {\n      \"name\": \"threads of one process\",\n"
      << "      \"source\": \"two ranks as threads computing 150 us and then "
         "all-reducing over the ring of the local transport, 1 KiB to 4 "
         "MiB, the median round less the computing: bus bandwidth by "
         "size, the fastest the rate, half the smallest a step's "
         "latency\",\n"
      << "      \"spans\": \"node\",\n"
      << "      \"bytes_per_s\": " << number(f.linkRate) << ",\n"
      << "      \"latency_s\": " << number(f.linkLatency) << ",\n"
      << "      \"bus_bytes_per_s_by_size\": [";
  for (size_t s = 0; s < m.linkSizes.size(); ++s)
    out << (s ? ", " : "") << "[" << std::to_string(int64_t(m.linkSizes[s]))
        << ", " << number(f.busBandwidth[s]) << "]";
  out << "]\n    },\n"
      << "    {\n      \"name\": \"another process\",\n"
      << "      \"source\": \"not measured: the threads' link\",\n"
      << "      \"spans\": \"cluster\",\n"
      << "      \"bytes_per_s\": " << number(f.linkRate) << ",\n"
      << "      \"latency_s\": " << number(f.linkLatency)
      << "\n    }\n  ]\n}\n";
  return out.str();
}

} // namespace

int main(int argc, char **argv) {
  std::vector<std::string> plans;
  // Each -o with the --ranks before it (1 if none); stdout without one.
  std::vector<std::pair<int, std::string>> outputs;
  std::string name = "this machine's CPU";
  int threads = 1, passes = 3, ranks = 1;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &out) {
      if (i + 1 >= argc)
        return false;
      out = argv[++i];
      return true;
    };
    auto count = [&](const char *flag, int most, int &out) -> std::string {
      std::string text;
      if (!value(text))
        return std::string(flag) + " needs a number";
      char *end = nullptr;
      long n = std::strtol(text.c_str(), &end, 10);
      if (text.empty() || *end || n < 1 || n > most)
        return std::string(flag) + " takes a number from 1 to " +
               std::to_string(most) + ", got '" + text + "'";
      out = int(n);
      return "";
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "-o") {
      std::string output;
      if (!value(output))
        return fail("-o needs a file");
      if (std::string error = checkWritable(output); !error.empty())
        return fail(error);
      outputs.push_back({ranks, output});
    } else if (arg == "--ranks") {
      if (std::string error = count("--ranks", 1024, ranks); !error.empty())
        return fail(error);
    } else if (arg == "--name") {
      if (!value(name))
        return fail("--name needs a value");
      for (char c : name)
        if (c == '"' || c == '\\' || static_cast<unsigned char>(c) < 0x20)
          return fail("--name is written into JSON as it is: no quotes, "
                      "backslashes or control characters");
    } else if (arg == "--threads") {
      if (std::string error = count("--threads", 256, threads); !error.empty())
        return fail(error);
    } else if (arg == "--passes") {
      if (std::string error = count("--passes", 20, passes); !error.empty())
        return fail(error);
    } else if (!arg.empty() && arg[0] == '-') {
      return fail("unknown flag '" + arg + "'\n" + kUsage);
    } else {
      plans.push_back(arg);
    }
  }
  if (plans.empty())
    return fail(std::string("no plan: its kernels are what is measured\n") +
                kUsage);
  // Each stage's first rank: the other ranks of a stage launch the same
  // kernels on the same shapes.
  std::vector<Plan> loaded(plans.size());
  std::deque<RankPlan> stageRanks;
  for (size_t p = 0; p < plans.size(); ++p) {
    LoadOptions load;
    load.resolve = false;
    if (std::string error = loadPlan(plans[p], loaded[p], load); !error.empty())
      return fail(plans[p] + ": " + error);
    if (!loaded[p].cudaArch.empty())
      return fail(plans[p] + ": a plan for the cuda target: its kernels do "
                             "not run on the CPU backend");
    for (uint32_t stage = 0; stage < loaded[p].pipelineParallel; ++stage) {
      stageRanks.emplace_back();
      if (std::string error = resolveRank(
              loaded[p], loaded[p].firstRankOf(stage), stageRanks.back());
          !error.empty())
        return fail(plans[p] + ": " + error);
    }
  }
  if (outputs.empty())
    outputs.push_back({ranks, ""});

  // A training run's allocator has freed large blocks by its first step,
  // and glibc then keeps blocks up to that size for reuse instead of
  // mapping (and trimming) fresh memory for each: its thresholds follow
  // the largest block freed. So the buffers each collective of the ring
  // allocates are reused there, and must be here too, not faulted in anew
  // every call (which makes a 1 MiB all-reduce 20 times slower).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 64 << 20);
  cpu::setThreads(threads);
  uint32_t state = 1234;
  Pool pool;
  Measured m;
  int tooLarge = 0;
  for (const RankPlan &rank : stageRanks)
    tooLarge += collectLaunches(rank, m.launches);
  if (tooLarge)
    std::cerr << "strata-fit-cpu: " << tooLarge
              << " launches whose operands exceed 256 MiB are not measured "
                 "(a smaller model's plan measures the same kernels)\n";
  // The kernels a gemm's epilogue is priced as, where no plan launches them.
  std::vector<std::unique_ptr<LoneKernel>> epilogues;
  for (Epilogue epilogue :
       {Epilogue::Bias, Epilogue::GeluBias, Epilogue::BiasGrad}) {
    GemmOp gemm;
    gemm.m = gemm.k = 128;
    gemm.n = 256;
    gemm.epilogue = epilogue;
    KernelWork pass;
    if (!epilogueWork(gemm, pass))
      continue;
    KernelId kernel = pass.kernel;
    // Its operands: the [128, 256] it sweeps, and the row an add
    // broadcasts or a sum_to writes.
    using Shapes = std::vector<std::vector<int64_t>>;
    Shapes shapes =
        kernel == KernelId::Add     ? Shapes{{128, 256}, {256}, {128, 256}}
        : kernel == KernelId::SumTo ? Shapes{{128, 256}, {256}}
                                    : Shapes{{128, 256}, {128, 256}};
    bool launched = false;
    for (const auto &[key, launch] : m.launches)
      launched |= launch.op->kernel == kernel;
    if (launched)
      continue;
    epilogues.push_back(loneKernel(kernel, shapes));
    Launch &launch = m.launches[std::string("epilogue ") + kernelName(kernel)];
    launch.op = &epilogues.back()->op;
    for (const Buffer &b : epilogues.back()->buffers)
      launch.operands.push_back(&b);
    launch.occurrences = 1;
  }
  auto copy = loneKernel(KernelId::Copy, {{kCopyFloats}, {kCopyFloats}});
  std::vector<const Buffer *> copyOperands = {&copy->buffers[0],
                                              &copy->buffers[1]};

  // The cores this process may run on: pass p measures the kernels on
  // core p mod their count, so that a core slowed for a while (a shared
  // machine's) is not the only one measured.
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  std::vector<int> cores;
  if (sched_getaffinity(0, sizeof allowed, &allowed) == 0)
    for (int c = 0; c < CPU_SETSIZE; ++c)
      if (CPU_ISSET(c, &allowed))
        cores.push_back(c);
  for (int pass = 0; pass < passes; ++pass) {
    // The core this pass's kernels run on (with more kernel threads,
    // OpenMP's team would keep the first pass's core: those passes go
    // where the system puts them, counted as one core).
    size_t core = 0;
    if (threads == 1 && !cores.empty()) {
      core = size_t(pass) % cores.size();
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cores[core], &one);
      sched_setaffinity(0, sizeof one, &one);
    }
    for (GemmShape &shape : m.gemms)
      timeGemm(shape, core, pool, state);
    for (auto &[key, launch] : m.launches) {
      LoneLaunch lone(*launch.op, launch.operands, pool, state);
      launch.seconds.keep(core, medianSeconds([&] { lone.run(); }));
    }
    LoneLaunch lone(copy->op, copyOperands, pool, state);
    m.copySeconds.keep(core, medianSeconds([&] { lone.run(); }));
    double launch = launchSeconds(threads);
    if (launch < 0)
      return fail("the CPU backend cannot allocate 256 bytes");
    m.launchSeconds.keep(core, launch);
    if (threads == 1 && !cores.empty()) // the streams' threads go anywhere
      sched_setaffinity(0, sizeof allowed, &allowed);
    m.wakeSeconds.keep(0, streamWake(threads));
    std::vector<double> link = allReduceSeconds(m.linkSizes);
    for (size_t s = 0; s < link.size(); ++s)
      m.linkSeconds[s].keep(0, link[s]);
  }

  for (auto [outputRanks, output] : outputs) {
    Fitted f = fit(m, outputRanks);
    std::string text = specText(m, f, name, threads, passes);
    // What is written must read back: a machine too slow or too odd for
    // the spec's bounds is said here, not when the spec is used.
    ClusterSpec check;
    if (std::string error = parseClusterSpec(text, check); !error.empty())
      return fail("the measurements make a spec strata cannot read: " + error);
    if (output.empty()) {
      std::cout << text;
      continue;
    }
    if (std::string error = writeFileWhole(output, text); !error.empty())
      return fail(error);
    std::cerr << "strata-fit-cpu: wrote " << output << " for " << outputRanks
              << (outputRanks == 1 ? " rank" : " ranks") << ": gemm "
              << number(f.gemm.peak / 1e9) << " GFLOP/s (k overhead "
              << number(f.gemm.kOverhead) << "), " << f.rates.size()
              << " kernel rates, memory " << number(f.bandwidth / 1e9)
              << " GB/s, launch " << number(f.launch * 1e6)
              << " us, stream wake " << number(f.wake * 1e6) << " us, threads "
              << number(f.linkRate / 1e9) << " GB/s and "
              << number(f.linkLatency * 1e6) << " us a step\n";
  }
  return 0;
}
