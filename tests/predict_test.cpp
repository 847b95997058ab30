#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "cli_test_util.h"
#include "costmodel/cost_model.h"
#include "costmodel/document.h"
#include "costmodel/errors.h"
#include "costmodel/profile.h"
#include "search/evaluate.h"
#include "tests/framework_fixture.h"

namespace hetplan {
namespace {

using testing::run_hetplan;
using testing::temp_dir;

Profile shipped_profile() { return load_profile_inputs({default_calibration_dir().string()}); }

std::string write(const std::filesystem::path& dir, const std::string& name,
                  const std::string& text) {
  const auto path = dir / name;
  std::ofstream(path) << text;
  return path.string();
}

TEST(CostModel, RingCollectiveInsideANodeFollowsBusBandwidth) {
  const ClusterSpec c = load_cluster("p4d.24xlarge:1");
  const CostModel cost(Profile{}, c);
  const auto devices = cluster_devices(c);
  const CommGroup g = make_comm_group(c, devices, {0, 1, 2, 3, 4, 5, 6, 7});
  // 2(n-1) steps of 2 us, then 1 GB x 2(n-1)/n over 300 GB/s x 0.8 (the NVLink prior).
  const double expected = 14 * 2e-6 + 1e9 * 1.75 / (300e9 * 0.8);
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllReduce, 1e9, g), expected, 1e-12);
}

TEST(CostModel, CrossNodeAllReduceIsBoundByTheSharedNetwork) {
  const ClusterSpec c = load_cluster("p4d.24xlarge:4");
  const CostModel cost(Profile{}, c);
  const auto devices = cluster_devices(c);
  // One GPU per node, 8 such groups sharing each 400 Gbit/s NIC (data parallel with tp 8).
  const CommGroup g = make_comm_group(c, devices, {0, 8, 16, 24}, 8);
  const double nic = 50e9 * 0.85 / 8;
  const double expected = 6 * 15e-6 + 2 * 3.0 / 4 * 1e9 / nic;
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllReduce, 1e9, g), expected, 1e-12);
}

TEST(CostModel, MeasuredCollectivesReplaceThePriors) {
  const ClusterSpec c = load_cluster("p4d.24xlarge:1");
  Profile p;
  for (double bytes : {1e6, 1e8}) {
    CollectiveMeasurement m;
    m.op = CollectiveKind::kAllReduce;
    m.bytes = bytes;
    m.group_size = 8;
    m.gpus_per_node = 8;
    m.link = "nvswitch";
    m.time_s = summarize({bytes / 100e9});  // 100 GB/s algbw
    p.collectives.push_back(m);
  }
  const CostModel cost(p, c);
  const auto devices = cluster_devices(c);
  const CommGroup g = make_comm_group(c, devices, {0, 1, 2, 3, 4, 5, 6, 7});
  EXPECT_NEAR(cost.collective_s(CollectiveKind::kAllReduce, 1e7, g), 1e7 / 100e9, 1e-12);
  // Other group sizes still use the priors.
  const CommGroup four = make_comm_group(c, devices, {0, 1, 2, 3});
  EXPECT_NE(cost.collective_s(CollectiveKind::kAllReduce, 1e7, four), 1e7 / 100e9);
}

TEST(Evaluate, SingleGpuIterationIsMicrobatchesTimesPassesPlusOptimizer) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.micro_batch = 4;
  s.global_batch = 16;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  ASSERT_EQ(p.stages.size(), 1u);
  const StagePrediction& st = p.stages[0];
  const double cycle = st.forward_s + st.backward_input_s + st.backward_weight_s;
  EXPECT_NEAR(p.iteration_s, 4 * cycle + st.optimizer_s, 1e-12);
  double sum = 0;
  for (const auto& [name, sec] : p.breakdown) sum += sec;
  EXPECT_NEAR(sum, p.iteration_s, 1e-12);
  EXPECT_NEAR(p.samples_per_s, 16 / p.iteration_s, 1e-9);
  // MFU: Narayanan et al. 2021 (SC'21) eq. 3, 72 s L h^2 (1 + s / (6h) + V / (12 h L)) FLOPs per
  // sample, for GPT-2 medium (s 1024, L 24, h 1024, V 50257) 2.4808e12, x 16 samples, over the
  // iteration at the A100's 312 TFLOP/s bf16 peak (NVIDIA's A100 datasheet, presets/gpus).
  const double seq = 1024, L = 24, h = 1024, V = 50257;
  const double flops = 72 * seq * L * h * h * (1 + seq / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(flops, 2.4808e12, 0.0001e12);
  EXPECT_NEAR(p.mfu, flops * 16 / (p.iteration_s * 312e12), 1e-12);
  // Backward is not a fixed multiple of forward: it comes from the op costs.
  EXPECT_GT(st.backward_input_s + st.backward_weight_s, 1.5 * st.forward_s);
  EXPECT_LT(st.backward_input_s + st.backward_weight_s, 2.6 * st.forward_s);
}

