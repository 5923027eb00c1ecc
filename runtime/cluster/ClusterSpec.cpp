//===- ClusterSpec.cpp - reading a cluster spec, checked ------------------===//
#include "runtime/cluster/ClusterSpec.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/Text.h"
#include "runtime/base/WholeFile.h"
#include "runtime/plan/KernelCatalog.h"

#include <cmath>
#include <cstdio>
#include <functional>
#include <initializer_list>
#include <set>

namespace strata::runtime {

namespace {

/// Walks a spec's objects, each field once, naming the field in an error.
class SpecReader {
public:
  explicit SpecReader(std::string_view text) : json(text) {}

  using Field = std::function<std::string(const std::string &key,
                                          const std::string &path)>;
  /// An object at `path`, `field` called for each member ("" when it read
  /// it, else the error); `required` members must all be there.
  std::string object(const std::string &path,
                     std::initializer_list<const char *> required,
                     const Field &field) {
    if (!json.eat('{'))
      return path + " must be an object";
    std::set<std::string> seen;
    if (!json.eat('}')) {
      do {
        std::string key;
        if (!json.string(key) || !json.eat(':'))
          return path + " is not valid JSON (a field name and ':' expected)";
        std::string at = path.empty() ? key : path + "." + key;
        if (!seen.insert(key).second)
          return at + " is given twice";
        if (std::string error = field(key, at); !error.empty())
          return error;
      } while (json.eat(','));
      if (!json.eat('}'))
        return path + " is not valid JSON (',' or '}' expected)";
    }
    for (const char *name : required)
      if (!seen.count(name))
        return (path.empty() ? "" : path + ".") + name + " is missing";
    return "";
  }

  std::string text(const std::string &path, std::string &out) {
    if (!json.string(out))
      return path + " must be a string";
    if (out.size() > 4096)
      return path + " is longer than 4096 bytes";
    return "";
  }

  /// A number in (0, most].
  std::string number(const std::string &path, double most, double &out) {
    if (!json.number(out))
      return path + " must be a finite number";
    if (!(out > 0) || out > most)
      return path + " must be positive and at most " + formatNumber(most) +
             ", got " + formatNumber(out);
    return "";
  }

  std::string integer(const std::string &path, int64_t most, int64_t &out) {
    if (!json.unsignedInteger(out))
      return path + " must be a whole number";
    if (out < 1 || out > most)
      return path + " must be at least 1 and at most " + std::to_string(most) +
             ", got " + std::to_string(out);
    return "";
  }

  bool boolean(bool &out) { return json.boolean(out); }
  bool done() { return json.done(); }
  bool eat(char c) { return json.eat(c); }

private:
  static std::string formatNumber(double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%g", value);
    return text;
  }

