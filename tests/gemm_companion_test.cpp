// A companion dtype's measurements in the GEMM correction (costmodel/gemm_companion.h): which
// dtypes may stand in for which, the cross-validated choice, the held-out score with it, how the
// model keeps them, and the profile key.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/gemm_companion.h"
#include "costmodel/profile.h"
#include "costmodel/profile_quality.h"
#include "synthetic_gemm.h"

namespace hetplan {
namespace {

using testing::SyntheticGpu;

// The synthetic ground truth's GPU as a datasheet: fp16 and bf16 at the same peak, fp8 at twice.
GpuSpec synthetic_spec(const SyntheticGpu& g) {
  GpuSpec s;
  s.name = "synthetic-h100";
  s.peak_tflops = {{Dtype::kFp16, g.peak_flops / 1e12},
                   {Dtype::kBf16, g.peak_flops / 1e12},
                   {Dtype::kFp8, 2 * g.peak_flops / 1e12}};
  s.memory_GBps = g.memory_Bps / 1e9;
  s.sm_count = g.sms;
  return s;
}

GemmTable fitted_table(std::vector<GemmPoint> points, const GpuSpec& gpu, Dtype dtype) {
  GemmTable t;
  t.efficiency = fit_gemm_efficiency(points, GemmEfficiency{}, gpu.peak_flops(dtype),
                                     gpu.memory_GBps, gpu.sm_count, dtype_bytes(dtype));
  t.points = std::move(points);
  return t;
}

// fp16 on the sparse grid the profiler gives it (M powers of two, N and K powers of four) and bf16
// on its dense one, both from the same ground truth: the same kernels, timed the same.
struct TwoTables {
  SyntheticGpu g;
  GpuSpec gpu = synthetic_spec(g);
  std::vector<GemmPoint> fp16 =
      testing::synthetic_table(g, testing::profiler_like_shapes(false, false));
  std::vector<GemmPoint> bf16 =
      testing::synthetic_table(g, testing::profiler_like_shapes(true, false));