TEST(Evaluate, ComputeIsNotLinearInMicroBatch) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy one, eight;
  one.micro_batch = 1;
  one.global_batch = 8;
  eight.micro_batch = 8;
  eight.global_batch = 8;
  const double f1 = ev.predict(one).stages[0].forward_s;
  const double f8 = ev.predict(eight).stages[0].forward_s;
  EXPECT_LT(f8, 8 * f1 * 0.95);  // small GEMMs use the GPU less well
}

TEST(Evaluate, MemoryRuleAndHeterogeneousPartition) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p3.8xlarge:3,g4dn.12xlarge:1");
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.dp = 1;
  s.tp = 4;
  s.pp = 4;
  s.micro_batch = 4;
  s.global_batch = 32;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  ASSERT_EQ(p.stages.size(), 4u);
  EXPECT_EQ(p.stages[3].stage.gpu_type, "t4");
  const auto layers = [&](int i) {
    return p.stages[i].stage.last_layer - p.stages[i].stage.first_layer + 1;
  };
  EXPECT_LT(layers(3), layers(0));  // the T4 stage gets fewer layers than the V100 stages
  EXPECT_EQ(p.notes.size(), 2u);    // bf16 runs as fp16 on v100 and on t4
}

// Coefficients that give a layer a time that is not finite: the error names the profile file and
// key they were read from, or the calibration files of a fit made in this run.
TEST(Evaluate, ALayerTimeThatIsNotFiniteNamesWhereTheCoefficientsCameFrom) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const std::string type = cluster.groups[0].node.gpu.name;
  GpuFit fit = Profile{}.gpu(type);
  fit.memory_efficiency = 0;  // out of the range a profile is read in
  fit.origins = {"a100.calib.json"};
  const auto message = [&](const GpuFit& f) {
    Profile p;
    p.gpus[type] = f;
    const CostModel cost(p, cluster);
    try {
      Evaluator(model, cluster, cost, testing::fixture_framework()).predict(Strategy{});
    } catch (const InputError& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  const std::string tail = " s in its forward pass on " + type +
                           " by these coefficients: expected a finite time >= 0 (a coefficient "
                           "out of range?)";
  std::string m = message(fit);
  EXPECT_EQ(m.rfind("a100.calib.json: layer 0 (", 0), 0u) << m;
  EXPECT_NE(m.find(tail), std::string::npos) << m;
  fit.read_from = "a100.profile.json";
  fit.read_key = "gpus." + type;
  m = message(fit);
  EXPECT_EQ(m.rfind("a100.profile.json: gpus." + type + ": layer 0 (", 0), 0u) << m;
  EXPECT_NE(m.find(tail), std::string::npos) << m;
}

// Data-parallel replicas of one pipeline rank on two GPU kinds (AMP's heterogeneous cluster in
// cluster order: pp 2 puts devices 8-15, four V100s and four T4s, on rank 1): each layer takes the
// slower kind's time per pass, and the rank names both kinds.
TEST(Evaluate, ARankOnTwoGpuKindsTakesTheSlowerPerLayer) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("p3.8xlarge:3,g4dn.12xlarge:1");
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.dp = 8;
  s.pp = 2;
  s.micro_batch = 2;
  s.global_batch = 32;
  s.stages = {StageSpec{}, StageSpec{}};
  s.stages[0].first_layer = 0;
  s.stages[0].last_layer = 12;
  s.stages[1].first_layer = 13;
  s.stages[1].last_layer = 25;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  EXPECT_EQ(p.stages[0].stage.gpu_type, "v100");
  EXPECT_EQ(p.stages[1].stage.gpu_type, "t4+v100");
  const auto& v100 = ev.layer_costs(0, 1, s);
  const auto& t4 = ev.layer_costs(1, 1, s);
  double f = 0, b = 0, w = 0, t4_f = 0;
  for (int i = 13; i <= 25; ++i) {
    f += std::max(v100[i].times.pass_s[0], t4[i].times.pass_s[0]);
    b += std::max(v100[i].times.pass_s[1], t4[i].times.pass_s[1]);
    w += std::max(v100[i].times.pass_s[2], t4[i].times.pass_s[2]);
    t4_f += t4[i].times.pass_s[0];
  }
  EXPECT_NEAR(p.stages[1].forward_s, f, 1e-12);
  EXPECT_NEAR(p.stages[1].backward_input_s, b, 1e-12);
  EXPECT_NEAR(p.stages[1].backward_weight_s, w, 1e-12);
  EXPECT_DOUBLE_EQ(f, t4_f);  // the T4 is the slower at every layer here
  bool noted = false;
  for (const auto& n : p.notes) noted |= n.find("pipeline rank 1 runs on v100 and t4") == 0;
  EXPECT_TRUE(noted);
  // MFU over every device's own peak: 12 V100s and 4 T4s in fp16.
  const double peak = 12 * 125e12 + 4 * 65e12;
  EXPECT_NEAR(p.mfu, model_flops_per_sample(model) * 32 / (p.iteration_s * peak), 1e-12);

  // A stage that names one kind for devices of two is an error naming both.
  s.stages[0].devices = {0, 1, 2, 3, 4, 5, 6, 7};
  s.stages[1].devices = {8, 9, 10, 11, 12, 13, 14, 15};
  EXPECT_NEAR(ev.predict(s).iteration_s, p.iteration_s, 1e-15);  // the same devices
  s.stages[1].gpu_type = "v100";
  try {
    ev.predict(s);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("says gpu_type v100 but its devices are t4+v100"),
              std::string::npos)
        << e.what();
  }
  s.stages[1].gpu_type = "t4+v100";
  EXPECT_TRUE(ev.predict(s).feasible);
  // A strategy built in code gets the checks a strategy file gets as it is read.
  s.stages[1].devices[0] = 7;
  try {
    ev.predict(s);
    ADD_FAILURE() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_STREQ(e.what(), "stage 1: device 7 is pipeline rank 0's too (stage 0)");
  }
}

