// The report: error metrics (values worked out by hand), the matching key, the pipeline timeline
// (worked out by hand), and the report document built from real hetplan outputs.
#include <unistd.h>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "costmodel/clocks.h"
#include "costmodel/document.h"
#include "costmodel/layer_correction.h"
#include "costmodel/profile.h"
#include "report/assets.h"
#include "report/html.h"
#include "report/import/profile_import.h"
#include "report/matching.h"
#include "report/metrics.h"
#include "report/report_data.h"
#include "report/timeline.h"
#include "report_fixture.h"

namespace hetplan {
namespace {

TEST(ReportMetrics, ErrorStatistics) {
  // APE 0.1, 0.3, 0.2, 0.05 -> sorted 0.05 0.1 0.2 0.3: median 0.15, p90 at position 2.7 =
  // 0.2 + 0.7 x 0.1 = 0.27. Signed 0.1 -0.3 -0.2 0.05 -> median (-0.2 + 0.05) / 2.
  const ErrorStats e = error_stats({1.1, 0.7, 2.0, 4.2}, {1.0, 1.0, 2.5, 4.0});
  EXPECT_EQ(e.count, 4);
  EXPECT_NEAR(e.median_ape, 0.15, 1e-12);
  EXPECT_NEAR(e.p90_ape, 0.27, 1e-12);
  EXPECT_NEAR(e.max_ape, 0.3, 1e-12);
  EXPECT_NEAR(e.median_signed, -0.075, 1e-12);
  EXPECT_EQ(error_stats({}, {}).count, 0);
}

TEST(ReportMetrics, SpearmanWithTies) {
  EXPECT_EQ(average_ranks({10, 20, 20, 5}), (std::vector<double>{2, 3.5, 3.5, 1}));
  // y ranks 1 2 3.5 5 3.5 against 1..5: sum dx dy = 8, sum dx^2 = 10, sum dy^2 = 9.5.
  const auto rho = spearman({1, 2, 3, 4, 5}, {5, 6, 7, 8, 7});
  ASSERT_TRUE(rho.has_value());
  EXPECT_NEAR(*rho, 8 / std::sqrt(95.0), 1e-12);
  EXPECT_NEAR(*spearman({1, 2, 3}, {30, 20, 10}), -1.0, 1e-12);
  EXPECT_FALSE(spearman({1, 2, 3}, {7, 7, 7}).has_value());
  EXPECT_FALSE(spearman({1}, {2}).has_value());
}

TEST(ReportMatching, KeyNormalisesWhatHasNoEffect) {
  Strategy s;
  s.dp = 1;
  s.micro_batch = 2;
  s.global_batch = 8;
  s.schedule = "gpipe";        // no pipeline: no schedule
  s.zero = 2;                  // one replica: nothing to shard
  s.sequence_parallel = true;  // tp 1: nothing to split
  EXPECT_EQ(strategy_key(s), "dp1 tp1 pp1 mb2 gb8 - none zero0");
  s.dp = 2;
  s.tp = 2;
  s.pp = 2;
  s.zero = 1;
  s.schedule = "interleaved";
  s.chunks = 2;
  s.recompute = Recompute::kFull;
  EXPECT_EQ(strategy_key(s), "dp2 tp2 pp2 mb2 gb8 interleavedx2 full zero1 sp");
  // Unfused gradient accumulation predicts another time: never matched with a fused prediction.
  s.grad_accumulation_fusion = false;
  EXPECT_EQ(strategy_key(s), "dp2 tp2 pp2 mb2 gb8 interleavedx2 full zero1 sp unfused-grad-add");
  // So does attention without the fused kernel (s^2 scores in memory).
  s.flash_attention = false;
  EXPECT_EQ(strategy_key(s),
            "dp2 tp2 pp2 mb2 gb8 interleavedx2 full zero1 sp unfused-attention unfused-grad-add");
  // And gradients reduced after the backward, where there are replicas to reduce over.
  s.overlap_grad_reduce = false;
  EXPECT_EQ(strategy_key(s),
            "dp2 tp2 pp2 mb2 gb8 interleavedx2 full zero1 sp unfused-attention "
            "unfused-grad-add serial-grad-reduce");
  s.dp = 1;
  EXPECT_EQ(strategy_key(s),
            "dp1 tp2 pp2 mb2 gb8 interleavedx2 full zero0 sp unfused-attention unfused-grad-add");
}

TEST(ReportTimeline, OneFOneBByHand) {
  // Two stages, F 1, B 2, W 1, p2p 0.5, two micro-batches. 1F1B computes B and W in one backward
  // (3): stage 0 runs F0 F1 B0 B1, stage 1 F0 B0 F1 B1. Stage 1: F0 1.5-2.5, B0 2.5-4.5, W0 -5.5,
  // F1 5.5-6.5, B1 6.5-8.5, W1 -9.5. Stage 0: F0 0-1, F1 1-2, B0 after stage 1's whole backward
  // + p2p = 6: 6-8, W0 -9; B1 at 9.5 + 0.5 = 10: 10-12, W1 -13.
  Prediction p;
  p.stages.resize(2);
  for (auto& st : p.stages) {
    st.forward_s = 1;
    st.backward_input_s = 2;
    st.backward_weight_s = 1;
  }
  p.stages[0].p2p_s = 0.5;
  const Timeline t = pipeline_timeline(p, "1f1b", 2, 2);
  EXPECT_DOUBLE_EQ(t.makespan_s, 13);
  auto find = [](const Timeline& tl, int64_t device, char pass, int64_t mb) {
    for (const auto& op : tl.ops)
      if (op.device == device && op.pass == pass && op.microbatch == mb) return op;
    return TimelineOp{-1};
  };
  EXPECT_DOUBLE_EQ(find(t, 1, 'F', 0).start_s, 1.5);
  EXPECT_DOUBLE_EQ(find(t, 1, 'W', 0).end_s, 5.5);
  EXPECT_DOUBLE_EQ(find(t, 1, 'F', 1).start_s, 5.5);
  EXPECT_DOUBLE_EQ(find(t, 0, 'B', 0).start_s, 6);
  EXPECT_DOUBLE_EQ(find(t, 0, 'W', 0).end_s, 9);
  EXPECT_DOUBLE_EQ(find(t, 0, 'B', 1).start_s, 10);
  EXPECT_EQ(t.ops.size(), 12u);  // 2 stages x 2 micro-batches x F, B, W
  EXPECT_NE(t.note.find("does not split the backward"), std::string::npos) << t.note;

  // ZB-H1 splits the backward: stage 0's B0 waits only for stage 1's B0 (4.5 + 0.5 = 5), and W
  // passes fill what would be bubbles.
  const Timeline z = pipeline_timeline(p, "zb-h1", 2, 2);
  EXPECT_TRUE(z.note.empty()) << z.note;
  EXPECT_DOUBLE_EQ(find(z, 0, 'B', 0).start_s, 5);
  EXPECT_LT(z.makespan_s, t.makespan_s);

  // Interleaved over one device pair: four virtual stages, two chunks per device; rows are
  // devices and every pass names its chunk.
  p.stages.resize(4, p.stages[1]);
  p.stages[2].p2p_s = 0.5;
  const Timeline v = pipeline_timeline(p, "interleaved", 2, 2);
  EXPECT_EQ(v.chunks, 2);
  EXPECT_EQ(v.ops.size(), 4u * 2 * 3);
  for (const auto& op : v.ops) {
    EXPECT_LT(op.device, 2);
    EXPECT_EQ(op.chunk, op.stage / 2);  // interleaved: stage = chunk x devices + device
  }
  // Three stages cannot split over two devices: nothing drawn, and why.
  p.stages.resize(3);
  EXPECT_NE(pipeline_timeline(p, "1f1b", 2, 2).note.find("do not split"), std::string::npos);
}

// A run that failed without saying why is not a run that fitted: the issue of stop 34's AMP
// report, which counted AMP's nine failed runs of unknown cause as "neither".
TEST(ReportData, AFailedRunIsNeverCountedAsOneThatFitted) {
  const auto& files = testing::report_inputs();
  Json doc = load_document(files.measurements).root;
  Json& failed = doc["measurements"][1];
  failed.erase("iteration_s");
  failed.erase("peak_memory_bytes");
  failed["error"] = "the run produced no iteration time";
  const auto path = (std::filesystem::path(files.measurements).parent_path() / "failed.json");
  std::ofstream(path) << doc.dump();
  ReportInputs in;
  in.predictions = files.predictions;
  in.measurements = {path.string()};
  const Json m = build_report_data(in)["metrics"];
  // Four runs: two completed, one out of memory (foreseen), one failed (predicted feasible).
  EXPECT_EQ(m["outcomes"]["completed"]["feasible"], 2);
  EXPECT_EQ(m["outcomes"]["out_of_memory"]["out_of_memory"], 1);
  EXPECT_EQ(m["outcomes"]["failed"]["feasible"], 1);
  EXPECT_EQ(m["oom"]["neither"], 2);
  EXPECT_EQ(m["oom"]["both"], 1);
  EXPECT_EQ(m["failed_runs"], 2);
  EXPECT_EQ(m["failed_runs_foreseen"], 1);
  EXPECT_EQ(m["completed_runs"], 2);
  EXPECT_EQ(m["completed_runs_refused"], 0);
  const std::string html = render_report_html(build_report_data(in));
  EXPECT_NE(html.find("runs that failed, predicted infeasible"), std::string::npos);
  EXPECT_NE(html.find(">1/2<"), std::string::npos);
  EXPECT_NE(html.find("failed, cause not logged: 0 of 1"), std::string::npos);
  std::filesystem::remove(path);
}

TEST(ReportData, MatchesRealOutputs) {
  const auto& files = testing::report_inputs();
  ReportInputs in;
  in.predictions = files.predictions;
  in.predictions.push_back(files.search);
  in.measurements = {files.measurements};
  in.calibration = {files.calibration};
  const Json data = build_report_data(in);
  EXPECT_EQ(data["format"], "hetplan-report");
  // Four measured strategies, each matched to its own prediction; the search's three strategies
  // (data parallel only, micro-batches 8 and below) match none of them.
  ASSERT_EQ(data["pairs"].size(), 4u);
  EXPECT_TRUE(data["unmatched_measurements"].empty());
  EXPECT_EQ(data["unmatched_predictions"].size(), 3u);
  const Json& a = data["pairs"][0];
  EXPECT_EQ(a["key"], "dp2 tp2 pp2 mb4 gb64 1f1b selective zero1 sp");
  EXPECT_DOUBLE_EQ(a["measured_s"].get<double>(), 0.1961);  // tests/data/megatron: median
  const Json predicted = load_document(files.predictions[0]).root["predicted"];
  const double p = predicted["iteration_s"];
  EXPECT_DOUBLE_EQ(a["predicted_s"].get<double>(), p);
  EXPECT_DOUBLE_EQ(a["ape"].get<double>(), std::fabs(p - 0.1961) / 0.1961);
  // Allocated memory against the prediction less its reserve and the allocator's fragmentation,
  // largest stage.
  const double reserve = predicted["stages"][0]["memory"]["reserve_bytes"].get<double>() +
                         predicted["stages"][0]["memory"]["fragmentation_bytes"].get<double>();
  const double peak = std::max(predicted["peak_memory_bytes"][0].get<double>(),
                               predicted["peak_memory_bytes"][1].get<double>());
  EXPECT_DOUBLE_EQ(a["predicted_memory_bytes"].get<double>(), peak - reserve);
  EXPECT_DOUBLE_EQ(a["measured_memory_bytes"].get<double>(), 3010.5625 * 1024 * 1024);
  // The dp 8, micro-batch 32 run: out of memory, as predicted.
  const Json& oom = data["pairs"][3];
  EXPECT_TRUE(oom["oom_observed"].get<bool>());
  EXPECT_TRUE(oom["oom_predicted"].get<bool>());
  const Json& m = data["metrics"];
  EXPECT_EQ(m["iteration"]["count"], 3);
  EXPECT_EQ(m["oom"]["both"], 1);
  EXPECT_EQ(m["oom"]["neither"], 3);
  EXPECT_FALSE(m["throughput_spearman"].is_null());
  // Calibration curves: one GEMM series of 8 shapes; two collectives (the failed one is left out).
  ASSERT_EQ(data["calibration"]["gemm"].size(), 1u);
  EXPECT_EQ(data["calibration"]["gemm"][0]["name"], "a100-40gb bf16");
  EXPECT_EQ(data["calibration"]["gemm"][0]["points"].size(), 8u);
  EXPECT_EQ(data["calibration"]["collectives"].size(), 2u);
  // Timeline and memory of the first strategy: pp 2, 64 / (dp 2 x mb 4) = 8 micro-batches, F, B
  // and W of each on both stages.
  EXPECT_EQ(data["pipeline"]["microbatches"], 8);
  EXPECT_EQ(data["pipeline"]["ops"].size(), 2u * 8 * 3);
  EXPECT_EQ(data["memory"]["parts"]["weights"].size(), 2u);
  EXPECT_EQ(data["memory"]["measured_gib"].size(), 2u);
  EXPECT_DOUBLE_EQ(data["memory"]["capacity_gib"][0].get<double>(), 40.0);
}

TEST(ReportData, CalibrationFoldersSkipProfilesAndEmptyFiles) {
  const auto& files = testing::report_inputs();
  ReportInputs in;
  in.predictions = {files.predictions[0]};
  // tests/data/calibration holds the sample; calibration_data/datasheet holds priors without
  // measurements, which add files but no curves.
  in.calibration = {std::string(HETPLAN_TEST_DATA) + "/calibration",
                    std::string(HETPLAN_TEST_DATA) + "/../../calibration_data/datasheet"};
  const Json data = build_report_data(in);
  EXPECT_EQ(data["calibration"]["gemm"].size(), 1u);
  EXPECT_EQ(data["calibration"]["collectives"].size(), 2u);
  // The sample and one datasheet file per GPU preset (22).
  EXPECT_EQ(data["inputs"]["calibration"].size(), 23u);
}

// QA: the bus-bandwidth chart drew one-GPU ("self") communicators beside real groups and put the
// dtypes of one collective and group in one series.
TEST(ReportData, BusBandwidthSeriesPerDtypeWithoutOneGpuGroups) {
  const auto& files = testing::report_inputs();
  CalibrationFile cal;
  cal.context.source = "measured";
  cal.context.gpu_type = "h100-sxm";
  auto add = [&](int64_t group, Dtype dtype, double bytes, const char* link) {
    CollectiveMeasurement c;
    c.op = CollectiveKind::kAllReduce;
    c.dtype = dtype;
    c.group_size = c.gpus_per_node = group;
    c.bytes = bytes;
    c.link = link;
    c.time_s = summarize({1e-5 + bytes / 1e11});
    cal.collectives.push_back(c);
  };
  for (double bytes : {1e6, 1e8}) {
    add(1, Dtype::kBf16, bytes, "self");
    add(8, Dtype::kBf16, bytes, "nvswitch");
    add(8, Dtype::kFp32, bytes, "nvswitch");
  }
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("hetplan_busbw_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  save_calibration(cal, dir / "coll.json");
  ReportInputs in;
  in.predictions = {files.predictions[0]};
  in.calibration = {(dir / "coll.json").string()};
  const Json data = build_report_data(in);
  const Json& series = data["calibration"]["collectives"];
  ASSERT_EQ(series.size(), 2u);
  EXPECT_EQ(series[0]["name"], "all_reduce bf16 8 GPUs nvswitch (h100-sxm)");
  EXPECT_EQ(series[1]["name"], "all_reduce fp32 8 GPUs nvswitch (h100-sxm)");
  EXPECT_EQ(series[0]["points"].size(), 2u);
  EXPECT_EQ(data["calibration"]["one_gpu_collectives"], 2);
  EXPECT_NE(render_report_html(data).find(
                "2 one-GPU (\"self\") measurements are left out: a copy inside the device "
                "says nothing about links."),
            std::string::npos);
  fs::remove_all(dir);
}

// The SM clocks of the calibration's measurements, per GPU type and class, as a table.
TEST(ReportData, CalibrationClocksPerClass) {
  const auto& files = testing::report_inputs();
  CalibrationFile cal = load_calibration(files.calibration);  // the A100 sample: 8 bf16 GEMMs
  ASSERT_EQ(cal.gemm.size(), 8u);
  for (size_t i = 0; i < cal.gemm.size(); ++i)
    cal.gemm[i].method["clocks"] = to_json(summarize_clocks(
        {{1410.0 - 10.0 * static_cast<double>(i), 390.0, i < 3 ? kClockReasonSwPowerCap : 0, 0}}));
  namespace fs = std::filesystem;
  const auto dir = fs::temp_directory_path() / ("hetplan_clocks_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  save_calibration(cal, dir / "clocked.json");
  ReportInputs in;
  in.predictions = {files.predictions[0]};
  in.calibration = {(dir / "clocked.json").string()};
  const Json data = build_report_data(in);
  const Json& clocks = data["calibration"]["clocks"];
  ASSERT_EQ(clocks.size(), 1u) << clocks.dump();
  EXPECT_EQ(clocks[0]["gpu_type"], "a100-40gb");
  EXPECT_EQ(clocks[0]["what"], "gemm bf16");
  EXPECT_EQ(clocks[0]["measurements"], 8);
  EXPECT_DOUBLE_EQ(clocks[0]["sm_mhz_median"].get<double>(), 1375);  // of 1340 .. 1410
  EXPECT_EQ(clocks[0]["power_thermal_measurements"], 3);
  const std::string html = render_report_html(data);
  EXPECT_NE(html.find("<h3>SM clock while timed</h3>"), std::string::npos);
  EXPECT_NE(html.find("<td>a100-40gb</td><td>gemm bf16</td><td class=\"num\">8</td>"
                      "<td class=\"num\">1375</td>"),
            std::string::npos);
  fs::remove_all(dir);
  // Files without clock records have none, and no table.
  in.calibration = {files.calibration};
  const Json plain = build_report_data(in);
  EXPECT_TRUE(plain["calibration"]["clocks"].empty());
  EXPECT_EQ(render_report_html(plain).find("SM clock while timed"), std::string::npos);
}

// Whole-layer timings in the calibration inputs (AMP's T4 arrays) against the cost model's ops.
TEST(ReportData, WholeLayerTimingsAgainstTheirOps) {
  const auto& files = testing::report_inputs();
  const CalibrationFile amp = import_amp_known_cost(
      {std::filesystem::path(HETPLAN_EXTERNAL_DATA) / "amp/known_cost/gpt2_G4_1.npy"}, {});
  const auto path = std::filesystem::temp_directory_path() /
                    ("hetplan_report_amp_" + std::to_string(::getpid()) + ".json");
  save_calibration(amp, path);
  ReportInputs in;
  in.predictions = {files.predictions[0]};
  in.calibration = {path.string()};
  const Json data = build_report_data(in);
  std::filesystem::remove(path);
  const Json& layers = data["calibration"]["layers"];
  ASSERT_EQ(layers.size(), 25u);  // the embedding and 24 blocks; the head's entries are unused
  const auto timings = compare_layer_timings(
      fit_profile({load_calibration(default_calibration_dir() / "datasheet" / "t4.json"), amp}),
      load_gpu("t4"));
  const Json& block = layers[1];  // layer 1 = AMP's entry 2
  EXPECT_EQ(block["source"], "t4 F (imported)");
  EXPECT_EQ(block["model"], "block h1024 a16 s1024 ffn4096 tp1 unfused");
  EXPECT_DOUBLE_EQ(block["measured_s"].get<double>(), amp.layer_forward[2].forward_s.median);
  EXPECT_DOUBLE_EQ(block["predicted_s"].get<double>(), timings[1].predicted_s[0]);
  EXPECT_NEAR(block["ape"].get<double>(),
              std::abs(timings[1].predicted_s[0] / amp.layer_forward[2].forward_s.median - 1),
              1e-12);
  const std::string html = render_report_html(data);
  EXPECT_NE(html.find("id=\"chart-layers\""), std::string::npos);
  // No measurement: no empty accuracy charts, a sentence instead.
  EXPECT_EQ(html.find("id=\"chart-iteration\""), std::string::npos);
  EXPECT_NE(html.find("No measured time or memory matched a prediction"), std::string::npos);
}

TEST(ReportHtml, SelfContainedAndEscaped) {
  const auto& files = testing::report_inputs();
  ReportInputs in;
  in.predictions = {files.predictions[1]};
  in.measurements = {files.measurements};
  in.title = "A </script><b>title</b>";
  const std::string html = render_report_html(build_report_data(in));
  EXPECT_EQ(html.find("<b>title"), std::string::npos);
  EXPECT_NE(html.find("<title>A &lt;/script&gt;&lt;b&gt;title&lt;/b&gt;</title>"),
            std::string::npos);
  // The data block escapes '<', so the only "</script" are the three closing tags.
  size_t count = 0;
  for (size_t pos = html.find("</script"); pos != std::string::npos;
       pos = html.find("</script", pos + 1))
    ++count;
  EXPECT_EQ(count, 3u);
  // No file or network fetches: everything is inline.
  EXPECT_EQ(html.find("<script src"), std::string::npos);
  EXPECT_EQ(html.find("<link"), std::string::npos);
  EXPECT_NE(html.find(std::string(report_asset("echarts/echarts.min.js")).substr(0, 200)),
            std::string::npos);
  EXPECT_GT(report_asset("echarts/echarts.min.js").size(), 1000000u);
  EXPECT_TRUE(report_asset("nope").empty());
}

}  // namespace
}  // namespace hetplan
