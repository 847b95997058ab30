#include "costmodel/fit_collectives.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "test_util.h"

namespace hetplan {
namespace {

// Sizes 1 KiB .. 1 GiB in x2 steps, as the full sweep measures them.
std::vector<double> full_sweep_sizes() {
  std::vector<double> sizes;
  for (int e = 10; e <= 30; ++e) sizes.push_back(std::ldexp(1.0, e));
  return sizes;
}

// Synthetic two-regime curve with multiplicative noise uniform in [-noise, +noise]; `repeats`
// medians per size, as when several calibration runs of one node kind are merged.
std::vector<SizeTime> synthetic(const TwoRegimeFit& truth, double noise, int repeats,
                                unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-noise, noise);
  std::vector<SizeTime> pts;
  for (int r = 0; r < repeats; ++r)
    for (double b : full_sweep_sizes()) pts.push_back({b, truth.time_s(b) * (1 + u(rng))});
  return pts;
}

double rel(double got, double want) { return std::abs(got / want - 1); }

TEST(FitCollectives, ExactLineIsRecoveredExactly) {
  // t = 10 us + b / 50 GB/s: a noiseless line must come back to rounding.
  std::vector<SizeTime> pts;
  for (double b : full_sweep_sizes()) pts.push_back({b, 10e-6 + b / 50e9});
  const LatencyBandwidth f = fit_latency_bandwidth(pts);
  EXPECT_NEAR(f.latency_s, 10e-6, 1e-12);
  EXPECT_NEAR(f.bandwidth_GBps, 50, 1e-6);
  const TwoRegimeFit two = fit_two_regimes(pts);
  // One line explains everything: the BIC keeps one regime.
  EXPECT_NEAR(two.small.latency_s, 10e-6, 1e-12);
  EXPECT_DOUBLE_EQ(two.small.bandwidth_GBps, two.large.bandwidth_GBps);
  EXPECT_DOUBLE_EQ(two.breakpoint_bytes, std::ldexp(1.0, 30));
  EXPECT_LT(two.max_rel_error, 1e-9);
}

// A protocol switch at 1 MiB as NCCL shows it: LL-like small messages (15 us, 12 GB/s) and
// Simple-like large ones (50 us, 150 GB/s); the curve jumps down at the switch.
TwoRegimeFit protocol_switch_truth() {
  TwoRegimeFit t;
  t.small = {15e-6, 12};
  t.large = {50e-6, 150};
  t.breakpoint_bytes = 1 << 20;
  return t;
}

// Errors of the four parameters and of the fitted curve over many noisy sweeps. A single seed is
// not a test: parameter error is a random variable (about noise / sqrt(points carrying it), and
// only 3-4 sizes carry each latency), so these tests look at its distribution over 100 seeds.
struct ErrorQuantiles {
  std::array<double, 5> median{}, p90{}, max{};  // small lat, small bw, large lat, large bw, curve
  int breakpoints_in_gap = 0;
};

ErrorQuantiles fit_many(double noise, int repeats) {
  const TwoRegimeFit truth = protocol_switch_truth();
  std::array<std::vector<double>, 5> errs;
  ErrorQuantiles q;
  for (unsigned seed = 1; seed <= 100; ++seed) {
    const TwoRegimeFit f = fit_two_regimes(synthetic(truth, noise, repeats, seed));
    errs[0].push_back(rel(f.small.latency_s, truth.small.latency_s));
    errs[1].push_back(rel(f.small.bandwidth_GBps, truth.small.bandwidth_GBps));
    errs[2].push_back(rel(f.large.latency_s, truth.large.latency_s));
    errs[3].push_back(rel(f.large.bandwidth_GBps, truth.large.bandwidth_GBps));
    double curve = 0;
    for (double b : full_sweep_sizes()) curve = std::max(curve, rel(f.time_s(b), truth.time_s(b)));
    errs[4].push_back(curve);
    // The break lies between the last small size (1 MiB) and the first large one (2 MiB).
    if (f.breakpoint_bytes >= (1 << 20) && f.breakpoint_bytes < (2 << 20)) ++q.breakpoints_in_gap;
    EXPECT_EQ(f.points, 21 * repeats);
  }
  for (size_t k = 0; k < errs.size(); ++k) {
    std::sort(errs[k].begin(), errs[k].end());
    q.median[k] = percentile_sorted(errs[k], 0.5);
    q.p90[k] = percentile_sorted(errs[k], 0.9);
    q.max[k] = errs[k].back();
  }
  return q;
}

TEST(FitCollectives, TwoPercentNoiseRecoversParametersWithinTwoPercent) {
  const ErrorQuantiles q = fit_many(0.02, 1);
  EXPECT_EQ(q.breakpoints_in_gap, 100);
  for (int k = 0; k < 4; ++k) {
    EXPECT_LT(q.median[k], 0.01) << "parameter " << k;
    EXPECT_LT(q.p90[k], 0.02) << "parameter " << k;
  }
  EXPECT_LT(q.max[4], 0.02);  // every fitted curve within 2% of the truth at every size
}

TEST(FitCollectives, FivePercentNoiseRecoversParametersWithinTwoPercent) {
  const ErrorQuantiles one = fit_many(0.05, 1);
  EXPECT_GE(one.breakpoints_in_gap, 95);
  for (int k = 0; k < 4; ++k) EXPECT_LT(one.median[k], 0.02) << "parameter " << k;
  EXPECT_LT(one.median[4], 0.03);
  // Four merged sweeps (repeated calibrations of one node kind) halve the error.
  const ErrorQuantiles four = fit_many(0.05, 4);
  EXPECT_EQ(four.breakpoints_in_gap, 100);
  for (int k = 0; k < 4; ++k) {
    EXPECT_LT(four.median[k], 0.7 * one.median[k]) << "parameter " << k;  // ideal: 1 / sqrt(4)
    EXPECT_LT(four.p90[k], 0.025) << "parameter " << k;
  }
  EXPECT_LT(four.max[4], 0.03);
}

TEST(FitCollectives, StrayPointDoesNotMoveTheFit) {
  // One median 3x too slow (a hiccup) among clean points must not pull the bandwidth.
  std::vector<SizeTime> pts;
  for (double b : full_sweep_sizes()) pts.push_back({b, 20e-6 + b / 100e9});
  pts[15].time_s *= 3;
  const LatencyBandwidth f = fit_latency_bandwidth(pts);
  EXPECT_LT(rel(f.bandwidth_GBps, 100), 0.01);
  EXPECT_LT(rel(f.latency_s, 20e-6), 0.01);
}

// QA: a flat series came back with the floor of the fit's slope as a bandwidth (1e6 GB/s), which
// fit-collectives printed and wrote as small_GBps as if measured. It is latency alone: JSON null.
TEST(FitCollectives, LatencyOnlySeriesHasNoBandwidth) {
  std::vector<SizeTime> pts = {{1024, 5e-6}, {2048, 5e-6}, {4096, 5e-6}};
  const LatencyBandwidth f = fit_latency_bandwidth(pts);
  EXPECT_NEAR(f.latency_s, 5e-6, 1e-12);
  EXPECT_TRUE(f.latency_only());
  EXPECT_DOUBLE_EQ(f.time_s(1e6), f.latency_s);
  EXPECT_TRUE(to_json(f)["bandwidth_GBps"].is_null());
  // Flat below 64 KiB (5 us), then 5 us + bytes / 100 GB/s: the small regime has no bandwidth.
  CollectiveFit c;
  static_cast<TwoRegimeFit&>(c) = fit_two_regimes([] {
    std::vector<SizeTime> sweep;
    for (double b : full_sweep_sizes()) sweep.push_back({b, b <= 65536 ? 5e-6 : 5e-6 + b / 100e9});
    return sweep;
  }());
  c.op = CollectiveKind::kAllReduce;
  c.group_size = c.gpus_per_node = 1;
  c.link = "self";
  EXPECT_TRUE(c.small.latency_only());
  EXPECT_NEAR(c.large.bandwidth_GBps, 100, 1e-6);
  CommunicationFit all;
  all.collectives.push_back(c);
  const Json j = to_json(all);
  EXPECT_TRUE(j["collectives"][0]["small"]["bandwidth_GBps"].is_null());
  EXPECT_FALSE(j["collectives"][0]["large"]["bandwidth_GBps"].is_null());
  const CommunicationFit back = communication_fit_from_json(ObjectReader(j, "fit.json"));
  EXPECT_TRUE(back.collectives[0].small.latency_only());
  EXPECT_DOUBLE_EQ(back.collectives[0].time_s(4096), c.small.latency_s);
}

CollectiveMeasurement coll(CollectiveKind op, int64_t group, int64_t nodes, double bytes, double t,
                           std::string link) {
  CollectiveMeasurement m;
  m.op = op;
  m.dtype = Dtype::kBf16;
  m.group_size = group;
  m.nodes = nodes;
  m.gpus_per_node = group / nodes;
  m.bytes = bytes;
  m.link = std::move(link);
  m.time_s = summarize({t});
  return m;
}

TEST(FitCollectives, HierarchicalAllReduceComposesMeasuredParts) {
  // Intra-node (8 GPUs): RS and AG take 5 us + b / 200 GB/s. Inter-node (2 nodes x 1 GPU):
  // all-reduce 20 us + b / 25 GB/s. Composed all-reduce of B over 2 x 8:
  // 2 * (5 us + B / 200e9) + 20 us + (B / 8) / 25e9 = 30 us + B * (1e-11 + 5e-12).
  CalibrationFile file;
  file.context.source = "measured";
  for (double b : full_sweep_sizes()) {
    file.collectives.push_back(
        coll(CollectiveKind::kReduceScatter, 8, 1, b, 5e-6 + b / 200e9, "nvswitch"));
    file.collectives.push_back(
        coll(CollectiveKind::kAllGather, 8, 1, b, 5e-6 + b / 200e9, "nvswitch"));
    file.collectives.push_back(coll(CollectiveKind::kAllReduce, 2, 2, b, 20e-6 + b / 25e9, "net"));
    // A measured 16-GPU run 10% slower than the composition.
    file.collectives.push_back(
        coll(CollectiveKind::kAllReduce, 16, 2, b, 1.1 * (30e-6 + b * 1.5e-11), "net"));
  }
  file.collectives.push_back(coll(CollectiveKind::kAllToAll, 8, 1, 1024, 1, "nvswitch"));
  file.collectives.back().ok = false;  // failed: skipped by the fit
  const CommunicationFit fit = fit_communication(file);
  EXPECT_EQ(fit.collectives.size(), 4u);
  const auto t = hierarchical_time_s(fit, CollectiveKind::kAllReduce, Dtype::kBf16, 1 << 30, 2, 8);
  ASSERT_TRUE(t.has_value());
  EXPECT_NEAR(*t, 30e-6 + std::ldexp(1.0, 30) * 1.5e-11, 1e-9);
  ASSERT_EQ(fit.hierarchy_checks.size(), 1u);
  EXPECT_EQ(fit.hierarchy_checks[0].points, 21);
  EXPECT_NEAR(fit.hierarchy_checks[0].median_rel_error, 1 - 1 / 1.1, 1e-6);
  EXPECT_FALSE(hierarchical_time_s(fit, CollectiveKind::kBroadcast, Dtype::kBf16, 1e6, 2, 8));
  EXPECT_FALSE(hierarchical_time_s(fit, CollectiveKind::kAllReduce, Dtype::kFp32, 1e6, 2, 8));
}

TEST(FitCollectives, JsonRoundTrip) {
  CollectiveFit f;
  f.op = CollectiveKind::kAllGather;
  f.dtype = Dtype::kFp32;
  f.group_size = 8;
  f.nodes = 1;
  f.gpus_per_node = 8;
  f.link = "nvswitch";
  f.gpus = {"h100-sxm"};
  f.small = {12e-6, 30};
  f.large = {40e-6, 350};
  f.breakpoint_bytes = 1.5e6;
  f.points = 21;
  CommunicationFit all;
  all.collectives.push_back(f);
  all.hierarchy_checks.push_back({CollectiveKind::kAllReduce, Dtype::kBf16, 2, 8, 0.05, 0.1, 21});
  P2pFit p2p;
  p2p.src = 0;
  p2p.dst = 9;
  p2p.link = "efa";
  p2p.gpus = {"h100-sxm", "h100-sxm"};
  p2p.small = {20e-6, 10};
  p2p.large = {25e-6, 45};
  p2p.breakpoint_bytes = 4e6;
  p2p.points = 17;
  all.p2p.push_back(p2p);
  HostDeviceFit h2d;
  h2d.direction = "h2d";
  h2d.pinned = false;
  h2d.small = {8e-6, 12};
  h2d.large = {10e-6, 25};
  h2d.breakpoint_bytes = 1e6;
  h2d.points = 12;
  all.host_device.push_back(h2d);
  const Json j = to_json(all);
  // busbw of the large regime: 350 GB/s x 7/8 (nccl-tests all-gather factor).
  EXPECT_DOUBLE_EQ(j["collectives"][0]["large_busbw_GBps"].get<double>(), 306.25);
  const CommunicationFit back = communication_fit_from_json(ObjectReader(j, "fit.json"));
  ASSERT_EQ(back.collectives.size(), 1u);
  EXPECT_DOUBLE_EQ(back.collectives[0].time_s(1e9), 40e-6 + 1e9 / 350e9);
  EXPECT_DOUBLE_EQ(back.collectives[0].time_s(1e6), 12e-6 + 1e6 / 30e9);
  EXPECT_EQ(back.collectives[0].gpus, std::vector<std::string>{"h100-sxm"});
  EXPECT_NE(back.find(CollectiveKind::kAllGather, Dtype::kFp32, 8, 1, "nvswitch"), nullptr);
  EXPECT_EQ(back.find(CollectiveKind::kAllGather, Dtype::kFp32, 8, 1, "pcie"), nullptr);
  EXPECT_EQ(back.hierarchy_checks[0].gpus_per_node, 8);
  ASSERT_EQ(back.p2p.size(), 1u);
  EXPECT_EQ(back.p2p[0].dst, 9);
  EXPECT_EQ(back.p2p[0].link, "efa");
  EXPECT_EQ(back.p2p[0].gpus, p2p.gpus);
  EXPECT_DOUBLE_EQ(back.p2p[0].time_s(1e8), 25e-6 + 1e8 / 45e9);
  EXPECT_EQ(back.p2p[0].points, 17);
  ASSERT_EQ(back.host_device.size(), 1u);
  EXPECT_EQ(back.host_device[0].direction, "h2d");
  EXPECT_FALSE(back.host_device[0].pinned);
  EXPECT_TRUE(back.host_device[0].gpus.empty());
  EXPECT_DOUBLE_EQ(back.host_device[0].time_s(1e3), 8e-6 + 1e3 / 12e9);
  // A direction other than h2d and d2h is named.
  Json bad = j;
  bad["host_device"][0]["direction"] = "d2d";
  const std::string what =
      testing::error_of([&] { communication_fit_from_json(ObjectReader(bad, "fit.json")); });
  EXPECT_NE(what.find("host_device[0].direction"), std::string::npos) << what;
  EXPECT_NE(what.find("d2d"), std::string::npos) << what;
}

}  // namespace
}  // namespace hetplan
