// LatentMoE (Nemotron 3 Super; Megatron-Core's moe_latent_size) and a hybrid model's
// multi-token-prediction block (mtp_hybrid_override_pattern): the model's parameters against
// Megatron-Bridge's count of the checkpoint, the experts' work at the latent width, the errors that
// name their keys, and the Megatron export's flags.
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/framework.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "report/export/exporters.h"
#include "search/evaluate.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;

const std::string kSuperConfig =
    std::string(HETPLAN_TEST_DATA) + "/hf/nemotron3-super-120b-a12b/config.json";

ModelSpec latent_model(int64_t latent) {
  const std::string text =
      "name: tiny-latent\nseq_len: 1024\nvocab: 32000\nlayers: 2\n"
      "block: {hidden: 1024, heads: 8, ffn_hidden: 512, activation: relu2, norm: rmsnorm, "
      "bias: false, experts: 16, top_k: 4, moe_latent: " +
      std::to_string(latent) + "}\n";
  return parse_model(parse_document(text, "l.yaml", DocumentFormat::kYaml));
}

const GemmOp* gemm(const LayerWork& w, const std::string& name, Pass pass) {
  for (const GemmOp& g : w.gemms)
    if (g.name == name && g.pass == pass) return &g;
  return nullptr;
}

const CommOp* comm(const LayerWork& w, const std::string& name) {
  for (const CommOp& c : w.comms)
    if (c.name == name) return &c;
  return nullptr;
}

