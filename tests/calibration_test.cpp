#include "costmodel/calibration.h"

#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "costmodel/errors.h"
#include "costmodel/journal.h"

namespace hetplan {
namespace {

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() /
         ("hetplan_test_" + std::to_string(::getpid()) + "_" + name);
}

TEST(Stats, MedianAndPercentilesInterpolate) {
  Distribution d = summarize({5, 1, 3, 2, 4});
  EXPECT_EQ(d.count, 5);
  EXPECT_DOUBLE_EQ(d.median, 3);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 5);
  EXPECT_DOUBLE_EQ(d.p10, 1.4);  // 0.1 * 4 = 0.4 between 1 and 2
  EXPECT_DOUBLE_EQ(d.p90, 4.6);
  EXPECT_DOUBLE_EQ(d.mean, 3);
  EXPECT_NEAR(d.stddev, 1.5811388300841898, 1e-12);  // sqrt(10/4)
}

// A distribution read back is what summarize() writes, or refused naming the key: the quantiles
// and the mean between the extremes and in order, no time below 0.
TEST(Stats, DistributionsAreReadInOrder) {
  const Json good = to_json(summarize({5, 1, 3, 2, 4}));
  const Distribution d = distribution_from_json(ObjectReader(good, "c.json", "time"));
  EXPECT_DOUBLE_EQ(d.p10, 1.4);
  EXPECT_DOUBLE_EQ(d.mean, 3);
  const auto error = [&](const char* key, double value) {
    Json j = good;
    j[key] = value;
    try {
      distribution_from_json(ObjectReader(j, "c.json", "time"));
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_EQ(error("p90_s", -1),
            "c.json: time.p90_s: expected median <= p90 <= max, found -1 (median 3, max 5)");
  EXPECT_EQ(error("p10_s", 3.5),
            "c.json: time.p10_s: expected min <= p10 <= median, found 3.5 (min 1, median 3)");
  EXPECT_EQ(error("mean_s", 1e308),
            "c.json: time.mean_s: expected min <= mean <= max, found 1e+308 (min 1, max 5)");
  EXPECT_EQ(error("min_s", -1), "c.json: time.min_s: expected a value >= 0, found -1");
  EXPECT_EQ(error("max_s", 1e6),
            "c.json: time.max_s: expected seconds, at most a day, found 1000000");
  EXPECT_EQ(error("p90_s", 5), "accepted");  // at the extreme
  // Equal samples: the interpolated quantiles and the mean equal the extremes.
  const Json flat = to_json(summarize(std::vector<double>(7, 0.1)));
  EXPECT_DOUBLE_EQ(distribution_from_json(ObjectReader(flat, "c.json")).p90, 0.1);
}

TEST(Stats, LineFitByEqualAndRelativeWeights) {
  // y = 1 + 2x exactly: either weighting finds it, and it explains all of y's variance.
  const std::vector<std::pair<double, double>> exact = {{1, 3}, {2, 5}, {4, 9}};
  for (LineWeights w : {LineWeights::kEqual, LineWeights::kRelative}) {
    const LineFit line = fit_line(exact, w);
    EXPECT_NEAR(line.slope, 2, 1e-12);
    EXPECT_NEAR(line.intercept, 1, 1e-12);
    EXPECT_NEAR(line.r2(), 1, 1e-12);
  }
  // (0, 0), (1, 1), (2, 1), (3, 3): by hand, x mean 1.5, y mean 1.25, sxx 5, sxy 4.5, syy 4.75.
  const LineFit equal = fit_line({{0, 0}, {1, 1}, {2, 1}, {3, 3}});
  EXPECT_DOUBLE_EQ(equal.sxx, 5);
  EXPECT_DOUBLE_EQ(equal.sxy, 4.5);
  EXPECT_DOUBLE_EQ(equal.syy, 4.75);
  EXPECT_DOUBLE_EQ(equal.slope, 0.9);
  EXPECT_DOUBLE_EQ(equal.intercept, 1.25 - 0.9 * 1.5);
  EXPECT_NEAR(*equal.correlation(), 4.5 / std::sqrt(5 * 4.75), 1e-15);
  // Relative weights (1/y^2: 1, 1/16, 1/100) pull the line towards the small y's: it passes
  // nearer (1, 1) than the line of equal weights.
  const std::vector<std::pair<double, double>> skewed = {{1, 1}, {2, 4}, {10, 10}};
  const LineFit rel = fit_line(skewed, LineWeights::kRelative);
  const LineFit eq = fit_line(skewed);
  EXPECT_LT(std::abs(rel.intercept + rel.slope - 1), std::abs(eq.intercept + eq.slope - 1));
  // x constant: no slope, the mean of y; no correlation.
  const LineFit flat = fit_line({{2, 1}, {2, 3}});
  EXPECT_EQ(flat.slope, 0);
  EXPECT_DOUBLE_EQ(flat.intercept, 2);
  EXPECT_FALSE(flat.correlation().has_value());
  EXPECT_EQ(flat.r2(), 0);
  EXPECT_FALSE(fit_line({}).correlation().has_value());
}

TEST(Collectives, BusBandwidthFactorsFollowNcclTests) {
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::kAllReduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::kAllGather, 8), 0.875);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::kReduceScatter, 4), 0.75);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::kAllToAll, 2), 0.5);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::kBroadcast, 8), 1.0);
  EXPECT_DOUBLE_EQ(bus_bandwidth_factor(CollectiveKind::kSendRecv, 2), 1.0);
}

