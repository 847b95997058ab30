// The clock monitor on a GPU: NVML opens the CUDA device by its PCI bus id, and a timed GEMM's
// method carries the SM clock it ran at.
#include <iostream>

#include <gtest/gtest.h>

#include "profiler/common/clock_monitor.h"
#include "profiler/timing.h"
#include "tests/gpu/gpu_test_util.h"
#include "tests/gpu/square_gemm.h"

namespace hetplan::profiler {
namespace {

TEST(ClockMonitorOnGpu, ATimedGemmSaysWhichClockItRanAt) {
  HETPLAN_REQUIRE_GPU();
  CUDA_CHECK(cudaSetDevice(0));
  const DeviceInfo info = query_device(0);
  const auto clocks = ClockMonitor::open_nvml(info.pci_bus_id, true);
  ASSERT_TRUE(clocks->available()) << clocks->unavailable_reason();

  CudaStream stream;
  SquareGemm gemm(info, 8192, stream.get());
  TimingOptions o;
  o.target_s = 100e-3;  // about 100 ms of products: dozens of readings 2 ms apart
  o.clocks = clocks.get();
  const Timing t = time_launches([&](int64_t) { gemm.run(stream.get()); }, stream.get(), o);
  ASSERT_FALSE(t.clocks.empty()) << clocks->unavailable_reason();
  EXPECT_GE(t.clocks.samples, 5);
  // Any GPU hetplan targets runs its SMs between a few hundred MHz and ~2.1 GHz (H100 SXM's top
  // boost is 1980 MHz: its datasheet).
  EXPECT_GT(t.clocks.sm_mhz_min, 200);
  EXPECT_LT(t.clocks.sm_mhz_max, 3000);
  const Json m = method_json(t, o);
  ASSERT_TRUE(m.contains("clocks"));
  EXPECT_EQ(m["clocks"]["samples"], t.clocks.samples);
  std::cout << "8192^3 GEMMs: " << m["clocks"].dump() << "\n";
}

}  // namespace
}  // namespace hetplan::profiler
