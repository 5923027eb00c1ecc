//===- strata-inspect.cpp - what a plan holds, and its schedule drawn -----===//
//
//   strata-inspect PLAN                      ranks, memory, programs
//   strata-inspect PLAN --schedule-text      the pipeline schedule, drawn
//   strata-inspect PLAN --schedule-svg OUT   the same as an SVG picture
//   ... --trace TRACE                        from strata-run --trace times
//   strata-inspect PLAN --launches           a CUDA plan's distinct launches
//
// The schedule comes from the plan itself: each stage's steps (its first
// rank's), timed by the schedule simulator with unit costs, or by the
// times a run measured. Links the runtime only.
//
//===----------------------------------------------------------------------===//
#include "runtime/base/WholeFile.h"
#include "runtime/device/Trace.h"
#include "runtime/exec/KernelCost.h"
#include "runtime/exec/StepName.h"
#include "runtime/plan/Plan.h"
#include "runtime/schedule/PipelineSim.h"
#include "runtime/schedule/ScheduleNames.h"
#include "tools/strata-inspect/ScheduleDrawing.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

using namespace strata;
using namespace strata::runtime;

namespace {

const char *kUsage =
    "usage: strata-inspect PLAN [--schedule-text] [--schedule-svg OUT.svg]\n"
    "                           [--trace TRACE.json] [--kernels DIR]\n"
    "                           [--launches]\n"
    "  (no flag)            the plan's layout, each template's (stage's)\n"
    "                       ranks, memory and programs\n"
    "  --schedule-text      the pipeline schedule drawn for a terminal: a row\n"
    "                       per stage, a box per forward and backward\n"
    "  --schedule-svg FILE  the same drawing as an SVG picture\n"
    "  --trace FILE         time the drawing with a strata-run --trace of the\n"
    "                       plan (its last iteration) instead of unit costs\n"
    "  --kernels DIR        write a CUDA plan's generated kernels into DIR,\n"
    "                       NAME.cu (CUDA C++) and NAME.ptx for each\n"
    "  --launches           a CUDA plan's distinct launches, each stage's:\n"
    "                       kernel, grid, block, shared bytes, how many\n"
    "                       times a step, operands\n";

int fail(const std::string &message) {
  std::cerr << "strata-inspect: error: " << message << "\n";
  return 1;
}

void describe(const Plan &plan) {
  std::cout << "plan for model " << plan.model << ": " << plan.world()
            << " ranks (" << plan.layoutText() << ") from "
            << plan.templates.size() << " templates, " << plan.numMicrobatches
            << " microbatches of " << plan.microBatchSize << " x "
            << plan.seqLength << " tokens"
            << (plan.pipelineSchedule.empty()
                    ? std::string()
                    : ", " + plan.pipelineSchedule + " schedule")
            << "\n";
  if (plan.cudaArch.empty())
    std::cout << "target: cpu\n";
  else
    std::cout << "target: cuda " << plan.cudaArch << ", " << plan.code.size()
              << " generated kernels (--kernels DIR writes them)\n";
  // The loader gives each stage's ranks their stage's template.
  uint32_t perStage = plan.ranksPerStage();
  for (uint32_t s = 0; s < plan.pipelineParallel; ++s) {
    uint32_t first = plan.firstRankOf(s), t = plan.rankTemplates[first];
    const RankPlan &stage = *plan.templates[t];
    std::cout << "template " << t << " (stage " << s << ", "
              << rankRangeText(first, perStage) << "): persistent "
              << withThousands(stage.persistentBytes) << " + workspace "
              << withThousands(stage.workspaceBytes) << " + stash "
              << withThousands(stage.stashBytes) << " bytes per rank; "
              << stage.buffers.size() << " buffers, " << stage.params.size()
              << " parameters, " << stage.schedule.size() << " steps\n";
    for (const Program &program : stage.programs)
      std::cout << "  program " << program.name << " ("
                << phaseName(program.phase)
                << (program.chunk >= 0
                        ? " of chunk " + std::to_string(program.chunk)
                        : std::string())
                << "): " << program.instructions.size() << " instructions\n";
  }
}

/// Each generated kernel as DIR/NAME.cu and DIR/NAME.ptx.
int writeKernels(const Plan &plan, const std::string &dir) {
  if (plan.code.empty())
    return fail("the plan has no generated kernels: strata-compile --target "
                "cuda makes them");
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  if (error)
    return fail("cannot make directory '" + dir + "': " + error.message());
  for (const CodeObject &code : plan.code) {
    // A name from the plan becomes a file name: letters, digits, '_' only.
    bool plain =
        !code.name.empty() &&
        std::all_of(code.name.begin(), code.name.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '_';
        });
    if (!plain)
      return fail("generated kernel '" + code.name +
                  "' has a name that is not a file name");
    for (const auto &[suffix, text] :
         {std::pair{".cu", &code.source}, std::pair{".ptx", &code.ptx}}) {
      if (std::string error =
              runtime::writeFileWhole(dir + "/" + code.name + suffix, *text);
          !error.empty())
        return fail(error);
    }
  }
  std::cout << "wrote " << plan.code.size() << " kernels for " << plan.cudaArch
            << " to " << dir << " (NAME.cu, NAME.ptx)\n";
  return 0;
}

