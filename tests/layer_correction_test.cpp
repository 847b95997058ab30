// Whole-layer timings correct the cost model's layer times (costmodel/layer_correction.h): ratios
// of measured to predicted per pass, by layer shape, interpolated over micro-batches; imported
// forward times (AMP's published arrays) with their tensor-parallel communication taken off.
#include <cmath>
#include <filesystem>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/layer_correction.h"
#include "costmodel/profile.h"
#include "report/import/profile_import.h"
#include "search/evaluate.h"

namespace hetplan {
namespace {

const std::filesystem::path kExternal = HETPLAN_EXTERNAL_DATA;

CalibrationFile datasheet(const std::string& gpu) {
  return load_calibration(default_calibration_dir() / "datasheet" / (gpu + ".json"));
}

LayerShape shape_of(int64_t micro_batch, int64_t tp, bool flash = true, Dtype d = Dtype::kBf16) {
  LayerShape s;
  s.micro_batch = micro_batch;
  s.tp = tp;
  s.flash_attention = flash;
  s.dtype = d;
  return s;
}

TEST(LayerCorrection, InterpolatesInLogMicroBatchAndHoldsTheEndsOutside) {
  LayerCorrection c;
  c.points = {{1, {2.0, 3.0, 1.0}, 1}, {4, {1.0, 1.0, 2.0}, 1}, {8, {1.5, 1.0, 2.0}, 1}};
  EXPECT_EQ(c.at(1), (std::array<double, 3>{2.0, 3.0, 1.0}));
  const auto two = c.at(2);  // half way from 1 to 4 in log2
  EXPECT_DOUBLE_EQ(two[0], 1.5);
  EXPECT_DOUBLE_EQ(two[1], 2.0);
  EXPECT_DOUBLE_EQ(two[2], 1.5);
  EXPECT_DOUBLE_EQ(c.at(4)[0], 1.0);
  EXPECT_NEAR(c.at(6)[0], 1.0 + 0.5 * std::log2(1.5), 1e-12);
  EXPECT_EQ(c.at(64), (std::array<double, 3>{1.5, 1.0, 2.0}));
  EXPECT_EQ(LayerCorrection{}.at(3), (std::array<double, 3>{1, 1, 1}));
}

// The profiler's block copies Q, K and V out of the QKV output and their gradients back in (three
// copies each way) where frameworks pass views and join the gradients once.
TEST(LayerCorrection, TheProfilersBlockIsComparedWithItsCopies) {
  LayerMeasurement m;
  m.style = "llama";
  m.micro_batch = 2;
  m.seq_len = 1024;
  m.hidden = 2048;
  m.heads = 16;
  m.kv_heads = 4;  // grouped-query: K and V narrower than Q
  m.ffn_hidden = 5632;
  m.tp = 2;
  const LayerWork plain = layer_work(measured_block(m), shape_of(2, 2));
  const LayerWork profiled = measured_block_work(m, Dtype::kBf16);
  EXPECT_EQ(profiled.key, plain.key);
  EXPECT_EQ(profiled.gemms.size(), plain.gemms.size());
  auto bytes = [](const LayerWork& w, const std::string& kernel, Pass pass) {
    double b = 0;
    for (const auto& op : w.memory_ops) b += op.kernel == kernel && op.pass == pass ? op.bytes : 0;
    return b;
  };
  const double T = 2 * 1024, qkv = (16 + 2 * 4) / 2 * 128;  // one rank's Q, K, V columns
  EXPECT_DOUBLE_EQ(bytes(plain, "qkv_grad_concat", Pass::kBackwardInput), 2 * T * qkv * 2);
  EXPECT_DOUBLE_EQ(bytes(profiled, "qkv_grad_concat", Pass::kBackwardInput), 0);
  EXPECT_DOUBLE_EQ(bytes(profiled, "copy", Pass::kForward), 2 * T * qkv * 2);
  EXPECT_DOUBLE_EQ(bytes(profiled, "copy", Pass::kBackwardInput), 2 * T * qkv * 2);
  EXPECT_EQ(profiled.memory_ops.size(), plain.memory_ops.size() + 5);
}

// A llama2-7b block timed by the profiler at micro-batches 1 and 4 (tp 1) on an H100, slower
// than its ops by known factors: layers of that shape take the factors, others do not.
class MeasuredLayers : public ::testing::Test {
 protected:
  void SetUp() override {
    const CostModel plain(fit_profile({datasheet("h100-sxm")}), cluster_);
    CalibrationFile f;
    f.context.source = "measured";
    f.context.gpu_type = "h100-sxm";
    f.origin = "synthetic";
    for (int64_t mb : {1, 4}) {
      LayerMeasurement m;
      m.style = "llama";
      m.micro_batch = mb;
      m.seq_len = 4096;
      m.hidden = 4096;
      m.heads = m.kv_heads = 32;
      m.ffn_hidden = 11008;
      // What the profiler's block would take if the ops were right, then slower by known factors.
      const LayerTimes t = plain.layer_times_from_ops(gpu(), measured_block_work(m, Dtype::kBf16),
                                                      Recompute::kNone, CommGroup{}, Dtype::kBf16);
      const double k = mb == 1 ? 1.0 : 0.0;  // mb 1: x1.5, x2, x0.8; mb 4: as predicted
      m.forward_s = summarize({t.pass_s[0] * (1 + 0.5 * k)});
      m.backward_input_s = summarize({t.pass_s[1] * (1 + 1.0 * k)});
      m.backward_weight_s = summarize({t.pass_s[2] * (1 - 0.2 * k)});
      f.layers.push_back(m);
    }
    cost_ = std::make_unique<CostModel>(fit_profile({datasheet("h100-sxm"), f}), cluster_);
  }
  const GpuSpec& gpu() const { return cluster_.groups[0].node.gpu; }
  const LayerSpec& block() const { return llama_.layers[1]; }

