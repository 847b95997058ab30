// `hetplan fit` end to end on a synthetic calibration file, and the profile format it writes.
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/document.h"
#include "costmodel/layer_correction.h"
#include "costmodel/profile.h"
#include "costmodel/profile_quality.h"
#include "synthetic_gemm.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::error_of;
using testing::run_hetplan;
using testing::temp_dir;

// The synthetic ground truth's times of `shapes` as `dtype`'s measured GEMMs.
void add_synthetic_gemms(CalibrationFile& f, Dtype dtype, const std::vector<GemmShape>& shapes) {
  for (const auto& p : testing::synthetic_table(testing::SyntheticGpu{}, shapes)) {
    GemmMeasurement m;
    m.dtype = dtype;
    m.shape = p.shape;
    m.origin = "grid";
    m.time_s = summarize({p.time_s});
    f.gemm.push_back(m);
  }
}

// A measured-looking H100 calibration: synthetic GEMMs on a grid, two streaming kernels, one
// attention kernel.
CalibrationFile synthetic_calibration(bool with_grid) {
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  f.context.notes = "synthetic (tests/synthetic_gemm.h)";
  add_synthetic_gemms(f, Dtype::kBf16, testing::profiler_like_shapes(with_grid, !with_grid));
  // A copy kernel at 3.0 TB/s with 3 us overhead: memory efficiency 3000 / 3350.
  for (double bytes : {1e6, 1e7, 1e8, 1e9}) {
    KernelMeasurement k;
    k.kernel = "copy";
    k.bytes = bytes;
    k.time_s = summarize({3e-6 + bytes / 3.0e12});
    f.kernels.push_back(k);
  }
  // Attention at half the peak, after the same 3 us launch as the copy's (the fit's launch).
  for (double flops : {1e10, 1e11, 1e12, 1e13}) {
    KernelMeasurement k;
    k.kernel = "attention_fwd";
    k.flops = flops;
    k.time_s = summarize({3e-6 + flops / (0.5 * 989.4e12)});
    f.kernels.push_back(k);
  }
  return f;
}

TEST(FitCli, WritesAProfileAndAHeldOutQualityReport) {
  const auto dir = temp_dir("fit_cli");
  CalibrationFile f = synthetic_calibration(true);
  const auto calib = (dir / "h100.json").string();
  save_calibration(f, calib);
  const auto profile_path = (dir / "profile.json").string();
  const auto quality_path = (dir / "quality.json").string();
  auto r = run_hetplan("fit " + calib + " --out " + profile_path + " --json " + quality_path +
                       " --require-targets");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("h100-sxm (measured)"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("met"), std::string::npos) << r.output;

  const Json q = load_document(quality_path).root;
  EXPECT_EQ(q["format"], "hetplan-fit-quality");
  const Json& bf16 = q["gpus"]["h100-sxm"]["gemm"]["bf16"];
  const double median = bf16["held_out_corrected"]["median_rel_error"].get<double>();
  const double p95 = bf16["held_out_corrected"]["p95_rel_error"].get<double>();
  EXPECT_LE(median, 0.03);
  EXPECT_LE(p95, 0.08);
  EXPECT_GT(bf16["held_out_corrected"]["points"].get<int64_t>(), 400);
  // Attention: half the peak, which the four timings fit exactly.
  const Json& attention = q["gpus"]["h100-sxm"]["attention"];
  EXPECT_NEAR(attention["efficiency"].get<double>(), 0.5, 1e-9);
  EXPECT_EQ(attention["forward_quality"]["points"], 4);
  EXPECT_LT(attention["forward_quality"]["p95_rel_error"].get<double>(), 1e-9);

  // The profile stores the same held-out score, and reads back.
  const Profile p = profile_from_document(load_document(profile_path));
  const GpuFit fit = p.gpu("h100-sxm");
  EXPECT_EQ(fit.source, "measured");
  ASSERT_TRUE(fit.gemm_quality.count(Dtype::kBf16));
  EXPECT_DOUBLE_EQ(fit.gemm_quality.at(Dtype::kBf16).median_rel_error, median);
  EXPECT_NE(fit.gemm_quality.at(Dtype::kBf16).method.find("held-out 1 in 5"), std::string::npos);
  EXPECT_NEAR(fit.memory_efficiency, 3000.0 / 3350.0, 1e-6);
  // The shipped datasheet priors were the starting point: fp16 keeps its prior peak fraction.
  EXPECT_DOUBLE_EQ(fit.gemm.at(Dtype::kFp16).peak_fraction, 0.81);
  std::filesystem::remove_all(dir);
}

