//===- strata-kernels.cpp - a plan's kernels run alone: speeds and a lab --===//
//
//   strata-kernels PLAN --speeds OUT.json     every distinct launch timed
//   strata-kernels PLAN --lab NAME --source FILE.cu [--grid X,Y,Z]
//                  [--block N] [--shared BYTES] [--json OUT.json]
//                                             a replacement for one kernel
//                                             checked and timed against it
//   strata-kernels PLAN --unit NAME           kernel NAME's CUDA source, to
//                                             start a replacement from
//   both: [--backend cuda|simt] [--reps N] [--stage S]
//
// Each distinct launch of a stage's first rank (its kernel, shapes and
// arguments; a fused group's members with it) runs alone on buffers of its
// own, filled with small positive values (ids spread over the rows they
// index, the optimizer's settings where it reads them), a few times to warm
// up and then --reps times, each timed on the device (CUDA events) or, on
// simt, by the host's clock; the median is what counts. --speeds writes the
// launches as --profile-json does ({"entries": [...]}: name, shape, calls a
// step, seconds a step, bytes and FLOPs of a call; strata-run --calibration
// reads it), with each launch's code, grid and block. --lab compiles
// FILE.cu, whose kernel must be named NAME and take NAME's parameters (the
// launch contract, CudaKernel.h), with NVRTC for the plan's architecture
// (the host compiler on simt), runs it and NAME's own kernel on the same
// inputs, compares every output, times both, and exits 1 when they differ:
// a GPU window tries variants of a kernel with no LLVM and no rebuild.
//
//===----------------------------------------------------------------------===//
#include "compiler/codegen/Nvrtc.h"
#include "runtime/base/BFloat16.h"
#include "runtime/base/JsonReader.h"
#include "runtime/base/Text.h"
#include "runtime/base/WholeFile.h"
#include "runtime/cuda/CudaBackend.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/plan/Hyper.h"
#include "runtime/plan/KernelCatalog.h"
#include "runtime/plan/PlanCheck.h"
#include "runtime/simt/SimtBackend.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace strata;
using namespace strata::runtime;

namespace {

const char *kUsage =
    "usage: strata-kernels PLAN --speeds OUT.json\n"
    "       strata-kernels PLAN --lab NAME --source FILE.cu [--grid X,Y,Z]\n"
    "                      [--block N] [--shared BYTES] [--json OUT.json]\n"
    "       strata-kernels PLAN --unit NAME\n"
    "       both: [--backend cuda|simt] [--reps N] [--stage S]\n"
    "  --speeds OUT.json  time every distinct launch of the stage's first\n"
    "                     rank alone (the median of --reps); write them as\n"
    "                     strata-run --profile-json does\n"
    "  --lab NAME         run FILE.cu's kernel NAME in place of the plan's\n"
    "                     kernel NAME on the same inputs: compare every\n"
    "                     output, time both; --grid, --block and --shared\n"
    "                     give it another launch shape (the plan's else)\n"
    "  --unit NAME        print kernel NAME's CUDA source (the unit the\n"
    "                     plan carries), a lab's starting point\n"
    "  --backend          cuda (a GPU; the default where one is found) or\n"
    "                     simt (the kernels compiled for this CPU)\n"
    "  --reps N           timed runs of each launch (10; simt 2)\n"
    "  --stage S          the pipeline stage whose launches run (0)\n";

int fail(const std::string &message) {
  std::cerr << "strata-kernels: error: " << message << "\n";
  return 1;
}

/// A device for one lone launch: its backend, made for the plan.
struct Device {
  std::string kind; // "cuda" or "simt"
  cuda::Gpu gpu;

  std::string open(const Plan &plan) {
    if (kind == "simt")
      return "";
    return cuda::openGpu(plan, gpu);
  }
  std::string make(std::unique_ptr<Backend> &backend) {
    if (kind == "simt") {
      backend = std::make_unique<simt::SimtBackend>();
      return "";
    }
    auto made = std::make_unique<cuda::CudaBackend>(gpu.context);
    if (std::string error = made->create(); !error.empty())
      return error;
    backend = std::move(made);
    return "";
  }
};

/// A launch of the plan (and a fused group's members after it) taken out
/// to run alone: its instructions with operands renumbered onto buffers of
/// its own, end to end in the persistent arena, and their first values.
struct Lone {
  std::vector<Instruction> instructions;
  RankPlan rank;
  std::vector<uint8_t> start; // the arena's bytes before a run
  InstructionCost cost;
  size_t occurrences = 0;
  std::string key;