/// Each stage's distinct launches (its first rank's): a line each, with the
/// generated kernel, its launch shape and its operands; equal launches
/// (the same code, shape and operands) once, with how many times a step
/// runs them.
int listLaunches(const Plan &plan) {
  if (plan.code.empty())
    return fail("the plan has no generated kernels: strata-compile --target "
                "cuda makes them");
  for (uint32_t s = 0; s < plan.pipelineParallel; ++s) {
    const RankPlan &rank =
        *plan.templates[plan.rankTemplates[plan.firstRankOf(s)]];
    std::map<std::string, int> counts;
    std::vector<std::string> order;
    for (const Program &program : rank.programs)
      for (size_t i = 0; i < program.instructions.size(); ++i) {
        const LaunchOp *op = program.instructions[i].launch();
        if (!op || op->code < 0)
          continue; // a fused group's members run in its first launch
        if (size_t(op->code) >= plan.code.size() || op->grid.size() != 3 ||
            op->block.size() != 3)
          return fail("stage " + std::to_string(s) +
                      ": a launch without its code or launch shape");
        const CodeObject &code = plan.code[op->code];
        std::string line =
            code.name + " " + code.kernel + " grid " +
            std::to_string(op->grid[0]) + "x" + std::to_string(op->grid[1]) +
            "x" + std::to_string(op->grid[2]) + " block " +
            std::to_string(op->block[0] * op->block[1] * op->block[2]) +
            " shared " + std::to_string(op->sharedBytes) + " |";
        // A fused group's operands are its members'.
        size_t members = std::max<uint32_t>(1, op->fuse);
        for (size_t m = 0; m < members && i + m < program.instructions.size();
             ++m) {
          const LaunchOp *member = program.instructions[i + m].launch();
          if (!member)
            break;
          for (const Buffer *operand : launchOperands(rank, *member))
            line += operand ? " " + shapeText(operand->shape) + " " +
                                  dtypeName(operand->dtype)
                            : std::string(" -");
        }
        if (counts[line]++ == 0)
          order.push_back(line);
      }
    std::cout << "stage " << s << ": " << order.size()
              << " distinct launches\n";
    for (const std::string &line : order) {
      size_t bar = line.find(" |");
      std::cout << "  " << line.substr(0, bar) << " x" << counts[line] << " |"
                << line.substr(bar + 2) << "\n";
    }
  }
  return 0;
}

/// Each stage's order of forwards and backwards, from its first rank.
std::string stageOrders(const Plan &plan,
                        std::vector<std::vector<sim::Work>> &orders,
                        int &chunks) {
  chunks = 0;
  orders.assign(plan.pipelineParallel, {});
  for (uint32_t s = 0; s < plan.pipelineParallel; ++s) {
    const RankPlan &rank =
        *plan.templates[plan.rankTemplates[plan.firstRankOf(s)]];
    for (const Step &step : rank.schedule) {
      const Program &program = rank.programs[step.program];
      if (program.phase == Phase::Microbatch)
        return "the plan runs whole microbatches (no pipeline chunks): "
               "compile with --pipeline-model-parallel-size or a "
               "--pipeline-schedule to see a schedule";
      std::optional<sim::Work> work = workOf(program, step.microbatch);
      if (!work) // the optimizer
        continue;
      orders[s].push_back(*work);
      chunks = std::max(chunks, program.chunk + 1);
    }
  }
  return "";
}

