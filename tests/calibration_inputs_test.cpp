// What a calibration file must say for its measurements to be used (context.gpu_type), and how
// fit and the commands with a cluster treat a GPU type that is no preset (docs/formats.md).
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/profile.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::error_of;
using testing::run_hetplan;
using testing::temp_dir;

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

// What require_known_gpu_types says of "h900" without a cluster, and with cluster `name` that
// defines no GPU type of its own.
// Every GPU preset, in the loader's order.
const std::string kPresets =
    "a100-40gb, a100-80gb, a100-pcie-40gb, a100-pcie-80gb, a10g, b200, b300, gb200, gb300, "
    "gh200-144gb, gh200-96gb, h100-sxm, h200, l4, l40s, mi300x, rtx-2080ti, rtx-3090, rtx-4090, "
    "t4, titan-rtx, v100";
const std::string kNoClusterError =
    "expected a GPU preset (" + kPresets +
    "), found \"h900\": its measurements need the GPU's datasheet (peaks, bandwidth); a GPU type a "
    "cluster file defines (gpu_types) is known only with that cluster file as the command's "
    "cluster (--cluster FILE)";
std::string cluster_error(const std::string& name) {
  return "expected a GPU preset (" + kPresets + ") or a GPU type the cluster " + name +
         " defines (none), found \"h900\": its measurements need the GPU's datasheet (peaks, "
         "bandwidth)";
}

// QA: these were fitted into `gpus: {}` (the GEMMs dropped without a word).
TEST(CalibrationGpuType, MissingOrMiscasedIsBadInputForEveryReader) {
  const auto dir = temp_dir("cal_gpu_type");
  const std::string none = sample_with_gpu_type(dir, nullptr);
  EXPECT_EQ(error_of([&] { load_calibration(none); }),
            none +
                ": context.gpu_type: missing: the file holds 8 GEMM measurements, which belong "
                "to one GPU type; expected a GPU type (" +
                kPresets + ", or one a cluster file defines in gpu_types)");
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

// Readers that tell a calibration file from a profile by its "format" read a format that is no
// string as no format: bad input naming the key, not Json::value's type_error ("internal error").
TEST(CalibrationFormat, AFormatThatIsNoStringIsBadInput) {
  const auto dir = temp_dir("cal_format");
  Json j = Json::parse(std::ifstream(kSample));
  j["format"] = 1e308;
  const std::string path = (dir / "number.json").string();
  std::ofstream(path) << j.dump(1);
  EXPECT_EQ(error_of([&] { load_profile_inputs({path}); }),
            path + ": format: expected \"hetplan-calibration\" or \"hetplan-profile\"");
  EXPECT_EQ(error_of([&] { read_calibration_inputs({path}, "merge"); }),
            path + ": format: expected a string, found the number 1e+308");
  const auto r = run_hetplan("fit " + path + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_FALSE(contains(r.output, "internal error")) << r.output;
  fs::remove_all(dir);
}

// A GPU type no preset has may be one a cluster file defines: fit fits it with the cluster given as
// --cluster (its datasheet from gpu_types) and refuses it without; predict with that cluster takes
// it, predict with another cluster refuses it as fit does.
TEST(CalibrationGpuType, UnknownTypeIsFittedWithItsClusterAndJudgedByTheCluster) {
  const auto dir = temp_dir("cal_gpu_custom");
  const std::string h900 = sample_with_gpu_type(dir, "h900");
  const std::string profile = (dir / "p.json").string();
  auto r = run_hetplan("fit " + h900 + " --out " + profile);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, h900 + ": context.gpu_type: " + kNoClusterError)) << r.output;
  EXPECT_FALSE(fs::exists(profile));
  // A cluster that does not define it: the known types named, the cluster's (none) among them.
  r = run_hetplan("fit " + h900 + " --out " + profile + " --cluster p4d.24xlarge:1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, h900 + ": context.gpu_type: " + cluster_error("p4d.24xlarge:1")))
      << r.output;
  EXPECT_FALSE(fs::exists(profile));

  std::ofstream(dir / "s.json") << R"({"dp": 8, "tp": 1, "pp": 1, "micro_batch": 1,
    "global_batch": 8})";
  const std::string predict = "predict --model gpt2-medium --strategy " +
                              (dir / "s.json").string() + " --calibration " + h900 + " --cluster ";
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
  // QA: fit could not fit a GPU type a cluster file defines. With the file as --cluster, the
  // sample's bf16 GEMMs (A100 speed) are fitted against h900's datasheet (2000 TFLOP/s): the
  // profile holds what fit_profile makes of them with that datasheet, a fraction of the peak
  // about 312/2000 of an A100's.
  const std::string lab = (dir / "lab.yaml").string();
  r = run_hetplan("fit " + h900 + " --out " + profile + " --cluster " + lab);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output, "bf16   fitted on all: peak fraction 0.125")) << r.output;
  const Json fitted = Json::parse(std::ifstream(profile));
  const Profile expected = fit_profile({load_calibration(h900)}, load_cluster(lab).gpu_types);
  EXPECT_DOUBLE_EQ(fitted["gpus"]["h900"]["gemm"]["bf16"]["peak_fraction"].get<double>(),
                   expected.gpu("h900").gemm.at(Dtype::kBf16).peak_fraction);
  EXPECT_NE(expected.gpu("h900").gemm.at(Dtype::kBf16).peak_fraction,
            fit_profile({load_calibration(h900)}).gpu("h900").gemm[Dtype::kBf16].peak_fraction);
  r = run_hetplan(predict + lab);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_FALSE(contains(r.output, "warning")) << r.output;
  r = run_hetplan(predict + "p4d.24xlarge:1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output, h900 + ": context.gpu_type: " + cluster_error("p4d.24xlarge:1")))
      << r.output;
  fs::remove_all(dir);
}

// One answer for a GPU type that is neither a preset nor the cluster's, whichever command reads
// the file: exit 2 at context.gpu_type, naming the known types (QA: search and predict warned and
// dropped the file's measurements, fit refused it). The cluster a command has is named with its
// own GPU types (a preset cluster defines none).
TEST(CalibrationGpuType, UnknownTypeIsTheSameInputErrorForEveryCommand) {
  const auto dir = temp_dir("cal_gpu_every");
  const std::string h900 = sample_with_gpu_type(dir, "h900");
  const std::string cal = " --calibration " + h900;
  const std::string with_cluster = h900 + ": context.gpu_type: " + cluster_error("g4dn.12xlarge:1");
  const std::string without = h900 + ": context.gpu_type: " + kNoClusterError;
  const std::vector<std::pair<std::string, std::string>> runs = {
      {"fit " + h900 + " --out " + (dir / "p.json").string(), without},
      {"fit " + h900 + " --out " + (dir / "p.json").string() + " --cluster g4dn.12xlarge:1",
       with_cluster},
      {"search --model gpt2-medium --cluster g4dn.12xlarge:1 --global-batch 8 --quiet" + cal,
       with_cluster},
      {"serve --model llama1-30b --cluster g4dn.12xlarge:2 --quiet" + cal,
       h900 + ": context.gpu_type: " + cluster_error("g4dn.12xlarge:2")},
      {"provision --model gpt2-medium --nodes g4dn.12xlarge --global-batch 8" + cal, without},
  };
  for (const auto& [command, error] : runs) {
    const auto r = run_hetplan(command);
    EXPECT_EQ(r.exit_code, 2) << command << "\n" << r.output;
    EXPECT_TRUE(contains(r.output, error)) << command << "\n" << r.output;
  }
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