  /// The outputs' buffers (no repeats).
  std::vector<uint32_t> outputs() const {
    std::vector<uint32_t> out;
    for (const Instruction &instruction : instructions) {
      const LaunchOp &op = *instruction.launch();
      const KernelSpec &spec = kernelSpec(op.kernel);
      for (size_t k = 0; k < op.operands.size(); ++k)
        if (spec.operands[k].output && op.operands[k] != kNoBuffer &&
            std::find(out.begin(), out.end(), op.operands[k]) == out.end())
          out.push_back(op.operands[k]);
    }
    return out;
  }
};

/// The rows an ids operand indexes, so its ids spread over them: an
/// embedding's table rows (from its vocabulary offset), a loss's
/// vocabulary.
int64_t idRange(const LaunchOp &op, const RankPlan &rank) {
  const KernelSpec &spec = kernelSpec(op.kernel);
  auto attr = [&](const char *name) -> int64_t {
    for (size_t a = 0; a < spec.attrs.size(); ++a)
      if (std::strcmp(spec.attrs[a].name, name) == 0 && a < op.attrs.size())
        return op.attrs[a].i;
    return 0;
  };
  if (op.kernel == KernelId::EmbeddingFwd ||
      op.kernel == KernelId::EmbeddingBwd)
    return attr("vocab_offset") +
           rank.buffers[op.operands[op.kernel == KernelId::EmbeddingFwd ? 0
                                                                        : 2]]
               .shape[0];
  if (int64_t vocab = attr("vocab_size"); vocab > 0)
    return attr("vocab_offset") + vocab;
  return 1;
}

/// The lone launch of instruction `at` of `program` (with its fused
/// members).
Lone takeOut(const RankPlan &from, const Program &program, size_t at,
             std::mt19937 &random) {
  Lone lone;
  const LaunchOp &first = *program.instructions[at].launch();
  size_t span = std::max<uint32_t>(1, first.fuse);
  lone.cost = instructionCost(from, program, at, span);
  lone.key = lone.cost.name + " " + lone.cost.shape;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> byBytes; // offset, size
  std::map<uint32_t, uint32_t> renumbered;
  for (size_t m = 0; m < span; ++m) {
    Instruction instruction = program.instructions[at + m];
    LaunchOp &op = std::get<LaunchOp>(instruction.op);
    for (uint32_t &index : op.operands) {
      if (index == kNoBuffer)
        continue;
      auto known = renumbered.find(index);
      if (known != renumbered.end()) {
        index = known->second;
        continue;
      }
      const Buffer &original = from.buffers[index];
      // Two names of the same bytes stay one buffer (an in-place update).
      auto key = std::pair{uint64_t(original.arena) << 56 ^ original.offset,
                           original.bytes};
      auto [it, fresh] =
          byBytes.try_emplace(key, uint32_t(lone.rank.buffers.size()));
      if (fresh) {
        Buffer b = original;
        b.arena = Arena::Persistent;
        b.offset = lone.rank.persistentBytes;
        b.perRank = {};
        b.slotStride = 0;
        lone.rank.persistentBytes += (b.bytes + 255) / 256 * 256;
        lone.rank.buffers.push_back(b);
      }
      renumbered[index] = it->second;
      index = it->second;
    }
    lone.key += " " + std::to_string(op.code);
    lone.instructions.push_back(instruction);
  }
  // The first values: small and positive (an optimizer's second moment
  // never is negative), ids over their rows, the optimizer's settings.
  lone.start.assign(lone.rank.persistentBytes, 0);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<bool> filled(lone.rank.buffers.size(), false);
  for (const Instruction &instruction : lone.instructions) {
    const LaunchOp &op = *instruction.launch();
    const KernelSpec &spec = kernelSpec(op.kernel);
    for (size_t k = 0; k < op.operands.size(); ++k) {
      uint32_t index = op.operands[k];
      if (index == kNoBuffer || filled[index])
        continue;
      filled[index] = true;
      const Buffer &b = lone.rank.buffers[index];
      uint8_t *bytes = lone.start.data() + b.offset;
      if (b.dtype == DType::I32) {
        int64_t rows = std::max<int64_t>(1, idRange(op, from));
        for (int64_t e = 0; e < b.elements; ++e) {
          int32_t id = int32_t((e * 7919) % rows);
          std::memcpy(bytes + 4 * e, &id, 4);
        }
        continue;
      }
      std::vector<float> values(size_t(b.elements));
      if (std::strcmp(spec.operands[k].name, "hyper") == 0 &&
          values.size() >= kHyperSlots) {
        Hyper settings;
        settings.lr = 1e-4;
        hyperValues(settings, values.data());
      } else {
        for (float &v : values)
          v = 0.1f * std::abs(normal(random));
      }
      for (int64_t e = 0; e < b.elements; ++e) {
        if (b.dtype == DType::BF16) {
          uint16_t h = floatToBf16(values[e]);
          std::memcpy(bytes + 2 * e, &h, 2);
        } else {
          std::memcpy(bytes + 4 * e, &values[e], 4);
        }
      }
    }
  }
  return lone;
}

/// Runs `lone` with code `code` (and launch shape `shape`, when given)
/// `reps` times after two to warm up: the median seconds of a run, and the
/// arena's bytes after the first run into `after`.
std::string runLone(Device &device, const Plan &plan, const Lone &lone,
                    int reps, double &seconds, std::vector<uint8_t> *after) {
  std::unique_ptr<Backend> backend;
  if (std::string error = device.make(backend); !error.empty())
    return error;
  RankPlan rank = lone.rank;
  rank.programs.push_back({"lone", lone.instructions});
  if (std::string error =
          backend->allocate(Arena::Persistent, rank.persistentBytes);
      !error.empty())
    return error;
  if (std::string error = backend->prepare(plan, rank); !error.empty())
    return error;
  uint8_t *arena = backend->arena(Arena::Persistent);
  std::vector<Operand> operands;
  const std::vector<Instruction> &loaded = rank.programs[0].instructions;
  for (const Instruction &instruction : loaded)
    for (uint32_t index : instruction.launch()->operands)
      operands.push_back(index == kNoBuffer
                             ? Operand{}
                             : Operand{arena + rank.buffers[index].offset,
                                       &rank.buffers[index]});
  const LaunchOp &op = *loaded[0].launch();
  auto start = [&] {
    backend->copyIn(Stream::Compute, arena, lone.start.data(),
                    lone.start.size());
  };
  std::vector<double> times;
  try {
    start();
    backend->launch(Stream::Compute, op, operands);
    if (after) {
      after->assign(lone.start.size(), 0);
      backend->copyOut(Stream::Compute, after->data(), arena, after->size());
    }
    backend->synchronize();
    backend->launch(Stream::Compute, op, operands); // warm
    backend->synchronize();
    if (backend->timesDevice()) {
      backend->clearMarks();
      for (int r = 0; r < reps; ++r) {
        backend->markTime(Stream::Compute);
        backend->launch(Stream::Compute, op, operands);
        backend->markTime(Stream::Compute);
      }
      backend->synchronize();
      std::vector<double> marks = backend->markTimes();
      for (int r = 0; r < reps; ++r)
        times.push_back((marks[2 * r + 1] - marks[2 * r]) * 1e-6);
    } else {
      for (int r = 0; r < reps; ++r) {
        auto begin = std::chrono::steady_clock::now();
        backend->launch(Stream::Compute, op, operands);
        backend->synchronize();
        times.push_back(std::chrono::duration<double>(
                            std::chrono::steady_clock::now() - begin)
                            .count());
      }
    }
  } catch (const std::exception &failure) {
    return failure.what();
  }
  std::sort(times.begin(), times.end());
  seconds = times[times.size() / 2];
  return "";
}

/// runLone in a child process, for a kernel nothing vouches for on simt,
/// where it runs in the host's memory: one that writes out of bounds (a
/// launch shape its scratch was not sized for, say) kills the child, and
/// that is an error here, not a crash.
std::string runApart(Device &device, const Plan &plan, const Lone &lone,
                     int reps, double &seconds, std::vector<uint8_t> &after) {
  int pipeFds[2];
  if (pipe(pipeFds) != 0)
    return std::string("cannot make a pipe: ") + std::strerror(errno);
  std::cout.flush();
  pid_t child = fork();
  if (child < 0)
    return std::string("cannot fork: ") + std::strerror(errno);
  if (child == 0) {
    close(pipeFds[0]);
    std::string error = runLone(device, plan, lone, reps, seconds, &after);
    // What comes back: the error's length and text, the seconds, the bytes.
    uint64_t length = error.size();
    auto put = [&](const void *data, size_t bytes) {
      const char *p = static_cast<const char *>(data);
      while (bytes > 0) {
        ssize_t n = write(pipeFds[1], p, bytes);
        if (n <= 0)
          _exit(3);
        p += n;
        bytes -= size_t(n);
      }
    };
    put(&length, sizeof length);
    put(error.data(), error.size());
    put(&seconds, sizeof seconds);
    put(after.data(), error.empty() ? after.size() : 0);
    _exit(0);
  }
  close(pipeFds[1]);
  std::string received;
  char chunk[1 << 16];
  for (ssize_t n; (n = read(pipeFds[0], chunk, sizeof chunk)) != 0;) {
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      break;
    received.append(chunk, size_t(n));
  }
  close(pipeFds[0]);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    return "it crashed the simt model (signal " +
           std::to_string(WTERMSIG(status)) + ", " +
           strsignal(WTERMSIG(status)) +
           "): an access out of its buffers, or a launch shape its unit was "
           "not written for";
  uint64_t length = 0;
  if (received.size() < sizeof length)
    return "the run's child ended without a result";
  std::memcpy(&length, received.data(), sizeof length);
  if (received.size() < sizeof length + length + sizeof seconds)
    return "the run's child ended without a result";
  std::string error = received.substr(sizeof length, length);
  if (!error.empty())
    return error;
  std::memcpy(&seconds, received.data() + sizeof length + length,
              sizeof seconds);
  size_t at = sizeof length + length + sizeof seconds;
  if (received.size() - at != lone.start.size())
    return "the run's child sent a result of the wrong size";
  after.assign(received.begin() + at, received.end());
  return "";
}

/// Every distinct launch of `rank`, in program order, how many times a
/// step runs each.
std::vector<Lone> distinctLaunches(const RankPlan &rank, std::mt19937 &random) {
  std::vector<Lone> out;
  std::map<std::string, size_t> seen;
  for (const Program &program : rank.programs)
    for (size_t i = 0; i < program.instructions.size(); ++i) {
      const LaunchOp *op = program.instructions[i].launch();
      if (!op || op->code < 0)
        continue; // not a launch, or a fused group's member
      InstructionCost cost =
          instructionCost(rank, program, i, std::max<uint32_t>(1, op->fuse));
      std::string key =
          cost.name + " " + cost.shape + " " + std::to_string(op->code);
      auto [it, fresh] = seen.try_emplace(key, out.size());
      if (fresh)
        out.push_back(takeOut(rank, program, i, random));
      ++out[it->second].occurrences;
    }
  return out;
}

std::string jsonNumber(double v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.9g", std::isfinite(v) ? v : -1.0);
  return text;
}

/// "" or why a launch shape cannot run on strata's GPUs.
std::string launchShapeError(const LaunchOp &op) {
  uint64_t threads = uint64_t(op.block[0]) * op.block[1] * op.block[2];
  if (op.grid.size() != 3 || op.block.size() != 3 || threads == 0 ||
      threads > 1024 || op.grid[0] == 0 || op.grid[0] > 0x7fffffffu ||
      op.grid[1] == 0 || op.grid[1] > 65535 || op.grid[2] == 0 ||
      op.grid[2] > 65535 || op.block[2] > 64)
    return "the launch shape (grid " + std::to_string(op.grid[0]) + "x" +
           std::to_string(op.grid[1]) + "x" + std::to_string(op.grid[2]) +
           ", block of " + std::to_string(threads) + ") is past CUDA's limits";
  if (op.sharedBytes > 227 * 1024)
    return "--shared " + std::to_string(op.sharedBytes) +
           " bytes is past the 227 KiB a block of strata's GPUs has";
  return "";
}

std::string shapeText3(const std::vector<uint32_t> &v) {
  std::string out;
  for (uint32_t x : v)
    out += (out.empty() ? "" : "x") + std::to_string(x);
  return out;
}

int speeds(Device &device, const Plan &plan, const RankPlan &rank, int reps,
           const std::string &out) {
  std::mt19937 random(1);
  std::vector<Lone> launches = distinctLaunches(rank, random);
  std::ostringstream json;
  json << "{\n \"backend\": " << jsonString(device.kind) << ",\n \"clock\": "
       << jsonString(device.kind == "cuda" ? "device" : "host")
       << ",\n \"entries\": [";
  for (size_t i = 0; i < launches.size(); ++i) {
    const Lone &lone = launches[i];
    double seconds = 0;
    if (std::string error = runLone(device, plan, lone, reps, seconds, nullptr);
        !error.empty())
      return fail(lone.key + ": " + error);
    const LaunchOp &op = *lone.instructions[0].launch();
    const std::string &code = plan.code[op.code].name;
    double rate = lone.cost.flops > 0 ? lone.cost.flops / seconds / 1e12
                                      : lone.cost.bytes / seconds / 1e9;
    std::printf("%-26s %-28s %10.1f us %9.1f %s  grid %s block %u x%zu\n",
                code.c_str(), lone.cost.name.c_str(), seconds * 1e6, rate,
                lone.cost.flops > 0 ? "TFLOP/s" : "GB/s   ",
                shapeText3(op.grid).c_str(),
                op.block[0] * op.block[1] * op.block[2], lone.occurrences);
    json << (i ? "," : "") << "\n  {\"name\": " << jsonString(lone.cost.name)
         << ", \"shape\": " << jsonString(lone.cost.shape)
         << ", \"code\": " << jsonString(code)
         << ", \"grid\": " << jsonString(shapeText3(op.grid))
         << ", \"block\": " << op.block[0] * op.block[1] * op.block[2]
         << ", \"calls\": " << lone.occurrences
         << ", \"seconds\": " << jsonNumber(seconds * double(lone.occurrences))
         << ", \"seconds_per_call\": " << jsonNumber(seconds)
         << ", \"bytes\": " << jsonNumber(lone.cost.bytes)
         << ", \"flops\": " << jsonNumber(lone.cost.flops) << "}";
  }
  json << "\n ]\n}\n";
  if (std::string error = writeFileWhole(out, json.str()); !error.empty())
    return fail(error);
  std::cout << "strata-kernels: " << launches.size() << " launches timed on "
            << device.kind << ", " << out << "\n";
  return 0;
}

/// The largest difference between the outputs of two runs, relative to
/// the largest output (at least 1); `bf16` whether any output is bf16.
double outputDifference(const Lone &lone, const std::vector<uint8_t> &a,
                        const std::vector<uint8_t> &b, bool &bf16,
                        std::string &where) {
  double worst = 0;
  bf16 = false;
  for (uint32_t index : lone.outputs()) {
    const Buffer &buffer = lone.rank.buffers[index];
    bf16 |= buffer.dtype == DType::BF16;
    double scale = 1, diff = 0;
    int64_t at = 0;
    auto value = [&](const std::vector<uint8_t> &bytes, int64_t e) -> double {
      const uint8_t *p = bytes.data() + buffer.offset;
      if (buffer.dtype == DType::BF16) {
        uint16_t h;
        std::memcpy(&h, p + 2 * e, 2);
        return bf16ToFloat(h);
      }
      if (buffer.dtype == DType::I32) {
        int32_t i;
        std::memcpy(&i, p + 4 * e, 4);
        return i;
      }
      float f;
      std::memcpy(&f, p + 4 * e, 4);
      return f;
    };
    for (int64_t e = 0; e < buffer.elements; ++e) {
      double x = value(a, e), y = value(b, e);
      scale = std::max(scale, std::abs(x));
      double d = std::isnan(x) != std::isnan(y) ? INFINITY
                 : std::isnan(x)                ? 0
                                                : std::abs(x - y);
      if (d > diff) {
        diff = d;
        at = e;
      }
    }
    if (diff / scale > worst) {
      worst = diff / scale;
      where = buffer.name + "[" + std::to_string(at) + "]";
    }
  }
  return worst;
}

struct LabOptions {
  std::string name, source, json;
  std::vector<uint32_t> grid, block;
  int64_t shared = -1;
};

int lab(Device &device, const Plan &plan, const RankPlan &rank, int reps,
        const LabOptions &o) {
  int32_t code = -1;
  for (size_t c = 0; c < plan.code.size(); ++c)
    if (plan.code[c].name == o.name)
      code = int32_t(c);
  if (code < 0)
    return fail("the plan has no kernel '" + o.name +
                "' (strata-inspect PLAN --launches lists them)");
  std::string source;
  if (std::string error = readFileWhole(o.source, source); !error.empty())
    return fail(error);
  std::mt19937 random(1);
  std::vector<Lone> launches = distinctLaunches(rank, random);
  auto it = std::find_if(launches.begin(), launches.end(), [&](const Lone &l) {
    return l.instructions[0].launch()->code == code;
  });
  if (it == launches.end())
    return fail("stage's launches do not run '" + o.name +
                "' (--stage names another stage)");
  const Lone &own = *it;
  // The replacement: the same launch on code of its own.
  Plan variant = plan;
  CodeObject replacement;
  replacement.name = o.name;
  replacement.kernel = plan.code[code].kernel;
  replacement.source = source;
  if (device.kind == "cuda")
    if (std::string error = codegen::compileToPtx(source, o.name, plan.cudaArch,
                                                  replacement.ptx);
        !error.empty())
      return fail(error);
  variant.code = {replacement};
  Lone theirs = own;
  LaunchOp &op = std::get<LaunchOp>(theirs.instructions[0].op);
  op.code = 0;
  if (!o.grid.empty())
    op.grid = o.grid;
  if (!o.block.empty())
    op.block = o.block;
  if (o.shared >= 0)
    op.sharedBytes = uint32_t(o.shared);
  std::string shapeError = launchShapeError(op);
  if (!shapeError.empty())
    return fail(shapeError);
  double ownSeconds = 0, theirSeconds = 0;
  std::vector<uint8_t> ownOut, theirOut;
  if (std::string error = runLone(device, plan, own, reps, ownSeconds, &ownOut);
      !error.empty())
    return fail(o.name + " (the plan's): " + error);
  if (std::string error =
          device.kind == "simt"
              ? runApart(device, variant, theirs, reps, theirSeconds, theirOut)
              : runLone(device, variant, theirs, reps, theirSeconds, &theirOut);
      !error.empty())
    return fail(o.name + " (" + o.source + "): " + error);
  bool bf16 = false;
  std::string where;
  double diff = outputDifference(own, ownOut, theirOut, bf16, where);
  // bf16 outputs may round the other way; f32 ones only by the order of
  // additions.
  double tolerance = bf16 ? 1e-2 : 1e-5;
  bool same = diff <= tolerance;
  std::printf("%s %s: the plan's %.1f us, %s %.1f us (%.2fx); outputs %s "
              "(largest difference %.3g of the largest output%s%s)\n",
              o.name.c_str(), own.cost.shape.c_str(), ownSeconds * 1e6,
              o.source.c_str(), theirSeconds * 1e6, ownSeconds / theirSeconds,
              same ? "match" : "DIFFER", diff, where.empty() ? "" : ", at ",
              where.c_str());
  if (!o.json.empty()) {
    std::ostringstream json;
    json << "{\"name\": " << jsonString(o.name)
         << ", \"shape\": " << jsonString(own.cost.shape)
         << ", \"source\": " << jsonString(o.source)
         << ", \"plan_seconds\": " << jsonNumber(ownSeconds)
         << ", \"variant_seconds\": " << jsonNumber(theirSeconds)
         << ", \"difference\": " << jsonNumber(diff)
         << ", \"match\": " << (same ? "true" : "false") << "}\n";
    if (std::string error = writeFileWhole(o.json, json.str()); !error.empty())
      return fail(error);
  }
  return same ? 0 : 1;
}

bool parseNumbers(const std::string &text, std::vector<uint32_t> &out) {
  out.clear();
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, ',');) {
    char *end = nullptr;
    unsigned long v = std::strtoul(part.c_str(), &end, 10);
    if (part.empty() || *end || v == 0 || v > 0x7fffffffu)
      return false;
    out.push_back(uint32_t(v));
  }
  return !out.empty();
}

} // namespace