// The layer check: a layer whose "measured" times are exactly what the fitted profile predicts
// from its ops scores zero error, which proves the check builds the block the profiler timed.
TEST(FitCli, LayerCheckComparesLayersBuiltFromTheirOps) {
  const auto dir = temp_dir("fit_layers");
  CalibrationFile f = synthetic_calibration(false);
  std::vector<CalibrationFile> files = {
      load_calibration(default_calibration_dir() / "datasheet" / "h100-sxm.json")};
  files.push_back(f);
  Profile fitted = fit_profile(files);
  ClusterSpec cluster = load_cluster("p5.48xlarge:1");
  const CostModel cost(fitted, cluster);
  const GpuSpec& gpu = cluster.groups[0].node.gpu;
  LayerMeasurement m;
  m.style = "llama";
  m.micro_batch = 2;
  m.seq_len = 4096;
  m.hidden = 4096;
  m.heads = 32;
  m.kv_heads = 32;
  m.ffn_hidden = 11008;
  m.tp = 2;
  // llama2-7b's block as the profiler runs it (its Q, K, V copies included).
  const LayerTimes t = cost.layer_times(gpu, measured_block_work(m, Dtype::kBf16), Recompute::kNone,
                                        CommGroup{}, Dtype::kBf16);
  m.forward_s = summarize({t.pass_s[0]});
  m.backward_input_s = summarize({t.pass_s[1]});
  m.backward_weight_s = summarize({t.pass_s[2] * 1.1});  // W measured 10% slower
  f.layers.push_back(m);
  const auto calib = (dir / "h100.json").string();
  save_calibration(f, calib);
  const auto quality_path = (dir / "quality.json").string();
  auto r = run_hetplan("fit " + calib + " --out " + (dir / "p.json").string() + " --json " +
                       quality_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json q = load_document(quality_path).root["gpus"]["h100-sxm"];
  ASSERT_EQ(q["layers"].size(), 1u);
  EXPECT_NEAR(q["layers"][0]["rel_error"][0].get<double>(), 0, 1e-9);
  EXPECT_NEAR(q["layers"][0]["rel_error"][1].get<double>(), 0, 1e-9);
  EXPECT_NEAR(q["layers"][0]["rel_error"][2].get<double>(), 1 / 1.1 - 1, 1e-9);
  EXPECT_NEAR(q["layer_quality"]["backward_weight"]["median_rel_error"].get<double>(), 1 - 1 / 1.1,
              1e-9);
  // The correction it makes (W x1.1), and no held-out score: one micro-batch only.
  ASSERT_EQ(q["layer_corrections"].size(), 1u);
  EXPECT_NEAR(q["layer_corrections"][0]["points"][0]["ratio"][2].get<double>(), 1.1, 1e-9);
  EXPECT_EQ(q["layer_quality_corrected_held_out"]["forward"]["points"].get<int64_t>(), 0);
  std::filesystem::remove_all(dir);
}

// tests/data/calibration/a100-sample.json was written with its bytes as floats ("bytes":
// 1048576.0): it still reads, and what fit and merge write from it has them whole.
TEST(FitCli, CalibrationWithFloatBytesReadsAndIsWrittenWhole) {
  const auto dir = temp_dir("fit_whole_bytes");
  const std::string sample = std::string(HETPLAN_TEST_DATA) + "/calibration/a100-sample.json";
  ASSERT_TRUE(load_document(sample).root["collectives"][0]["bytes"].is_number_float());
  auto r = run_hetplan("fit " + sample + " --out " + (dir / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json profile = load_document(dir / "p.json").root;
  EXPECT_EQ(profile["collectives"][0]["bytes"], 1048576);
  EXPECT_TRUE(profile["collectives"][0]["bytes"].is_number_integer());
  EXPECT_TRUE(profile["gpus"]["a100-40gb"]["context_reserve_bytes"].is_number_integer());
  EXPECT_EQ(testing::fractional_bytes(profile), std::vector<std::string>{});
  EXPECT_EQ(testing::byte_values(profile), 13u + 1);  // 13 collectives, one context reserve
  r = run_hetplan("merge " + sample + " --out " + (dir / "m.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json merged = load_document(dir / "m.json").root;
  EXPECT_EQ(testing::fractional_bytes(merged), std::vector<std::string>{});
  EXPECT_EQ(testing::byte_values(merged), 13u);
  std::filesystem::remove_all(dir);
}

// What fit says of the correction's inputs: fp16 on its sparse grid takes bf16's dense table of
// the same kernels (a companion), and a bf16 shape measured 5x slow is named as a glitch.
TEST(FitCli, SaysWhichDtypeJoinsAnothersCorrectionAndNamesTheGlitches) {
  const auto dir = temp_dir("fit_companion");
  CalibrationFile f = synthetic_calibration(true);  // bf16 on the dense grid
  const size_t glitch = f.gemm.size() / 2;
  const GemmShape slow = f.gemm[glitch].shape;
  f.gemm[glitch].time_s = summarize({5 * f.gemm[glitch].time_s.median});
  add_synthetic_gemms(f, Dtype::kFp16, testing::profiler_like_shapes(false, false));
  const auto calib = (dir / "h100.json").string();
  save_calibration(f, calib);
  const auto profile_path = (dir / "profile.json").string();
  const auto r = run_hetplan("fit " + calib + " --out " + profile_path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("fp16   corrected with bf16's measurements (same kernels; 5-fold "
                          "cross-validation of the fit set: median "),
            std::string::npos)
      << r.output;
  const std::string label = fmt::format("{}x{}x{} {}{}", slow.m, slow.n, slow.k,
                                        slow.trans_a ? 'T' : 'N', slow.trans_b ? 'T' : 'N');
  EXPECT_NE(r.output.find(fmt::format(
                "bf16   1 measured shape left out of other shapes' corrections as glitches (each "
                "over 1.8x its 8 nearest neighbours' median in measured / analytical): {} {:.1f} "
                "us",
                label, f.gemm[glitch].time_s.median * 1e6)),
            std::string::npos)
      << label << "\n"
      << r.output;
  const Profile p = profile_from_document(load_document(profile_path));
  EXPECT_EQ(p.gpu("h100-sxm").gemm_companion.at(Dtype::kFp16), Dtype::kBf16);
  std::filesystem::remove_all(dir);
}

TEST(FitCli, BadInputExitsTwo) {
  const auto dir = temp_dir("fit_bad");
  auto r =
      run_hetplan("fit " + (dir / "missing.json").string() + " --out " + (dir / "p.json").string());
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("no such calibration file"), std::string::npos) << r.output;
  std::filesystem::remove_all(dir);
}

// Profiles written before the tile exponent, memory fraction, blend and wave smoothing existed
// still read, with the defaults.
TEST(ProfileFormat, ReadsProfilesWithoutTheNewerGemmKeys) {
  const char* text = R"({"format": "hetplan-profile", "schema_version": 1, "gpus": {"h100-sxm": {
      "source": "measured", "gemm": {"bf16": {"peak_fraction": 0.8, "tile_m": 128,
      "tile_n": 256, "k_half": 64, "overhead_s": 6e-6, "quality": {"points": 4,
      "median_rel_error": 0.02, "p95_rel_error": 0.07}, "measured": []}},
      "memory_efficiency": 0.9, "attention_efficiency": 0.45}}})";
  const Profile p = profile_from_document(parse_document(text, "old.json", DocumentFormat::kJson));
  const GemmEfficiency e = p.gpu("h100-sxm").gemm.at(Dtype::kBf16);
  EXPECT_EQ(e.tile_n, 256);
  EXPECT_DOUBLE_EQ(e.memory_fraction, 1.0);
  EXPECT_DOUBLE_EQ(e.wave_smoothing, 0.0);
  EXPECT_DOUBLE_EQ(p.gpu("h100-sxm").gemm_quality.at(Dtype::kBf16).p95_rel_error, 0.07);
}

