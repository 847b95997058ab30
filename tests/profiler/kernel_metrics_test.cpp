// hetplan_kernel_metrics' CPU half: the metric catalog and its resolution, option parsing, the
// derived numbers, the JSON and the table, the counter-status messages.
#include <gtest/gtest.h>

#include <set>

#include "profiler/metrics/metric_catalog.h"
#include "profiler/metrics/metrics_options.h"
#include "profiler/metrics/metrics_report.h"
#include "tests/test_util.h"

namespace hetplan::profiler::metrics {
namespace {

using hetplan::testing::contains;
using hetplan::testing::error_of;

TEST(KernelMetricsCatalog, KeysAreUniqueAndEveryGroupHasMetrics) {
  std::set<std::string> keys;
  for (const MetricSpec& m : metric_catalog()) {
    EXPECT_TRUE(keys.insert(m.key).second) << m.key;
    EXPECT_FALSE(m.candidates.empty()) << m.key;
  }
  for (const std::string& g : metric_groups()) EXPECT_FALSE(select_metrics({g}).empty()) << g;
  EXPECT_EQ(select_metrics({}).size(), metric_catalog().size());
  EXPECT_EQ(select_metrics({"all"}).size(), metric_catalog().size());
}

TEST(KernelMetricsCatalog, StallsCoverHopperReasonsWithTwoNameFamilies) {
  const auto stalls = select_metrics({"stalls"});
  ASSERT_EQ(stalls.size(), stall_reasons().size());
  ASSERT_EQ(stalls.size(), 19u);
  const MetricSpec& gmma = stalls[4];
  EXPECT_EQ(gmma.key, "stall_gmma");
  ASSERT_EQ(gmma.candidates.size(), 2u);
  EXPECT_EQ(gmma.candidates[0], "smsp__average_warps_issue_stalled_gmma_per_issue_active.ratio");
  EXPECT_EQ(gmma.candidates[1], "smsp__average_warp_latency_issue_stalled_gmma.ratio");
}

TEST(KernelMetricsCatalog, SelectsGroupsInCatalogOrderAndNamesUnknownGroups) {
  const auto two = select_metrics({"l2red", "time"});
  ASSERT_EQ(two.size(), 10u);
  EXPECT_EQ(two.front().key, "duration_ns");  // time comes first in the catalog
  EXPECT_EQ(two.back().key, "atom_inst");
  const std::string e = error_of([] { select_metrics({"tensor", "cache"}); });
  EXPECT_TRUE(contains(e, "unknown metric group 'cache'")) << e;
  EXPECT_TRUE(contains(e, "time, tensor, pipes, smem, memory, l2red, occupancy, issue, stalls"));
}

TEST(KernelMetricsCatalog, ResolvesToFirstAcceptedCandidateAndKeepsRejected) {
  const std::vector<MetricSpec> specs = {
      {"a", "g", "%", "", {"x.new", "x.old"}},
      {"b", "g", "%", "", {"y"}},
      {"c", "g", "%", "", {"x.old"}},
  };
  const auto r = resolve_metrics(specs, [](const std::string& n) { return n == "x.old"; });
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0].name, "x.old");
  EXPECT_EQ(r[0].rejected, std::vector<std::string>{"x.new"});
  EXPECT_EQ(r[1].name, "");
  EXPECT_EQ(r[1].rejected, std::vector<std::string>{"y"});
  // A name shared by two keys is configured once.
  EXPECT_EQ(accepted_names(r), std::vector<std::string>{"x.old"});
}

TEST(KernelMetricsOptions, DefaultsProfileAttentionAndTwoAnchors) {
  const Options o = parse_options({});
  ASSERT_EQ(o.picks.size(), 4u);
  EXPECT_EQ(o.picks[0].filter, "attention_bwd_bf16");
  EXPECT_EQ(o.picks[0].shapes, "bench");
  EXPECT_EQ(o.picks[1].filter, "copy_probe");
  EXPECT_EQ(o.picks[1].shapes, "last");
  EXPECT_EQ(o.picks[2].filter, kGemmCaseName);
  EXPECT_EQ(o.picks[3].filter, "attention_fwd_bf16");
  EXPECT_TRUE(o.counters);
  EXPECT_EQ(o.runs, 10);
  EXPECT_TRUE(o.json_path.empty());
}

TEST(KernelMetricsOptions, ParsesEveryOption) {
  const Options o =
      parse_options({"--filter", "copy_probe", "--filter=rmsnorm", "--shapes", "first", "--metrics",
                     "memory,stalls", "--json=out.json", "--runs", "3", "--max-seconds", "45",
                     "--no-counters", "--device", "1"});
  ASSERT_EQ(o.picks.size(), 2u);
  EXPECT_EQ(o.picks[1].filter, "rmsnorm");
  EXPECT_EQ(o.picks[1].shapes, "first");
  EXPECT_EQ(o.groups, (std::vector<std::string>{"memory", "stalls"}));
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_EQ(o.runs, 3);
  EXPECT_DOUBLE_EQ(o.max_seconds, 45);
  EXPECT_FALSE(o.counters);
  EXPECT_EQ(o.device, 1);
  // --shapes without --filter applies to the default selection.
  for (const Pick& p : parse_options({"--shapes", "first"}).picks) EXPECT_EQ(p.shapes, "first");
}

