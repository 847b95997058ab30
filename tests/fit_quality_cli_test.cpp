// `hetplan fit`'s quality report when there is little to score: no held-out shapes, too few
// shapes for the GEMM model's coefficients, and GEMM times no GPU could have measured (QA's
// cases on tests/data/calibration/a100-sample.json: 8 bf16 GEMMs and one attention kernel of an
// A100 40 GB).
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "test_util.h"

namespace hetplan {
namespace {

namespace fs = std::filesystem;
using testing::contains;
using testing::run_hetplan;
using testing::temp_dir;

const fs::path kSample = fs::path(HETPLAN_TEST_DATA) / "calibration" / "a100-sample.json";

// a100-sample.json with every GEMM time multiplied by `scale` (and `edit` applied).
std::string scaled_sample(const fs::path& dir, const std::string& name, double scale) {
  Json j = Json::parse(std::ifstream(kSample));
  for (auto& g : j["gemm"])
    for (const char* key : {"median_s", "min_s", "max_s", "p10_s", "p90_s", "mean_s", "stddev_s"})
      if (g["time"].contains(key)) g["time"][key] = g["time"][key].get<double>() * scale;
  const fs::path out = dir / name;
  std::ofstream(out) << j.dump(1);
  return out.string();
}

// QA: --holdout-every 0 (documented: no held-out scoring) and 1 wrote `gpus: {}`.
TEST(FitQuality, NoHeldOutScoringStillReportsEverythingElse) {
  const auto dir = temp_dir("fit_holdout0");
  const std::string q = (dir / "q.json").string();
  auto r = run_hetplan("fit " + kSample.string() + " --out " + (dir / "p.json").string() +
                       " --holdout-every 0 --json " + q);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "GEMM: no shape held out (--holdout-every 0), in-sample scores "
                       "only"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "attention (prior, not measured)")) << r.output;
  const Json report = load_document(q).root;
  EXPECT_EQ(report["holdout"]["every"], 0);
  const Json& g = report["gpus"]["a100-40gb"];
  EXPECT_EQ(g["gemm"]["bf16"]["points"], 8);
  EXPECT_EQ(g["gemm"]["bf16"]["fit_points"], 8);
  EXPECT_TRUE(g["gemm"]["bf16"]["held_out_corrected"].is_null());
  EXPECT_EQ(g["gemm"]["bf16"]["target"], "not scored");
  EXPECT_EQ(g["gemm"]["bf16"]["in_sample_analytical"]["points"], 8);
  EXPECT_TRUE(g.contains("attention"));
  EXPECT_TRUE(g.contains("kernels"));

  r = run_hetplan("fit " + kSample.string() + " --out " + (dir / "p.json").string() +
                  " --holdout-every 1");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "--holdout-every: 1 would hold out every shape and leave none "
                       "to fit; give 0 (no held-out scoring) or N >= 2"))
      << r.output;
  r = run_hetplan("fit " + kSample.string() + " --out " + (dir / "p.json").string() +
                  " --holdout-every 0 --require-targets");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  fs::remove_all(dir);
}

// QA: 8 shapes, none held out, printed "0.00% 0.00% met" and --require-targets exited 0.
TEST(FitQuality, NoHeldOutShapeIsNotMetAndTooFewShapesAreSaid) {
  const auto dir = temp_dir("fit_vacuous");
  const std::string q = (dir / "q.json").string();
  auto r = run_hetplan("fit " + kSample.string() + " --out " + (dir / "p.json").string() +
                       " --require-targets --json " + q);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_FALSE(contains(r.output, " met")) << r.output;
  EXPECT_FALSE(contains(r.output, "0.00%")) << r.output;
  EXPECT_TRUE(contains(r.output, "not scored")) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "warning: bf16 only 8 shapes for the GEMM model's 7 "
                       "coefficients (want at least 21)"))
      << r.output;
  EXPECT_TRUE(contains(r.output,
                       "warning: bf16 fewer than 10 shapes: none held out, no held-out "
                       "score"))
      << r.output;
  EXPECT_TRUE(contains(r.output, "held-out GEMM targets missed (or not scored)")) << r.output;
  const Json report = load_document(q).root;
  const Json& bf16 = report["gpus"]["a100-40gb"]["gemm"]["bf16"];
  EXPECT_EQ(bf16["target"], "not scored");
  ASSERT_EQ(bf16["warnings"].size(), 2u);
  EXPECT_TRUE(contains(bf16["warnings"][0].get<std::string>(), "only 8 shapes"));
  fs::remove_all(dir);
}

// QA: times 1000x too short (above the A100's 312 TFLOP/s) and m = 2^62 were fitted; times in
// microseconds written as seconds fitted a peak fraction of 0.02 without a word.
TEST(FitQuality, ImpossibleGemmTimesAreBadInputAndImplausibleOnesWarned) {
  const auto dir = temp_dir("fit_impossible");
  const std::string fast = scaled_sample(dir, "fast.json", 1e-3);
  auto r = run_hetplan("fit " + fast + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  // 2 x 512^3 flops in 4.628e-9 s.
  EXPECT_TRUE(contains(r.output, fast + ": gemm[0].time.median_s: 512 x 512 x 512 (batch 1) bf16 "
                                        "in 4.628e-09 s is 5.8e+04 TFLOP/s, above the "
                                        "a100-40gb's bf16 peak of 312 TFLOP/s"))
      << r.output;
  EXPECT_FALSE(fs::exists(dir / "p.json"));

  Json j = Json::parse(std::ifstream(kSample));
  j["gemm"][3]["m"] = int64_t{1} << 62;
  std::ofstream(dir / "huge.json") << j.dump(1);
  r = run_hetplan("fit " + (dir / "huge.json").string() + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "huge.json: gemm[3].m: expected at most 2147483647 (cuBLAS's int "
                       "sizes), found 4611686018427387904"))
      << r.output;

  const std::string slow = scaled_sample(dir, "us.json", 1e6);
  r = run_hetplan("fit " + slow + " --out " + (dir / "p.json").string() + " --json " +
                  (dir / "q.json").string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(contains(r.output,
                       "warning: bf16 fitted peak fraction 0.020: the large GEMMs "
                       "reach 2.0% of the datasheet peak"))
      << r.output;
  const Json q = load_document(dir / "q.json").root;
  EXPECT_EQ(q["gpus"]["a100-40gb"]["gemm"]["bf16"]["warnings"].size(), 3u);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
