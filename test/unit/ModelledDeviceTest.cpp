//===- ModelledDeviceTest.cpp - a rank's streams as the sim issues them ---===//
//
// Where the compute stream runs on the host that issues (a CPU rank, the
// spec's synchronous_compute), another stream gets an instruction only
// once the compute issued before it has run; on a GPU it may start at
// once.
//
//===----------------------------------------------------------------------===//
#include "runtime/predict/ModelledDevice.h"

#include <gtest/gtest.h>

using namespace strata::runtime;
using namespace strata::runtime::predict;

namespace {

ClusterSpec oneByteASecond(bool synchronous) {
  ClusterSpec spec;
  spec.gpusPerNode = 1;
  spec.gpu.peakFlops = {{"bf16", 1}, {"fp32", 1}};
  spec.gpu.hbmBytesPerSecond = 1;
  spec.gpu.hbmEfficiency = 1;
  spec.gpu.synchronousCompute = synchronous;
  return spec;
}

TEST(ModelledDevice, ASynchronousComputeStreamHoldsBackTheOthersIssues) {
  for (bool synchronous : {false, true}) {
    ClusterSpec spec = oneByteASecond(synchronous);
    CostModel costs(spec);
    Timeline timeline;
    ModelledDevice device(timeline, costs, nullptr, 0);
    device.createEvents(1);
    device.fillZero(Stream::Compute, nullptr, 3); // 3 s on compute
    device.fillZero(Stream::Comm, nullptr, 1);    // then 1 s, issued after
    device.record(Stream::Comm, 0);
    ASSERT_EQ(timeline.solve(), "");
    uint32_t comm = device.lane(Stream::Comm);
    OpRef last{comm, timeline.size(comm) - 1};
    EXPECT_EQ(timeline.end(last), synchronous ? 4 : 1)
        << (synchronous ? "synchronous" : "a GPU's");
  }
}

} // namespace