// A tiny GPT with its LM head tied to the embedding, and the same model with a table of its own.
TEST(Evaluate, ATiedHeadOnTheEmbeddingsDeviceAddsItsGradientOnce) {
  const auto dir = temp_dir("tied");
  const auto tiny = [&](bool tie) {
    return load_model(write(dir, tie ? "tied.yaml" : "untied.yaml",
                            fmt::format(R"(name: tiny-gpt
seq_len: 32
vocab: 512
tie_embeddings: {}
embedding: {{max_positions: 64, dropout: 0.1}}
block: {{hidden: 64, heads: 4, ffn_hidden: 256, activation: gelu, norm: layernorm, bias: true}}
layers: 2
head: {{final_norm: layernorm}}
)",
                                        tie)));
  };
  const ModelSpec tied = tiny(true), untied = tiny(false);
  const ClusterSpec cluster = load_cluster("p4d.24xlarge:1");
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator with_tie(tied, cluster, cost, testing::fixture_framework()),
      without(untied, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.micro_batch = 2;
  s.global_batch = 4;
  for (const bool fusion : {true, false}) {
    SCOPED_TRACE(fusion ? "gradient-accumulation fusion" : "no fusion");
    s.grad_accumulation_fusion = fusion;
    const Prediction a = with_tie.predict(s), b = without.predict(s);
    ASSERT_TRUE(a.feasible && b.feasible);
    const double table = 512.0 * 64;  // vocabulary x hidden
    // The tied table is held once: 18 B per parameter (bf16 weight, fp32 main gradient, fp32
    // master weight and two moments).
    EXPECT_NEAR(b.peak_memory_bytes[0] - a.peak_memory_bytes[0], 18 * table, 1.0);
    EXPECT_EQ(a.stages[0].forward_s, b.stages[0].forward_s);
    EXPECT_EQ(a.stages[0].backward_input_s, b.stages[0].backward_input_s);
    // Without fusion the head's add into the fp32 main gradient (10 B per element) becomes
    // autograd's add of the two uses' bf16 gradients (6 B); with fusion the head's GEMM writes
    // the main gradient and nothing changes.
    const GpuSpec& a100 = cluster.groups[0].node.gpu;
    const double saved = fusion ? 0.0
                                : cost.memory_op_s(a100, "grad_accumulate", table * 10) -
                                      cost.memory_op_s(a100, "grad_accumulate", table * 6);
    if (!fusion) {
      EXPECT_GT(saved, 0);
    }
    EXPECT_NEAR(b.stages[0].backward_weight_s - a.stages[0].backward_weight_s, saved, 1e-15);
  }
}