int main(int argc, char **argv) {
  std::string planPath, speedsOut, backend, unit;
  LabOptions labOptions;
  int reps = 0;
  uint32_t stage = 0;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &target) {
      if (i + 1 >= argc)
        return false;
      target = argv[++i];
      return true;
    };
    std::string text;
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--speeds") {
      if (!value(speedsOut))
        return fail("--speeds needs a file to write");
    } else if (arg == "--unit") {
      if (!value(unit))
        return fail("--unit needs a kernel's name (strata-inspect --launches)");
    } else if (arg == "--lab") {
      if (!value(labOptions.name))
        return fail("--lab needs a kernel's name (strata-inspect --launches)");
    } else if (arg == "--source") {
      if (!value(labOptions.source))
        return fail("--source needs a CUDA file");
    } else if (arg == "--json") {
      if (!value(labOptions.json))
        return fail("--json needs a file to write");
    } else if (arg == "--backend") {
      if (!value(backend) || (backend != "cuda" && backend != "simt"))
        return fail("--backend is cuda or simt");
    } else if (arg == "--grid" || arg == "--block") {
      std::vector<uint32_t> &target =
          arg == "--grid" ? labOptions.grid : labOptions.block;
      if (!value(text) || !parseNumbers(text, target))
        return fail(arg + " needs positive numbers, X[,Y[,Z]]");
      target.resize(3, 1);
    } else if (arg == "--shared") {
      std::vector<uint32_t> n;
      if (!value(text) || (text != "0" && !parseNumbers(text, n)))
        return fail("--shared needs a number of bytes");
      labOptions.shared = text == "0" ? 0 : n[0];
    } else if (arg == "--reps") {
      std::vector<uint32_t> n;
      if (!value(text) || !parseNumbers(text, n) || n.size() != 1 ||
          n[0] > 10000)
        return fail("--reps needs a number from 1 to 10000");
      reps = int(n[0]);
    } else if (arg == "--stage") {
      std::vector<uint32_t> n;
      if (!value(text) ||
          (text != "0" && (!parseNumbers(text, n) || n.size() != 1)))
        return fail("--stage needs a stage's number");
      stage = text == "0" ? 0 : n[0];
    } else if (arg.rfind("--", 0) == 0) {
      return fail("unknown flag '" + arg + "'; see strata-kernels --help");
    } else if (planPath.empty()) {
      planPath = arg;
    } else {
      return fail("one plan at a time: got '" + planPath + "' and '" + arg +
                  "'");
    }
  }
  if (planPath.empty())
    return fail("no plan given\n" + std::string(kUsage));
  if (int(!speedsOut.empty()) + int(!labOptions.name.empty()) +
          int(!unit.empty()) !=
      1)
    return fail("say what to do: --speeds OUT.json, --lab NAME or --unit NAME");
  if (!labOptions.name.empty() && labOptions.source.empty())
    return fail("--lab " + labOptions.name + " needs --source FILE.cu");
  Plan plan;
  LoadOptions load;
  load.resolve = false;
  if (std::string error = loadPlan(planPath, plan, load); !error.empty())
    return fail(planPath + ": " + error);
  if (plan.cudaArch.empty())
    return fail(planPath +
                " is a CPU plan: its kernels are generated by strata-compile "
                "--target cuda");
  if (!unit.empty()) {
    for (const CodeObject &code : plan.code)
      if (code.name == unit) {
        std::cout << code.source;
        return 0;
      }
    return fail("the plan has no kernel '" + unit +
                "' (strata-inspect PLAN --launches lists them)");
  }
  if (stage >= plan.pipelineParallel)
    return fail("--stage " + std::to_string(stage) + ": the plan has " +
                std::to_string(plan.pipelineParallel) + " stages");
  RankPlan rank;
  if (std::string error = resolveRank(plan, plan.firstRankOf(stage), rank);
      !error.empty())
    return fail(error);
  Device device;
  device.kind = backend.empty() ? "cuda" : backend;
  if (std::string error = device.open(plan); !error.empty()) {
    if (!backend.empty())
      return fail(error);
    std::cerr << "strata-kernels: no GPU (" << error << "): simt\n";
    device.kind = "simt";
  }
  if (reps == 0)
    reps = device.kind == "simt" ? 2 : 10;
  return speedsOut.empty() ? lab(device, plan, rank, reps, labOptions)
                           : speeds(device, plan, rank, reps, speedsOut);
}