TEST(KernelMetricsOptions, BadArgumentsNameTheOptionAndWhatItExpects) {
  EXPECT_TRUE(contains(error_of([] {
                         parse_options({"--runs", "0"});
                       }),
                       "--runs: expected a number >= 1, got '0'"));
  EXPECT_TRUE(contains(error_of([] {
                         parse_options({"--shapes", "all"});
                       }),
                       "--shapes: expected bench, first, last or test, got 'all'"));
  EXPECT_TRUE(
      contains(error_of([] { parse_options({"--json"}); }), "--json: expected a value after it"));
  EXPECT_TRUE(contains(error_of([] {
                         parse_options({"--metrics", "dram"});
                       }),
                       "unknown metric group 'dram'"));
  EXPECT_TRUE(contains(error_of([] { parse_options({"--frobnicate"}); }),
                       "unknown argument '--frobnicate'"));
  EXPECT_TRUE(contains(error_of([] { parse_options({"--no-counters=1"}); }),
                       "unknown argument '--no-counters=1'"));
}

TEST(KernelMetricsOptions, PicksMatchNamesOrFamiliesAndShapes) {
  EXPECT_TRUE(pick_matches("attention_bwd", "attention_bwd_bf16", "attention"));
  EXPECT_TRUE(pick_matches("attention", "attention_fwd_fp16", "attention"));
  EXPECT_TRUE(pick_matches("bandwidth", "copy_probe", "bandwidth"));
  EXPECT_FALSE(pick_matches("attention_bwd", "attention_fwd_bf16", "attention"));
  EXPECT_EQ(pick_shape_indices("bench", 3), (std::vector<size_t>{0, 1, 2}));
  EXPECT_EQ(pick_shape_indices("first", 3), (std::vector<size_t>{0}));
  EXPECT_EQ(pick_shape_indices("last", 3), (std::vector<size_t>{2}));
  EXPECT_TRUE(pick_shape_indices("last", 0).empty());
}

LaunchMetrics copy_launch() {
  LaunchMetrics l;
  l.kernel = "void hetplan::kernels::copy_kernel<float4>(float4 const*, float4*, long)";
  l.values = {{"duration_ns", 345000},     {"sm_clock_hz", 1.755e9},
              {"dram_read_bytes", 1.07e9}, {"dram_write_bytes", 1.08e9},
              {"smem_wavefronts", 2e6},    {"smem_bank_conflicts", 5e5},
              {"l2_red_sectors", 1000},    {"stall_long_scoreboard", 12.5},
              {"stall_barrier", 0.25},     {"stall_gmma", 3.0},
              {"stall_wait", 1.0}};
  return l;
}

TEST(KernelMetricsReport, DerivesBytesConflictsClocksAndStallOrder) {
  const Derived d = derive(copy_launch());
  EXPECT_DOUBLE_EQ(*d.dram_bytes, 2.15e9);
  EXPECT_DOUBLE_EQ(*d.l2_red_bytes, 32000);
  EXPECT_DOUBLE_EQ(*d.smem_conflict_pct, 25);
  EXPECT_DOUBLE_EQ(*d.duration_us, 345);
  EXPECT_DOUBLE_EQ(*d.sm_clock_mhz, 1755);
  ASSERT_EQ(d.stalls.size(), 4u);
  EXPECT_EQ(d.stalls[0].first, "long_scoreboard");
  EXPECT_EQ(d.stalls[3].first, "barrier");
  EXPECT_EQ(top_stalls(copy_launch(), 2), "long_scoreboard 12.50, gmma 3.00");
  LaunchMetrics empty;
  EXPECT_FALSE(derive(empty).dram_bytes.has_value());
  EXPECT_EQ(top_stalls(empty, 3), "-");
}

TEST(KernelMetricsReport, ShortensKernelNames) {
  EXPECT_EQ(short_kernel_name("void ns::k<(int)64, true>(float*, int)"), "ns::k<(int)64, true>");
  EXPECT_EQ(short_kernel_name("sm90_xmma_gemm_bf16bf16_bf16f32"),
            "sm90_xmma_gemm_bf16bf16_bf16f32");
  const std::string s = short_kernel_name(std::string(100, 'a') + "zz", 20);
  EXPECT_EQ(s.size(), 20u);
  EXPECT_EQ(s, "aaaaaaaa...aaaaaaazz");
}

