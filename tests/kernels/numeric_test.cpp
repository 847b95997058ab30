// The CPU side the kernel checks rest on: 16-bit conversions, Philox, and the output judge.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/philox.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/numeric.h"
#include "kernels/reference/random.h"

namespace hetplan::kernels {
namespace {

TEST(Numeric, Bf16RoundsToNearestEven) {
  EXPECT_EQ(float_to_bf16_bits(1.0f), 0x3F80);
  EXPECT_EQ(float_to_bf16_bits(-2.0f), 0xC000);
  // 1 + 2^-8 is halfway between bf16 1.0 and 1 + 2^-7: ties to the even mantissa (1.0).
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0.00390625f), 0x3F80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 (odd) and 1 + 2^-6: rounds up to even.
  EXPECT_EQ(float_to_bf16_bits(1.0f + 3 * 0.00390625f), 0x3F82);
  EXPECT_EQ(float_to_bf16_bits(1.0f + 0.0040f), 0x3F81);  // just above halfway
  EXPECT_TRUE(std::isnan(bf16_bits_to_float(float_to_bf16_bits(NAN))));
  EXPECT_EQ(bf16_bits_to_float(0x4049), 3.140625f);
}

TEST(Numeric, Fp16ConversionsMatchIeeeBinary16) {
  EXPECT_EQ(float_to_fp16_bits(1.0f), 0x3C00);
  EXPECT_EQ(float_to_fp16_bits(-2.0f), 0xC000);
  EXPECT_EQ(float_to_fp16_bits(65504.0f), 0x7BFF);  // largest finite
  EXPECT_EQ(float_to_fp16_bits(65520.0f), 0x7C00);  // halfway to 65536: ties to even = inf
  EXPECT_EQ(float_to_fp16_bits(65519.0f), 0x7BFF);
  EXPECT_EQ(float_to_fp16_bits(6.103515625e-05f), 0x0400);          // 2^-14, smallest normal
  EXPECT_EQ(float_to_fp16_bits(5.9604644775390625e-08f), 0x0001);   // 2^-24, smallest subnormal
  EXPECT_EQ(float_to_fp16_bits(2.98023223876953125e-08f), 0x0000);  // 2^-25: tie to even (0)
  EXPECT_EQ(float_to_fp16_bits(1.0f + 0.00048828125f), 0x3C00);     // 1 + 2^-11: tie to even
  EXPECT_EQ(float_to_fp16_bits(1.0f + 3 * 0.00048828125f), 0x3C02);
  for (uint32_t h = 0; h < 0x7C00; ++h)  // every finite positive half survives the round trip
    ASSERT_EQ(float_to_fp16_bits(fp16_bits_to_float(static_cast<uint16_t>(h))), h) << h;
}

// Known-answer vectors of Random123's kat_vectors for philox4x32 with 10 rounds.
TEST(Philox, MatchesRandom123KnownAnswers) {
  Philox4 r = philox4x32_10({{0, 0, 0, 0}}, 0, 0);
  EXPECT_EQ(r.v[0], 0x6627e8d5u);
  EXPECT_EQ(r.v[1], 0xe169c58du);
  EXPECT_EQ(r.v[2], 0xbc57ac4cu);
  EXPECT_EQ(r.v[3], 0x9b00dbd8u);
  r = philox4x32_10({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu,
                    0xffffffffu);
  EXPECT_EQ(r.v[0], 0x408f276du);
  EXPECT_EQ(r.v[1], 0x41c83b0eu);
  EXPECT_EQ(r.v[2], 0xa20bc7c6u);
  EXPECT_EQ(r.v[3], 0x6d5451fdu);
  r = philox4x32_10({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u,
                    0x299f31d0u);
  EXPECT_EQ(r.v[0], 0xd16cfe09u);
  EXPECT_EQ(r.v[1], 0x94fdccebu);
  EXPECT_EQ(r.v[2], 0x5001e420u);
  EXPECT_EQ(r.v[3], 0x24126ea1u);
}

TEST(Philox, DropoutThresholdKeepsOneMinusP) {
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_threshold(0.5f), 0x80000000u);
  EXPECT_EQ(dropout_threshold(1.0f), 0xffffffffu);
  int kept = 0;
  const int n = 100000;
  const uint32_t t = dropout_threshold(0.1f);
  for (int i = 0; i < n; ++i) kept += philox_group(42, 7, static_cast<uint64_t>(i)).v[i % 4] >= t;
  EXPECT_NEAR(kept / double{n}, 0.9, 0.005);  // 5 sigma of a binomial(1e5, 0.9) is 0.0047
}

TEST(Random, InputsAreNeverZeroAndInRange) {
  const std::vector<float> v = random_vector<float>(10000, -1.0f, 2.0f, 3);
  for (float x : v) {
    EXPECT_GE(x, -1.0f);
    EXPECT_LT(x, 2.0f);
  }
  EXPECT_NE(v[0], v[1]);
  const std::vector<int32_t> ids = random_ints(10000, 5, 9, 4);
  std::vector<int> seen(9, 0);
  for (int32_t i : ids) {
    ASSERT_GE(i, 5);
    ASSERT_LT(i, 9);
    ++seen[static_cast<size_t>(i)];
  }
  for (int k = 5; k < 9; ++k) EXPECT_GT(seen[static_cast<size_t>(k)], 2300);
}

// The judge itself: it must pass rounding noise and fail each kind of real error.
TEST(Compare, PassesBf16RoundingNoise) {
  std::vector<double> want(4096);
  std::vector<float> got(4096);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = std::sin(0.37 * static_cast<double>(i)) * 3.0;
    got[i] = round_to<bf16>(static_cast<float>(want[i]));
  }
  const Comparison c = compare("x", got, want, default_tolerance(DType::kBF16));
  EXPECT_TRUE(c.passed) << c.summary();
  EXPECT_LT(c.rel_l2, 3e-3);  // bf16 keeps 8 bits: |error| <= 2^-9 relative
}

TEST(Compare, FailsOnAnUnwrittenPoisonedElement) {
  std::vector<double> want(1000, 1.0);
  std::vector<float> got(1000, 1.0f);
  got[517] = std::numeric_limits<float>::quiet_NaN();
  const Comparison c = compare("y", got, want, default_tolerance(DType::kBF16));
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.nonfinite, 1);
  EXPECT_EQ(c.first_nonfinite, 517);
  EXPECT_NE(c.summary().find("NaN"), std::string::npos);
}