// A profile's GEMM coefficients are read in the ranges the fit keeps them in. A wave smoothing of
// 816 (scripts/fuzz_inputs.py) gave partial waves negative times, and predict a segmentation fault.
TEST(ProfileFormat, GemmCoefficientsOutsideTheFitsRangesAreBadInput) {
  const auto text = [](const std::string& key, const std::string& value) {
    return R"({"format": "hetplan-profile", "schema_version": 1, "gpus": {"h100-sxm": {
      "source": "measured", "gemm": {"bf16": {"peak_fraction": 0.8, "tile_m": 128,
      "tile_n": 256, ")" +
           key + "\": " + value +
           R"(}}, "memory_efficiency": 0.9, "attention_efficiency": 0.45}}})";
  };
  const auto error = [&](const std::string& key, const std::string& value) {
    return error_of([&] {
      profile_from_document(parse_document(text(key, value), "p.json", DocumentFormat::kJson));
    });
  };
  EXPECT_EQ(error("wave_smoothing", "1"), "");
  EXPECT_EQ(error("wave_smoothing", "816.85"),
            "p.json: gpus.h100-sxm.gemm.bf16.wave_smoothing: expected a number from 0 to 1, "
            "found 816.85");
  EXPECT_EQ(error("blend", "0.5"),
            "p.json: gpus.h100-sxm.gemm.bf16.blend: expected a number from 1 to 32, found 0.5");
  EXPECT_EQ(error("k_half", "0"), "");  // older profiles
  EXPECT_EQ(error("measured", R"([{"m": 64, "n": 64, "k": 64, "batch": 1, "trans_a": true,
                                   "trans_b": false, "time_s": 1e308}])"),
            "p.json: gpus.h100-sxm.gemm.bf16.measured[0].time_s: expected seconds, at most a day, "
            "found 1e+308");
  EXPECT_EQ(error("memory_fraction", "2"),
            "p.json: gpus.h100-sxm.gemm.bf16.memory_fraction: expected a number from 0.05 to "
            "1.5, found 2");
  EXPECT_EQ(error("tile_exponent", "-1"),
            "p.json: gpus.h100-sxm.gemm.bf16.tile_exponent: expected a number from 0 to 3, "
            "found -1");
  std::string peak = text("k_half", "64");
  peak.replace(peak.find("0.8"), 3, "2");
  EXPECT_EQ(error_of([&] {
              profile_from_document(parse_document(peak, "p.json", DocumentFormat::kJson));
            }),
            "p.json: gpus.h100-sxm.gemm.bf16.peak_fraction: expected a number from 0.02 to 1, "
            "found 2");
}

