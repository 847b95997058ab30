// Sweep planning of `hetplan calibrate`: grid sizes, counts, keys, deduplication, estimates.
#include "profiler/common/gemm_plan.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "profiler/common/dtypes.h"

namespace hetplan::profiler {
namespace {

const std::vector<Dtype> kAll(std::begin(kAllDtypes), std::end(kAllDtypes));

size_t count_dtype(const std::vector<GemmCase>& cases, Dtype d) {
  return static_cast<size_t>(
      std::count_if(cases.begin(), cases.end(), [&](const GemmCase& c) { return c.dtype == d; }));
}

TEST(GemmPlan, LogSizesArePowersOfTwoWithHalfSteps) {
  EXPECT_EQ(log_sizes(16, 128, false), (std::vector<int64_t>{16, 32, 64, 128}));
  EXPECT_EQ(log_sizes(16, 128, true), (std::vector<int64_t>{16, 24, 32, 48, 64, 96, 128}));
  // 16..16384: 11 powers of two and the 10 points 1.5x between them.
  EXPECT_EQ(log_sizes(16, 16384, true).size(), 21u);
  EXPECT_EQ(log_sizes(16, 16384, true).back(), 16384);
}

TEST(GemmPlan, QuickGridCounts) {
  const auto grid = gemm_grid(/*quick=*/true, kAll);
  // bf16: {16, 128, 1024, 8192}^3 = 64; the other four dtypes {128, 1024, 8192}^3 = 27 each.
  EXPECT_EQ(count_dtype(grid, Dtype::kBf16), 64u);
  EXPECT_EQ(count_dtype(grid, Dtype::kFp32), 27u);
  EXPECT_EQ(grid.size(), 64u + 4 * 27u);
  for (const auto& c : grid) {
    EXPECT_TRUE(c.shape.trans_a);
    EXPECT_FALSE(c.shape.trans_b);
    EXPECT_EQ(c.origin, "grid");
  }
}

TEST(GemmPlan, FullGridCounts) {
  const auto grid = gemm_grid(/*quick=*/false, kAll);
  // bf16 TN: 21 x 11 x 11 = 2541, plus NN and NT on {256, 512, ..., 16384}^3: 343 each.
  EXPECT_EQ(count_dtype(grid, Dtype::kBf16), 2541u + 2 * 343u);
  size_t nn = 0, nt = 0;
  for (const auto& c : grid)
    if (c.dtype == Dtype::kBf16 && !c.shape.trans_a) {
      (c.shape.trans_b ? nt : nn) += 1;
      EXPECT_GE(std::min({c.shape.m, c.shape.n, c.shape.k}), 256);
    }
  EXPECT_EQ(nn, 343u);
  EXPECT_EQ(nt, 343u);
  // fp16 and fp8: M and N 11 x 11, K 6, all under the FLOP cap (2 * 16384^3 = 8.8e12 < 1.5e13,
  // 2.5e13).
  EXPECT_EQ(count_dtype(grid, Dtype::kFp16), 726u);
  EXPECT_EQ(count_dtype(grid, Dtype::kFp8), 726u);
  // tf32: the same 726 minus 16384^3 (8.8e12 > cap 300e12 * 25 ms = 7.5e12).
  EXPECT_EQ(count_dtype(grid, Dtype::kTf32), 725u);
  // fp32: cap 50e12 * 25 ms = 1.25e12 FLOPs, so m n k <= 6.25e11: over it are k = 16384 with
  // (m, n) = (16384, 16384), (16384, 8192), (8192, 16384), (16384, 4096), (4096, 16384),
  // (8192, 8192), and k = 4096 with (16384, 16384).
  EXPECT_EQ(count_dtype(grid, Dtype::kFp32), 719u);
}

TEST(GemmPlan, FullGridFitsItsTimeBudget) {
  // The full run must stay under 15 minutes on an H100; the GEMM grid is budgeted at 6.
  double total_s = 0;
  for (const auto& item : gemm_items(gemm_grid(false, kAll), "gemm", false))
    total_s += item.estimate_s;
  EXPECT_LT(total_s, 360.0);
  EXPECT_GT(total_s, 60.0);  // 6123 shapes at >= 24 ms each is at least 147 s
  double quick_s = 0;
  for (const auto& item : gemm_items(gemm_grid(true, kAll), "gemm", true))
    quick_s += item.estimate_s;
  EXPECT_LT(quick_s, 20.0);
}

TEST(GemmPlan, KeysAndLabels) {
  const GemmShape s{4096, 1024, 512, 1, true, false};
  EXPECT_EQ(gemm_key(Dtype::kBf16, s), "gemm/bf16/4096x1024x512x1/TN");
  EXPECT_EQ(gemm_label(Dtype::kFp8, s), "fp8 4096x1024x512 TN");
  EXPECT_EQ(gemm_shape_label(s), "4096x1024x512 TN");
  EXPECT_EQ(gemm_shape_label({64, 128, 256, 8, false, true}), "64x128x256 x8 NT");
  EXPECT_EQ(gemm_key(Dtype::kTf32, GemmShape{8, 16, 32, 4, false, true}), "gemm/tf32/8x16x32x4/NT");
}

TEST(GemmPlan, EstimateOfATinyShapeIsOverheadPlusTimingTarget) {
  // 16^3 bf16: launch ~4 us (fixed cost dominates), so 15 ms overhead (with the timing graph's
  // capture) + 5 ms quick target + 4 extra launches (16 us).
  EXPECT_NEAR(estimate_gemm_s(Dtype::kBf16, {16, 16, 16, 1, true, false}, true), 20.016e-3, 1e-5);
  // 16384^3 bf16: 8.8e12 / 600e12 = 14.7 ms per launch; 3 timed + 4 others = 7 launches + 15 ms.
  const double launch = 2.0 * 16384.0 * 16384 * 16384 / 600e12;
  EXPECT_NEAR(estimate_gemm_s(Dtype::kBf16, {16384, 16384, 16384, 1, true, false}, false),
              15e-3 + 7 * (launch + 4e-6), 1e-4);
}

TEST(GemmPlan, ItemsDeduplicateAndKeepEveryOrigin) {
  std::vector<GemmCase> cases = {
      {Dtype::kBf16, {64, 64, 64, 1, true, false}, "m/a/F"},
      {Dtype::kBf16, {64, 64, 64, 1, true, false}, "m/b/F"},
      {Dtype::kFp16, {64, 64, 64, 1, true, false}, "m/a/F"},
  };
  const auto items = gemm_items(cases, "layer_gemm", false);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].spec["origins"], Json::array({"m/a/F", "m/b/F"}));
  const GemmCase back = gemm_case_from_spec(items[0].spec);
  EXPECT_EQ(back.origin, "m/a/F;m/b/F");
  EXPECT_EQ(back.shape, (GemmShape{64, 64, 64, 1, true, false}));
  EXPECT_EQ(back.dtype, Dtype::kBf16);
}

TEST(Dtypes, SupportFollowsComputeCapability) {
  std::vector<std::string> skipped;
  // T4 (7.5): no bf16, tf32 or fp8.
  EXPECT_EQ(supported_dtypes({}, 7, 5, &skipped), (std::vector<Dtype>{Dtype::kFp32, Dtype::kFp16}));
  EXPECT_EQ(skipped.size(), 3u);
  // A100 (8.0): all but fp8; H100 (9.0) and L4 (8.9): all five.
  EXPECT_EQ(supported_dtypes({}, 8, 0, nullptr).size(), 4u);
  EXPECT_EQ(supported_dtypes({}, 8, 9, nullptr).size(), 5u);
  EXPECT_EQ(supported_dtypes({Dtype::kFp8}, 9, 0, nullptr), (std::vector<Dtype>{Dtype::kFp8}));
}

TEST(Dtypes, ParsesAListAndRejectsUnknownNames) {
  EXPECT_EQ(parse_dtype_list("bf16,fp8,bf16"), (std::vector<Dtype>{Dtype::kBf16, Dtype::kFp8}));
  EXPECT_THROW(parse_dtype_list("bf16,int8"), InputError);
}

}  // namespace
}  // namespace hetplan::profiler
