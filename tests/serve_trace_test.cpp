// Request traces: Helix's generator on a series worked by hand, and the shipped Azure data.
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "serve/trace.h"
#include "serve_test_util.h"

namespace hetplan::serve {
namespace {

using testing::kHelix;

TEST(ServeTrace, HelixGeneratorOnAConstantSeries) {
  // Every interval of the series had 2 requests; at 1 request/s the 3-s intervals are rescaled
  // by 1 x 3 / 2 = 1.5 to 3 requests each: 9 s give 3 intervals of 3 arrivals, each interval's
  // inside it and in order, every one with the only measured length pair.
  MeasuredTrace measured;
  measured.lengths = {{10, 5}};
  measured.interval_requests = {2, 2};
  const auto trace = helix_trace(measured, 1.0, 9, 7);
  ASSERT_EQ(trace.size(), 9u);
  for (size_t i = 0; i < trace.size(); ++i) {
    const double start = 3.0 * (i / 3);
    EXPECT_GE(trace[i].arrival_s, start) << i;
    EXPECT_LT(trace[i].arrival_s, start + 3) << i;
    if (i % 3 > 0) {
      EXPECT_GE(trace[i].arrival_s, trace[i - 1].arrival_s) << i;
    }
    EXPECT_EQ(trace[i].prompt_tokens, 10);
    EXPECT_EQ(trace[i].output_tokens, 5);
  }
  // At 0.5 requests/s each interval is due 1.5; the rounding carries what it leaves to the next
  // interval: 1.5 -> 2 (ties to even, carry -0.5), 1.0 -> 1, 1.5 -> 2, 1.0 -> 1: 6 in 12 s.
  const auto half = helix_trace(measured, 0.5, 12, 7);
  std::vector<int> per_interval(4, 0);
  for (const auto& r : half) ++per_interval.at(static_cast<size_t>(r.arrival_s / 3));
  EXPECT_EQ(per_interval, (std::vector<int>{2, 1, 2, 1}));
}

TEST(ServeTrace, ShippedAzureConversationTrace) {
  // Helix's artifact: 16657 requests, mean prompt 763.1 and output 232.4 tokens (its
  // length_sampler.py); 1200 intervals of 3 s, 13.88 requests each on average.
  const MeasuredTrace t = read_measured_trace(kHelix / "traces/azure_conv_lengths.csv",
                                              kHelix / "traces/azure_conv_arrivals.csv");
  ASSERT_EQ(t.lengths.size(), 16657u);
  ASSERT_EQ(t.interval_requests.size(), 1200u);
  double prompt = 0, output = 0, arrivals = 0;
  for (const auto& [p, o] : t.lengths) {
    prompt += p;
    output += o;
  }
  for (double a : t.interval_requests) arrivals += a;
  EXPECT_NEAR(prompt / t.lengths.size(), 763.08, 0.01);
  EXPECT_NEAR(output / t.lengths.size(), 232.45, 0.01);
  EXPECT_NEAR(t.mean_request_tokens(), 995.53, 0.01);
  EXPECT_NEAR(arrivals / 1200, 13.8808, 1e-4);
  // 1800 s at 700 tokens/s (Helix's online run on cluster24): about 1266 requests.
  const auto trace = helix_trace(t, 700 / t.mean_request_tokens(), 1800, 1);
  EXPECT_NEAR(static_cast<double>(trace.size()), 1800 * 700 / 995.53, 0.05 * 1266);
}

}  // namespace
}  // namespace hetplan::serve