/// Times from a trace: each stage's steps in its first rank's last
/// traced iteration, in milliseconds from that iteration's first start.
std::string
traceTimes(const Plan &plan, const std::string &path,
           const std::vector<std::vector<sim::Work>> &orders,
           std::vector<std::vector<std::pair<double, double>>> &times) {
  std::vector<std::vector<TraceEvent>> byRank;
  if (std::string error = readTraceSteps(path, byRank); !error.empty())
    return error;
  times.assign(orders.size(), {});
  int64_t iteration = -1;
  for (const auto &events : byRank)
    for (const TraceEvent &e : events)
      iteration = std::max(iteration, e.iteration);
  for (size_t s = 0; s < orders.size(); ++s) {
    size_t rank = plan.firstRankOf(uint32_t(s));
    if (rank >= byRank.size())
      return "trace '" + path + "' has no steps of rank " +
             std::to_string(rank) + ": is it a trace of this plan?";
    std::vector<sim::Work> seen;
    for (const TraceEvent &e : byRank[rank]) {
      std::optional<sim::Phase> phase =
          e.phase == phaseName(Phase::Forward)    ? sim::Phase::Forward
          : e.phase == phaseName(Phase::Backward) ? sim::Phase::Backward
          : e.phase == phaseName(Phase::Weight)
              ? std::optional<sim::Phase>(sim::Phase::Weight)
              : std::nullopt;
      if (e.iteration != iteration || !phase)
        continue;
      seen.push_back({*phase, e.chunk, e.microbatch});
      // A step's box starts when its receives have their data: the wait
      // before it is bubble, as in the simulated picture.
      times[s].push_back({(e.startUs + e.waitUs) / 1000.0,
                          (e.startUs + e.durationUs) / 1000.0});
    }
    if (seen != orders[s])
      return "trace '" + path + "': stage " + std::to_string(s) +
             " ran another order than the plan's: is it a trace of this "
             "plan?";
  }
  return "";
}

} // namespace

int main(int argc, char **argv) {
  std::string planPath, svgPath, tracePath, kernelsDir;
  bool text = false, launches = false;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&](std::string &target) {
      if (i + 1 >= argc)
        return false;
      target = argv[++i];
      return true;
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      return 0;
    }
    if (arg == "--schedule-text") {
      text = true;
    } else if (arg == "--launches") {
      launches = true;
    } else if (arg == "--schedule-svg") {
      if (!value(svgPath))
        return fail("--schedule-svg needs a file to write");
    } else if (arg == "--kernels") {
      if (!value(kernelsDir))
        return fail("--kernels needs a directory to write into");
    } else if (arg == "--trace") {
      if (!value(tracePath))
        return fail("--trace needs a trace file (strata-run --trace)");
    } else if (arg.rfind("--", 0) == 0) {
      return fail("unknown flag '" + arg + "'; see strata-inspect --help");
    } else if (planPath.empty()) {
      planPath = arg;
    } else {
      return fail("one plan at a time: got '" + planPath + "' and '" + arg +
                  "'");
    }
  }
  if (planPath.empty())
    return fail("no plan given\n" + std::string(kUsage));
  Plan plan;
  // Templates decoded, no rank resolved: a 3072-rank plan reads as fast as
  // a small one (strata-run --check resolves and checks every rank).
  LoadOptions load;
  load.resolve = false;
  if (std::string error = loadPlan(planPath, plan, load); !error.empty())
    return fail(planPath + ": " + error);
  if (!kernelsDir.empty())
    return writeKernels(plan, kernelsDir);
  if (launches)
    return listLaunches(plan);
  if (!text && svgPath.empty()) {
    if (!tracePath.empty())
      return fail("--trace times a drawing: add --schedule-text or "
                  "--schedule-svg");
    describe(plan);
    return 0;
  }

  std::vector<std::vector<sim::Work>> orders;
  int chunks = 0;
  if (std::string error = stageOrders(plan, orders, chunks); !error.empty())
    return fail(error);
  inspect::Picture picture;
  picture.stages = int(plan.pipelineParallel);
  picture.chunksPerStage = chunks / picture.stages;
  picture.microbatches = int(plan.numMicrobatches);
  std::optional<sim::ScheduleKind> known =
      sim::parseSchedule(plan.pipelineSchedule);
  std::string kind = known ? sim::scheduleTitle(*known) : plan.pipelineSchedule;
  picture.title = kind + ": " + std::to_string(picture.stages) +
                  " stages (p), " + std::to_string(picture.chunksPerStage) +
                  " chunks per stage (v), " +
                  std::to_string(picture.microbatches) + " microbatches (m)";
  if (tracePath.empty()) {
    picture.timed = sim::simulate(orders, chunks, picture.microbatches,
                                  sim::unitCosts(orders), plan.placement());
    if (!picture.timed.deadlock.empty())
      return fail("the plan's schedule cannot run: " + picture.timed.deadlock);
  } else {
    std::vector<std::vector<std::pair<double, double>>> times;
    if (std::string error = traceTimes(plan, tracePath, orders, times);
        !error.empty())
      return fail(error);
    picture.timed = sim::fromMeasured(orders, times);
    picture.unit = "ms";
    picture.title += ", measured";
  }
  if (text)
    std::cout << inspect::drawText(picture);
  if (!svgPath.empty())
    if (std::string error =
            runtime::writeFileWhole(svgPath, inspect::drawSvg(picture));
        !error.empty())
      return fail(error);
  return 0;
}
