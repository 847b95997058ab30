// Clock records (costmodel/clocks.h, clock_classes.h): NVML's reason bits by name, the summary of
// a timed region's readings, its JSON form and the classes `hetplan fit` prints.
#include <gtest/gtest.h>

#include "costmodel/clock_classes.h"
#include "costmodel/clocks.h"
#include "costmodel/errors.h"

namespace hetplan {
namespace {

TEST(ClockReasons, NameNvmlsBitsAndReadThemBack) {
  // nvml.h: SwPowerCap 0x4, HwThermalSlowdown 0x40; 0x200 has no name here.
  const std::vector<std::string> names = clock_reason_names(0x4 | 0x40 | 0x200);
  EXPECT_EQ(names, (std::vector<std::string>{"sw_power_cap", "hw_thermal", "0x200"}));
  for (int b = 0; b < 12; ++b) {
    const uint64_t bit = uint64_t{1} << b;
    const auto n = clock_reason_names(bit);
    ASSERT_EQ(n.size(), 1u);
    EXPECT_EQ(clock_reason_bit(n[0]), bit) << n[0];
  }
  EXPECT_TRUE(clock_reason_names(0).empty());
  EXPECT_EQ(clock_reason_bit("bogus"), std::nullopt);
  EXPECT_EQ(clock_reason_bit("0x"), std::nullopt);
  EXPECT_EQ(clock_reason_bit("0x0"), std::nullopt);
  EXPECT_EQ(clock_reason_bit("0x2g"), std::nullopt);
  // Power and thermal reasons, not idle, sync boost or application clocks.
  EXPECT_EQ(kClockReasonsPowerThermal, uint64_t{0x4 | 0x8 | 0x20 | 0x40 | 0x80});
}

std::vector<ClockSample> three_readings() {
  return {{1980, 610.0, 0, 40e-6},
          {1755, std::nullopt, kClockReasonSwPowerCap, 60e-6},
          {1620, 700.0, kClockReasonSwPowerCap | kClockReasonHwSlowdown, 50e-6}};
}

TEST(ClockSummary, MedianExtremesReasonsAndPowerOfTheReadings) {
  const ClockSummary s = summarize_clocks(three_readings());
  EXPECT_EQ(s.samples, 3);
  EXPECT_DOUBLE_EQ(s.sm_mhz_median, 1755);
  EXPECT_DOUBLE_EQ(s.sm_mhz_min, 1620);
  EXPECT_DOUBLE_EQ(s.sm_mhz_max, 1980);
  ASSERT_TRUE(s.power_w_median);
  EXPECT_DOUBLE_EQ(*s.power_w_median, 655);  // of the two readings that have it
  EXPECT_EQ(s.reasons, kClockReasonSwPowerCap | kClockReasonHwSlowdown);
  EXPECT_EQ(s.power_thermal_samples, 2);
  EXPECT_DOUBLE_EQ(s.read_s_median, 50e-6);
  EXPECT_TRUE(summarize_clocks({}).empty());
  EXPECT_FALSE(summarize_clocks({{1400, std::nullopt, 0, 0}}).power_w_median);
}

TEST(ClockSummary, JsonRoundTrips) {
  const ClockSummary s = summarize_clocks(three_readings());
  const Json j = to_json(s);
  EXPECT_EQ(j["reasons"], Json({"sw_power_cap", "hw_slowdown"}));
  EXPECT_DOUBLE_EQ(j["read_us_median"].get<double>(), 50);
  const ClockSummary back =
      clock_summary_from_json(ObjectReader(j, "f.json", "gemm[0].method.clocks"));
  EXPECT_EQ(back.samples, s.samples);
  EXPECT_DOUBLE_EQ(back.sm_mhz_median, s.sm_mhz_median);
  EXPECT_DOUBLE_EQ(back.sm_mhz_min, s.sm_mhz_min);
  EXPECT_DOUBLE_EQ(back.sm_mhz_max, s.sm_mhz_max);
  EXPECT_EQ(back.power_w_median, s.power_w_median);
  EXPECT_EQ(back.reasons, s.reasons);
  EXPECT_EQ(back.power_thermal_samples, s.power_thermal_samples);
  EXPECT_NEAR(back.read_s_median, s.read_s_median, 1e-15);
}

// The error names the file, the key path and what was expected.
void expect_error(Json j, const std::string& needle) {
  try {
    (void)clock_summary_from_json(ObjectReader(j, "cal.json", "layers[3].method.forward.clocks"));
    ADD_FAILURE() << "accepted " << j.dump();
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cal.json"), std::string::npos) << what;
    EXPECT_NE(what.find("layers[3].method.forward.clocks"), std::string::npos) << what;
    EXPECT_NE(what.find(needle), std::string::npos) << what;
  }
}

TEST(ClockSummary, MalformedRecordsAreNamed) {
  const Json good = to_json(summarize_clocks(three_readings()));
  Json j = good;
  j.erase("samples");
  expect_error(j, "samples");
  j = good;
  j["sm_mhz_max"] = 1700;
  expect_error(j, "sm_mhz_min <= sm_mhz_median <= sm_mhz_max");
  j = good;
  j["reasons"] = {"sw_power_cap", "too_hot"};
  expect_error(j, "\"too_hot\"");
  j = good;
  j["power_thermal_samples"] = 4;
  expect_error(j, "expected 0 to samples (3), found 4");
  j = good;
  j["sm_mhz"] = 1;
  expect_error(j, "sm_mhz");
}

CalibrationFile file_with_clocks() {
  auto clocks = [](double mhz, uint64_t reasons) {
    return to_json(summarize_clocks({{mhz, 650.0, reasons, 0}}));
  };
  CalibrationFile f;
  f.origin = "cal.json";
  for (double mhz : {1980.0, 1755.0, 1620.0}) {
    GemmMeasurement g;
    g.dtype = Dtype::kBf16;
    g.method =
        Json{{"samples", 10}, {"clocks", clocks(mhz, mhz < 1900 ? kClockReasonSwPowerCap : 0)}};
    f.gemm.push_back(g);
  }
  GemmMeasurement unclocked;  // an older file's record: no class entry
  unclocked.dtype = Dtype::kFp16;
  unclocked.method = Json{{"samples", 10}};
  f.gemm.push_back(unclocked);
  KernelMeasurement k;
  k.kernel = "attention_fwd_bf16";
  k.params = Json{{"family", "attention"}, {"pass", "forward"}};
  k.method = Json{{"clocks", clocks(1980, 0)}};
  f.kernels.push_back(k);
  KernelMeasurement copy;
  copy.kernel = "d2d_copy";
  copy.params = Json{{"copy_bytes", 1024}};
  copy.method = Json{{"clocks", clocks(1500, kClockReasonHwThermal)}};
  f.kernels.push_back(copy);
  LayerMeasurement l;
  l.style = "llama";
  l.method = Json{{"forward", {{"clocks", clocks(1600, kClockReasonSwPowerCap)}}},
                  {"backward_input", {{"samples", 3}}}};
  f.layers.push_back(l);
  return f;
}

TEST(ClockClasses, GroupGemmsKernelsAndLayerPasses) {
  const CalibrationFile f = file_with_clocks();
  const std::vector<ClockClass> c = clock_classes({&f});
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].what, "gemm bf16");
  EXPECT_EQ(c[0].measurements, 3);
  EXPECT_DOUBLE_EQ(c[0].sm_mhz_median, 1755);
  EXPECT_DOUBLE_EQ(c[0].sm_mhz_p10, 1620 + 0.2 * 135);  // interpolated between 1620 and 1755
  EXPECT_DOUBLE_EQ(c[0].sm_mhz_p90, 1755 + 0.8 * 225);
  EXPECT_DOUBLE_EQ(c[0].sm_mhz_min, 1620);
  EXPECT_EQ(c[0].power_thermal, 2);
  EXPECT_EQ(c[0].reasons, kClockReasonSwPowerCap);
  EXPECT_EQ(c[0].power_w_median, 650.0);
  EXPECT_EQ(c[1].what, "kernel attention forward");
  EXPECT_EQ(c[1].power_thermal, 0);
  EXPECT_EQ(c[2].what, "kernel d2d_copy");
  EXPECT_EQ(c[2].reasons, kClockReasonHwThermal);
  EXPECT_EQ(c[2].abnormal, 1);  // heat, not the power cap
  EXPECT_EQ(c[0].abnormal, 0);
  EXPECT_EQ(c[3].what, "layer llama F");
  EXPECT_DOUBLE_EQ(c[3].sm_mhz_median, 1600);
  const Json j = to_json(c[3]);
  EXPECT_EQ(j["reasons"], Json({"sw_power_cap"}));
  EXPECT_EQ(j["power_thermal_measurements"], 1);
}

TEST(ClockClasses, AMalformedRecordNamesItsFileAndKey) {
  CalibrationFile f = file_with_clocks();
  f.layers[0].method["forward"]["clocks"]["sm_mhz_median"] = -5;
  try {
    (void)clock_classes({&f});
    ADD_FAILURE() << "accepted a negative clock";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cal.json"), std::string::npos) << what;
    EXPECT_NE(what.find("layers[0].method.forward.clocks.sm_mhz_median"), std::string::npos)
        << what;
  }
}

}  // namespace
}  // namespace hetplan