TEST(ProfileFit, RegistryKernelNamesReachTheCostModelsOps) {
  EXPECT_EQ(cost_op_name("layernorm_bwd_input_bf16"), "layernorm_bwd");
  EXPECT_EQ(cost_op_name("layernorm_bwd_weight_fp32"), "layernorm_bwd_weight");
  EXPECT_EQ(cost_op_name("dropout_bwd_bf16"), "bias_dropout_residual_bwd");
  EXPECT_EQ(cost_op_name("adamw_step"), "adamw");
  EXPECT_EQ(cost_op_name("memcpy_d2d"), "copy");
  EXPECT_EQ(cost_op_name("d2d_copy"), "copy");
  EXPECT_EQ(cost_op_name("copy_probe"), "copy_probe");
  EXPECT_EQ(cost_op_name("swiglu_fwd"), "swiglu_fwd");

  // The bf16 case sets the fit; the fp32 one of the same op is ignored (activations are half).
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  auto add = [&](const std::string& name, Dtype dtype, double GBps) {
    for (double bytes : {1e7, 1e8, 1e9}) {
      KernelMeasurement k;
      k.kernel = name;
      k.dtype = dtype;
      k.bytes = bytes;
      k.time_s = summarize({2e-6 + bytes / (GBps * 1e9)});
      f.kernels.push_back(k);
    }
  };
  add("gelu_fwd_bf16", Dtype::kBf16, 2500);
  add("gelu_fwd_fp32", Dtype::kFp32, 1000);
  add("memcpy_d2d", Dtype::kFp32, 3000);
  const GpuFit g = fit_profile({f}).gpu("h100-sxm");
  ASSERT_EQ(g.kernels.count("gelu_fwd"), 1u);
  EXPECT_NEAR(g.kernels.at("gelu_fwd").GBps, 2500, 25);
  EXPECT_EQ(g.kernels.count("gelu_fwd_bf16"), 0u);
  EXPECT_NEAR(g.memory_efficiency, 3000.0 / 3350.0, 0.01);
}