double breakdown_of(const Prediction& p, const std::string& key) {
  for (const auto& [name, s] : p.breakdown)
    if (name == key) return s;
  ADD_FAILURE() << "no " << key << " in the breakdown";
  return 0;
}

// Gradients reduced during the last micro-batch's backward (overlap_grad_reduce) hide up to that
// backward's time; reduced after it, the whole reduction adds to the iteration. The tied
// embeddings' sum between the first and last pipeline stage follows the backward either way.
TEST(Evaluate, GradientReductionAfterTheBackwardIsExposedWhole) {
  const ModelSpec model = load_model("gpt2-medium");
  const ClusterSpec cluster = load_cluster("g4dn.12xlarge:2");  // dp across the 50 Gbit/s network
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(model, cluster, cost, testing::fixture_framework());
  Strategy s;
  s.dp = 8;
  s.micro_batch = 2;
  s.global_batch = 32;
  s.overlap_grad_reduce = true;
  const Prediction during = ev.predict(s);
  s.overlap_grad_reduce = false;
  const Prediction after = ev.predict(s);
  ASSERT_TRUE(during.feasible && after.feasible);
  const StagePrediction& st = after.stages[0];
  const double reduce = st.dp_sync_s, backward = st.backward_input_s + st.backward_weight_s;
  EXPECT_GT(reduce, 0);
  EXPECT_EQ(during.stages[0].dp_sync_s, reduce);  // the same reduction, placed differently
  EXPECT_DOUBLE_EQ(breakdown_of(after, "dp_sync"), reduce);
  EXPECT_DOUBLE_EQ(breakdown_of(during, "dp_sync"), std::max(0.0, reduce - backward));
  EXPECT_NEAR(after.iteration_s - during.iteration_s, std::min(reduce, backward), 1e-12);

  // One replica over two stages of a tied model: only the embeddings' sum, never hidden.
  Strategy p;
  p.pp = 2;
  p.micro_batch = 2;
  p.global_batch = 8;
  for (bool overlap : {true, false}) {
    p.overlap_grad_reduce = overlap;
    const Prediction r = ev.predict(p);
    ASSERT_TRUE(r.feasible);
    EXPECT_GT(r.stages[0].dp_sync_s, 0);
    EXPECT_EQ(r.stages[1].dp_sync_s, r.stages[0].dp_sync_s);
    EXPECT_DOUBLE_EQ(breakdown_of(r, "dp_sync"), r.stages[0].dp_sync_s);
  }
}