  // The sparse table as `sparse` (fp16 unless said) and the dense one as bf16, each fitted.
  std::map<Dtype, GemmTable> fitted(Dtype sparse = Dtype::kFp16) const {
    return {{sparse, fitted_table(fp16, gpu, sparse)},
            {Dtype::kBf16, fitted_table(bf16, gpu, Dtype::kBf16)}};
  }
  GemmCompanionChoice choose(Dtype sparse = Dtype::kFp16) const {
    return choose_gemm_companion(sparse, fitted(sparse), gpu, gpu.memory_GBps);
  }
};

TEST(GemmCompanion, OnlyADtypeOfTheSameSizeAndPeakMayStandIn) {
  const GpuSpec h100 = *find_gpu_spec("h100-sxm", {});
  EXPECT_TRUE(may_share_gemm_kernels(h100, Dtype::kFp16, Dtype::kBf16));
  EXPECT_TRUE(may_share_gemm_kernels(h100, Dtype::kBf16, Dtype::kFp16));
  EXPECT_FALSE(may_share_gemm_kernels(h100, Dtype::kBf16, Dtype::kBf16));
  EXPECT_FALSE(may_share_gemm_kernels(h100, Dtype::kFp8, Dtype::kBf16));   // 1 byte, 2x peak
  EXPECT_FALSE(may_share_gemm_kernels(h100, Dtype::kTf32, Dtype::kFp32));  // other kernels
  const GpuSpec t4 = *find_gpu_spec("t4", {});                             // no bf16 unit
  EXPECT_FALSE(may_share_gemm_kernels(t4, Dtype::kFp16, Dtype::kBf16));
}

TEST(GemmCompanion, TheDenseTableOfTheSameKernelsIsChosenAndLowersTheHeldOutError) {
  const TwoTables t;
  const GemmCompanionChoice c = t.choose();
  ASSERT_TRUE(c.candidate.has_value());
  EXPECT_EQ(*c.candidate, Dtype::kBf16);
  ASSERT_TRUE(c.companion.has_value());
  EXPECT_EQ(c.own.points, static_cast<int64_t>(t.fp16.size()));  // every fp16 shape, once
  EXPECT_LT(c.with.p95_rel_error, (1 - kCompanionMinGain) * c.own.p95_rel_error);
  EXPECT_LE(c.with.median_rel_error, c.own.median_rel_error);

  // The held-out score of `hetplan fit`: the companion chosen on the fit sets, and better than
  // fp16's own table alone (gemm_holdout, no companion), on the same held-out shapes.
  const std::vector<GemmHoldout> scored =
      gemm_holdouts({{Dtype::kFp16, t.fp16}, {Dtype::kBf16, t.bf16}}, {}, t.gpu, t.gpu.memory_GBps);
  ASSERT_EQ(scored.size(), 2u);
  const GemmHoldout& fp16 = scored[0].dtype == Dtype::kFp16 ? scored[0] : scored[1];
  ASSERT_TRUE(fp16.companion.companion.has_value());
  const GemmHoldout alone = gemm_holdout(t.fp16, GemmEfficiency{}, t.gpu.peak_flops(Dtype::kFp16),
                                         t.gpu.memory_GBps, t.gpu.sm_count, 2);
  fmt::print(
      "fp16 sparse grid, held out: alone {:.2f}% / {:.2f}%, with bf16 {:.2f}% / {:.2f}%; "
      "cross-validated {:.2f}% / {:.2f}% -> {:.2f}% / {:.2f}%\n",
      100 * alone.corrected.median_rel_error, 100 * alone.corrected.p95_rel_error,
      100 * fp16.corrected.median_rel_error, 100 * fp16.corrected.p95_rel_error,
      100 * c.own.median_rel_error, 100 * c.own.p95_rel_error, 100 * c.with.median_rel_error,
      100 * c.with.p95_rel_error);
  EXPECT_EQ(fp16.corrected.points, alone.corrected.points);
  EXPECT_LT(fp16.corrected.p95_rel_error, alone.corrected.p95_rel_error);
  EXPECT_LT(fp16.corrected.median_rel_error, alone.corrected.median_rel_error);
}

// Times that drifted apart (as launch-bound times did between the sections of an eager-timed
// calibration) do not stand in: the cross-validation refuses them.
TEST(GemmCompanion, ACompanionWhoseTimesDriftedIsRefused) {
  TwoTables t;
  for (GemmPoint& p : t.bf16)
    p.time_s *= std::exp(0.3 * testing::synthetic::normal(p.shape, 77, 5));
  const GemmCompanionChoice c = t.choose();
  ASSERT_TRUE(c.candidate.has_value());
  EXPECT_FALSE(c.companion.has_value());
  fmt::print("drifted bf16: cross-validated p95 {:.2f}% -> {:.2f}%\n", 100 * c.own.p95_rel_error,
             100 * c.with.p95_rel_error);
  EXPECT_GT(c.with.p95_rel_error, c.own.p95_rel_error);
}

TEST(GemmCompanion, NoCandidateWithoutADtypeOfTheSameKernelsOrEnoughShapes) {
  const TwoTables t;
  const GemmCompanionChoice fp8 = t.choose(Dtype::kFp8);
  EXPECT_FALSE(fp8.candidate.has_value());
  EXPECT_FALSE(fp8.companion.has_value());
  EXPECT_EQ(fp8.own.points, 0);

  TwoTables few;
  few.fp16.resize(kMinCompanionShapes - 1);
  EXPECT_FALSE(few.choose().candidate.has_value());
}

TEST(GemmCompanion, TheModelKeepsItsOwnMeasurementsExactAndTheCompanionsGlitchesOut) {
  const TwoTables t;
  const GemmTable fp16 = fitted_table(t.fp16, t.gpu, Dtype::kFp16);
  std::vector<GemmPoint> bf16 = t.bf16;
  // A shape both measured, 10% slower in bf16: fp16's own time still answers for it.
  const GemmShape both = t.fp16[5].shape;
  for (GemmPoint& p : bf16)
    if (p.shape == both) p.time_s = 1.1 * t.fp16[5].time_s;
  // A bf16 glitch, 5x its neighbours: left out of what joins fp16's correction.
  GemmPoint& glitch = bf16[bf16.size() / 2];
  glitch.time_s *= 5;
  GemmModel other = gemm_model_for(Dtype::kBf16, fitted_table(bf16, t.gpu, Dtype::kBf16), t.gpu,
                                   t.gpu.memory_GBps);
  ASSERT_EQ(other.glitches(), 1u);
  EXPECT_EQ(other.glitch_shapes()[0], glitch.shape);

  GemmModel m = gemm_model_for(Dtype::kFp16, fp16, t.gpu, t.gpu.memory_GBps);
  const GemmShape unmeasured{3000, 700, 5000, 1, true, false};
  const double before = m.time_s(unmeasured);
  m.set_companion(other);
  EXPECT_EQ(m.companion_points(), bf16.size() - 1);
  EXPECT_DOUBLE_EQ(m.time_s(both), t.fp16[5].time_s);
  const double with = m.time_s(unmeasured);
  EXPECT_NE(with, before);
  // Kept across new coefficients and new measurements; an empty model takes them out.
  m.set_efficiency(fp16.efficiency);
  EXPECT_EQ(m.companion_points(), bf16.size() - 1);
  EXPECT_DOUBLE_EQ(m.time_s(unmeasured), with);
  m.set_measurements(t.fp16);
  EXPECT_DOUBLE_EQ(m.time_s(unmeasured), with);
  m.set_companion(GemmModel{});
  EXPECT_EQ(m.companion_points(), 0u);
  EXPECT_DOUBLE_EQ(m.time_s(unmeasured), before);
}

TEST(GemmCompanion, TheProfileNamesItAndRefusesAnotherGpusOrAMissingDtype) {
  auto profile_text = [](const std::string& companion) {
    return R"({"format": "hetplan-profile", "schema_version": 1, "gpus": {"h100-sxm": {
      "source": "measured", "gemm": {
        "bf16": {"peak_fraction": 0.8, "tile_m": 128, "tile_n": 128,
                 "measured": [{"m": 64, "n": 64, "k": 64, "time_s": 4e-6}]},
        "fp16": {"peak_fraction": 0.8, "tile_m": 128, "tile_n": 128, "companion": ")" +
           companion + R"(",
                 "measured": [{"m": 128, "n": 64, "k": 64, "time_s": 5e-6}]}},
      "memory_efficiency": 0.9, "attention_efficiency": 0.45}}})";
  };
  const Profile p =
      profile_from_document(parse_document(profile_text("bf16"), "p.json", DocumentFormat::kJson));
  const GpuFit& fit = p.gpu("h100-sxm");
  ASSERT_EQ(fit.gemm_companion.size(), 1u);
  EXPECT_EQ(fit.gemm_companion.at(Dtype::kFp16), Dtype::kBf16);
  // Written back as read.
  const Profile back =
      profile_from_document(parse_document(to_json(p).dump(), "back.json", DocumentFormat::kJson));
  EXPECT_EQ(back.gpu("h100-sxm").gemm_companion, fit.gemm_companion);

  for (const char* bad : {"fp8", "fp16", "bf17"}) {
    try {
      profile_from_document(parse_document(profile_text(bad), "p.json", DocumentFormat::kJson));
      ADD_FAILURE() << bad << " was accepted";
    } catch (const InputError& e) {
      const std::string what = e.what();
      EXPECT_NE(what.find("p.json"), std::string::npos) << what;
      EXPECT_NE(what.find("companion"), std::string::npos) << what;
      EXPECT_NE(what.find(bad), std::string::npos) << what;
    }
  }
}

