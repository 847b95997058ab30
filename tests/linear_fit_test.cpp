// The one fixed + slope fit (costmodel/linear_fit.h): every expected value below is worked out by
// hand from its definition, minimising sum w ((fixed + slope x) / y - 1)^2.
#include "costmodel/linear_fit.h"

#include <cmath>

#include <gtest/gtest.h>

namespace hetplan {
namespace {

TEST(FixedPlusSlope, RecoversAnExactLine) {
  const FixedSlopeFit f = fit_fixed_plus_slope({{1, 5}, {2, 8}, {4, 14}});  // y = 2 + 3 x
  EXPECT_EQ(f.form, FitForm::kLine);
  EXPECT_NEAR(f.fixed, 2, 1e-12);
  EXPECT_NEAR(f.slope, 3, 1e-12);
  EXPECT_DOUBLE_EQ(f.x_spread, 4);
  EXPECT_EQ(f.points, 3);
  EXPECT_NEAR(f.max_rel_residual, 0, 1e-12);
  EXPECT_NEAR(f.at(10), 32, 1e-10);
}

TEST(FixedPlusSlope, NoisyLineByRelativeResiduals) {
  // (1, 1), (2, 2), (4, 2): weights 1 / y^2 = 1, 1/4, 1/4; weighted means x 5/3, y 4/3;
  // sxx = 4/9 + (1/9 + 49/9) / 4 = 11/6, sxy = 2/9 + (2/9 + 14/9) / 4 = 2/3;
  // slope = (2/3) / (11/6) = 4/11, fixed = 4/3 - 4/11 x 5/3 = 8/11.
  // Fitted 12/11, 16/11, 24/11: relative residuals 1/11, -3/11, 1/11.
  const FixedSlopeFit f = fit_fixed_plus_slope({{1, 1}, {2, 2}, {4, 2}});
  EXPECT_EQ(f.form, FitForm::kLine);
  EXPECT_NEAR(f.slope, 4.0 / 11, 1e-12);
  EXPECT_NEAR(f.fixed, 8.0 / 11, 1e-12);
  EXPECT_NEAR(f.median_rel_residual, 1.0 / 11, 1e-12);
  EXPECT_NEAR(f.max_rel_residual, 3.0 / 11, 1e-12);
  EXPECT_NEAR(f.rms_rel_residual, std::sqrt(11.0 / 121 / 3), 1e-12);
}

TEST(FixedPlusSlope, OneXOrAllEqualXIsASlopeThroughTheOrigin) {
  const FixedSlopeFit one = fit_fixed_plus_slope({{4, 8}});
  EXPECT_EQ(one.form, FitForm::kThroughOrigin);
  EXPECT_DOUBLE_EQ(one.fixed, 0);
  EXPECT_DOUBLE_EQ(one.slope, 2);
  EXPECT_FALSE(one.fixed_identifiable());
  // x/y = 1/2 and 1/3: slope = (1/2 + 1/3) / (1/4 + 1/9) = 30/13; at x = 2, 60/13 against
  // 4 and 6: residuals +2/13 and -3/13.
  const FixedSlopeFit same = fit_fixed_plus_slope({{2, 4}, {2, 6}});
  EXPECT_EQ(same.form, FitForm::kThroughOrigin);
  EXPECT_DOUBLE_EQ(same.x_spread, 1);
  EXPECT_NEAR(same.slope, 30.0 / 13, 1e-12);
  EXPECT_DOUBLE_EQ(same.fixed, 0);
  EXPECT_NEAR(same.max_rel_residual, 3.0 / 13, 1e-12);
  EXPECT_NEAR(same.rms_rel_residual, std::sqrt((4.0 + 9.0) / 169 / 2), 1e-12);
}

TEST(FixedPlusSlope, TheSpreadRuleIsLargestOverSmallestX) {
  // 1.2 < kFixedTermMinSpread = 1.25: y = 1 + x at x = 1, 1.2 is read as a proportion.
  // x/y = 1/2 and 1.2/2.2: slope = (1/2 + 6/11) / (1/4 + 36/121) = (23/22) / (265/484) = 506/265.
  const FixedSlopeFit close = fit_fixed_plus_slope({{1, 2}, {1.2, 2.2}});
  EXPECT_EQ(close.form, FitForm::kThroughOrigin);
  EXPECT_NEAR(close.slope, 506.0 / 265, 1e-12);
  const FixedSlopeFit apart = fit_fixed_plus_slope({{1, 2}, {1.25, 2.25}});  // at the limit
  EXPECT_TRUE(apart.fixed_identifiable());
  EXPECT_EQ(apart.form, FitForm::kLine);
  EXPECT_NEAR(apart.fixed, 1, 1e-12);
  EXPECT_NEAR(apart.slope, 1, 1e-12);
}

TEST(FixedPlusSlope, ANegativeFixedTermGivesTheSlopeThroughTheOrigin) {
  // y = 2 x - 1 at x = 1, 2, 4 (y = 1, 3, 7): the free line is exact, its fixed term -1. With the
  // fixed term held at 0: x/y = 1, 2/3, 4/7; slope = (47/21) / (781/441) = 987/781.
  const FixedSlopeFit f = fit_fixed_plus_slope({{1, 1}, {2, 3}, {4, 7}});
  EXPECT_EQ(f.form, FitForm::kThroughOrigin);
  EXPECT_NEAR(f.free_fixed, -1, 1e-12);
  EXPECT_NEAR(f.free_slope, 2, 1e-12);
  EXPECT_DOUBLE_EQ(f.fixed, 0);
  EXPECT_NEAR(f.slope, 987.0 / 781, 1e-12);
  // Fitted 987/781, 1974/781, 3948/781 against 1, 3, 7: the largest miss is at (4, 7).
  EXPECT_NEAR(f.max_rel_residual, 1 - 3948.0 / (781 * 7), 1e-12);
}

TEST(FixedPlusSlope, AFallingLineGivesAConstant) {
  // (1, 3), (2, 2): the free line is 4 - x. Constant: (1/3 + 1/2) / (1/9 + 1/4) = 30/13.
  const FixedSlopeFit f = fit_fixed_plus_slope({{1, 3}, {2, 2}});
  EXPECT_EQ(f.form, FitForm::kConstant);
  EXPECT_NEAR(f.free_slope, -1, 1e-12);
  EXPECT_NEAR(f.free_fixed, 4, 1e-12);
  EXPECT_NEAR(f.fixed, 30.0 / 13, 1e-12);
  EXPECT_DOUBLE_EQ(f.slope, 0);
}

TEST(FixedPlusSlope, AnExactProportionHasNoFixedTerm) {
  const FixedSlopeFit f = fit_fixed_plus_slope({{1e-3, 3e-3}, {3e-3, 9e-3}});
  EXPECT_EQ(f.form, FitForm::kLine);
  EXPECT_EQ(f.fixed, 0);
  EXPECT_NEAR(f.slope, 3, 1e-12);
}

TEST(FixedPlusSlope, WeightsAndUnusablePoints) {
  // A stray point at weight 0 moves nothing but is scored; x or y <= 0 is not a point.
  const FixedSlopeFit f =
      fit_fixed_plus_slope({{1, 5}, {2, 8, 1}, {4, 14}, {3, 22, 0}, {0, 1}, {2, -1}});
  EXPECT_EQ(f.form, FitForm::kLine);
  EXPECT_NEAR(f.fixed, 2, 1e-12);
  EXPECT_NEAR(f.slope, 3, 1e-12);
  EXPECT_EQ(f.points, 4);
  EXPECT_NEAR(f.max_rel_residual, 1 - 11.0 / 22, 1e-12);
  EXPECT_EQ(fit_fixed_plus_slope({}).form, FitForm::kNone);
  EXPECT_EQ(fit_fixed_plus_slope({{0, 1}}).form, FitForm::kNone);
}

TEST(FixedPlusSlope, ThroughTheOriginOnRequest) {
  // The free line of (1, 5), (2, 8), (4, 14) is 2 + 3 x; held through the origin:
  // x/y = 1/5, 1/4, 2/7: slope = (0.2 + 0.25 + 2/7) / (0.04 + 0.0625 + 4/49).
  const FixedSlopeFit f = fit_through_origin({{1, 5}, {2, 8}, {4, 14}});
  EXPECT_EQ(f.form, FitForm::kThroughOrigin);
  EXPECT_NEAR(f.slope, (0.2 + 0.25 + 2.0 / 7) / (0.04 + 0.0625 + 4.0 / 49), 1e-12);
  EXPECT_EQ(f.points, 3);
}

}  // namespace
}  // namespace hetplan
