// hetplan import, export and report from the command line: outputs, exit statuses and messages.
#include <filesystem>
#include <fstream>
#include <iterator>

#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/attention_model.h"
#include "costmodel/calibration.h"
#include "costmodel/measurements.h"
#include "costmodel/profile.h"
#include "report_fixture.h"

namespace hetplan {
namespace {

using testing::run_hetplan;
const std::string kData = HETPLAN_TEST_DATA;
const std::string kExternal = HETPLAN_EXTERNAL_DATA;

// `hetplan ARGS` is refused as bad input (exit 2) with `message` in its output.
void expect_refused(const std::string& args, const std::string& message) {
  const auto r = run_hetplan(args);
  EXPECT_EQ(r.exit_code, 2) << args << "\n" << r.output;
  EXPECT_NE(r.output.find(message), std::string::npos) << args << "\n" << r.output;
}

TEST(ImportCli, WritesMeasurementsAndCalibrationFiles) {
  const auto dir = testing::temp_dir("import_cli");
  const auto meas = (dir / "ds.json").string();
  auto r =
      run_hetplan("import --format deepspeed " + kData +
                  "/deepspeed/gpt2-medium_pp2_dp4_zero1.log --model gpt2-medium --out " + meas);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("1 measurements (0 out of memory) from 1 files"), std::string::npos);
  const MeasurementsFile f = load_measurements(meas);
  EXPECT_EQ(f.context.framework, "deepspeed");
  EXPECT_EQ(f.context.framework_version, "0.16.4");
  EXPECT_EQ(f.measurements.at(0).source, "imported:deepspeed");
  // Max_MA 5.83 GiB = 6259914833.92 bytes, written as the nearest whole byte; what the log does
  // not say is listed as assumed, and the import warns about it.
  const Json written = load_document(meas).root["measurements"][0];
  EXPECT_EQ(written["peak_memory_bytes"], Json::parse("[6259914834]"));
  EXPECT_TRUE(written["peak_memory_bytes"][0].is_number_integer());
  EXPECT_EQ(written["assumed"],
            Json::parse(R"(["strategy.recompute", "strategy.flash_attention"])"));
  EXPECT_NE(r.output.find("gpt2-medium_pp2_dp4_zero1.log:45-50: not in the log, recorded with "
                          "defaults: strategy.recompute, strategy.flash_attention"),
            std::string::npos)
      << r.output;

  const auto cal = (dir / "amp.json").string();
  r = run_hetplan("import --format amp " + kExternal + "/amp/known_cost/gpt2_G4_1.npy " +
                  kExternal + "/amp/known_cost/gpt2_G4_2.npy --out " + cal);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CalibrationFile c = load_calibration(cal);
  EXPECT_EQ(c.context.source, "imported:amp");
  EXPECT_EQ(c.context.gpu_type, "t4");
  EXPECT_EQ(c.layer_forward.size(), 60u);

