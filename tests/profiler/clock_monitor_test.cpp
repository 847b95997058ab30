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

// NVML's calls as the monitor makes them, against tests/fake_nvml (NVML's signatures and codes).
class FakeNvml : public ::testing::Test {
 protected:
  void SetUp() override {
    lib_ = dlopen(HETPLAN_FAKE_NVML, RTLD_NOW | RTLD_LOCAL);
    ASSERT_NE(lib_, nullptr) << dlerror();
    set_ = reinterpret_cast<SetFn>(dlsym(lib_, "fake_nvml_set"));
    ASSERT_NE(set_, nullptr);
  }
  void TearDown() override {
    if (set_) set_(1980, 0, 0, -1);
    if (lib_) dlclose(lib_);
  }
  using SetFn = void (*)(unsigned, unsigned, unsigned long long, int);
  void* lib_ = nullptr;
  SetFn set_ = nullptr;
};

TEST_F(FakeNvml, ReadsTheDevicesClockPowerAndReasons) {
  set_(1755, 650500, 0x4 | 0x40, -1);  // sw_power_cap and hw_thermal, 650.5 W
  EXPECT_EQ(Nvml(HETPLAN_FAKE_NVML).driver_version(), "580.159.04");
  auto m = ClockMonitor::open_nvml("0000:00:06.0", true, HETPLAN_FAKE_NVML);
  ASSERT_TRUE(m->available()) << m->unavailable_reason();
  EXPECT_EQ(m->describe(), "clocks read through NVML every 2 ms during each timed region");
  const ClockSummary s = m->watch([] { return false; });
  EXPECT_EQ(s.samples, 1);
  EXPECT_DOUBLE_EQ(s.sm_mhz_median, 1755);
  EXPECT_EQ(s.power_w_median, 650.5);
  EXPECT_EQ(clock_reason_names(s.reasons),
            (std::vector<std::string>{"sw_power_cap", "hw_thermal"}));
  EXPECT_EQ(s.power_thermal_samples, 1);
  EXPECT_GE(s.read_s_median, 0);

  set_(1410, 0, 0, -1);  // a board that does not report power
  const ClockSummary quiet = m->watch([] { return false; });
  EXPECT_DOUBLE_EQ(quiet.sm_mhz_median, 1410);
  EXPECT_FALSE(quiet.power_w_median);
  EXPECT_EQ(quiet.reasons, 0u);
}

TEST_F(FakeNvml, AnUnknownDeviceAndALostGpuAreSaidInNvmlsWords) {
  auto none = ClockMonitor::open_nvml("0000:3b:00.0", true, HETPLAN_FAKE_NVML);
  EXPECT_FALSE(none->available());
  EXPECT_EQ(none->unavailable_reason(),
            "clocks not read: nvmlDeviceGetHandleByPciBusId_v2(\"0000:3b:00.0\"): Not Found (NVML "
            "error 6)");
  set_(1980, 0, 0, 3);  // the check at opening and two readings succeed, then the GPU is lost
  auto m = ClockMonitor::open_nvml("0000:00:06.0", true, HETPLAN_FAKE_NVML);
  ASSERT_TRUE(m->available());
  // Busy for up to a second: readings every 2 ms until three fail (~8 ms).
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  const ClockSummary s = m->watch([&] { return std::chrono::steady_clock::now() < end; });
  EXPECT_EQ(s.samples, 2);
  EXPECT_FALSE(m->available());
  EXPECT_EQ(m->unavailable_reason(),
            "clocks no longer read after 3 failed readings in a row: "
            "nvmlDeviceGetClockInfo(SM): GPU is lost (NVML error 15)");
  auto missing = ClockMonitor::open_nvml("0000:00:06.0", true, "/nonexistent/libnvidia-ml.so.1");
  EXPECT_NE(missing->unavailable_reason().find("clocks not read: NVML not loaded ("),
            std::string::npos)
      << missing->unavailable_reason();
}

}  // namespace
}  // namespace hetplan::profiler