TEST(PredictCli, PrintsTheContractFields) {
  const auto dir = temp_dir("predict");
  const std::string strategy = write(dir, "s.json", R"({"dp": 2, "tp": 2, "pp": 4,
      "micro_batch": 2, "global_batch": 32, "schedule": "1f1b", "recompute": "none"})");
  const auto out = (dir / "out.json").string();
  auto r = run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " +
                       strategy + " --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  Json j = load_document(out).root;
  const Json& p = j["predicted"];
  for (const char* key :
       {"iteration_s", "samples_per_s", "tokens_per_s", "mfu", "peak_memory_bytes", "feasible",
        "reason", "reason_code", "breakdown", "bubble_rate", "stages", "notes"})
    EXPECT_TRUE(p.contains(key)) << key;
  EXPECT_TRUE(p["feasible"].get<bool>());
  EXPECT_EQ(j["format"], "hetplan-prediction");
  EXPECT_EQ(j["schema_version"], 1);
  // docs/cli.md shows reason_code "" for a feasible prediction (it was left out).
  EXPECT_EQ(p.value("reason_code", "absent"), "");
  EXPECT_EQ(p["peak_memory_bytes"].size(), 4u);
  for (const char* key :
       {"compute", "tp_comm", "cp_comm", "ep_comm", "pp_p2p", "pp_bubble", "dp_sync", "optimizer"})
    EXPECT_TRUE(p["breakdown"].contains(key)) << key;
  EXPECT_EQ(j["strategy"]["tp"], 2);
  EXPECT_NE(r.output.find("strategy (megatron-core): dp 2 tp 2 pp 4 micro-batch 2 global batch 32 "
                          "schedule 1f1b recompute none zero 0\n"),
            std::string::npos)
      << r.output;
  // Chunks and the framework switches that differ from the defaults are named.
  const std::string other = write(dir, "o.json", R"({"dp": 2, "tp": 2, "pp": 4,
      "micro_batch": 2, "global_batch": 32, "schedule": "interleaved", "flash_attention": false,
      "grad_accumulation_fusion": false, "overlap_grad_reduce": false})");
  r = run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " + other);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("schedule interleaved x2 recompute none zero 0 unfused-attention "
                          "unfused-grad-add serial-grad-reduce\n"),
            std::string::npos)
      << r.output;
  // Bytes are whole ("total_bytes": 3371199488, not 3371199488.0): 4 peaks, 9 figures (7 parts,
  // allocated and total) of 4 stages.
  EXPECT_TRUE(p["peak_memory_bytes"][0].is_number_integer());
  EXPECT_TRUE(p["stages"][0]["memory"]["total_bytes"].is_number_integer());
  EXPECT_TRUE(p["stages"][0]["memory"]["activations_bytes"].is_number_integer());
  EXPECT_EQ(testing::fractional_bytes(j), std::vector<std::string>{});
  EXPECT_EQ(testing::byte_values(j), 4u + 9 * 4);
  std::filesystem::remove_all(dir);
}

TEST(PredictCli, ReportsAStrategyThatCannotFit) {
  const auto dir = temp_dir("predict_oom");
  const std::string strategy = write(dir, "s.json", R"({"dp": 1, "tp": 1, "pp": 1,
      "micro_batch": 8, "global_batch": 32})");
  const auto out = (dir / "out.json").string();
  auto r = run_hetplan("predict --model llama2-7b --cluster g4dn.12xlarge:1 --strategy " +
                       strategy + " --json " + out);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("INFEASIBLE (memory)"), std::string::npos) << r.output;
  Json p = load_document(out).root["predicted"];
  EXPECT_FALSE(p["feasible"].get<bool>());
  EXPECT_EQ(p.value("reason_code", "absent"), "memory");
  EXPECT_NE(p["reason"].get<std::string>().find("GiB"), std::string::npos);
  std::filesystem::remove_all(dir);
}