  r = run_hetplan("import --format helix " + kExternal + "/helix/profiles/llama1_30b/t4x4 --out " +
                  (dir / "helix.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(load_calibration(dir / "helix.json").serving_layer.front().gpus, 4);
  std::filesystem::remove_all(dir);
}

TEST(ImportCli, BadInputIsExitTwoWithFileAndLine) {
  const auto dir = testing::temp_dir("import_cli_bad");
  const auto log = dir / "broken.log";
  std::ofstream(log) << "------------------------ arguments ------------------------\n"
                        "  micro_batch_size ................................ 2\n"
                        "-------------------- end of arguments ---------------------\n"
                        " iteration        1/      10 | elapsed time per iteration (ms): 12,5 |\n";
  auto r = run_hetplan("import --format megatron " + log.string() + " --out " +
                       (dir / "m.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("broken.log:4: \"elapsed time per iteration (ms)\": expected a number, "
                          "found \"12,5\""),
            std::string::npos)
      << r.output;
  r = run_hetplan("import --format nemo " + log.string() + " --out x.json");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(
      r.output.find("unknown format \"nemo\" (expected megatron, deepspeed, amp, sailor, helix, "
                    "kernel-bench, torch-sdpa)"),
      std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

TEST(ImportCli, KernelBenchJsonBecomesAMeasuredCalibration) {
  const auto dir = testing::temp_dir("import_kernel_bench");
  const auto cal = (dir / "kernels.json").string();
  auto r = run_hetplan("import --format kernel-bench " + kData + "/kernel_bench/h100_subset.json" +
                       " --out " + cal);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("7 kernel records for h100-sxm (measured)"), std::string::npos)
      << r.output;
  const CalibrationFile c = load_calibration(cal);
  EXPECT_EQ(c.context.source, "measured");
  EXPECT_EQ(c.context.gpu_type, "h100-sxm");
  EXPECT_EQ(c.context.date, "2026-11-22T12:18:25Z");  // the bench's date, not the import's
  EXPECT_EQ(c.context.sm_count, 132);
  ASSERT_EQ(c.kernels.size(), 7u);  // the unsupported case is left out
  const KernelMeasurement& ln = c.kernels[3];
  EXPECT_EQ(ln.kernel, "layernorm_fwd_bf16");
  EXPECT_EQ(ln.params.at("rows"), 16384);
  EXPECT_EQ(ln.params.at("cols"), 4096);
  EXPECT_EQ(ln.params.at("pass"), "forward");
  EXPECT_NEAR(ln.time_s.median, 98.4e-6, 0.1e-6);
  EXPECT_GT(ln.bytes, 2 * 16384.0 * 4096 * 2 * 0.99);

  // The fit takes the bf16 layernorm and the copy bandwidth from it.
  r = run_hetplan("fit " + cal + " --out " + (dir / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("layernorm_fwd "), std::string::npos) << r.output;

  std::ofstream(dir / "other.json") << R"({"schema": "hetplan.bench/9", "results": []})";
  r = run_hetplan("import --format kernel-bench " + (dir / "other.json").string() + " --out " +
                  (dir / "x.json").string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("other.json"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("hetplan.kernel_bench/1"), std::string::npos) << r.output;

  // QA: a median below the minimum passed the import and failed only in fit; --gpu-type
  // a100-40gb relabelled an H100's bench.
  // `bench` written as `name` and imported: refused with `message`.
  const auto refused = [&](const std::string& name, const Json& bench, const std::string& message) {
    std::ofstream(dir / name) << bench.dump();
    expect_refused("import --format kernel-bench " + (dir / name).string() + " --out " +
                       (dir / "x.json").string(),
                   message);
  };
  Json bench = Json::parse(std::ifstream(kData + "/kernel_bench/h100_subset.json"));
  bench["results"][0]["time_s"] = 4.8468e-08;  // min 4.794e-05
  refused("fast.json", bench,
          "fast.json: results[0].time_s: expected time_min_s <= time_s <= time_max_s, found "
          "4.7944e-05 <= 4.8468e-08 <= 4.896e-05");
  bench["results"][0]["time_s"] = 4.85e-05;
  bench["results"][0]["time_max_s"] = 1e6;  // a unit slip
  refused("slow.json", bench,
          "slow.json: results[0].time_max_s: expected seconds, at most a day, found 1000000");
  r = run_hetplan("import --format kernel-bench " + kData + "/kernel_bench/h100_subset.json" +
                  " --gpu-type a100-40gb --out " + (dir / "x.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("h100_subset.json: context.gpu: the GPU --gpu-type names (a100-40gb), "
                          "not \"NVIDIA H100 80GB HBM3\" (h100-sxm)"),
            std::string::npos)
      << r.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.json"));
  std::filesystem::remove_all(dir);
}

// PyTorch's SDPA timings become sdpa_* kernel records, and the fit takes the attention
// efficiency from the FLASH_ATTENTION backend's (what flash_attention strategies and the reference
// harness run) over hetplan's own kernels, in whichever order the files come.
TEST(ImportCli, TorchSdpaTimingsSetTheAttentionEfficiency) {
  const auto dir = testing::temp_dir("import_torch_sdpa");
  const auto sdpa = (dir / "sdpa.json").string();
  auto r = run_hetplan("import --format torch-sdpa " + kData + "/torch_sdpa/h100_one_shape.json" +
                       " --out " + sdpa);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CalibrationFile c = load_calibration(sdpa);
  EXPECT_EQ(c.context.gpu_type, "h100-sxm");
  ASSERT_EQ(c.kernels.size(), 8u);  // four backends, forward and backward
  EXPECT_EQ(c.kernels[0].kernel, "sdpa_fwd_default");
  EXPECT_EQ(c.kernels[0].params.at("picked"), "CUDNN_ATTENTION");
  // Causal b 4, h 16, s 4096, d 128: 4 b h s^2 d / 2 FLOPs forward, 2.5 times that backward.
  const double flops = 4.0 * 4 * 16 * 4096.0 * 4096 * 128 / 2;
  EXPECT_DOUBLE_EQ(c.kernels[0].flops, flops);
  EXPECT_DOUBLE_EQ(c.kernels[1].flops, 2.5 * flops);
  EXPECT_NEAR(c.kernels[1].time_s.median, 0.00207315194606781 - 0.0004983839988708496, 1e-12);

  const auto ours = (dir / "ours.json").string();
  r = run_hetplan("import --format kernel-bench " + kData + "/kernel_bench/h100_subset.json" +
                  " --out " + ours);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  CalibrationFile own = load_calibration(ours);
  KernelMeasurement k;  // one of hetplan's attention timings, at half SDPA's speed
  k.kernel = "attention_fwd_bf16";
  k.flops = flops;
  k.time_s = summarize({2 * 0.0004983839988708496});
  own.kernels.push_back(k);
  save_calibration(own, ours);
  const double peak = 989.4e12;  // h100-sxm bf16 dense (presets/gpus)
  for (const bool sdpa_first : {true, false}) {
    const std::vector<CalibrationFile> files =
        sdpa_first ? std::vector<CalibrationFile>{load_calibration(sdpa), load_calibration(ours)}
                   : std::vector<CalibrationFile>{load_calibration(ours), load_calibration(sdpa)};
    const GpuFit g = fit_profile(files).gpu("h100-sxm");
    // FLASH_ATTENTION's forward (0.93 ms), not the default backend's cuDNN (0.50 ms): one timing,
    // so the efficiency that gives it exactly after the launch, whichever file came first (the
    // fit waits for the last file's launch). At 64 heads x batch the critical path adds 0.8%.
    const AttentionWork w{flops, 64, 4096, 128, true};
    const double at_peak = attention_time_s({1, 0, 0}, w, peak, 132);
    EXPECT_GT(at_peak, 1.008 * flops / peak);
    EXPECT_NEAR(g.attention_efficiency, at_peak / (0.0009256160259246826 - g.launch_s), 1e-9);
    EXPECT_EQ(g.attention_source, "torch sdpa, FLASH_ATTENTION backend");
  }
  // Without SDPA's figures, hetplan's own kernels set it (a timing without its shape: no
  // critical path).
  const GpuFit g = fit_profile({load_calibration(ours)}).gpu("h100-sxm");
  EXPECT_NEAR(g.attention_efficiency, flops / (2 * 0.0004983839988708496 - g.launch_s) / peak,
              1e-9);
  EXPECT_EQ(g.attention_source, "hetplan kernels");
  std::filesystem::remove_all(dir);
}

// SDPA timed again right after GEMMs (bench_attention_torch.py --between-gemm-ms): the import
// keeps those times, and the fit gives SDPA its own in-layer factor from them (here 1.1 forward,
// 1.15 backward) instead of the one of hetplan's kernels.
TEST(ImportCli, TorchSdpaAfterGemmTimingsGiveSdpaItsOwnInLayerFactor) {
  const auto dir = testing::temp_dir("import_torch_sdpa_after_gemm");
  Json bench = Json::parse(std::ifstream(kData + "/torch_sdpa/h100_one_shape.json"));
  const double peak = 989.4e12, launch = GpuFit{}.launch_s;
  const AttentionCoefficients truth{0.5, 0, 0};
  Json rows = Json::array();
  for (const int64_t seq : {1024, 2048, 4096})
    for (const int64_t head_dim : {64, 128}) {
      const double flops = 4.0 * 4 * 16 * seq * seq * head_dim / 2;
      const double f = attention_time_s(truth, {flops, 64, seq, head_dim, true}, peak, 132);
      const double b = attention_time_s(truth, {2.5 * flops, 64, seq, head_dim, true}, peak, 132);
      const double fwd_after = launch + 1.1 * f, bwd_after = launch + 1.15 * b;
      rows.push_back(
          {{"shape",
            {{"batch", 4}, {"heads", 16}, {"seq", seq}, {"head_dim", head_dim}, {"causal", true}}},
           {"torch",
            {{{"backend", "FLASH_ATTENTION"},
              {"fwd_s", launch + f},
              {"fwd_bwd_s", 2 * launch + f + b},
              {"fwd_s_after_gemm", fwd_after},
              {"fwd_bwd_s_after_gemm", fwd_after + bwd_after},
              {"after_gemm_factor_fwd", fwd_after / (launch + f)},
              {"after_gemm_factor_fwd_bwd", (fwd_after + bwd_after) / (2 * launch + f + b)}}}}});
    }
  bench["rows"] = rows;
  const auto in = dir / "after_gemm.json";
  std::ofstream(in) << bench.dump(1);
  const auto sdpa = (dir / "sdpa.json").string();
  auto r = run_hetplan("import --format torch-sdpa " + in.string() + " --out " + sdpa);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CalibrationFile c = load_calibration(sdpa);
  ASSERT_EQ(c.kernels.size(), 12u);
  EXPECT_TRUE(c.kernels[0].params.contains("after_gemm_s"));
  const GpuFit g = fit_profile({c}).gpu("h100-sxm");
  EXPECT_EQ(g.attention_source, "torch sdpa, FLASH_ATTENTION backend");
  EXPECT_NEAR(g.attention_efficiency, 0.5, 1e-9);
  EXPECT_NEAR(g.attention_in_layer_factor, 1.1, 1e-9);
  EXPECT_NEAR(g.attention_bwd_in_layer_factor, 1.15, 1e-9);
  EXPECT_EQ(g.attention_in_layer_points[0], 6);

  // One of the pair missing is refused by name.
  bench["rows"][0]["torch"][0].erase("fwd_bwd_s_after_gemm");
  std::ofstream(in) << bench.dump(1);
  expect_refused("import --format torch-sdpa " + in.string() + " --out " + sdpa,
                 "rows[0].torch[0].fwd_bwd_s_after_gemm: both timings after GEMMs or neither");
  std::filesystem::remove_all(dir);
}

// The SM clock of each SDPA timing (bench_attention_torch.py reads NVML): kept in the kernel
// records' method, alone and after GEMMs, and printed by `hetplan fit` as clock classes of their
// own, so the after-GEMM factor can be set against the clock change (docs/benchmarks.md item 15).
TEST(ImportCli, TorchSdpaClocksAreKeptAloneAndAfterGemms) {
  const auto dir = testing::temp_dir("import_torch_sdpa_clocks");
  Json bench = Json::parse(std::ifstream(kData + "/torch_sdpa/h100_one_shape.json"));
  auto clock = [](double mhz, int limited) {
    return Json{{"samples", 12},
                {"sm_mhz_median", mhz},
                {"sm_mhz_min", mhz - 15},
                {"sm_mhz_max", mhz + 15},
                {"reasons", limited ? Json({"sw_power_cap"}) : Json::array()},
                {"power_thermal_samples", limited},
                {"read_us_median", 30.0}};
  };
  Json& flash = bench["rows"][0]["torch"][1];
  ASSERT_EQ(flash["backend"], "FLASH_ATTENTION");
  flash["fwd_s_after_gemm"] = 1.2 * flash["fwd_s"].get<double>();
  flash["fwd_bwd_s_after_gemm"] = 1.2 * flash["fwd_bwd_s"].get<double>();
  flash["clocks_fwd_s"] = clock(1980, 0);
  flash["clocks_fwd_bwd_s"] = clock(1965, 0);
  flash["clocks_fwd_s_after_gemm"] = clock(1755, 10);
  flash["clocks_fwd_bwd_s_after_gemm"] = clock(1740, 12);
  // A backend whose clocks NVML could not read says why, once.
  bench["rows"][0]["torch"][2]["clocks_note"] = "clocks not read: NVML not loaded (no driver)";
  bench["rows"][0]["torch"][3]["clocks_note"] = "clocks not read: NVML not loaded (no driver)";
  const auto in = dir / "clocks.json";
  std::ofstream(in) << bench.dump(1);
  const auto sdpa = (dir / "sdpa.json").string();
  auto r = run_hetplan("import --format torch-sdpa " + in.string() + " --out " + sdpa);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const CalibrationFile c = load_calibration(sdpa);
  const KernelMeasurement* fwd = nullptr;
  const KernelMeasurement* bwd = nullptr;
  for (const auto& k : c.kernels) {
    if (k.kernel == "sdpa_fwd_flash_attention") fwd = &k;
    if (k.kernel == "sdpa_bwd_flash_attention") bwd = &k;
  }
  ASSERT_TRUE(fwd && bwd);
  EXPECT_EQ(fwd->method["clocks"]["sm_mhz_median"], 1980);
  EXPECT_EQ(fwd->method["after_gemm"]["clocks"]["sm_mhz_median"], 1755);
  EXPECT_EQ(fwd->method["after_gemm"]["clocks"]["reasons"], Json({"sw_power_cap"}));
  EXPECT_EQ(bwd->method["clocks"]["sm_mhz_median"], 1965);  // forward + backward's
  EXPECT_EQ(bwd->method["after_gemm"]["clocks"]["sm_mhz_median"], 1740);
  const std::string note = "clocks not read: NVML not loaded (no driver)";
  const size_t at = c.context.notes.find(note);
  ASSERT_NE(at, std::string::npos) << c.context.notes;
  EXPECT_EQ(c.context.notes.find(note, at + 1), std::string::npos) << c.context.notes;

  r = run_hetplan("fit " + sdpa + " --out " + (dir / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("kernel sdpa_fwd_flash_attention                 1 timed   1980 MHz"),
            std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("kernel sdpa_fwd_flash_attention after GEMMs     1 timed   1755 MHz"),
            std::string::npos)
      << r.output;

  // A malformed record is refused by file and key.
  flash["clocks_fwd_s_after_gemm"]["sm_mhz_median"] = "fast";
  std::ofstream(in) << bench.dump(1);
  expect_refused("import --format torch-sdpa " + in.string() + " --out " + sdpa,
                 "clocks.json: rows[0].torch[1].clocks_fwd_s_after_gemm.sm_mhz_median");
  // So is a time over a day (a unit slip).
  flash["clocks_fwd_s_after_gemm"] = clock(1755, 10);
  flash["fwd_bwd_s_after_gemm"] = 1e6;
  std::ofstream(in) << bench.dump(1);
  expect_refused("import --format torch-sdpa " + in.string() + " --out " + sdpa,
                 "clocks.json: rows[0].torch[1].fwd_bwd_s_after_gemm: expected seconds, at most "
                 "a day, found 1000000");
  std::filesystem::remove_all(dir);
}

TEST(ExportCli, PredictOutputCarriesThePartition) {
  const auto& in = testing::report_inputs();
  // The tp 1, pp 4 run of the uneven Megatron-LM log: blocks 5, 7, 7, 5 again.
  auto r = run_hetplan("export --strategy " + in.predictions[1] + " --format megatron");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("  --decoder-first-pipeline-num-layers 5\n  "
                          "--decoder-last-pipeline-num-layers 5\n"),
            std::string::npos)
      << r.output;
  r = run_hetplan("export --strategy " + in.search + " --index 5 --format deepspeed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("--index 5: the file holds 3 strategies"), std::string::npos) << r.output;
}

TEST(ExportCli, UnsupportedIsAnErrorUnlessApproximationIsAllowed) {
  const auto dir = testing::temp_dir("export_cli");
  const auto s = dir / "zb.json";
  std::ofstream(s) << R"({"dp": 1, "tp": 1, "pp": 4, "micro_batch": 1, "global_batch": 8,
                         "schedule": "zb-h2"})";
  auto r =
      run_hetplan("export --strategy " + s.string() + " --model gpt2-medium --format deepspeed");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("deepspeed cannot express this strategy:\n  - schedule zb-h2: "
                          "DeepSpeed's pipeline engine runs 1F1B only"),
            std::string::npos)
      << r.output;
  const auto out = dir / "ds.json";
  r = run_hetplan("export --strategy " + s.string() +
                  " --model gpt2-medium --format deepspeed "
                  "--allow-approximate --out " +
                  out.string());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("NOT EXPRESSED: schedule zb-h2"), std::string::npos);
  EXPECT_TRUE(std::filesystem::exists(out));
  r = run_hetplan("export --strategy " + s.string() + " --format megatron");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("the file does not name the model: give --model"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(ReportCli, WritesHtmlAndJsonAndRejectsBadMeasurements) {
  const auto& in = testing::report_inputs();
  const auto dir = testing::temp_dir("report_cli");
  const auto html = dir / "r.html";
  auto r = run_hetplan("report --predictions " + in.predictions[0] + " --predictions " +
                       in.predictions[2] + " --measurements " + in.measurements + " --out " +
                       html.string() + " --json " + (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // Two of the four measured strategies have a prediction here.
  EXPECT_NE(r.output.find("2 matched pairs"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("2 measurements and 0 predictions unmatched"), std::string::npos);
  EXPECT_GT(std::filesystem::file_size(html), 1000000u);  // ECharts inside
  const Document data = load_document(dir / "r.json");
  EXPECT_EQ(data.root["unmatched_measurements"].size(), 2u);
  // Measured and predicted peaks of the two pairs, in whole bytes.
  EXPECT_TRUE(data.root["pairs"][0]["measured_memory_bytes"].is_number_integer());
  EXPECT_TRUE(data.root["pairs"][0]["predicted_memory_bytes"].is_number_integer());
  EXPECT_EQ(testing::fractional_bytes(data.root), std::vector<std::string>{});
  EXPECT_EQ(testing::byte_values(data.root), 2u * 2);

  const auto bad = dir / "bad.json";
  std::ofstream(bad) << R"({"format": "hetplan-measurements", "schema_version": 1, "context": {},
    "measurements": [{"model": "gpt2-medium", "strategy": {"dp": 1, "tp": 0, "pp": 1,
    "micro_batch": 1, "global_batch": 1}, "iteration_s": 1, "source": "measured:pytorch"}]})";
  r = run_hetplan("report --predictions " + in.predictions[0] + " --measurements " + bad.string() +
                  " --out " + html.string());
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find(
                "bad.json: measurements[0].strategy.tp: expected a whole number from 1 to 1048576, "
                "found 0"),
            std::string::npos)
      << r.output;
  std::filesystem::remove_all(dir);
}

// A measurement whose importer filled in a value by default says so in the table of runs.
TEST(ReportCli, ShowsWhatAMeasurementAssumed) {
  const auto& in = testing::report_inputs();
  const auto dir = testing::temp_dir("report_assumed");
  MeasurementsFile f = load_measurements(in.measurements);
  f.measurements.at(0).assumed = {"strategy.grad_accumulation_fusion", "strategy.zero"};
  save_measurements(f, dir / "m.json");
  const auto html = dir / "r.html";
  auto r = run_hetplan("report --predictions " + in.predictions[0] + " --measurements " +
                       (dir / "m.json").string() + " --out " + html.string() + " --json " +
                       (dir / "r.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json data = load_document(dir / "r.json").root;
  ASSERT_EQ(data["pairs"].size(), 1u);
  EXPECT_EQ(data["pairs"][0]["assumed"],
            Json::parse(R"(["strategy.grad_accumulation_fusion", "strategy.zero"])"));
  for (const Json& m : data["unmatched_measurements"]) EXPECT_FALSE(m.contains("assumed"));
  std::ifstream file(html);
  const std::string page((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  EXPECT_NE(page.find(">assumed: grad_accumulation_fusion, zero</span>"), std::string::npos);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
