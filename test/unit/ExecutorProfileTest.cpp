//===- ExecutorProfileTest.cpp - which library ran each launch ------------===//
//
// --profile, --profile-json and --trace name the library that ran a launch
// in place of the plan's kernel (Backend::launchLibrary: the cuda
// backend's cuDNN attention). No GPU here: a CPU backend that says a
// library runs the attention launches, over a compiled gpt-tiny plan
// (STRATA_EXECUTOR_TEST_PLAN, written by the ctest fixture), trained for an
// iteration with the profile on.
//
//===----------------------------------------------------------------------===//
#include "runtime/comm/RingCollectives.h"
#include "runtime/comm/Transport.h"
#include "runtime/cpu/CpuBackend.h"
#include "runtime/data/Dataset.h"
#include "runtime/exec/Executor.h"
#include "runtime/plan/KernelCatalog.h"
#include "runtime/train/TrainingLoop.h"

#include <gtest/gtest.h>

using namespace strata::runtime;

namespace {

/// The CPU's backend, its attention launches said to be a library's.
class AttentionByLibrary : public cpu::CpuBackend {
public:
  std::string launchLibrary(const LaunchOp &op) const override {
    return op.kernel == KernelId::AttentionFwd ||
                   op.kernel == KernelId::AttentionBwd
               ? "cudnn"
               : "";
  }
};

TEST(ExecutorProfile, NamesTheLibraryThatRanALaunch) {
  Plan plan;
  ASSERT_EQ(loadPlan(STRATA_EXECUTOR_TEST_PLAN, plan), "");
  AttentionByLibrary backend;
  std::unique_ptr<Transport> transport = makeLocalTransport(makeLocalHub(1), 0);
  RingCollectives collectives(
      *transport,
      [&backend](Stream stream, const std::string &name,
                 std::function<void()> work) {
        backend.submit(stream, name, std::move(work));
      },
      std::chrono::milliseconds(60000));
  Executor executor(plan, 0, backend, collectives);
  ASSERT_EQ(executor.load(), "");
  TrainOptions options;
  options.trainIters = 1;
  options.profile = true;
  executor.enableProfile();
  executor.enableTrace(std::chrono::steady_clock::now());
  std::unique_ptr<Dataset> data =
      makeSyntheticDataset(1, plan.vocabSize, plan.seqLength);
  TrainingLoop loop(executor, options, *data);
  ASSERT_TRUE(loop.run(nullptr));

  // The per-name totals: attention under the library's name, the rest
  // (gemms, the plan's other kernels) under their own.
  std::map<std::string, std::pair<double, int64_t>> times = executor.profile();
  EXPECT_EQ(times.count("attention_fwd"), 0u);
  EXPECT_EQ(times.count("attention_bwd"), 0u);
  ASSERT_EQ(times.count("attention_fwd (cudnn)"), 1u);
  ASSERT_EQ(times.count("attention_bwd (cudnn)"), 1u);
  EXPECT_EQ(times["attention_fwd (cudnn)"].second,
            int64_t(plan.numMicrobatches) * 2); // two layers
  EXPECT_EQ(times.count("gemm"), 1u);

  // The last iteration's entries: the library beside the kernel's own name.
  size_t byLibrary = 0, byPlan = 0;
  for (const auto &[key, entry] : executor.profileDetail()) {
    bool attention = entry.cost.name == "attention_fwd" ||
                     entry.cost.name == "attention_bwd";
    EXPECT_EQ(entry.library, attention ? "cudnn" : "") << key;
    (attention ? byLibrary : byPlan) += 1;
  }
  EXPECT_EQ(byLibrary, 2u);
  EXPECT_GT(byPlan, 0u);
  std::string json = loop.profileJson();
  EXPECT_NE(json.find("\"name\": \"attention_fwd\", \"shape\""),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"library\": \"cudnn\""), std::string::npos) << json;

  // The trace's events likewise.
  size_t traced = 0;
  for (const TraceEvent &event : executor.takeTrace()) {
    EXPECT_NE(event.name, "attention_fwd");
    traced += event.name == "attention_bwd (cudnn)";
  }
  EXPECT_EQ(traced, size_t(plan.numMicrobatches) * 2);
}

} // namespace