CalibrationFile sample_file() {
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  f.context.date = "2026-11-22";
  GemmMeasurement g;
  g.dtype = Dtype::kBf16;
  g.shape = {4096, 4096, 4096, 1, false, true};
  g.time_s = summarize({1e-3, 1.1e-3, 0.9e-3});
  g.kernels = {"sm90_xmma_gemm_bf16"};
  g.tensor_cores = true;
  f.gemm.push_back(g);
  CollectiveMeasurement c;
  c.op = CollectiveKind::kAllReduce;
  c.bytes = 1 << 20;
  c.group_size = 8;
  c.gpus_per_node = 8;
  c.link = "nvswitch";
  c.time_s = summarize({1e-4});
  f.collectives.push_back(c);
  f.failures.push_back({"all_to_all 8 ranks", "NCCL timeout"});
  return f;
}

TEST(Provenance, NotesAreJoinedBySemicolonsAndEmptyOnesLeftOut) {
  Provenance p;
  p.add_note("");
  EXPECT_EQ(p.notes, "");
  p.add_note("clocks read through NVML every 1 ms during each timed region");
  p.add_note("");
  p.add_note("partial");
  EXPECT_EQ(p.notes, "clocks read through NVML every 1 ms during each timed region; partial");
}

TEST(CalibrationFile, RoundTripsThroughJson) {
  const auto path = temp_path("cal.json");
  save_calibration(sample_file(), path);
  CalibrationFile back = load_calibration(path);
  ASSERT_EQ(back.gemm.size(), 1u);
  EXPECT_EQ(back.gemm[0].shape, (GemmShape{4096, 4096, 4096, 1, false, true}));
  EXPECT_DOUBLE_EQ(back.gemm[0].time_s.median, 1e-3);
  EXPECT_TRUE(back.gemm[0].tensor_cores);
  ASSERT_EQ(back.collectives.size(), 1u);
  // busbw recomputed from bytes and time: 1 MiB / 100 us = 10.48576 GB/s algbw, x 1.75
  EXPECT_NEAR(back.collectives[0].busbw_GBps, 10.48576 * 1.75, 1e-9);
  ASSERT_EQ(back.failures.size(), 1u);
  EXPECT_EQ(back.failures[0].error, "NCCL timeout");
  std::filesystem::remove(path);
}

TEST(CalibrationFile, RejectsWrongVersionAndBadSource) {
  Json j = to_json(sample_file());
  j["schema_version"] = 99;
  EXPECT_THROW(calibration_from_document({"x.json", j}), InputError);
  j = to_json(sample_file());
  j["context"]["source"] = "guessed";
  try {
    calibration_from_document({"x.json", j});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "context.source");
  }
  j = to_json(sample_file());
  j["gemm"][0]["m"] = 0;
  try {
    calibration_from_document({"x.json", j});
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "gemm[0].m");
  }
}

// A message size is a whole number of bytes and a p2p end a global rank: the fuzzer had
// 131072.5 bytes and a src of 2^31 accepted (records the fits read, then ignored the field of).
TEST(CalibrationFile, MessageBytesAreWholeAndP2pEndsAreRanks) {
  CalibrationFile f = sample_file();
  P2pMeasurement p;
  p.src = 0;
  p.dst = 7;
  p.bytes = 1 << 20;
  p.time_s = summarize({2e-5});
  f.p2p.push_back(p);
  const Json good = to_json(f);
  ASSERT_EQ(calibration_from_document({"x.json", good}).p2p.at(0).dst, 7);

  const auto message = [](const Json& j) {
    try {
      calibration_from_document({"x.json", j});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  Json j = good;
  j["collectives"][0]["bytes"] = 131072.5;
  EXPECT_EQ(message(j),
            "x.json: collectives[0].bytes: expected a whole number, found the number 131072.5");
  j = good;
  j["p2p"][0]["bytes"] = 0;
  EXPECT_EQ(message(j), "x.json: p2p[0].bytes: expected a whole number > 0, found 0");
  j = good;
  j["p2p"][0]["src"] = int64_t{1} << 31;
  EXPECT_EQ(message(j),
            "x.json: p2p[0].src: expected a global rank in [0, 1048576), found 2147483648");
  j = good;
  j["p2p"][0]["dst"] = -1;
  EXPECT_EQ(message(j), "x.json: p2p[0].dst: expected a global rank in [0, 1048576), found -1");
  // Whole sizes written as floats (1e6) still read, as every whole number does.
  j = good;
  j["collectives"][0]["bytes"] = 1e6;
  EXPECT_DOUBLE_EQ(calibration_from_document({"x.json", j}).collectives.at(0).bytes, 1e6);
}

TEST(Journal, ResumeSkipsFinishedAndDropsTornLine) {
  const auto path = temp_path("journal.jsonl");
  {
    Journal j(path, false);
    j.append("gemm/bf16/1", Json{{"t", 1}});
    j.append("gemm/bf16/2", Json{{"t", 2}});
  }
  {  // Simulate a crash mid-write: a torn line without newline.
    std::ofstream out(path, std::ios::app);
    out << "{\"key\": \"gemm/bf16/3\", \"rec";
  }
  Journal j(path, true);
  EXPECT_EQ(j.size(), 2u);
  EXPECT_EQ(j.dropped_lines(), 1);
  EXPECT_TRUE(j.contains("gemm/bf16/1"));
  EXPECT_FALSE(j.contains("gemm/bf16/3"));
  j.append("gemm/bf16/3", Json{{"t", 3}});
  Journal again(path, true);
  EXPECT_EQ(again.size(), 3u);
  EXPECT_EQ(again.dropped_lines(), 1);  // the torn line stays in the file, still ignored
  EXPECT_EQ((*again.find("gemm/bf16/3"))["t"], 3);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace hetplan
