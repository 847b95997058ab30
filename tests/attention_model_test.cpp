// The fused-attention time model (costmodel/attention_model.h): its two bounds worked by hand,
// and its fit recovering known coefficients.
#include <gtest/gtest.h>

#include <cmath>

#include "costmodel/attention_model.h"

namespace hetplan {
namespace {

constexpr double kPeak = 1e15;  // 1 PFLOP/s over 100 SMs: 1e13 per SM
constexpr int64_t kSms = 100;

// Forward FLOPs of causal attention: 2 products of 2 FLOPs per (query, key, channel), half of the
// s x s pairs.
double causal_forward_flops(int64_t batch_heads, int64_t seq, int64_t head_dim) {
  return 4.0 * seq * seq / 2 * head_dim * batch_heads;
}

TEST(AttentionModel, OneHeadTakesAsLongAsOneBlockWalkingTheSequence) {
  const AttentionCoefficients c{0.5, 0, 0};
  // One head of 4096 x 128: 4.295 GFLOP, 8.59 us at half the peak. Its longest block, 128
  // queries against all 4096 keys at 4 x 128 FLOPs a pair, is 268.4 MFLOP on one SM at half its
  // 1e13: 53.69 us. sqrt(8.59^2 + 53.69^2) = 54.37 us.
  const AttentionWork one{causal_forward_flops(1, 4096, 128), 1, 4096, 128, true};
  EXPECT_NEAR(attention_time_s(c, one, kPeak, kSms), 54.369943e-6, 1e-11);
  // 64 heads: 549.76 us of throughput; the same block adds 0.5%: 552.37 us.
  const AttentionWork many{causal_forward_flops(64, 4096, 128), 64, 4096, 128, true};
  EXPECT_NEAR(attention_time_s(c, many, kPeak, kSms), 552.371034e-6, 1e-10);
  // Without batch x heads (or SMs) only the throughput bound is known.
  const AttentionWork unknown{many.flops, 0, 4096, 128, true};
  EXPECT_NEAR(attention_time_s(c, unknown, kPeak, kSms), 549.755814e-6, 1e-10);
  EXPECT_NEAR(attention_time_s(c, many, kPeak, 0), 549.755814e-6, 1e-10);
}

TEST(AttentionModel, ShortSequencesAndNarrowHeadsRunFurtherBelowThePeak) {
  // Backward (2.5x the forward's FLOPs) of 8 heads x 1024 x 64, e 0.3, both halves: sequence
  // 1024 / (1024 + 1024) = 0.5, head 64 / (64 + 64) = 0.5. Throughput: 2.684 GFLOP / (1e15 x 0.3
  // x 0.25) = 35.79 us; the longest block (128 x 1024 pairs at 640 FLOPs) / (1e13 x 0.3 x 0.5),
  // the sequence term not applying to one block: 55.92 us; together 66.40 us.
  const AttentionCoefficients c{0.3, 1024, 64};
  const AttentionWork w{2.5 * causal_forward_flops(8, 1024, 64), 8, 1024, 64, true};
  EXPECT_NEAR(attention_time_s(c, w, kPeak, kSms), 66.396714e-6, 1e-11);
  // A causal sequence shorter than a block is one block of half its square: 2 heads x 100 x 128
  // (5.12 MFLOP) take 10.24 ns of throughput and 512 ns on the block's SM.
  const AttentionCoefficients flat{0.5, 0, 0};
  const AttentionWork short_seq{causal_forward_flops(2, 100, 128), 2, 100, 128, true};
  EXPECT_NEAR(attention_time_s(flat, short_seq, kPeak, kSms), 512.1024e-9, 1e-13);
}

// Timings made by the model itself, at coefficients on the fit's grids, over sequences, head
// sizes and batch x heads from one head (critical path) to 64: the fit finds them again.
TEST(AttentionModel, FitRecoversTheCoefficientsOfItsOwnTimings) {
  const AttentionCoefficients truth{0.42, 16 * std::exp2(40 / 8.0), 4 * std::exp2(7 / 2.0)};
  const double launch = 4e-6;
  std::vector<AttentionSample> samples;
  for (int64_t seq : {512, 1024, 4096})
    for (int64_t head_dim : {64, 128})
      for (int64_t bh : {1, 8, 64}) {
        const AttentionWork w{causal_forward_flops(bh, seq, head_dim), bh, seq, head_dim, true};
        samples.push_back({w, launch + attention_time_s(truth, w, 989e12, 132)});
      }
  const AttentionFitResult r = fit_attention(samples, 989e12, 132, launch, {});
  EXPECT_NEAR(r.coefficients.efficiency, truth.efficiency, 1e-9);
  EXPECT_DOUBLE_EQ(r.coefficients.seq_half, truth.seq_half);
  EXPECT_DOUBLE_EQ(r.coefficients.head_dim_half, truth.head_dim_half);
  EXPECT_EQ(r.quality.points, 18);
  EXPECT_LT(r.quality.p95_rel_error, 1e-9);

  // One sequence length and one head size: neither half can be told apart from the efficiency;
  // both stay 0 and the efficiency takes what they would have cost at that shape (within 2%:
  // the critical path, which the sequence term does not slow, is a little off then).
  std::vector<AttentionSample> one_shape;
  for (const auto& s : samples)
    if (s.work.seq == 4096 && s.work.head_dim == 128 && s.work.batch_heads == 64)
      one_shape.push_back(s);
  const AttentionFitResult flat = fit_attention(one_shape, 989e12, 132, launch, {});
  EXPECT_EQ(flat.coefficients.seq_half, 0);
  EXPECT_EQ(flat.coefficients.head_dim_half, 0);
  const double folded =
      truth.efficiency * 4096 / (4096 + truth.seq_half) * 128 / (128 + truth.head_dim_half);
  EXPECT_NEAR(flat.coefficients.efficiency, folded, 0.02 * folded);

  // No timings: the prior, unscored.
  const AttentionCoefficients prior{0.3, 100, 10};
  const AttentionFitResult none = fit_attention({}, 989e12, 132, launch, prior);
  EXPECT_EQ(none.coefficients.efficiency, 0.3);
  EXPECT_EQ(none.coefficients.seq_half, 100);
  EXPECT_EQ(none.quality.points, 0);
}

// The same timings half alone and half inside layers 1.25x slower: the halves are shared, the
// efficiency is the alone one and in_layer_factor the ratio; fewer than
// kMinAttentionContextSamples inside layers share one efficiency instead.
TEST(AttentionModel, FitSeparatesTimingsInsideLayersByOneFactor) {
  const AttentionCoefficients truth{0.42, 16 * std::exp2(40 / 8.0), 4 * std::exp2(7 / 2.0)};
  const double launch = 4e-6, factor = 1.25;
  std::vector<AttentionSample> samples;
  for (int64_t seq : {512, 1024, 4096})
    for (int64_t head_dim : {64, 128})
      for (int64_t bh : {1, 8, 64}) {
        const AttentionWork w{causal_forward_flops(bh, seq, head_dim), bh, seq, head_dim, true};
        const double body = attention_time_s(truth, w, 989e12, 132);
        const bool in_layer = bh == 8;  // 6 of the 18
        samples.push_back({w, launch + (in_layer ? factor : 1.0) * body, in_layer});
      }
  const AttentionFitResult r = fit_attention(samples, 989e12, 132, launch, {});
  EXPECT_NEAR(r.coefficients.efficiency, truth.efficiency, 1e-9);
  EXPECT_DOUBLE_EQ(r.coefficients.seq_half, truth.seq_half);
  EXPECT_DOUBLE_EQ(r.coefficients.head_dim_half, truth.head_dim_half);
  EXPECT_NEAR(r.coefficients.in_layer_factor, factor, 1e-9);
  EXPECT_EQ(r.in_layer_points, 6);
  EXPECT_LT(r.quality.p95_rel_error, 1e-9);  // the factor applied to the in-layer ones

  // Two inside layers: too few for their own efficiency; one efficiency for all, factor 1.
  std::vector<AttentionSample> few;
  for (const auto& s : samples)
    if (!s.in_layer || s.work.seq == 4096) few.push_back(s);
  ASSERT_EQ(few.size(), 14u);
  const AttentionFitResult shared = fit_attention(few, 989e12, 132, launch, {});
  EXPECT_EQ(shared.coefficients.in_layer_factor, 1);
  EXPECT_EQ(shared.in_layer_points, 0);
  EXPECT_GT(shared.quality.p95_rel_error, 0.05);  // the two are 25% off the others' efficiency
}

}  // namespace
}  // namespace hetplan