TEST(Compare, FailsOnOneWrongElementAmongMany) {
  // One element off by 50% among 100k: the norm hardly moves (rel_l2 ~ 1.6e-3 passes the bf16
  // bound), the elementwise bound catches it.
  std::vector<double> want(100000);
  std::vector<float> got(100000);
  for (size_t i = 0; i < want.size(); ++i) want[i] = got[i] = static_cast<float>(1 + i % 7);
  got[12345] *= 1.5f;
  const Comparison c = compare("z", got, want, default_tolerance(DType::kBF16));
  EXPECT_LT(c.rel_l2, default_tolerance(DType::kBF16).rel_l2);
  EXPECT_FALSE(c.passed);
  EXPECT_EQ(c.worst_index, 12345);
}

TEST(Compare, FailsOnAWrongScaleAndOnZerosForNonzeroReference) {
  std::vector<double> want(256);
  std::vector<float> got(256), zeros(256, 0.0f);
  for (size_t i = 0; i < want.size(); ++i) {
    want[i] = 1.0 + static_cast<double>(i) / 256;
    got[i] = static_cast<float>(want[i] * 1.02);  // 2% off everywhere
  }
  EXPECT_FALSE(compare("s", got, want, default_tolerance(DType::kBF16)).passed);
  EXPECT_FALSE(compare("s", zeros, want, default_tolerance(DType::kBF16)).passed);
}

// A zero reference (attention's dq for one key) against rounding noise: x / 0 without a floor;
// with the scale of the other outputs (~1) as the floor, 6e-8 passes and one 0.5 still fails.
TEST(Compare, ZeroReferenceIsJudgedAgainstTheFloor) {
  const std::vector<double> want(64, 0.0);
  std::vector<float> noise(64, 5.9e-8f), wrong(64, 0.0f);
  wrong[3] = 0.5f;
  EXPECT_FALSE(compare("dq", noise, want, {1e-2, 8e-2}).passed);
  const Comparison c = compare("dq", noise, want, {1e-2, 8e-2, 1.0});
  EXPECT_TRUE(c.passed) << c.summary();
  EXPECT_NEAR(c.rel_l2, 5.9e-8, 1e-9);
  EXPECT_FALSE(compare("dq", wrong, want, {1e-2, 8e-2, 1.0}).passed);  // 0.5 / 1 > 8e-2
}

TEST(Compare, ExpectedInfinityMustBeMatched) {
  const std::vector<double> want = {1.0, -INFINITY};
  EXPECT_TRUE(compare("m", std::vector<float>{1.0f, -INFINITY}, want, {1e-5, 1e-4}).passed);
  EXPECT_FALSE(compare("m", std::vector<float>{1.0f, 0.0f}, want, {1e-5, 1e-4}).passed);
}

}  // namespace
}  // namespace hetplan::kernels