TEST(PredictCli, BadInputExitsTwoNamingFileAndKey) {
  const auto dir = temp_dir("predict_bad");
  struct Case {
    std::string strategy, expect;
  } cases[] = {
      {R"({"dp": 1, "tp": 3, "pp": 1, "micro_batch": 1, "global_batch": 8})", "s.json: tp:"},
      {R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 3, "global_batch": 8})",
       "s.json: global_batch:"},
      {R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "zeros": 1})",
       "s.json: zeros: unknown key"},
      {R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 0, "global_batch": 8})",
       "s.json: micro_batch: expected a whole number from 1 to 1048576"},
      {R"({"dp": 64, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 64})", "s.json: dp:"},
      {R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "schedule": "x"})",
       "s.json: schedule: expected one of gpipe, 1f1b, interleaved"},
      {R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8, "chunks": 2})",
       "s.json: chunks: schedule 1f1b runs one chunk per device, found 2"},
      {R"({"dp": 2, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 8,
           "sequence_parallel": true})",
       "s.json: sequence_parallel: sequence parallelism splits activations over the "
       "tensor-parallel group: it needs tp > 1"},
      {R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
           "stages": [{"layers": [0, 4]}, {"layers": [7, 25]}]})",
       "s.json: stages: stage 1 starts at layer 7; expected 5"},
      {R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
           "stages": [{"devices": [0, 1, 2, 99]}, {}]})",
       "s.json: stages: pipeline rank 0 uses device 99; the cluster has 16 devices"},
      {R"({"dp": 4, "tp": 1, "pp": 2, "micro_batch": 1, "global_batch": 8,
           "stages": [{"gpu_type": "v100"}, {"gpu_type": "t4"}]})",
       "s.json: stages[0].gpu_type: a GPU type of cluster g4dn.12xlarge:4 (t4), found \"v100\""},
  };
  for (const auto& c : cases) {
    const std::string strategy = write(dir, "s.json", c.strategy);
    auto r =
        run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:4 --strategy " + strategy);
    EXPECT_EQ(r.exit_code, 2) << c.strategy << "\n" << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << c.strategy << "\n" << r.output;
  }
  auto r = run_hetplan("predict --model nosuch --cluster g4dn.12xlarge:4 --strategy x.json");
  EXPECT_EQ(r.exit_code, 2);
  r = run_hetplan("predict --model gpt2-medium --cluster g4dn.12xlarge:0 --strategy x.json");
  EXPECT_EQ(r.exit_code, 2);
  std::filesystem::remove_all(dir);
}

TEST(ListCli, ModelsAndClustersListThePresets) {
  auto r = run_hetplan("models");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* name : {"gpt2-medium", "gpt3-175b", "llama2-70b", "llama1-30b", "bert-large",
                           "mixtral-8x7b", "cmpp-98.5b", "funnel-uneven"})
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
  r = run_hetplan("clusters");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* name :
       {"g4dn.12xlarge", "p3.8xlarge", "p3.16xlarge", "p4d.24xlarge", "p5.48xlarge", "g6.12xlarge",
        "t4", "v100", "a100-40gb", "a100-80gb", "l4", "h100-sxm"})
    EXPECT_NE(r.output.find(name), std::string::npos) << name;
}

// A tf32 model (fp32 weights and activations, TF32 GEMMs where the GPU has them: how Sailor
// trains OPT-350M): its GEMMs run tf32 on an A100 and fp32 on a V100, which has no TF32 units;
// every activation byte is 4, and the states are fp32 training's 16 B per parameter.
TEST(Predict, ATf32ModelRunsTf32GemmsWhereTheGpuHasThem) {
  const std::string model = std::string(HETPLAN_SOURCE_DIR) + "/examples/models/opt-350m.yaml";
  const auto dir = temp_dir("predict_tf32");
  const std::string strategy =
      write(dir, "s.json", R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1})");
  auto r = run_hetplan("predict --model " + model + " --cluster a2-highgpu-4g:1 --strategy " +
                       strategy + " --layer-ops");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("unfused-attention"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("m4096 n2048 k1024 tf32"), std::string::npos) << r.output;  // fc1
  // The residual gradients' add reads two and writes one 2048 x 1024 tensor of 4-byte values.
  EXPECT_NE(r.output.find("residual_grad_add                  25.2 MB"), std::string::npos)
      << r.output;
  r = run_hetplan("predict --model " + model + " --cluster n1-v100x4:1 --strategy " + strategy +
                  " --layer-ops");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("m4096 n2048 k1024 fp32"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("note: tf32 runs as fp32 on v100"), std::string::npos) << r.output;

  const ModelSpec m = load_model(model);
  const ClusterSpec cluster = load_cluster("a2-highgpu-4g:1");
  const CostModel cost(shipped_profile(), cluster);
  const Evaluator ev(m, cluster, cost, load_framework("megatron-core"));
  Strategy s;
  s.global_batch = 1;
  s.flash_attention = false;
  const Prediction p = ev.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  const double params = static_cast<double>(m.parameters());
  // Weights 4 + gradients 4 + Adam's two moments 8, no master copy (megatron-core's fp32 layout).
  const MemoryBreakdown& mem = p.stages.front().memory;
  EXPECT_NEAR(mem.weights + mem.gradients + mem.optimizer, 16 * params, 1e-6 * params);
}

}  // namespace
}  // namespace hetplan