Report sample_report() {
  Report r;
  r.provenance.gpu = "NVIDIA H100 80GB HBM3";
  r.provenance.chip = "GH100";
  r.provenance.cc_major = 9;
  r.provenance.sm_count = 132;
  r.provenance.cupti_version = "13.0.1 (API 130001)";
  r.provenance.command = "hetplan_kernel_metrics --filter copy_probe";
  r.provenance.date_utc = "2026-11-23T12:00:00Z";
  r.passes = 7;
  r.metrics = resolve_metrics(select_metrics({"time", "memory"}), [](const std::string& n) {
    return n != "l1tex__m_xbar2l1tex_read_bytes_mem_global_op_tma_ld.sum";
  });
  CaseResult c;
  c.name = "copy_probe";
  c.shape = "bytes=1073741824";
  c.work_bytes = 2147483648.0;
  c.timed_runs = 10;
  c.event_us_median = 700;
  c.launches = {copy_launch()};
  r.cases.push_back(c);
  CaseResult skipped;
  skipped.name = "attention_bwd_bf16";
  skipped.shape = "batch=1";
  skipped.status = "not supported: head_dim 96";
  r.cases.push_back(skipped);
  return r;
}

TEST(KernelMetricsReport, JsonCarriesProvenanceMetricNamesValuesAndDerived) {
  const nlohmann::json j = to_json(sample_report());
  EXPECT_EQ(j["tool"], "hetplan_kernel_metrics");
  EXPECT_EQ(j["provenance"]["gpu"], "NVIDIA H100 80GB HBM3");
  EXPECT_EQ(j["provenance"]["compute_capability"], "9.0");
  EXPECT_EQ(j["provenance"]["command"], "hetplan_kernel_metrics --filter copy_probe");
  EXPECT_EQ(j["counters"]["state"], "collected");
  EXPECT_EQ(j["counters"]["passes"], 7);
  bool saw_tma = false;
  for (const auto& m : j["metrics"])
    if (m["key"] == "tma_load_bytes") {
      saw_tma = true;
      EXPECT_TRUE(m["name"].is_null());
      EXPECT_EQ(m["rejected"].size(), 1u);
    }
  EXPECT_TRUE(saw_tma);
  ASSERT_EQ(j["cases"].size(), 2u);
  const auto& launch = j["cases"][0]["launches"][0];
  EXPECT_DOUBLE_EQ(launch["values"]["dram_read_bytes"].get<double>(), 1.07e9);
  EXPECT_DOUBLE_EQ(launch["derived"]["dram_bytes"].get<double>(), 2.15e9);
  EXPECT_EQ(j["cases"][1]["status"], "not supported: head_dim 96");
  EXPECT_TRUE(j["cases"][1]["launches"].empty());
}

TEST(KernelMetricsReport, TableShowsRowsMissingMetricsAndDramAgainstMinimum) {
  const std::string t = render_table(sample_report());
  EXPECT_TRUE(contains(t, "GPU NVIDIA H100 80GB HBM3 (GH100, sm_90, 132 SMs")) << t;
  EXPECT_TRUE(contains(t, "hardware counters: collected")) << t;
  EXPECT_TRUE(contains(t, "not known (left out): tma_load_bytes")) << t;
  EXPECT_TRUE(contains(t, "7 replay passes per launch")) << t;
  EXPECT_TRUE(contains(t, "copy_probe bytes=1073741824: event median 700.0 us over 10 runs"));
  // 2.15e9 of 2^31 bytes moved: 1.001x.
  EXPECT_TRUE(contains(t, "DRAM moved 1.001x that minimum")) << t;
  EXPECT_TRUE(contains(t, "  copy_kernel<float4> ")) << t;
  EXPECT_TRUE(contains(t, "long_scoreboard 12.50, gmma 3.00, wait 1.00")) << t;
  EXPECT_TRUE(contains(t, "attention_bwd_bf16 batch=1: not supported: head_dim 96")) << t;
}

TEST(KernelMetricsReport, RestrictedCountersSayWhatFailedWhatRanAndTheFix) {
  CounterStatus s{CounterState::kRestricted, "cuptiRangeProfilerEnable",
                  "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES"};
  const std::string m = counter_status_message(s, "1");
  EXPECT_TRUE(contains(m, "restricted to admin users")) << m;
  EXPECT_TRUE(contains(m, "(cuptiRangeProfilerEnable: CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)"));
  EXPECT_TRUE(contains(m, "NVreg_RestrictProfilingToAdminUsers")) << m;
  EXPECT_TRUE(contains(m, "RmProfilingAdminOnly: 1 in /proc/driver/nvidia/params")) << m;
  EXPECT_TRUE(contains(m, "the event timings need none and were measured")) << m;
  EXPECT_TRUE(contains(counter_status_message(s, ""), "RmProfilingAdminOnly unreadable"));
  EXPECT_EQ(counter_status_message({CounterState::kDisabled, "", ""}, ""),
            "hardware counters: not collected (--no-counters); event timings only");
  const std::string u = counter_status_message(
      {CounterState::kUnsupported, "cuptiProfilerDeviceSupported", "vGPU (disabled)"}, "");
  EXPECT_TRUE(contains(u, "cannot be profiled (cuptiProfilerDeviceSupported: vGPU (disabled))"));
  EXPECT_STREQ(state_name(CounterState::kRestricted), "restricted");
}

}  // namespace
}  // namespace hetplan::profiler::metrics
