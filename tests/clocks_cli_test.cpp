// Clock records end to end: a kernel bench JSON whose results carry the SM clock they ran at is
// imported with them, and `hetplan fit` prints and writes the clocks per class of measurement.
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/calibration.h"
#include "costmodel/document.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::run_hetplan;

const std::string kBench = std::string(HETPLAN_TEST_DATA) + "/kernel_bench/h100_subset.json";

bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}

Json clocks(double median, double lowest, std::vector<std::string> reasons, int limited) {
  return {{"samples", 8},
          {"sm_mhz_median", median},
          {"sm_mhz_min", lowest},
          {"sm_mhz_max", 1980},
          {"power_w_median", 640.5},
          {"reasons", reasons},
          {"power_thermal_samples", limited},
          {"read_us_median", 35.0}};
}

TEST(ClocksCli, KernelBenchClocksAreImportedAndFitPrintsThemByClass) {
  const auto dir = testing::temp_dir("clocks_cli");
  Json bench = Json::parse(std::ifstream(kBench));
  bench["context"]["clocks"] = "clocks read through NVML every 2 ms during each timed region";
  // memcpy_d2d at the top clock; layernorm forward held by the power cap in 3 of 8 readings.
  ASSERT_EQ(bench["results"][0]["case"], "memcpy_d2d");
  ASSERT_EQ(bench["results"][3]["case"], "layernorm_fwd_bf16");
  bench["results"][0]["clocks"] = clocks(1980, 1980, {}, 0);
  bench["results"][3]["clocks"] = clocks(1755, 1620, {"sw_power_cap"}, 3);
  const fs::path in = dir / "bench.json", cal = dir / "kernels.json";
  std::ofstream(in) << bench.dump(1);
  auto r = run_hetplan("import --format kernel-bench " + in.string() + " --out " + cal.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CalibrationFile c = load_calibration(cal);
  EXPECT_TRUE(has(c.context.notes, "clocks read through NVML every 2 ms")) << c.context.notes;
  ASSERT_TRUE(c.kernels[3].method.contains("clocks"));
  EXPECT_EQ(c.kernels[3].method["clocks"]["sm_mhz_median"], 1755);
  EXPECT_EQ(c.kernels[3].method["clocks"]["reasons"], Json({"sw_power_cap"}));
  EXPECT_FALSE(c.kernels[1].method.contains("clocks"));

  const std::string q = (dir / "q.json").string();
  r = run_hetplan("fit " + cal.string() + " --out " + (dir / "p.json").string() + " --json " + q);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output, "SM clock while timed")) << r.output;
  EXPECT_TRUE(has(r.output, "kernel bandwidth probe")) << r.output;
  EXPECT_TRUE(has(r.output, "1755 MHz [1755, 1755], lowest 1620, 640 W; 1 limited (sw_power_cap)"))
      << r.output;
  const Json report = load_document(q).root;
  const Json& classes = report["gpus"]["h100-sxm"]["clocks"];
  ASSERT_EQ(classes.size(), 2u) << classes.dump();
  EXPECT_EQ(classes[0]["what"], "kernel bandwidth probe");
  EXPECT_EQ(classes[1]["what"], "kernel layernorm forward");
  EXPECT_EQ(classes[1]["power_thermal_measurements"], 1);
  EXPECT_EQ(classes[1]["sm_mhz_min"], 1620);

  EXPECT_FALSE(has(r.output, "warning: ")) << r.output;  // the power cap is a loaded GPU's norm

  // Heat is not: the fit says which class ran hot and at what clock.
  bench["results"][3]["clocks"] = clocks(1410, 990, {"sw_power_cap", "hw_thermal"}, 5);
  std::ofstream(in) << bench.dump(1);
  ASSERT_EQ(run_hetplan("import --format kernel-bench " + in.string() + " --out " + cal.string())
                .exit_code,
            0);
  r = run_hetplan("fit " + cal.string() + " --out " + (dir / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r.output,
                  "warning: 1 measurement(s) of class \"kernel layernorm forward\" ran while NVML "
                  "reported hw_thermal: the GPU was held below its clock by more than its power "
                  "cap (lowest reading 990 MHz)"))
      << r.output;

  // A malformed record is refused at the import, by file and key.
  bench["results"][3]["clocks"]["reasons"] = {"too_warm"};
  std::ofstream(in) << bench.dump(1);
  r = run_hetplan("import --format kernel-bench " + in.string() + " --out " + cal.string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(has(r.output, "bench.json: results[3].clocks.reasons")) << r.output;
  EXPECT_TRUE(has(r.output, "\"too_warm\"")) << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