TEST(LatentMoe, NemotronSuperHasTheCheckpointsParameters) {
  const ModelSpec m = load_model(kSuperConfig);
  // Megatron-Bridge's verification card (examples/model_verification_cards/
  // nemotron-3-super-120b-a12b/card.yaml at 067f987df03b): its export "reproduces all 42,683
  // source tensors and 123,611,033,088 elements, including the 41 FP32 router correction-bias
  // tensors" (one of 512 per MoE layer, the MTP module's included: a load-balancing buffer, not
  // a trained parameter).
  EXPECT_EQ(m.parameters(), int64_t{123611033088} - 41 * 512);
  // "A12B": about 12 billion parameters a token runs.
  EXPECT_GT(m.activated_parameters(), int64_t{12'000'000'000});
  EXPECT_LT(m.activated_parameters(), int64_t{13'000'000'000});
  // 88 layers and one MTP module of attention and LatentMoE ("*E").
  ASSERT_EQ(m.num_blocks(), 89);
  const TransformerLayer& mtp = *m.layers[89].block();
  EXPECT_GT(mtp.mtp_vocab, 0);
  EXPECT_TRUE(mtp.has_attention());
  EXPECT_TRUE(mtp.is_moe());
  EXPECT_EQ(mtp.moe_latent, 1024);
  EXPECT_EQ(hybrid_mtp_pattern(mtp), "*E");
}

TEST(LatentMoe, TheConfigIsThePreset) {
  const ModelSpec a = load_model(kSuperConfig);
  const ModelSpec b = load_model("nemotron3-super-120b-a12b");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 1; i + 1 < a.layers.size(); ++i)
    EXPECT_EQ(*a.layers[i].block(), *b.layers[i].block()) << i;
  EXPECT_EQ(a.parameters(), b.parameters());
}

TEST(LatentMoe, TheExpertsRunAtTheLatentWidth) {
  const ModelSpec plain = latent_model(0);
  const ModelSpec latent = latent_model(256);
  // In each of the two blocks, the projections in and out (1024 x 256 each, whole on every rank)
  // replace three quarters of each expert's fc1 input and fc2 output.
  EXPECT_EQ(latent.parameters() - plain.parameters(),
            2 * (2 * 1024 * 256 - 16 * (2 * 512 * (1024 - 256))));
  LayerShape shape;
  shape.ep = 4;
  shape.dispatcher = MoeDispatcher::kAllToAll;
  const LayerWork p = layer_work(plain.layers[1], shape);
  const LayerWork l = layer_work(latent.layers[1], shape);
  const GemmOp* down = gemm(l, "moe_latent_down", Pass::kForward);
  ASSERT_NE(down, nullptr);
  EXPECT_EQ(down->shape.m, 256);   // out
  EXPECT_EQ(down->shape.k, 1024);  // in
  const GemmOp* up = gemm(l, "moe_latent_up", Pass::kForward);
  ASSERT_NE(up, nullptr);
  EXPECT_EQ(up->shape.m, 1024);
  EXPECT_EQ(up->shape.k, 256);
  EXPECT_EQ(gemm(p, "moe_latent_down", Pass::kForward), nullptr);
  // The experts read and write the latent; the all-to-alls move a quarter of the bytes.
  EXPECT_EQ(gemm(l, "fc1", Pass::kForward)->shape.k, 256);
  EXPECT_EQ(gemm(l, "fc2", Pass::kForward)->shape.m, 256);
  ASSERT_NE(comm(p, "moe_dispatch_a2a"), nullptr);
  EXPECT_DOUBLE_EQ(comm(l, "moe_dispatch_a2a")->bytes * 4, comm(p, "moe_dispatch_a2a")->bytes);
  EXPECT_DOUBLE_EQ(comm(l, "moe_combine_a2a")->bytes * 4, comm(p, "moe_combine_a2a")->bytes);
}

TEST(LatentMoe, BadLatentsAndMtpPatternsNameTheirKeys) {
  std::string e = error_of([] {
    parse_model(
        parse_document("name: d\nseq_len: 128\nvocab: 100\nlayers: 1\n"
                       "block: {hidden: 64, heads: 2, ffn_hidden: 128, moe_latent: 32}\n",
                       "d.yaml", DocumentFormat::kYaml));
  });
  EXPECT_TRUE(contains(e, "moe_latent")) << e;
  EXPECT_TRUE(contains(e, "a latent belongs to a mixture of experts")) << e;
  const std::string base = R"({"model_type": "nemotron_h", "hidden_size": 64,
      "num_hidden_layers": 2, "num_attention_heads": 2, "vocab_size": 100,
      "mamba_num_heads": 2, "mamba_head_dim": 32, "ssm_state_size": 16,
      "hybrid_override_pattern": "M*")";
  e = error_of([&] {
    model_from_hf_config(
        parse_document(base + R"(, "moe_latent_size": 16})", "c.json", DocumentFormat::kJson));
  });
  EXPECT_TRUE(contains(e, "c.json")) << e;
  EXPECT_TRUE(contains(e, "moe_latent_size: a latent needs routed experts")) << e;
  e = error_of([&] {
    model_from_hf_config(parse_document(
        base + R"(, "num_nextn_predict_layers": 1, "mtp_hybrid_override_pattern": "**"})", "c.json",
        DocumentFormat::kJson));
  });
  EXPECT_TRUE(contains(e, "mtp_hybrid_override_pattern")) << e;
  EXPECT_TRUE(contains(e, "expected one letter, or * followed by - or E")) << e;
  // Without a - layer, intermediate_size may be left out; with one it is required.
  e = error_of([&] {
    model_from_hf_config(parse_document(
        R"({"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "vocab_size": 100, "mamba_num_heads": 2, "mamba_head_dim": 32,
        "ssm_state_size": 16, "hybrid_override_pattern": "M-"})",
        "c.json", DocumentFormat::kJson));
  });
  EXPECT_TRUE(contains(e, "intermediate_size: missing: expected the MLP width")) << e;
}