// Fused attention from PyTorch's SDPA timings: the FLASH_ATTENTION backend's (what a strategy's
// flash_attention and the reference harness run) over the faster default backend's, its
// efficiency falling with the sequence and the head size, forward and backward apart, and the
// cost model timing an op with what was fitted.
TEST(ProfileFit, AttentionIsFlashAttentionsAndFallsWithTheSequenceAndTheHeadSize) {
  const double peak = 989.4e12;  // h100-sxm bf16 dense
  const int64_t sms = 132;
  // Halves on the fit's grids (16 x 2^(i/8), 4 x 2^(j/2)), so that the fit can find them exactly.
  const AttentionCoefficients fwd{0.36, 16 * std::exp2(45 / 8.0), 32};
  const AttentionCoefficients bwd{0.30, 1024, 4 * std::exp2(9 / 2.0)};
  const double launch = GpuFit{}.launch_s;  // the file times no other kernel
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  auto add = [&](const std::string& kernel, const AttentionCoefficients& c, int64_t seq,
                 int64_t head_dim) {
    KernelMeasurement k;
    k.kernel = kernel;
    k.dtype = Dtype::kBf16;
    k.flops = 4.0 * 4 * 16 * seq * seq * head_dim / 2 *
              (kernel.find("bwd") != std::string::npos ? 2.5 : 1);
    k.params =
        Json{{"batch", 4}, {"heads", 16}, {"seq", seq}, {"head_dim", head_dim}, {"causal", 1}};
    const AttentionWork w{k.flops, 64, seq, head_dim, true};
    k.time_s = summarize({launch + attention_time_s(c, w, peak, sms)});
    f.kernels.push_back(k);
  };
  for (int64_t seq : {512, 1024, 2048, 4096})
    for (int64_t head_dim : {64, 128}) {
      add("sdpa_fwd_flash_attention", fwd, seq, head_dim);
      add("sdpa_bwd_flash_attention", bwd, seq, head_dim);
      add("sdpa_fwd_default", {0.55, 0, 0}, seq, head_dim);
      add("sdpa_bwd_default", {0.45, 0, 0}, seq, head_dim);
    }
  const GpuFit g = fit_profile({f}).gpu("h100-sxm");
  EXPECT_EQ(g.attention_source, "torch sdpa, FLASH_ATTENTION backend");
  EXPECT_NEAR(g.attention_efficiency, fwd.efficiency, 1e-9);
  EXPECT_DOUBLE_EQ(g.attention_seq_half, fwd.seq_half);
  EXPECT_DOUBLE_EQ(g.attention_head_dim_half, fwd.head_dim_half);
  EXPECT_NEAR(g.attention_bwd_efficiency, bwd.efficiency, 1e-9);
  EXPECT_DOUBLE_EQ(g.attention_bwd_seq_half, bwd.seq_half);
  EXPECT_DOUBLE_EQ(g.attention_bwd_head_dim_half, bwd.head_dim_half);
  EXPECT_EQ(g.attention_quality[0].points, 8);
  EXPECT_LT(g.attention_quality[1].p95_rel_error, 1e-9);

  // The cost model's attention: launch + the model at the fitted coefficients. Two heads of a
  // 1024-token backward are far below the GPU: the critical path sets it, 8x the FLOPs' time.
  Profile p;
  p.gpus["h100-sxm"] = g;
  const ClusterSpec cluster = load_cluster("p5.48xlarge:1");
  const CostModel cost(p, cluster);
  const GpuSpec& gpu = cluster.groups[0].node.gpu;
  const double flops = 2.5 * 4.0 * 2 * 1024 * 1024 * 128 / 2;
  const AttentionOp op{Pass::kBackwardInput, 1, 2, 2, 1024, 128, true, flops};
  const double head = 128 / (128 + bwd.head_dim_half);
  const double throughput = flops / (peak * 0.30 * 1024 / (1024 + bwd.seq_half) * head);
  const double critical = 2.5 * 4 * 128 * 128 * 1024 / (peak / sms * 0.30 * head);
  EXPECT_NEAR(cost.attention_s(gpu, Dtype::kBf16, op),
              g.launch_s + std::hypot(throughput, critical), 1e-12);
  EXPECT_GT(critical, 8 * throughput);
  // With one sequence length and one head size neither half is fitted.
  CalibrationFile one = f;
  one.kernels.erase(std::remove_if(one.kernels.begin(), one.kernels.end(),
                                   [](const auto& k) {
                                     return k.params["seq"] != 4096 || k.params["head_dim"] != 128;
                                   }),
                    one.kernels.end());
  const GpuFit flat = fit_profile({one}).gpu("h100-sxm");
  EXPECT_EQ(flat.attention_seq_half, 0);
  EXPECT_EQ(flat.attention_head_dim_half, 0);
  EXPECT_EQ(flat.attention_quality[0].points, 1);
}