  JsonReader json;
};

// Bounds no machine reaches, so that a misplaced exponent is caught: rates
// up to 1e18 (an exaFLOP/s a GPU), bandwidths up to 1e15 bytes/s, memory
// up to 1 PiB, latencies and overheads up to a second.
constexpr double kMostFlops = 1e18, kMostBandwidth = 1e15, kMostSeconds = 1;
constexpr size_t kMostCurvePoints = 64;
constexpr int64_t kMostMemory = int64_t(1) << 50, kMostGpusPerNode = 1024,
                  kMostMultiprocessors = 4096, kMostTile = 4096;

std::string readGpu(SpecReader &r, const std::string &path, GpuSpec &gpu) {
  return r.object(
      path,
      {"name", "peak_flops", "hbm_bytes_per_s", "hbm_bytes",
       "launch_overhead_s", "sm_count", "gemm_tile", "gemm_waves",
       "gemm_efficiency", "gemm_k_overhead", "hbm_efficiency"},
      [&](const std::string &key, const std::string &at) -> std::string {
        if (key == "name")
          return r.text(at, gpu.name);
        if (key == "source")
          return r.text(at, gpu.source);
        if (key == "hbm_bytes_per_s")
          return r.number(at, kMostBandwidth, gpu.hbmBytesPerSecond);
        if (key == "hbm_bytes")
          return r.integer(at, kMostMemory, gpu.hbmBytes);
        if (key == "launch_overhead_s")
          return r.number(at, kMostSeconds, gpu.launchOverheadSeconds);
        if (key == "sm_count")
          return r.integer(at, kMostMultiprocessors, gpu.smCount);
        if (key == "gemm_efficiency")
          return r.number(at, 1, gpu.gemmEfficiency);
        if (key == "hbm_efficiency")
          return r.number(at, 1, gpu.hbmEfficiency);
        if (key == "gemm_k_overhead")
          return r.number(at, kMostTile, gpu.gemmKOverhead);
        if (key == "gemm_waves") {
          std::string waves;
          if (std::string error = r.text(at, waves); !error.empty())
            return error;
          if (waves != "quantized" && waves != "balanced")
            return at + " must be \"quantized\" or \"balanced\", got \"" +
                   printable(waves) + "\"";
          gpu.gemmWavesQuantized = waves == "quantized";
          return "";
        }
        if (key == "gemm_tile") {
          std::string notATile = at + " must be a list of two whole numbers, "
                                      "a tile's rows and columns";
          if (!r.eat('['))
            return notATile;
          if (std::string error = r.integer(at + "[0]", kMostTile,
                                            gpu.gemmTileRows);
              !error.empty())
            return error;
          if (!r.eat(','))
            return notATile;
          if (std::string error = r.integer(at + "[1]", kMostTile,
                                            gpu.gemmTileColumns);
              !error.empty())
            return error;
          return r.eat(']') ? "" : notATile;
        }
        if (key == "synchronous_compute") {
          if (!r.boolean(gpu.synchronousCompute))
            return at + " must be true or false";
          return "";
        }
        if (key == "stream_wake_s")
          return r.number(at, kMostSeconds, gpu.streamWakeSeconds);
        if (key == "kernel_rates")
          return r.object(
              at, {},
              [&](const std::string &kernel,
                  const std::string &atKernel) -> std::string {
                if (findKernel(kernel) < 0)
                  return atKernel + " is not a kernel of the catalog";
                return r.number(atKernel, kMostFlops,
                                gpu.kernelRates[kernel]);
              });
        if (key == "peak_flops")
          return r.object(
              at, {"bf16", "fp32"},
              [&](const std::string &dtype,
                  const std::string &atDtype) -> std::string {
                if (dtype != "bf16" && dtype != "fp16" && dtype != "tf32" &&
                    dtype != "fp32")
                  return atDtype + " is not a dtype strata knows (bf16, "
                                   "fp16, tf32, fp32)";
                return r.number(atDtype, kMostFlops, gpu.peakFlops[dtype]);
              });
        return at + " is not a field strata knows";
      });
}

/// [[bytes, bytes per second], ...], sizes strictly ascending.
std::string readCurve(SpecReader &r, const std::string &path,
                      std::vector<std::pair<double, double>> &curve) {
  std::string notACurve = path + " must be a list of [bytes, bytes per "
                                 "second] pairs, the sizes ascending";
  if (!r.eat('['))
    return notACurve;
  if (r.eat(']'))
    return "";
  do {
    std::string at = path + "[" + std::to_string(curve.size()) + "]";
    double size = 0, rate = 0;
    if (!r.eat('['))
      return notACurve;
    if (std::string error = r.number(at + "[0]", kMostMemory, size);
        !error.empty())
      return error;
    if (!r.eat(','))
      return notACurve;
    if (std::string error = r.number(at + "[1]", kMostBandwidth, rate);
        !error.empty())
      return error;
    if (!r.eat(']'))
      return notACurve;
    if (!curve.empty() && size <= curve.back().first)
      return notACurve;
    if (curve.size() == kMostCurvePoints)
      return path + " has more than " + std::to_string(kMostCurvePoints) +
             " points";
    curve.push_back({size, rate});
  } while (r.eat(','));
  if (!r.eat(']'))
    return notACurve;
  return "";
}

std::string readLevel(SpecReader &r, const std::string &path, LinkLevel &level,
                      std::string &spans) {
  return r.object(
      path, {"name", "spans", "bytes_per_s", "latency_s"},
      [&](const std::string &key, const std::string &at) -> std::string {
        if (key == "name")
          return r.text(at, level.name);
        if (key == "source")
          return r.text(at, level.source);
        if (key == "spans") {
          if (std::string error = r.text(at, spans); !error.empty())
            return error;
          if (spans != "node" && spans != "cluster")
            return at + " must be \"node\" or \"cluster\", got \"" +
                   printable(spans) + "\"";
          level.spansNode = spans == "node";
          return "";
        }
        if (key == "bytes_per_s")
          return r.number(at, kMostBandwidth, level.bytesPerSecond);
        if (key == "latency_s")
          return r.number(at, kMostSeconds, level.latencySeconds);
        if (key == "bus_bytes_per_s_by_size")
          return readCurve(r, at, level.busBandwidthBySize);
        return at + " is not a field strata knows";
      });
}

} // namespace

double LinkLevel::measuredBusBandwidth(double bytes) const {
  const auto &curve = busBandwidthBySize;
  if (curve.empty() || bytes < curve.front().first ||
      bytes > curve.back().first)
    return 0;
  size_t i = 1;
  while (i < curve.size() && curve[i].first < bytes)
    ++i;
  if (i == curve.size())
    return curve.back().second;
  auto [size0, rate0] = curve[i - 1];
  auto [size1, rate1] = curve[i];
  double t = std::log(bytes / size0) / std::log(size1 / size0);
  return rate0 + t * (rate1 - rate0);
}

std::string parseClusterSpec(std::string_view text, ClusterSpec &out) {
  out = ClusterSpec();
  SpecReader r(text);
  std::string error = r.object(
      "", {"name", "gpus_per_node", "gpu", "levels"},
      [&](const std::string &key, const std::string &at) -> std::string {
        if (key == "name")
          return r.text(at, out.name);
        if (key == "source")
          return r.text(at, out.source);
        if (key == "gpus_per_node")
          return r.integer(at, kMostGpusPerNode, out.gpusPerNode);
        if (key == "gpu")
          return readGpu(r, at, out.gpu);
        if (key == "levels") {
          // One level within a node and one across nodes, in that order.
          if (!r.eat('['))
            return at + " must be a list of two levels, the node's and the "
                        "cluster's";
          for (int i = 0; i < 2; ++i) {
            if (i == 1 && !r.eat(','))
              return at + " must list two levels, the node's and the "
                          "cluster's";
            std::string spans;
            LinkLevel level;
            std::string atLevel = at + "[" + std::to_string(i) + "]";
            if (std::string e = readLevel(r, atLevel, level, spans); !e.empty())
              return e;
            if (level.spansNode != (i == 0))
              return atLevel + ".spans must be \"" +
                     (i == 0 ? "node" : "cluster") +
                     "\": the node's level comes first, the cluster's second";
            (i == 0 ? out.node : out.cluster) = level;
          }
          if (!r.eat(']'))
            return at + " must list two levels, the node's and the "
                        "cluster's";
          return "";
        }
        return at + " is not a field strata knows";
      });
  if (!error.empty())
    return error;
  if (!r.done())
    return "the spec has text after its object";
  return "";
}

std::string loadClusterSpec(const std::string &path, ClusterSpec &out) {
  std::string text;
  if (std::string error = readFileWhole(path, text, kJsonFile); !error.empty())
    return error;
  if (std::string error = parseClusterSpec(text, out); !error.empty())
    return "cluster spec " + path + ": " + error;
  return "";
}

} // namespace strata::runtime