TEST(LatentMoe, TheMegatronExportWritesTheLatentAndTheMtpPattern) {
  const ModelSpec m = load_model("nemotron3-super-120b-a12b");
  Strategy s;
  s.dp = 64;
  s.ep = 64;
  s.global_batch = 64;
  const ExportResult r = export_megatron(m, s, {});
  EXPECT_TRUE(r.unsupported.empty()) << r.unsupported.front();
  EXPECT_TRUE(contains(r.text, "--moe-latent-size 1024")) << r.text;
  // The MTP depth after a / (Megatron-LM infers --mtp-num-layers from the pattern and refuses
  // the flag without it).
  EXPECT_TRUE(contains(r.text, "EMEMEMEME/*E\"")) << r.text;
  EXPECT_FALSE(contains(r.text, "--mtp-num-layers")) << r.text;
  EXPECT_TRUE(contains(r.text, "--num-layers 88")) << r.text;
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

// Megatron-Bridge's Super recipes run the config's one MTP module twice over shared weights
// (mtp_num_layers 2, mtp_use_repeated_layer): examples/models/published's model file.
const std::string kSuperMtp2 = std::string(HETPLAN_SOURCE_DIR) +
                               "/examples/models/published/nemotron3-super-120b-a12b-mtp2.yaml";

TEST(RepeatedMtp, TheSecondDepthRunsTheFirstsWeights) {
  const ModelSpec one = load_model("nemotron3-super-120b-a12b");
  const ModelSpec two = load_model(kSuperMtp2);
  EXPECT_EQ(two.num_blocks(), one.num_blocks() + 1);
  EXPECT_EQ(two.parameters(), one.parameters());
  EXPECT_EQ(two.activated_parameters(), one.activated_parameters());
  const LayerSpec& repeat = two.layers[90];
  ASSERT_TRUE(repeat.block() && repeat.block()->mtp_repeat);
  EXPECT_EQ(layer_parameters(repeat), 0);
  EXPECT_EQ(layer_parameters(repeat, 1, /*unique=*/false), layer_parameters(two.layers[89]));
  // Its work is the first depth's.
  LayerShape shape;
  shape.ep = 64;
  shape.dispatcher = MoeDispatcher::kAllToAll;
  EXPECT_EQ(layer_work(repeat, shape).gemms.size(), layer_work(two.layers[89], shape).gemms.size());
  // The Megatron export repeats the MTP pattern per depth and says the weights are shared.
  Strategy s;
  s.dp = 64;
  s.ep = 64;
  s.global_batch = 64;
  const ExportResult r = export_megatron(two, s, {});
  EXPECT_TRUE(r.unsupported.empty()) << r.unsupported.front();
  EXPECT_TRUE(contains(r.text, "EMEMEMEME/*E/*E\"")) << r.text;
  EXPECT_TRUE(contains(r.text, "--mtp-use-repeated-layer")) << r.text;
}

TEST(RepeatedMtp, TheDeviceHoldsTheSharedWeightsOnce) {
  const ModelSpec two = load_model(kSuperMtp2);
  ModelSpec separate = two;
  std::get<TransformerLayer>(separate.layers[90].op).mtp_repeat = false;
  const ClusterSpec cluster = load_cluster("dgx-b200:8");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  Strategy s;
  s.dp = 64;
  s.ep = 64;
  s.global_batch = 64;
  s.zero = 1;
  const Prediction shared =
      Evaluator(two, cluster, cost, load_framework("megatron-core")).predict(s);
  const Prediction apart =
      Evaluator(separate, cluster, cost, load_framework("megatron-core")).predict(s);
  ASSERT_FALSE(shared.peak_memory_bytes.empty());
  // At least its bf16 weights and fp32 gradients (6 B) of the module's share on a rank.
  const double held = static_cast<double>(layer_parameters(two.layers[90], 1, false, 64));
  EXPECT_GT(apart.peak_memory_bytes[0] - shared.peak_memory_bytes[0], 6 * held);
}

TEST(RepeatedMtp, ARepeatNeedsAModuleToRepeat) {
  const std::string e = error_of([] {
    parse_model(parse_document(
        "name: d\nseq_len: 128\nvocab: 100\nlayers: 1\nmtp_layers: 1\nmtp_repeated: true\n"
        "block: {hidden: 64, heads: 2, ffn_hidden: 128}\n",
        "d.yaml", DocumentFormat::kYaml));
  });
  EXPECT_TRUE(contains(e, "d.yaml")) << e;
  EXPECT_TRUE(contains(e, "mtp_repeated: expected mtp_layers of 2 or more")) << e;
}

}  // namespace
}  // namespace hetplan