// gpt2-medium's block at micro-batch 1 and tensor width `tp`, timed whole (1 ms a pass).
LayerMeasurement gpt2_medium_block(int64_t tp) {
  LayerMeasurement m;
  m.style = "gpt";
  m.micro_batch = 1;
  m.seq_len = 1024;
  m.hidden = 1024;
  m.heads = m.kv_heads = 16;
  m.ffn_hidden = 4096;
  m.tp = tp;
  m.forward_s = m.backward_input_s = m.backward_weight_s = summarize({1e-3});
  return m;
}

// hetplan's attention kernels inside its whole-layer timings: the CUPTI trace's kernels named
// attention_* (the pass with its preprocessing and dQ conversion) are timings of the layer's
// attention op, the others are not; an SDPA file replaces them as it replaces the kernels'.
TEST(ProfileFit, AttentionTakesTheKernelsInsideWholeLayerTimings) {
  const double peak = 989.4e12;  // h100-sxm bf16 dense
  const AttentionCoefficients truth{0.3, 0, 0};
  const double launch = GpuFit{}.launch_s;  // the file times no memory-bound kernel
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  for (int64_t tp : {1, 8}) {  // gpt2-medium's block: 16 and 2 heads per rank, micro-batch 1
    LayerMeasurement m = gpt2_medium_block(tp);
    for (const AttentionOp& op : measured_block_work(m, Dtype::kBf16).attention) {
      const double t = launch + attention_time_s(truth, attention_work(op), peak, 132);
      const char* pass = op.pass == Pass::kForward ? "forward" : "backward_input";
      m.trace[pass]["kernels"] = Json::array(
          {{{"name", "void hetplan::kernels::attention_main_kernel<bf16, 64>"},
            {"count", 1},
            {"mean_s", 0.75 * t}},
           {{"name", "void hetplan::kernels::attention_side_kernel<bf16, 64>"},
            {"count", 2},
            {"mean_s", 0.125 * t}},
           {{"name", "nvjet_sm90_tst_128x64_64x8_1x2_h_bz_NNT"}, {"count", 3}, {"mean_s", t}}});
    }
    f.layers.push_back(m);
  }
  const GpuFit g = fit_profile({f}).gpu("h100-sxm");
  EXPECT_EQ(g.attention_source, "hetplan kernels");
  EXPECT_EQ(g.attention_quality[0].points, 2);
  EXPECT_EQ(g.attention_quality[1].points, 2);
  EXPECT_NEAR(g.attention_efficiency, 0.3, 1e-9);
  EXPECT_NEAR(g.attention_bwd_efficiency, 0.3, 1e-9);
  EXPECT_LT(g.attention_quality[1].p95_rel_error, 1e-9);

  KernelMeasurement k;  // SDPA's figures, in another file
  k.kernel = "sdpa_fwd_flash_attention";
  k.dtype = Dtype::kBf16;
  k.flops = 1e12;
  k.time_s = summarize({launch + 1e12 / (0.5 * peak)});
  CalibrationFile sdpa = f;
  sdpa.layers.clear();
  sdpa.kernels = {k};
  for (const auto& files : {std::vector<CalibrationFile>{f, sdpa}, {sdpa, f}}) {
    const GpuFit both = fit_profile(files).gpu("h100-sxm");
    EXPECT_EQ(both.attention_source, "torch sdpa, FLASH_ATTENTION backend");
    EXPECT_EQ(both.attention_quality[0].points, 1);
    EXPECT_NEAR(both.attention_efficiency, 0.5, 1e-9);
  }
}

