// The analytical GEMM model worked out by hand, and the measured-table correction on tables whose
// answer is known.
#include <cmath>

#include <gtest/gtest.h>

#include "costmodel/gemm_model.h"

namespace hetplan {
namespace {

// 132 SMs at 1 PFLOP/s x 0.5: 3.7879e12 FLOP/s per SM. Memory made negligible (1e9 GB/s) and
// smaller tiles made useless (tile exponent 50) so that the compute side can be checked alone.
GemmModel hand_model(double wave_smoothing = 0) {
  GemmEfficiency e;
  e.peak_fraction = 0.5;
  e.tile_m = e.tile_n = 128;
  e.k_half = 64;
  e.overhead_s = 5e-6;
  e.tile_exponent = 50;
  e.memory_fraction = 1;
  e.blend = 8;
  e.wave_smoothing = wave_smoothing;
  return GemmModel(e, 1e15, 1e9, 132, 2);
}

constexpr double kPerSm = 1e15 * 0.5 / 132;

TEST(GemmModel, OneWaveOfTilesWithoutSplitK) {
  // 1408 = 11 x 128: 121 tiles, one wave; K = 256 is too short to split (256 per split at least).
  // Each tile: 2 x 128 x 128 x (256 + 64) FLOPs.
  const double tile_s = 2.0 * 128 * 128 * (256 + 64) / kPerSm;
  EXPECT_NEAR(hand_model().analytical_s({1408, 1408, 256, 1, true, false}), 5e-6 + tile_s, 1e-12);
}

TEST(GemmModel, WavesAndTheirSmoothing) {
  // 13 x 11 = 143 tiles on 132 SMs: two waves, or 0.5 x 2 + 0.5 x 143/132 with smoothing 0.5.
  const double tile_s = 2.0 * 128 * 128 * (256 + 64) / kPerSm;
  const GemmShape s{13 * 128, 11 * 128, 256, 1, true, false};
  EXPECT_NEAR(hand_model().analytical_s(s), 5e-6 + 2 * tile_s, 1e-12);
  EXPECT_NEAR(hand_model(0.5).analytical_s(s), 5e-6 + (1 + 0.5 * 143.0 / 132) * tile_s, 1e-12);
}

TEST(GemmModel, SplitKForOneTileWithDeepK) {
  // One 128 x 128 tile, K = 8192. Splits 1..16 all fit one wave; per split the tile computes
  // ceil(8192 / s) + 64 K steps, and a reduction kernel costs one more overhead (5 us). 16 splits:
  // 512 + 64 steps = 4.98 us + 5 us; 12 splits: 683 + 64 = 6.46 us + 5 us; no split: 71.4 us.
  const double compute_s = 2.0 * 128 * 128 * (512 + 64) / kPerSm;
  const double reduce_s = 5e-6 + (4.0 * 16 + 2) * 128 * 128 / 1e18;
  EXPECT_NEAR(hand_model().analytical_s({128, 128, 8192, 1, true, false}),
              5e-6 + compute_s + reduce_s, 1e-12);
}

TEST(GemmModel, MemoryBoundShapesFollowTheBandwidth) {
  // A 16 x 16384 x 16384 product moves 2 x (16 x 16384 + 16384 x 16384 + 16 x 16384) bytes; at
  // 1000 GB/s x 0.8 that is 0.672 ms, far above its compute, and blend 32 is nearly the max.
  GemmEfficiency e;
  e.memory_fraction = 0.8;
  e.blend = 32;
  e.overhead_s = 0;
  const GemmModel m(e, 1e15, 1000, 132, 2);
  const double bytes = 2.0 * (16.0 * 16384 + 16384.0 * 16384 + 16.0 * 16384);
  EXPECT_NEAR(m.analytical_s({16, 16384, 16384, 1, true, false}), bytes / 0.8e12,
              1e-3 * bytes / 0.8e12);
}

std::vector<GemmPoint> grid(const GemmModel& m, double (*ratio)(const GemmShape&), bool ta, bool tb,
                            int64_t step) {
  std::vector<GemmPoint> pts;
  for (int64_t a = 256; a <= 8192; a *= step)
    for (int64_t b = 256; b <= 8192; b *= step)
      for (int64_t c = 256; c <= 8192; c *= step) {
        const GemmShape s{a, b, c, 1, ta, tb};
        pts.push_back({s, m.analytical_s(s) * ratio(s)});
      }
  return pts;
}

TEST(GemmCorrection, MeasuredShapesAreReturnedAndAConstantRatioCarriesOver) {
  GemmModel m(GemmEfficiency{}, 989.4e12, 3000, 132, 2);
  m.set_measurements(grid(
      m, [](const GemmShape&) { return 1.1; }, true, false, 2));
  const GemmShape measured{1024, 2048, 512, 1, true, false};
  EXPECT_DOUBLE_EQ(m.time_s(measured), m.analytical_s(measured) * 1.1);
  const GemmShape between{1536, 3000, 700, 1, true, false};
  EXPECT_NEAR(m.time_s(between) / m.analytical_s(between), 1.1, 1e-9);
}

TEST(GemmCorrection, FollowsALogLinearTrendBetweenGridPoints) {
  // ratio = 2^(0.05 log2 m): 5% more per doubling of m. Half-way between m = 1024 and 2048 the
  // local regression must give 2^(0.05 x 10.5) (the ridge on slopes biases it slightly).
  GemmModel m(GemmEfficiency{}, 989.4e12, 3000, 132, 2);
  auto trend = [](const GemmShape& s) { return std::pow(2.0, 0.05 * std::log2(double(s.m))); };
  m.set_measurements(grid(m, trend, true, false, 2));
  const GemmShape q{1448, 1024, 1024, 1, true, false};
  EXPECT_NEAR(m.time_s(q) / m.analytical_s(q), std::pow(2.0, 0.05 * std::log2(1448.0)), 2e-3);
}

TEST(GemmCorrection, AnotherLayoutBorrowsTheGridPlusItsOwnOffset) {
  // TN measured on a 2x grid at ratio 1.0; NN only on a 4x cube at ratio 1.05. An NN shape off
  // the cube takes the TN structure and the NN offset.
  GemmModel m(GemmEfficiency{}, 989.4e12, 3000, 132, 2);
  auto pts = grid(
      m, [](const GemmShape&) { return 1.0; }, true, false, 2);
  auto nn = grid(
      m, [](const GemmShape&) { return 1.05; }, false, false, 4);
  pts.insert(pts.end(), nn.begin(), nn.end());
  m.set_measurements(pts);
  const GemmShape q{2048, 1024, 2048, 1, false, false};  // on the TN grid, not on the NN cube
  EXPECT_NEAR(m.time_s(q) / m.analytical_s(q), 1.05, 5e-3);
}

TEST(GemmCorrection, LeavesSlowGlitchesOutOfOtherShapesCorrections) {
  // A 2x grid at ratio 1.0 but for one shape measured 3x slow (log 3 = 1.1 above its neighbours'
  // median, beyond the 0.6 allowed): it keeps its measured time, and its neighbours do not inherit
  // it. The same shape measured 3x fast is a trend the correction keeps (only slow glitches).
  GemmModel m(GemmEfficiency{}, 989.4e12, 3000, 132, 2);
  const GemmShape odd{1024, 1024, 1024, 1, true, false};
  auto with_odd = [&](double factor) {
    auto pts = grid(
        m, [](const GemmShape&) { return 1.0; }, true, false, 2);
    for (auto& p : pts)
      if (p.shape == odd) p.time_s *= factor;
    return pts;
  };
  m.set_measurements(with_odd(3));
  EXPECT_EQ(m.glitches(), 1u);
  EXPECT_NEAR(m.time_s(odd) / m.analytical_s(odd), 3, 1e-12);
  const GemmShape next{1024, 1024, 1300, 1, true, false};
  EXPECT_NEAR(m.time_s(next) / m.analytical_s(next), 1.0, 1e-9);
  m.set_measurements(with_odd(1.0 / 3));
  EXPECT_EQ(m.glitches(), 0u);
  EXPECT_LT(m.time_s(next) / m.analytical_s(next), 0.95);
}

TEST(GemmCorrection, FadesFarFromEveryMeasurement) {
  GemmModel m(GemmEfficiency{}, 989.4e12, 3000, 132, 2);
  m.set_measurements(grid(
      m, [](const GemmShape&) { return 1.2; }, true, false, 2));
  // 2^17 x 16 x 16: 4 octaves beyond the grid in m, 4 below it in n and k.
  const GemmShape far{1 << 17, 16, 16, 1, true, false};
  EXPECT_LT(std::abs(m.log_correction(far)), 0.01 * std::log(1.2));
}

}  // namespace
}  // namespace hetplan
