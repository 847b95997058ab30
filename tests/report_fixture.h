// Real inputs for the report tests, made once per test process with the built hetplan binary:
// the sample Megatron-LM logs imported into measurements, `hetplan predict --json` for each
// measured strategy (gpt2-medium on one p4d.24xlarge), and `hetplan search --json`.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/measurements.h"

namespace hetplan::testing {

struct ReportInputsOnDisk {
  std::filesystem::path dir;
  std::string measurements;              // imported from tests/data/megatron/*.log
  std::vector<std::string> predictions;  // one predict output per measured strategy, in order
  std::string search;                    // search --json output (3 strategies)
  std::string calibration;               // tests/data/calibration/a100-sample.json
};

// Removes the inputs' folder when the test process ends.
struct RemoveAtExit {
  std::filesystem::path dir;
  ~RemoveAtExit() {
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
  }
};

inline const ReportInputsOnDisk& report_inputs() {
  static const ReportInputsOnDisk inputs = [] {
    ReportInputsOnDisk in;
    in.dir = temp_dir("report_inputs");
    static const RemoveAtExit cleanup{in.dir};
    const std::string data = HETPLAN_TEST_DATA;
    in.measurements = (in.dir / "megatron.json").string();
    const auto imported = run_hetplan(
        "import --format megatron " + data + "/megatron/gpt2-medium_tp2_pp2_dp2.log " + data +
        "/megatron/gpt2-medium_tp1_pp4_dp2_uneven.log " + data +
        "/megatron/gpt2-medium_tp4_dp2_full.log " + data +
        "/megatron/gpt2-medium_dp8_mb32_oom.log --model gpt2-medium --cluster p4d.24xlarge:1 "
        "--gpu-type a100-40gb --out " +
        in.measurements);
    EXPECT_EQ(imported.exit_code, 0) << imported.output;
    const MeasurementsFile f = load_measurements(in.measurements);
    for (size_t i = 0; i < f.measurements.size(); ++i) {
      const auto strategy = in.dir / ("strategy" + std::to_string(i) + ".json");
      std::ofstream(strategy) << f.measurements[i].strategy.dump();
      const auto pred = in.dir / ("predict" + std::to_string(i) + ".json");
      const auto r =
          run_hetplan("predict --model gpt2-medium --cluster p4d.24xlarge:1 --strategy " +
                      strategy.string() + " --json " + pred.string());
      EXPECT_EQ(r.exit_code, 0) << r.output;
      in.predictions.push_back(pred.string());
    }
    in.search = (in.dir / "search.json").string();
    const auto s = run_hetplan(
        "search --model gpt2-medium --cluster p4d.24xlarge:1 "
        "--global-batch 64 --top 3 --quiet --json " +
        in.search);
    EXPECT_EQ(s.exit_code, 0) << s.output;
    in.calibration = data + "/calibration/a100-sample.json";
    return in;
  }();
  return inputs;
}

}  // namespace hetplan::testing
