// What a calibration file must say for its measurements to be used (context.gpu_type), and how
// fit and the commands with a cluster treat a GPU type that is no preset (docs/formats.md).
#include <filesystem>
#include <fstream>
#include <functional>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::run_hetplan;
using testing::temp_dir;
using testing::contains;
using testing::error_of;

const fs::path kSample = fs::path(HETPLAN_TEST_DATA) / "calibration" / "a100-sample.json";

// a100-sample.json (8 GEMMs) with its context.gpu_type replaced (nullptr: removed).
std::string sample_with_gpu_type(const fs::path& dir, const char* type) {
  Json j = Json::parse(std::ifstream(kSample));
  if (type)
    j["context"]["gpu_type"] = type;
  else
    j["context"].erase("gpu_type");
  const fs::path out = dir / (std::string(type ? type : "none") + ".json");
  std::ofstream(out) << j.dump(1);
  return out.string();
}

// QA: these were fitted into `gpus: {}` (the GEMMs dropped without a word).
TEST(CalibrationGpuType, MissingOrMiscasedIsBadInputForEveryReader) {
  const auto dir = temp_dir("cal_gpu_type");
  const std::string none = sample_with_gpu_type(dir, nullptr);
  EXPECT_EQ(error_of([&] { load_calibration(none); }),
            none +
                ": context.gpu_type: missing: the file holds 8 GEMM measurements, which belong "
                "to one GPU type; expected a GPU type (a100-40gb, a100-80gb, h100-sxm, l4, t4, "
                "v100, or one a cluster file defines in gpu_types)");
  const std::string upper = sample_with_gpu_type(dir, "A100-40GB");
  EXPECT_EQ(error_of([&] { load_calibration(upper); }),
            upper +
                ": context.gpu_type: expected \"a100-40gb\" (GPU types are lower case), found "
                "\"A100-40GB\"");
  // A communication-only file needs none (it may describe a cluster's network).
  CalibrationFile links;
  links.context.source = "measured";
  save_calibration(links, dir / "links.json");
  EXPECT_EQ(error_of([&] { load_calibration(dir / "links.json"); }), "");
  for (const auto& path : {none, upper}) {
    const auto r = run_hetplan("fit " + path + " --out " + (dir / "p.json").string());
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, "context.gpu_type")) << r.output;
  }
  fs::remove_all(dir);
}

// A GPU type no preset has may be one a cluster file defines: fit cannot fit it (no datasheet),
// predict with that cluster takes it, predict with another cluster warns that it is not used.
TEST(CalibrationGpuType, UnknownTypeIsRefusedByFitAndJudgedByTheCluster) {
  const auto dir = temp_dir("cal_gpu_custom");
  const std::string h900 = sample_with_gpu_type(dir, "h900");
  auto r = run_hetplan("fit " + h900 + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, h900 + ": context.gpu_type: expected a GPU preset (a100-40gb, "
                                        "a100-80gb, h100-sxm, l4, t4, v100), found \"h900\""))
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "p.json"));

  std::ofstream(dir / "lab.yaml") << R"(name: lab
gpu_types:
  h900: {peak_tflops: {bf16: 2000, fp16: 2000, fp32: 60}, memory_gib: 141, memory_GBps: 4800,
         sm_count: 132, l2_mib: 50}
node_types:
  box: {gpu: h900, gpus: 8, fabric: nvswitch, intra_GBps: 450, intra_latency_us: 3,
        network_gbit: 400, network_latency_us: 10}
nodes:
  - {type: box, count: 1}
)";
  std::ofstream(dir / "s.json") << R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1,
    "global_batch": 8})";
  const std::string predict = "predict --model gpt2-medium --strategy " +
                              (dir / "s.json").string() + " --calibration " + h900 + " --cluster ";
  r = run_hetplan(predict + (dir / "lab.yaml").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "warning")) << r.output;
  r = run_hetplan(predict + "p4d.24xlarge:1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "warning: " + h900 +
                                     ": context.gpu_type \"h900\" is neither a GPU preset "
                                     "(a100-40gb, a100-80gb, h100-sxm, l4, t4, v100) nor a GPU "
                                     "type of the cluster: its measurements are not used"))
      << r.output;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