// `hetplan fit` scores the profile's own coefficients in-sample (and takes their glitches): the
// ones given for a dtype, not a refit; a dtype without given ones is fitted on every shape.
TEST(GemmHoldouts, InSampleScoreIsThatOfTheGivenWholeTableCoefficients) {
  const TwoTables t;
  const GemmTable fp16_all = fitted_table(t.fp16, t.gpu, Dtype::kFp16);
  GemmEfficiency slower = fp16_all.efficiency;
  slower.peak_fraction /= 2;
  const std::map<Dtype, std::vector<GemmPoint>> points = {{Dtype::kFp16, t.fp16},
                                                          {Dtype::kBf16, t.bf16}};
  auto in_sample = [&](const GemmEfficiency& e) {
    const GemmModel m(e, t.gpu.peak_flops(Dtype::kFp16), t.gpu.memory_GBps, t.gpu.sm_count, 2);
    std::vector<double> errors;
    for (const GemmPoint& p : t.fp16)
      errors.push_back(std::abs(m.analytical_s(p.shape) / p.time_s - 1));
    return summarize_errors(errors);
  };
  auto by_dtype = [](const std::vector<GemmHoldout>& scored, Dtype d) {
    return scored[0].dtype == d ? scored[0] : scored[1];
  };
  const std::vector<GemmHoldout> refit = gemm_holdouts(points, {}, t.gpu, t.gpu.memory_GBps);
  const std::vector<GemmHoldout> given =
      gemm_holdouts(points, {{Dtype::kFp16, slower}}, t.gpu, t.gpu.memory_GBps);
  const GemmHoldout& fp16_refit = by_dtype(refit, Dtype::kFp16);
  const GemmHoldout& fp16_given = by_dtype(given, Dtype::kFp16);
  EXPECT_DOUBLE_EQ(fp16_refit.in_sample.median_rel_error,
                   in_sample(fp16_all.efficiency).median_rel_error);
  EXPECT_DOUBLE_EQ(fp16_given.in_sample.median_rel_error, in_sample(slower).median_rel_error);
  EXPECT_DOUBLE_EQ(fp16_given.in_sample.p95_rel_error, in_sample(slower).p95_rel_error);
  EXPECT_GT(fp16_given.in_sample.median_rel_error, 3 * fp16_refit.in_sample.median_rel_error);
  // The held-out score fits on the fit set whatever is given; the other dtype refits.
  EXPECT_DOUBLE_EQ(fp16_given.corrected.p95_rel_error, fp16_refit.corrected.p95_rel_error);
  EXPECT_DOUBLE_EQ(by_dtype(given, Dtype::kBf16).in_sample.median_rel_error,
                   by_dtype(refit, Dtype::kBf16).in_sample.median_rel_error);
}

}  // namespace
}  // namespace hetplan
