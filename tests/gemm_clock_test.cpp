// The GEMM clock check (costmodel/gemm_clock.h): the share of a shape's time that follows the SM
// clock, the slope and cross-validated scores on times that follow their clock and on times that
// do not, the cases it declines, the clock read from calibration files, and `hetplan fit`'s line
// and JSON.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/gemm_clock.h"
#include "costmodel/profile.h"
#include "synthetic_gemm.h"

namespace hetplan {
namespace {

using testing::SyntheticGpu;
namespace synthetic = testing::synthetic;

// The synthetic ground truth is modelled on the H100 SXM, whose preset it is fitted against.
const GpuSpec& h100() {
  static const GpuSpec spec = *find_gpu_spec("h100-sxm", {});
  return spec;
}

GemmTable fitted(std::vector<GemmPoint> points, Dtype dtype = Dtype::kBf16) {
  GemmTable t;
  t.efficiency = fit_gemm_efficiency(points, GemmEfficiency{}, h100().peak_flops(dtype),
                                     h100().memory_GBps, h100().sm_count, dtype_bytes(dtype));
  t.points = std::move(points);
  return t;
}

// A clock per shape, spread over 1755-1980 MHz (a power-capped H100's range) by its hash.
double clock_of(const GemmShape& s) { return 1755 + 225 * synthetic::uniform(s, 9, 1); }

// bf16 on the profiler's dense grid, each shape given its clock; where `follow`, its time is what
// it would take at that clock: the share of it the clock sets (the fitted model's elasticity)
// scaled by 1980 MHz / clock.
std::vector<GemmPoint> clocked_table(bool follow, bool bf16_grid = true) {
  const SyntheticGpu g;
  std::vector<GemmPoint> points =
      testing::synthetic_table(g, testing::profiler_like_shapes(bf16_grid, false));
  const GemmModel truth =
      gemm_model_for(Dtype::kBf16, {{}, fitted(points).efficiency}, h100(), h100().memory_GBps);
  for (GemmPoint& p : points) {
    p.sm_mhz = clock_of(p.shape);
    if (follow) p.time_s *= std::pow(1980 / p.sm_mhz, truth.clock_elasticity(p.shape));
  }
  return points;
}

GemmClockCheck check(const std::vector<GemmPoint>& points) {
  return check_gemm_clocks(Dtype::kBf16, {{Dtype::kBf16, fitted(points)}}, std::nullopt, h100(),
                           h100().memory_GBps);
}

TEST(GemmClock, ElasticityIsTheShareOfTheTimeTheSmClockSets) {
  const GemmTable t =
      fitted(testing::synthetic_table(SyntheticGpu{}, testing::profiler_like_shapes(false, false)));
  const GemmModel m = gemm_model_for(Dtype::kBf16, {{}, t.efficiency}, h100(), h100().memory_GBps);
  EXPECT_GT(m.clock_elasticity({8192, 8192, 8192}), 0.9);  // compute-bound
  EXPECT_LT(m.clock_elasticity({1, 8192, 8192}), 0.2);     // a matrix-vector product: memory
  EXPECT_LT(m.clock_elasticity({16, 16, 16}), 0.2);        // launch overhead

  // It is d log(time) / d log(compute time): a 0.01% slower SM moves the time by that share.
  const double eps = 1e-4;
  GemmModel slower(t.efficiency, h100().peak_flops(Dtype::kBf16) / (1 + eps), h100().memory_GBps,
                   h100().sm_count, 2);
  for (const GemmShape s : {GemmShape{4096, 4096, 4096}, GemmShape{2048, 256, 1024},
                            GemmShape{64, 4096, 4096}, GemmShape{1024, 1024, 64}}) {
    const double e = m.clock_elasticity(s);
    EXPECT_GE(e, 0);
    EXPECT_LE(e, 1);
    const double numeric = std::log(slower.analytical_s(s) / m.analytical_s(s)) / std::log1p(eps);
    EXPECT_NEAR(e, numeric, 1e-3) << s.m << "x" << s.n << "x" << s.k;
  }
}

TEST(GemmClock, TimesThatFollowTheirClockGiveSlopeMinusOneAndTheClockExplainsTheirScatter) {
  const std::vector<GemmPoint> points = clocked_table(true);
  const GemmClockCheck c = check(points);
  ASSERT_TRUE(c.checked());
  EXPECT_EQ(c.points, static_cast<int64_t>(points.size()));
  EXPECT_EQ(c.as_measured.points, c.points);
  EXPECT_NEAR(c.reference_mhz, 1867, 15);  // the median of uniform 1755-1980
  EXPECT_GT(c.mhz_min, 1754);
  EXPECT_LT(c.mhz_max, 1981);
  EXPECT_GT(c.compute_bound, 300);
  ASSERT_TRUE(c.slope.has_value());
  EXPECT_NEAR(*c.slope, -1, 0.2);
  EXPECT_GT(c.r2, 0.2);
  EXPECT_LT(c.clock_known.p95_rel_error, 0.9 * c.as_measured.p95_rel_error);
  EXPECT_LT(c.clock_known.median_rel_error, c.as_measured.median_rel_error);

  // With each clock known the score is that of the same table timed at one clock.
  std::vector<GemmPoint> one_clock = clocked_table(false);
  for (GemmPoint& p : one_clock) p.sm_mhz = 1980;
  const GemmClockCheck same = check(one_clock);
  EXPECT_NEAR(c.clock_known.p95_rel_error, same.as_measured.p95_rel_error,
              0.15 * same.as_measured.p95_rel_error);
  fmt::print(
      "clock-following bf16: {} GEMMs, reference {:.0f} MHz, slope {:.2f}, R^2 {:.2f} over {} "
      "compute-bound; cross-validated median / p95 {:.2f}% / {:.2f}% as measured, {:.2f}% / "
      "{:.2f}% clock known, {:.2f}% / {:.2f}% at one clock\n",
      c.points, c.reference_mhz, *c.slope, c.r2, c.compute_bound,
      100 * c.as_measured.median_rel_error, 100 * c.as_measured.p95_rel_error,
      100 * c.clock_known.median_rel_error, 100 * c.clock_known.p95_rel_error,
      100 * same.as_measured.median_rel_error, 100 * same.as_measured.p95_rel_error);
}

TEST(GemmClock, ClocksTheTimesDoNotFollowGiveNoSlopeAndNoGain) {
  const GemmClockCheck c = check(clocked_table(false));
  ASSERT_TRUE(c.checked());
  ASSERT_TRUE(c.slope.has_value());
  EXPECT_LT(std::abs(*c.slope), 0.3);
  EXPECT_LT(c.r2, 0.05);
  EXPECT_GT(c.clock_known.p95_rel_error, 0.97 * c.as_measured.p95_rel_error);
  fmt::print(
      "clocks not followed: slope {:.2f}, R^2 {:.3f}; cross-validated p95 {:.2f}% as "
      "measured, {:.2f}% clock known\n",
      *c.slope, c.r2, 100 * c.as_measured.p95_rel_error, 100 * c.clock_known.p95_rel_error);
}

TEST(GemmClock, OneClockForAllGivesNoSlopeAndTheSameScores) {
  std::vector<GemmPoint> points = clocked_table(false, false);
  for (GemmPoint& p : points) p.sm_mhz = 1830;
  const GemmClockCheck c = check(points);
  ASSERT_TRUE(c.checked());
  EXPECT_DOUBLE_EQ(c.reference_mhz, 1830);
  EXPECT_FALSE(c.slope.has_value());
  EXPECT_DOUBLE_EQ(c.clock_known.p95_rel_error, c.as_measured.p95_rel_error);
  EXPECT_DOUBLE_EQ(c.clock_known.median_rel_error, c.as_measured.median_rel_error);
  EXPECT_TRUE(to_json(c)["slope"].is_null());
}

TEST(GemmClock, TooFewClocksAreCountedNotChecked) {
  std::vector<GemmPoint> points = clocked_table(false, false);
  for (size_t i = 0; i < points.size(); ++i)
    if (i >= kMinClockShapes - 1) points[i].sm_mhz = 0;
  const GemmClockCheck c = check(points);
  EXPECT_EQ(c.points, static_cast<int64_t>(kMinClockShapes - 1));
  EXPECT_FALSE(c.checked());
  EXPECT_EQ(to_json(c), Json({{"points", kMinClockShapes - 1}}));
  // No table of the dtype: nothing.
  EXPECT_EQ(check_gemm_clocks(Dtype::kFp8, {{Dtype::kBf16, fitted(points)}}, std::nullopt, h100(),
                              h100().memory_GBps)
                .points,
            0);
}

TEST(GemmClock, ACompanionsTimesArePutOnTheSameClock) {
  // fp16 on its sparse grid with bf16's dense table as companion, both following their clocks.
  const std::vector<GemmPoint> bf16 = clocked_table(true);
  const std::vector<GemmPoint> fp16 = clocked_table(true, false);
  const std::map<Dtype, GemmTable> tables = {{Dtype::kFp16, fitted(fp16, Dtype::kFp16)},
                                             {Dtype::kBf16, fitted(bf16)}};
  const GemmClockCheck alone =
      check_gemm_clocks(Dtype::kFp16, tables, std::nullopt, h100(), h100().memory_GBps);
  const GemmClockCheck with =
      check_gemm_clocks(Dtype::kFp16, tables, Dtype::kBf16, h100(), h100().memory_GBps);
  EXPECT_EQ(with.points, static_cast<int64_t>(fp16.size()));
  EXPECT_LT(with.clock_known.p95_rel_error, with.as_measured.p95_rel_error);
  EXPECT_LT(with.clock_known.p95_rel_error, alone.clock_known.p95_rel_error);
}

CalibrationFile gemm_file(const std::vector<GemmPoint>& points) {
  CalibrationFile f;
  f.origin = "cal.json";
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  for (const GemmPoint& p : points) {
    GemmMeasurement g;
    g.shape = p.shape;
    g.time_s = summarize({p.time_s});
    if (p.sm_mhz > 0)
      g.method["clocks"] = {{"samples", 4},
                            {"sm_mhz_median", p.sm_mhz},
                            {"sm_mhz_min", p.sm_mhz},
                            {"sm_mhz_max", p.sm_mhz},
                            {"reasons", {"sw_power_cap"}}};
    f.gemm.push_back(g);
  }
  return f;
}

TEST(GemmClock, TheFitReadsEachGemmsClockAndNamesAMalformedRecord) {
  std::vector<GemmPoint> points = clocked_table(false, false);
  points.resize(3);
  points[1].sm_mhz = 0;  // not recorded
  const Profile p = fit_profile({gemm_file(points)});
  const GpuFit fit = p.gpu("h100-sxm");  // by value: a reference into it must not outlive it
  const std::vector<GemmPoint>& read = fit.gemm_points.at(Dtype::kBf16);
  ASSERT_EQ(read.size(), 3u);
  EXPECT_DOUBLE_EQ(read[0].sm_mhz, points[0].sm_mhz);
  EXPECT_EQ(read[1].sm_mhz, 0);
  EXPECT_DOUBLE_EQ(read[2].sm_mhz, points[2].sm_mhz);

  CalibrationFile bad = gemm_file(points);
  bad.gemm[2].method["clocks"]["sm_mhz_median"] = -3;
  try {
    fit_profile({bad});
    ADD_FAILURE() << "a negative clock was accepted";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("cal.json"), std::string::npos) << what;
    EXPECT_NE(what.find("gemm[2].method.clocks.sm_mhz_median"), std::string::npos) << what;
  }
}

TEST(GemmClock, RepeatedShapesTakeTheGeometricMeanOfTheirRecordedClocks) {
  const GemmShape s{1024, 1024, 1024};
  GemmModel m(GemmEfficiency{}, h100().peak_flops(Dtype::kBf16), h100().memory_GBps,
              h100().sm_count, 2);
  m.set_measurements({{s, 10e-6, 1600}, {s, 10e-6, 1900}, {s, 10e-6, 0}});
  ASSERT_EQ(m.measurements().size(), 1u);
  EXPECT_NEAR(m.measurements()[0].sm_mhz, std::sqrt(1600.0 * 1900.0), 1e-9);
}

TEST(GemmClock, FitPrintsTheCheckAndWritesItToTheQualityJson) {
  const auto dir = testing::temp_dir("gemm_clock_cli");
  save_calibration(gemm_file(clocked_table(true, false)), dir / "cal.json");
  const std::string q = (dir / "q.json").string();
  const auto r = testing::run_hetplan("fit " + (dir / "cal.json").string() + " --out " +
                                      (dir / "p.json").string() + " --json " + q);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("bf16   SM clock of "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("(-1: time follows 1/clock, 0: the clock does not matter)"),
            std::string::npos)
      << r.output;
  const Json clock = load_document(q).root["gpus"]["h100-sxm"]["gemm"]["bf16"]["clock"];
  EXPECT_EQ(clock["points"], testing::profiler_like_shapes(false, false).size()) << clock.dump();
  EXPECT_LT(clock["slope"].get<double>(), -0.5) << clock.dump();
  EXPECT_LT(clock["cross_validated_clock_known"]["p95_rel_error"].get<double>(),
            clock["cross_validated_as_measured"]["p95_rel_error"].get<double>())
      << clock.dump();

  // Too few clocks to check, and one clock for all: said, with no slope.
  auto fit_says = [&](const std::vector<GemmPoint>& points) {
    save_calibration(gemm_file(points), dir / "cal.json");
    const auto out = testing::run_hetplan("fit " + (dir / "cal.json").string() + " --out " +
                                          (dir / "p.json").string());
    EXPECT_EQ(out.exit_code, 0) << out.output;
    return out.output;
  };
  std::vector<GemmPoint> few = clocked_table(false, false);
  for (size_t i = kMinClockShapes - 1; i < few.size(); ++i) few[i].sm_mhz = 0;
  const std::string too_few = fit_says(few);
  EXPECT_NE(too_few.find(fmt::format("bf16   SM clock recorded for {} GEMM(s): too few to check "
                                     "(at least {})",
                                     kMinClockShapes - 1, kMinClockShapes)),
            std::string::npos)
      << too_few;
  std::vector<GemmPoint> one = clocked_table(false, false);
  for (GemmPoint& p : one) p.sm_mhz = 1830;
  const std::string one_clock = fit_says(one);
  EXPECT_NE(one_clock.find("time against clock: no slope ("), std::string::npos) << one_clock;
  EXPECT_NE(one_clock.find("compute-bound GEMMs, one clock)"), std::string::npos) << one_clock;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
