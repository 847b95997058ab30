// The clock monitor (profiler/common/clock_monitor.h) with a scripted source of readings: when it
// reads, how failures turn it off, and NVML's absence on a machine without a driver.
#include <dlfcn.h>

#include <chrono>
#include <thread>

#include <gtest/gtest.h>

#include "profiler/common/clock_monitor.h"

namespace hetplan::profiler {
namespace {

// Readings 1000, 1001, ... MHz; the calls listed in `fail_at` fail.
struct Script {
  int calls = 0;
  std::vector<int> fail_at;
  ClockMonitor::ReadFn fn() {
    return [this]() -> ClockRead {
      const int i = calls++;
      for (int f : fail_at)
        if (f == i) return {std::nullopt, "GPU is lost"};
      return {ClockSample{1000.0 + i, std::nullopt, 0, 1e-6}, ""};
    };
  }
};

// busy() true for its first `n` calls.
std::function<bool()> busy_for(int n) {
  auto left = std::make_shared<int>(n);
  return [left] { return (*left)-- > 0; };
}

TEST(ClockMonitor, ReadsOnceAtOnceAndAtEveryIntervalWhileBusy) {
  Script s;
  ClockMonitor m(s.fn(), 0.0, "script");  // interval 0: a reading at every poll
  ASSERT_TRUE(m.available());
  const ClockSummary one = m.watch(busy_for(0));
  EXPECT_EQ(one.samples, 1);  // the region had ended: still one reading
  EXPECT_DOUBLE_EQ(one.sm_mhz_median, 1000);
  const ClockSummary five = m.watch(busy_for(4));
  EXPECT_EQ(five.samples, 5);
  EXPECT_DOUBLE_EQ(five.sm_mhz_min, 1001);
  EXPECT_DOUBLE_EQ(five.sm_mhz_max, 1005);
  std::vector<ClockSample> readings;
  m.read_while(busy_for(2), readings);
  m.read_while(busy_for(1), readings);
  EXPECT_EQ(readings.size(), 5u);  // appended across waits (the kernel bench's samples)
  EXPECT_EQ(m.describe(), "clocks read through script every 0 ms during each timed region");
}

TEST(ClockMonitor, TheIntervalLimitsTheReadings) {
  Script s;
  ClockMonitor m(s.fn(), 10e-3, "script");
  const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(35);
  const ClockSummary c = m.watch([&] { return std::chrono::steady_clock::now() < end; });
  // At most one at once and one per 10 ms of the 35 (fewer if the host sleeps late).
  EXPECT_GE(c.samples, 1);
  EXPECT_LE(c.samples, 4);
}

TEST(ClockMonitor, FailedReadingsAreSkippedAndThreeInARowTurnItOff) {
  Script s;
  s.fail_at = {1, 3, 4, 5};
  ClockMonitor m(s.fn(), 0.0, "script");
  // Calls 0 (ok), 1 (fails), 2 (ok): one failure, then reset.
  EXPECT_EQ(m.watch(busy_for(2)).samples, 2);
  EXPECT_TRUE(m.available());
  // Calls 3, 4, 5 fail: off, with the source's message; busy() is no longer asked.
  const ClockSummary c = m.watch(busy_for(100));
  EXPECT_TRUE(c.empty());
  EXPECT_FALSE(m.available());
  EXPECT_NE(m.unavailable_reason().find("3 failed readings in a row: GPU is lost"),
            std::string::npos)
      << m.unavailable_reason();
  EXPECT_EQ(s.calls, 6);
  EXPECT_TRUE(m.watch(busy_for(1)).empty());
  EXPECT_EQ(s.calls, 6);
  EXPECT_EQ(m.describe(), m.unavailable_reason());
}

TEST(ClockMonitor, OffWhenAskedOrWhereNvmlIsMissing) {
  auto off = ClockMonitor::open_nvml("0000:00:06.0", false);
  EXPECT_FALSE(off->available());
  EXPECT_EQ(off->unavailable_reason(), "clocks not read (--no-clocks)");
  EXPECT_TRUE(off->watch([] { return false; }).empty());

  void* lib = dlopen("libnvidia-ml.so.1", RTLD_LAZY | RTLD_LOCAL);
  if (lib != nullptr) {
    dlclose(lib);
    // A driver is installed: a bus id no GPU has is refused by name (or NVML itself would not
    // start, in a container without the device nodes).
    auto none = ClockMonitor::open_nvml("00ff:ff:1f.7", true);
    EXPECT_FALSE(none->available());
    const std::string& why = none->unavailable_reason();
    EXPECT_TRUE(why.find("00ff:ff:1f.7") != std::string::npos ||
                why.find("nvmlInit_v2") != std::string::npos)
        << why;
    return;
  }
  auto missing = ClockMonitor::open_nvml("0000:00:06.0", true);
  EXPECT_FALSE(missing->available());
  EXPECT_NE(missing->unavailable_reason().find("NVML not loaded"), std::string::npos)
      << missing->unavailable_reason();
  EXPECT_TRUE(missing->watch([] { return true; }).empty());  // returns at once
}

}  // namespace
}  // namespace hetplan::profiler