  ClusterSpec cluster_ = load_cluster("p5.48xlarge:1");
  ModelSpec llama_ = load_model("llama2-7b");
  std::unique_ptr<CostModel> cost_;
};

TEST_F(MeasuredLayers, ScaleEachPassOfTheSameShape) {
  const LayerWork w1 = layer_work(block(), shape_of(1, 1));
  const LayerTimes ops = cost_->layer_times_from_ops(gpu(), w1, Recompute::kNone, {}, Dtype::kBf16);
  const LayerTimes t = cost_->layer_times(gpu(), w1, Recompute::kNone, {}, Dtype::kBf16);
  ASSERT_NE(t.correction, nullptr);
  EXPECT_EQ(t.correction->source, "measured");
  EXPECT_NEAR(t.pass_s[0], 1.5 * ops.pass_s[0], 1e-12);
  EXPECT_NEAR(t.pass_s[1], 2.0 * ops.pass_s[1], 1e-12);
  EXPECT_NEAR(t.pass_s[2], 0.8 * ops.pass_s[2], 1e-12);

  // Micro-batch 2 lies half way (in log2) between the measured 1 and 4.
  const LayerWork w2 = layer_work(block(), shape_of(2, 1));
  const LayerTimes ops2 =
      cost_->layer_times_from_ops(gpu(), w2, Recompute::kNone, {}, Dtype::kBf16);
  const LayerTimes t2 = cost_->layer_times(gpu(), w2, Recompute::kNone, {}, Dtype::kBf16);
  EXPECT_NEAR(t2.pass_s[0], 1.25 * ops2.pass_s[0], 1e-12);
  EXPECT_NEAR(t2.pass_s[1], 1.5 * ops2.pass_s[1], 1e-12);
  EXPECT_NEAR(t2.pass_s[2], 0.9 * ops2.pass_s[2], 1e-12);
  // Beyond micro-batch 4, its ratios (1): the ops as they are.
  const LayerWork w8 = layer_work(block(), shape_of(8, 1));
  EXPECT_NEAR(cost_->layer_times(gpu(), w8, Recompute::kNone, {}, Dtype::kBf16).pass_s[1],
              cost_->layer_times_from_ops(gpu(), w8, Recompute::kNone, {}, Dtype::kBf16).pass_s[1],
              1e-15);
}

TEST_F(MeasuredLayers, RecomputedForwardTakesTheForwardRatio) {
  const LayerWork w = layer_work(block(), shape_of(1, 1));
  const LayerTimes ops = cost_->layer_times_from_ops(gpu(), w, Recompute::kFull, {}, Dtype::kBf16);
  const LayerTimes t = cost_->layer_times(gpu(), w, Recompute::kFull, {}, Dtype::kBf16);
  EXPECT_NEAR(t.recompute_s, 1.5 * ops.recompute_s, 1e-12);
  EXPECT_NEAR(t.pass_s[1], 2.0 * (ops.pass_s[1] - ops.recompute_s) + 1.5 * ops.recompute_s, 1e-12);
}

TEST_F(MeasuredLayers, OtherShapesAndTheCommunicationAreLeftAlone) {
  // Another tensor width, sequence length or attention is another shape.
  const ClusterSpec& c = cluster_;
  const CommGroup tp2 = make_comm_group(c, cluster_devices(c), {0, 1});
  const LayerWork wide = layer_work(block(), shape_of(1, 2));
  const LayerTimes t = cost_->layer_times(gpu(), wide, Recompute::kNone, tp2, Dtype::kBf16);
  EXPECT_EQ(t.correction, nullptr);
  EXPECT_DOUBLE_EQ(
      t.pass_s[0],
      cost_->layer_times_from_ops(gpu(), wide, Recompute::kNone, tp2, Dtype::kBf16).pass_s[0]);
  LayerSpec longer = block();
  longer.seq_len = 8192;
  EXPECT_EQ(cost_
                ->layer_times(gpu(), layer_work(longer, shape_of(1, 1)), Recompute::kNone, {},
                              Dtype::kBf16)
                .correction,
            nullptr);
  EXPECT_EQ(cost_
                ->layer_times(gpu(), layer_work(block(), shape_of(1, 1, false)), Recompute::kNone,
                              {}, Dtype::kBf16)
                .correction,
            nullptr);
  // The embedding and head were not timed.
  EXPECT_EQ(cost_
                ->layer_times(gpu(), layer_work(llama_.layers[0], shape_of(1, 1)), Recompute::kNone,
                              {}, Dtype::kBf16)
                .correction,
            nullptr);
}

// Scoring how corrections carry over micro-batches: each timing against the correction made of
// the other micro-batch alone.
TEST_F(MeasuredLayers, HeldOutMicroBatchesScoreTheCorrections) {
  const auto errors = held_out_micro_batch_errors(cost_->layer_timings(gpu()));
  // mb 1 from mb 4's ratios (1): ops / (1.5, 2, 0.8 x ops); mb 4 from mb 1's: 1.5, 2, 0.8 - 1.
  const std::vector<double> f = {1 / 1.5 - 1, 0.5}, b = {-0.5, 1.0}, w = {1 / 0.8 - 1, -0.2};
  ASSERT_EQ(errors[0].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_NEAR(errors[0][i], f[i], 1e-12);
    EXPECT_NEAR(errors[1][i], b[i], 1e-12);
    EXPECT_NEAR(errors[2][i], w[i], 1e-12);
  }
}

// AMP's published T4 arrays (g4dn.12xlarge): with them, a GPT-2 medium block as AMP ran it
// (unfused attention, fp16, micro-batch 1) takes exactly AMP's median forward time at each tensor
// width on the same node, communication included; B and W take the forward's ratio.
TEST(ImportedLayers, AmpForwardTimesAreReproducedOnTheirNode) {
  std::vector<std::filesystem::path> files;
  for (int tp : {1, 2, 4})
    files.push_back(kExternal / fmt::format("amp/known_cost/gpt2_G4_{}.npy", tp));
  const CalibrationFile amp = import_amp_known_cost(files, {});
  const ClusterSpec cluster = load_cluster("g4dn.12xlarge:1");
  const GpuSpec& t4 = cluster.groups[0].node.gpu;
  const CostModel cost(fit_profile({datasheet("t4"), amp}), cluster);
  const ModelSpec gpt2 = load_model("gpt2-medium");
  const std::vector<Device> devices = cluster_devices(cluster);
  for (int64_t tp : {1, 2, 4}) {
    std::vector<double> measured;
    for (const auto& r : amp.layer_forward)
      if (r.tp == tp && r.kind == "transformer") measured.push_back(r.forward_s.median);
    ASSERT_EQ(measured.size(), 24u);
    std::vector<int64_t> ranks;
    for (int64_t i = 0; i < tp; ++i) ranks.push_back(i);
    const CommGroup group = make_comm_group(cluster, devices, ranks);
    const LayerWork w = layer_work(gpt2.layers[1], shape_of(1, tp, false, Dtype::kFp16));
    const LayerTimes ops = cost.layer_times_from_ops(t4, w, Recompute::kNone, group, Dtype::kFp16);
    const LayerTimes t = cost.layer_times(t4, w, Recompute::kNone, group, Dtype::kFp16);
    ASSERT_NE(t.correction, nullptr) << "tp " << tp;
    EXPECT_NE(t.correction->source.find("imported"), std::string::npos);
    // gpt2-medium's preset block is the block AMP timed (dropout 0.1 as Megatron-LM's default).
    const double median = summarize(measured).median;
    EXPECT_NEAR(t.pass_s[0] / median, 1.0, 1e-12) << "tp " << tp;
    const double ratio = (t.pass_s[0] - ops.tp_comm_s[0]) / (ops.pass_s[0] - ops.tp_comm_s[0]);
    EXPECT_GT(ratio, 2.0);  // AMP's times are well above what the T4's datasheet predicts
    EXPECT_NEAR(t.pass_s[1] - ops.tp_comm_s[1], ratio * (ops.pass_s[1] - ops.tp_comm_s[1]), 1e-12);
    EXPECT_NEAR(t.pass_s[2], ratio * ops.pass_s[2], 1e-12);
    EXPECT_DOUBLE_EQ(t.tp_comm_s[0], ops.tp_comm_s[0]);
  }
  // Fused attention is another layer: AMP timed none.
  EXPECT_EQ(cost.layer_times(t4, layer_work(gpt2.layers[1], shape_of(1, 1, true, Dtype::kFp16)),
                             Recompute::kNone, {}, Dtype::kFp16)
                .correction,
            nullptr);
  // The embedding's entries correct gpt2-medium's embedding (vocabulary aside, the same shape);
  // the head's do not (AMP's head entries leave the loss out).
  EXPECT_NE(cost.layer_times(t4, layer_work(gpt2.layers[0], shape_of(1, 1, true, Dtype::kFp16)),
                             Recompute::kNone, {}, Dtype::kFp16)
                .correction,
            nullptr);
  EXPECT_EQ(cost.layer_times(t4, layer_work(gpt2.layers.back(), shape_of(1, 1, true, Dtype::kFp16)),
                             Recompute::kNone, {}, Dtype::kFp16)
                .correction,
            nullptr);
  int64_t heads_unused = 0;
  for (const auto& t : cost.layer_timings(t4))
    heads_unused += t.unused.find("leave out the loss") != std::string::npos;
  EXPECT_EQ(heads_unused, 3);
  // One micro-batch each: nothing to hold out.
  for (const auto& e : held_out_micro_batch_errors(cost.layer_timings(t4))) EXPECT_TRUE(e.empty());
}

TEST(ImportedLayers, TensorParallelTimingsNeedTheirNode) {
  std::vector<std::filesystem::path> files = {kExternal / "amp/known_cost/gpt2_P3_2.npy"};
  CalibrationFile amp = import_amp_known_cost(files, {});
  amp.context.node_type.clear();
  const ClusterSpec cluster = load_cluster("p3.8xlarge:1");
  const CostModel cost(fit_profile({datasheet("v100"), amp}), cluster);
  const auto& timings = cost.layer_timings(cluster.groups[0].node.gpu);
  ASSERT_FALSE(timings.empty());
  for (const auto& t : timings) EXPECT_FALSE(t.unused.empty()) << t.what;
  EXPECT_NE(timings.front().unused.find("unknown node"), std::string::npos);
}

TEST(ImportedLayers, PredictionsSayWhichLayersWereScaled) {
  std::vector<std::filesystem::path> files = {kExternal / "amp/known_cost/gpt2_G4_1.npy"};
  const ClusterSpec cluster = load_cluster("g4dn.12xlarge:1");
  const CostModel cost(fit_profile({datasheet("t4"), import_amp_known_cost(files, {})}), cluster);
  const ModelSpec model = load_model("gpt2-medium");
  const Evaluator eval(model, cluster, cost);
  Strategy s;
  s.global_batch = 4;
  s.micro_batch = 1;
  s.flash_attention = false;
  const Prediction p = eval.predict(s);
  ASSERT_TRUE(p.feasible) << p.reason;
  bool block = false, embedding = false;
  for (const auto& n : p.notes) {
    block |= n.rfind("block h1024 a16 s1024 ffn4096 tp1 unfused on t4", 0) == 0;
    embedding |= n.rfind("embedding h1024 s1024 tp1 on t4", 0) == 0;
  }
  EXPECT_TRUE(block && embedding) << fmt::format("{}", fmt::join(p.notes, " | "));
}

TEST(ImportedLayers, ProfilesKeepTheTimingsAndTheirNode) {
  std::vector<std::filesystem::path> files = {kExternal / "amp/known_cost/gpt2_G4_2.npy"};
  const Profile p = fit_profile({datasheet("t4"), import_amp_known_cost(files, {})});
  const auto path = std::filesystem::temp_directory_path() /
                    ("hetplan_layer_profile_" + std::to_string(::getpid()) + ".json");
  save_profile(p, path);
  const Profile back = profile_from_document(load_document(path));
  std::filesystem::remove(path);
  const GpuFit fit = back.gpu("t4");
  ASSERT_EQ(fit.layer_forward.size(), 30u);
  EXPECT_EQ(fit.layer_forward[2].node_type, "g4dn.12xlarge");
  EXPECT_EQ(fit.layer_forward[2].tp, 2);
  EXPECT_DOUBLE_EQ(fit.layer_forward[2].forward_s.median,
                   p.gpu("t4").layer_forward[2].forward_s.median);
}

}  // namespace
}  // namespace hetplan
