// The GEMM model and its fit against synthetic tables with a known ground truth
// (tests/synthetic_gemm.h), and the held-out protocol of `hetplan fit`.
#include <chrono>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodel/gemm_model.h"
#include "costmodel/profile_quality.h"
#include "synthetic_gemm.h"

namespace hetplan {
namespace {

using testing::SyntheticGpu;

GemmHoldout holdout_of(const SyntheticGpu& g, const std::vector<GemmShape>& shapes) {
  const auto table = testing::synthetic_table(g, shapes);
  return gemm_holdout(table, GemmEfficiency{}, g.peak_flops, g.memory_Bps / 1e9, g.sms, g.bytes);
}

void print(const char* label, const GemmHoldout& h) {
  fmt::print(
      "{:<28} fit {:>5} held-out {:>4}: corrected median {:.2f}% p95 {:.2f}%  analytical "
      "median {:.2f}% p95 {:.2f}%  in-sample median {:.2f}% p95 {:.2f}%\n",
      label, h.fit_points, h.corrected.points, 100 * h.corrected.median_rel_error,
      100 * h.corrected.p95_rel_error, 100 * h.analytical.median_rel_error,
      100 * h.analytical.p95_rel_error, 100 * h.in_sample.median_rel_error,
      100 * h.in_sample.p95_rel_error);
}

// The targets: median <= 3% and p95 <= 8% on held-out measured shapes, on a profiler-like
// bf16 table (TN grid, NN/NT cubes, two models' layer GEMMs) of an H100-like ground truth with
// 1.5% noise and 5% irregular shapes.
TEST(GemmFit, HeldOutErrorMeetsTheTargetsOnASyntheticH100Table) {
  SyntheticGpu g;
  const auto shapes = testing::profiler_like_shapes(true, true);
  const auto start = std::chrono::steady_clock::now();
  const GemmHoldout h = holdout_of(g, shapes);
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  print("bf16 default", h);
  fmt::print("  (two fits and scoring: {:.2f} s)\n", elapsed);
  EXPECT_GT(h.corrected.points, 400);
  EXPECT_LE(h.corrected.median_rel_error, 0.03);
  EXPECT_LE(h.corrected.p95_rel_error, 0.08);
  // The correction must earn its place: better than the analytical model alone.
  EXPECT_LT(h.corrected.median_rel_error, h.analytical.median_rel_error);
}

// The held-out score by measured time: every held-out shape in exactly one class, the bounds at
// 10 and 30 us.
TEST(GemmFit, HeldOutScoreIsSplitByMeasuredTime) {
  EXPECT_EQ(gemm_time_class(9.99e-6), 0);
  EXPECT_EQ(gemm_time_class(10e-6), 1);
  EXPECT_EQ(gemm_time_class(29.9e-6), 1);
  EXPECT_EQ(gemm_time_class(30e-6), 2);
  SyntheticGpu g;
  const GemmHoldout h = holdout_of(g, testing::profiler_like_shapes(true, true));
  int64_t points = 0;
  for (const FitQuality& q : h.corrected_by_time) {
    EXPECT_GT(q.points, 50);
    points += q.points;
  }
  EXPECT_EQ(points, h.corrected.points);
  // And by layout: TN (the grid and most layer GEMMs) and the NN and NT cubes; no TT shape.
  EXPECT_EQ(gemm_layout_index({1, 1, 1, 1, true, false}), 2);
  EXPECT_STREQ(kGemmLayouts[gemm_layout_index({1, 1, 1, 1, false, true})], "NT");
  points = 0;
  for (const FitQuality& q : h.corrected_by_layout) points += q.points;
  EXPECT_EQ(points, h.corrected.points);
  EXPECT_GT(h.corrected_by_layout[2].points, 400);
  EXPECT_GT(h.corrected_by_layout[0].points, 10);
  EXPECT_GT(h.corrected_by_layout[1].points, 10);
  EXPECT_EQ(h.corrected_by_layout[3].points, 0);
}

}  // namespace
}  // namespace hetplan
