//===- CalibrationTest.cpp - measured kernel times, read and refused ------===//
//
// Both shapes of file read (strata-run --profile-json's entries and the
// GPU check's plans), an entry measured in two plans takes the mean time
// per call, and every malformed file is refused naming what is wrong.
//
//===----------------------------------------------------------------------===//
#include "runtime/cluster/Calibration.h"

#include <gtest/gtest.h>

using namespace strata::runtime;

namespace {

TEST(Calibration, ReadsProfileJsonEntries) {
  Calibration c;
  ASSERT_EQ(c.parse(R"({"clock": "host", "rank": 0, "entries": [
      {"name": "gemm", "shape": "m=8 n=8 k=8 f32 nn", "calls": 4,
       "seconds": 0.002, "bytes": 768, "flops": 4096},
      {"name": "add", "shape": "[8] f32", "calls": 1, "seconds": 0}]})"),
            "");
  EXPECT_EQ(c.size(), 2u);
  EXPECT_DOUBLE_EQ(c.secondsPerCall("gemm", "m=8 n=8 k=8 f32 nn"), 0.0005);
  EXPECT_EQ(c.secondsPerCall("add", "[8] f32"), 0);
  EXPECT_EQ(c.secondsPerCall("gemm", "m=8 n=8 k=9 f32 nn"), -1);
  EXPECT_EQ(c.hits, 2u);
  EXPECT_EQ(c.misses, 1u);
}

TEST(Calibration, ReadsTheChecksPlansAndAveragesPerCall) {
  Calibration c;
  ASSERT_EQ(c.parse(R"({"gpu": {"gpu": "H200"}, "clock": "device", "plans": {
      "a": [{"name": "k", "shape": "s", "calls": 1, "seconds": 1.0}],
      "b": [{"name": "k", "shape": "s", "calls": 3, "seconds": 1.0}]}})"),
            "");
  EXPECT_DOUBLE_EQ(c.secondsPerCall("k", "s"), 0.5); // 2 s over 4 calls
}

TEST(Calibration, EveryMalformedFileIsRefused) {
  struct Case {
    const char *text, *message;
  };
  Case cases[] = {
      {"", "the calibration must be an object"},
      {"{}", "the calibration has no entries"},
      {R"({"entries": {}})", "entries must be a list of entries"},
      {R"({"entries": [{"name": "k", "shape": "s", "calls": 0, "seconds": 1}]})",
       "entries[0].calls must be a whole number from 1 to 1e12"},
      {R"({"entries": [{"name": "k", "shape": "s", "calls": 1, "seconds": -1}]})",
       "entries[0].seconds must be a number from 0 to 1e6"},
      {R"({"entries": [{"name": "k", "shape": "s", "calls": 1, "seconds": 1e999}]})",
       "entries[0].seconds must be a number from 0 to 1e6"},
      {R"({"entries": [{"name": "k", "shape": "s", "calls": 1, "seconds": 1e308}]})",
       "entries[0].seconds must be a number from 0 to 1e6"},
      {R"({"entries": [{"name": "k", "shape": "s", "calls": 5000000000000000000, "seconds": 1}]})",
       "entries[0].calls must be a whole number from 1 to 1e12"},
      {R"({"entries": [{"name": "k", "calls": 1, "seconds": 1}]})",
       "entries[0] needs a name, a shape, calls and seconds"},
      {R"({"entries": [{"name": 3, "shape": "s", "calls": 1, "seconds": 1}]})",
       "entries[0].name must be a string"},
      {R"({"plans": {"a": [{"name": "k", "shape": "s", "calls": 1, "seconds": 1}, 7]}})",
       "plans.a[1] must be an object"},
      {R"({"entries": []} x)", "the calibration has text after its object"},
  };
  for (const Case &c : cases) {
    Calibration calibration;
    std::string error = calibration.parse(c.text);
    EXPECT_NE(error.find(c.message), std::string::npos)
        << "expected '" << c.message << "', got '" << error << "'";
  }
}

TEST(Calibration, AFileThatIsNotThereIsNamed) {
  Calibration c;
  std::string error = c.load("/nonexistent/calibration.json");
  EXPECT_NE(error.find("/nonexistent/calibration.json"), std::string::npos)
      << error;
}

} // namespace