// hetplan's kernels timed alone (kernel measurements) and inside its layers (their traces), 1.25x
// slower in the forward and 1.2x in the backward: the fit keeps the alone efficiency and the
// factor, the cost model applies the factor, the profile keeps it, and an SDPA file (timed alone)
// takes the efficiencies and keeps hetplan's factor.
TEST(ProfileFit, AttentionInsideLayersTakesTheFactorItsKernelsShowThere) {
  const double peak = 989.4e12;  // h100-sxm bf16 dense
  const AttentionCoefficients truth{0.3, 0, 0};
  const double factor[2] = {1.25, 1.2};
  const double launch = GpuFit{}.launch_s;
  CalibrationFile f;
  f.context.source = "measured";
  f.context.gpu_type = "h100-sxm";
  for (int64_t tp : {1, 2, 4, 8}) {  // gpt2-medium's block at micro-batch 1
    LayerMeasurement m = gpt2_medium_block(tp);
    for (const AttentionOp& op : measured_block_work(m, Dtype::kBf16).attention) {
      const int pass = op.pass == Pass::kForward ? 0 : 1;
      const double t = factor[pass] * attention_time_s(truth, attention_work(op), peak, 132);
      m.trace[pass == 0 ? "forward" : "backward_input"]["kernels"] =
          Json::array({{{"name", "void hetplan::kernels::attention_main_kernel<bf16, 64>"},
                        {"count", 1},
                        {"mean_s", launch + t}}});
    }
    f.layers.push_back(m);
  }
  for (const char* kernel : {"attention_fwd_bf16", "attention_bwd_bf16"})
    for (int64_t batch : {1, 4, 16}) {  // alone: 16 to 256 heads x batch
      KernelMeasurement k;
      k.kernel = kernel;
      k.dtype = Dtype::kBf16;
      const bool bwd = std::string(kernel).find("bwd") != std::string::npos;
      k.flops = 4.0 * batch * 16 * 1024 * 1024 * 64 / 2 * (bwd ? 2.5 : 1);
      k.params = Json{{"batch", batch}, {"heads", 16}, {"seq", 1024},
                      {"head_dim", 64}, {"causal", 1}, {"family", "attention"}};
      const AttentionWork w{k.flops, batch * 16, 1024, 64, true};
      k.time_s = summarize({launch + attention_time_s(truth, w, peak, 132)});
      f.kernels.push_back(k);
    }
  const GpuFit g = fit_profile({f}).gpu("h100-sxm");
  EXPECT_EQ(g.attention_source, "hetplan kernels");
  EXPECT_NEAR(g.attention_efficiency, 0.3, 1e-9);
  EXPECT_NEAR(g.attention_bwd_efficiency, 0.3, 1e-9);
  EXPECT_NEAR(g.attention_in_layer_factor, 1.25, 1e-9);
  EXPECT_NEAR(g.attention_bwd_in_layer_factor, 1.2, 1e-9);
  EXPECT_EQ(g.attention_in_layer_points[0], 4);
  EXPECT_EQ(g.attention_quality[0].points, 7);
  EXPECT_LT(g.attention_quality[1].p95_rel_error, 1e-9);

  // In a training step the pass runs inside its layer: launch + factor x its time alone.
  Profile p;
  p.gpus["h100-sxm"] = g;
  const ClusterSpec cluster = load_cluster("p5.48xlarge:1");
  const GpuSpec& gpu = cluster.groups[0].node.gpu;
  const double flops = 4.0 * 16 * 1024 * 1024 * 64 / 2;
  const AttentionOp op{Pass::kForward, 1, 16, 16, 1024, 64, true, flops};
  const double alone = attention_time_s(truth, attention_work(op), peak, 132);
  EXPECT_NEAR(CostModel(p, cluster).attention_s(gpu, Dtype::kBf16, op), g.launch_s + 1.25 * alone,
              1e-12);
  // The profile keeps both factors, and hetplan fit prints them.
  const auto dir = temp_dir("attention_in_layer");
  save_profile(p, (dir / "p.json").string());
  save_calibration(f, dir / "cal.json");
  const auto r = run_hetplan("fit " + (dir / "cal.json").string() + " --out " +
                             (dir / "fitted.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("; x1.250 inside layers (4 timings there), backward"), std::string::npos)
      << r.output;
  EXPECT_NE(r.output.find("; x1.200 inside layers (4 timings there) of the dense peak"),
            std::string::npos)
      << r.output;
  const GpuFit back = profile_from_document(load_document(dir / "p.json")).gpu("h100-sxm");
  EXPECT_DOUBLE_EQ(back.attention_in_layer_factor, g.attention_in_layer_factor);
  EXPECT_DOUBLE_EQ(back.attention_bwd_in_layer_factor, g.attention_bwd_in_layer_factor);
  std::filesystem::remove_all(dir);

  // SDPA, timed alone, sets the efficiency; hetplan's kernels still say what a layer does to it.
  KernelMeasurement k;
  k.kernel = "sdpa_fwd_flash_attention";
  k.dtype = Dtype::kBf16;
  k.flops = 1e12;
  k.time_s = summarize({launch + 1e12 / (0.5 * peak)});
  CalibrationFile sdpa;
  sdpa.context = f.context;
  sdpa.kernels = {k};
  const GpuFit both = fit_profile({sdpa, f}).gpu("h100-sxm");
  EXPECT_EQ(both.attention_source, "torch sdpa, FLASH_ATTENTION backend");
  EXPECT_NEAR(both.attention_efficiency, 0.5, 1e-9);
  EXPECT_NEAR(both.attention_in_layer_factor, 1.25, 1e-9);
  EXPECT_NEAR(both.attention_bwd_in_layer_factor, 1.2, 1e-9);
}

// QA: predict and search named Helix ("imported:helix") as the source of the T4's training fit,
// which Helix's serving tables do not change (its coefficients were the datasheet's).
TEST(ProfileFit, ServingTablesAloneAreNoSourceOfTheTrainingFit) {
  CalibrationFile helix;
  helix.context.source = "imported:helix";
  helix.context.gpu_type = "t4";
  helix.origin = "helix-t4.json";
  helix.serving_layer.push_back({"llama2-70b", "prompt", 250, 1, summarize({0.002})});
  const CalibrationFile prior =
      load_calibration(default_calibration_dir() / "datasheet" / "t4.json");
  const GpuFit both = fit_profile({prior, helix}).gpu("t4");
  EXPECT_EQ(both.source, "datasheet");
  EXPECT_EQ(both.origins.size(), 2u);  // the serving tables are still among its files
  EXPECT_EQ(fit_profile({helix}).gpu("t4").source, "default");

  const auto dir = temp_dir("helix_source");
  const auto imported =
      run_hetplan("import --format helix " + std::string(HETPLAN_EXTERNAL_DATA) +
                  "/helix/profiles/llama2_70b/t4 --out " + (dir / "helix-t4.json").string());
  ASSERT_EQ(imported.exit_code, 0) << imported.output;
  const auto r = run_hetplan(
      "predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
      std::string(HETPLAN_SOURCE_DIR) + "/examples/strategies/gpt2-medium-g4dn.json " +
      "--calibration " + (dir / "helix-t4.json").string() + " --json " + (dir / "p.json").string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const Json j = Json::parse(std::ifstream(dir / "p.json"));
  EXPECT_EQ(j["context"]["gpu_sources"]["t4"], "datasheet");
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace hetplan
