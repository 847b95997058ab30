// Hybrid models of Mamba-2, attention and MoE layers (Megatron-Core's hybrid_override_pattern;
// Nemotron-H, Nemotron 3): the model file's hybrid_pattern and mamba, a Mamba-2 layer's
// parameters and ops, the parallelism it refuses, and the evaluator end to end.
#include <algorithm>

#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "costmodel/profile.h"
#include "report/export/exporters.h"
#include "search/evaluate.h"
#include "search/search.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;

constexpr double kNormStatBytesForTests = 8;  // mean and rstd per token, fp32

ModelSpec hybrid(const std::string& extra) {
  const std::string text =
      "name: tiny-hybrid\nseq_len: 1024\nvocab: 32000\n"
      "block: {hidden: 1024, heads: 8, kv_heads: 2, head_dim: 128, ffn_hidden: 512, "
      "activation: relu, norm: rmsnorm, bias: false, experts: 8, top_k: 2}\n" +
      extra;
  return parse_model(parse_document(text, "h.yaml", DocumentFormat::kYaml));
}

ModelSpec parse_model_text_hf(const std::string& json) {
  return model_from_hf_config(parse_document(json, "config.json", DocumentFormat::kJson));
}

const char* const kMamba = "mamba: {heads: 32, head_dim: 64, state: 128, groups: 4}\n";

TEST(HybridMamba, ThePatternBuildsOneMixerALayer) {
  const ModelSpec m = hybrid(std::string(kMamba) + "hybrid_pattern: \"ME*-\"\nlayers: 4\n");
  ASSERT_EQ(m.layers.size(), 6u);  // embedding, four layers, head
  const TransformerLayer& mamba = *m.layers[1].block();
  EXPECT_TRUE(mamba.mamba.enabled());
  EXPECT_FALSE(mamba.has_attention());
  EXPECT_FALSE(mamba.has_mlp());
  EXPECT_EQ(mamba.mamba.chunk, 128);  // the defaults: chunk 128, conv 4
  EXPECT_EQ(mamba.mamba.conv_kernel, 4);
  const TransformerLayer& moe = *m.layers[2].block();
  EXPECT_TRUE(moe.is_moe());
  EXPECT_FALSE(moe.has_attention());
  const TransformerLayer& attention = *m.layers[3].block();
  EXPECT_TRUE(attention.has_attention());
  EXPECT_FALSE(attention.has_mlp());
  const TransformerLayer& mlp = *m.layers[4].block();
  EXPECT_FALSE(mlp.is_moe());
  EXPECT_TRUE(mlp.has_mlp());
  EXPECT_FALSE(mlp.has_attention());
}

TEST(HybridMamba, BadPatternsNameTheKey) {
  std::string e =
      error_of([] { hybrid(std::string(kMamba) + "hybrid_pattern: \"MX\"\nlayers: 2\n"); });
  EXPECT_TRUE(contains(e, "hybrid_pattern")) << e;
  EXPECT_TRUE(contains(e, "found 'X' at 1")) << e;
  e = error_of([] { hybrid(std::string(kMamba) + "hybrid_pattern: \"M*\"\nlayers: 3\n"); });
  EXPECT_TRUE(contains(e, "expected the 2 layers of hybrid_pattern, found 3")) << e;
  e = error_of([] { hybrid("hybrid_pattern: \"M*\"\nlayers: 2\n"); });
  EXPECT_TRUE(contains(e, "mamba")) << e;
  e = error_of([] {
    parse_model(
        parse_document("name: d\nseq_len: 1024\nvocab: 100\nblock: {hidden: 64, heads: 2}\n"
                       "hybrid_pattern: \"E*\"\nlayers: 2\n",
                       "d.yaml", DocumentFormat::kYaml));
  });
  EXPECT_TRUE(contains(e, "an E layer needs experts > 1")) << e;
}

TEST(HybridMamba, TheMixersParametersAreMegatronCores) {
  // Nemotron 3 Nano's Mamba-2 layer: in_proj 2688 -> 2 x 4096 + 2 x 8 x 128 + 64 = 10304, the
  // conv1d's 4 taps and a bias over 4096 + 2 x 8 x 128 = 6144 channels, dt_bias, A_log and D, the
  // gated norm's 4096 gains, out_proj 4096 -> 2688 and the pre-norm's 2688.
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  const LayerSpec& mamba = m.layers[1];
  ASSERT_TRUE(mamba.block()->mamba.enabled());
  const int64_t expected =
      2688 * 10304 + 6144 * 5 + 3 * 64 + 4096 + 4096 * 2688 + 2688;  // 38,744,896
  EXPECT_EQ(layer_parameters(mamba), expected);
  EXPECT_EQ(layer_parameters(mamba, 2),
            (2688 * 10304 + 6144 * 5 + 3 * 64 + 4096 + 4096 * 2688) / 2 + 2688);
  // The whole model: 31.58B, 3.23B activated without the input embedding.
  EXPECT_NEAR(static_cast<double>(m.parameters()) / 1e9, 31.58, 0.01);
  EXPECT_NEAR(static_cast<double>(m.activated_parameters()) / 1e9, 3.23, 0.01);
}

TEST(HybridMamba, AMambaLayersWorkIsItsProjectionsAndItsScan) {
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  LayerShape shape;
  const LayerWork w = layer_work(m.layers[1], shape);
  const auto find = [&](const std::string& name, Pass pass) -> const GemmOp* {
    for (const GemmOp& g : w.gemms)
      if (g.name == name && g.pass == pass) return &g;
    return nullptr;
  };
  const GemmOp* in_proj = find("mamba_in_proj", Pass::kForward);
  ASSERT_NE(in_proj, nullptr);
  EXPECT_EQ(in_proj->shape, (GemmShape{10304, 8192, 2688, 1, true, false}));
  const GemmOp* out_proj = find("mamba_out_proj", Pass::kForward);
  ASSERT_NE(out_proj, nullptr);
  EXPECT_EQ(out_proj->shape, (GemmShape{2688, 8192, 4096, 1, true, false}));
  // 8192 tokens in 64 chunks of 128: C B^T per chunk and group, the rest per chunk and head.
  const GemmOp* cb = find("ssd_cb", Pass::kForward);
  ASSERT_NE(cb, nullptr);
  EXPECT_EQ(cb->shape, (GemmShape{128, 128, 128, 64 * 8, false, false}));
  const GemmOp* diag = find("ssd_scan_diag", Pass::kForward);
  ASSERT_NE(diag, nullptr);
  EXPECT_EQ(diag->shape, (GemmShape{128, 64, 128, 64 * 64, false, false}));
  // Each scan matmul's backward: the gradients of both its operands.
  EXPECT_EQ(std::count_if(w.gemms.begin(), w.gemms.end(),
                          [](const GemmOp& g) {
                            return g.pass == Pass::kBackwardInput && g.name.rfind("ssd_", 0) == 0;
                          }),
            8);
  // Weight gradients: the two projections' GEMMs alone.
  EXPECT_EQ(std::count_if(w.gemms.begin(), w.gemms.end(),
                          [](const GemmOp& g) { return g.pass == Pass::kBackwardWeight; }),
            2);
  EXPECT_TRUE(w.comms.empty());  // tp 1
  EXPECT_EQ(describe(w.key), "mamba2 h2688 m64x64 n128 s8192 tp1");

  shape.tp = 2;
  const LayerWork half = layer_work(m.layers[1], shape);
  bool reduced = false;
  for (const CommOp& c : half.comms) reduced = reduced || c.name == "mamba_allreduce";
  EXPECT_TRUE(reduced);  // out_proj's row-parallel output
  for (const GemmOp& g : half.gemms)
    if (g.name == "mamba_in_proj" && g.pass == Pass::kForward) EXPECT_EQ(g.shape.m, 10304 / 2);
}

// What a Mamba-2 layer keeps for backward, as Megatron-Core's memory-efficient path does
// (mamba_mixer.py _ssm_training at d98e8a64dd; mamba_ssm's MambaSplitConv1dScanCombinedFn saves
// in_proj's output and the scan's output, and recomputes the conv's): per token, bf16 values of
// the pre-norm's input and in_proj's input (hidden each), in_proj's output (z, x, B, C, dt), the
// scan's output and the gated output the norm reads (d_inner each), out_proj's input (d_inner),
// and the two norms' fp32 statistics.
TEST(HybridMamba, AMambaLayerKeepsWhatTheMemoryEfficientPathSaves) {
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  LayerShape shape;
  const LayerWork w = layer_work(m.layers[1], shape);
  const double T = 8192, h = 2688, inner = 64 * 64, in_width = 10304;
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kNone),
                   T * (2 * (2 * h + in_width + 3 * inner) + 2 * kNormStatBytesForTests));
}

TEST(HybridMamba, ANemotronHConfigIsThePreset) {
  const ModelSpec a =
      load_model(std::string(HETPLAN_TEST_DATA) + "/hf/nemotron3-nano-30b-a3b/config.json");
  const ModelSpec b = load_model("nemotron3-nano-30b-a3b");
  ASSERT_EQ(a.layers.size(), b.layers.size());
  for (size_t i = 1; i + 1 < a.layers.size(); ++i)
    EXPECT_EQ(*a.layers[i].block(), *b.layers[i].block()) << i;
  EXPECT_EQ(a.parameters(), b.parameters());
  EXPECT_EQ(a.seq_len, 4096);  // a long-context config's default; the preset trains at 8192
  const std::string e = error_of([] {
    parse_model_text_hf(R"({"model_type": "nemotron_h", "hidden_size": 64, "num_hidden_layers": 2,
        "num_attention_heads": 2, "intermediate_size": 128, "vocab_size": 100,
        "mamba_num_heads": 2, "mamba_head_dim": 32, "ssm_state_size": 16,
        "hybrid_override_pattern": "M*M"})");
  });
  EXPECT_TRUE(contains(e, "hybrid_override_pattern")) << e;
  EXPECT_TRUE(contains(e, "expected one entry per layer (2), found 3")) << e;
}

TEST(HybridMamba, TheRulesNameTheMambaLayer) {
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  std::string why = tensor_parallel_problem(m, 16);
  EXPECT_TRUE(contains(why, "tp 16 does not divide the 64 Mamba-2 heads and 8 groups")) << why;
  EXPECT_EQ(tensor_parallel_problem(m, 2), "");
  why = context_parallel_problem(m, 2);
  EXPECT_TRUE(contains(why, "context parallelism over the Mamba-2 layer block0")) << why;
}

TEST(HybridMamba, OnlyTheMegatronExportWritesAHybridModel) {
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  Strategy s;
  s.dp = 16;
  s.ep = 8;
  s.global_batch = 16;
  const ExportResult tt = export_torchtitan(m, s, {});
  ASSERT_FALSE(tt.unsupported.empty());
  EXPECT_TRUE(contains(tt.unsupported.front(),
                       "is a hybrid model (layers MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEMEM*"))
      << tt.unsupported.front();
  const ExportResult mg = export_megatron(m, s, {});
  EXPECT_TRUE(mg.unsupported.empty()) << mg.unsupported.front();
  EXPECT_TRUE(contains(mg.text, "--hybrid-layer-pattern \"MEMEM*EMEMEM*EMEMEM*EMEMEM*EMEMEM*"))
      << mg.text;
  // A hybrid layer that holds attention and an MLP together has no letter.
  ModelSpec mixed = m;
  auto& b = std::get<TransformerLayer>(mixed.layers[6].op);  // an attention layer
  b.ffn_hidden = 128;
  const ExportResult bad = export_megatron(mixed, s, {});
  ASSERT_FALSE(bad.unsupported.empty());
  EXPECT_TRUE(contains(bad.unsupported.front(), "holds attention and an MLP together"))
      << bad.unsupported.front();
}

TEST(HybridMamba, TheSearchPlansAHybridModel) {
  const ModelSpec m = load_model("nemotron3-nano-30b-a3b");
  const ClusterSpec cluster = load_cluster("dgx-h100:2");
  const CostModel cost(load_profile_inputs({default_calibration_dir().string()}), cluster);
  const Evaluator ev(m, cluster, cost, load_framework("megatron-core"));
  SearchOptions o;
  o.global_batch = 64;
  o.top_k = 1;
  const SearchResult r = search_training(ev, o);
  ASSERT_FALSE(r.top.empty());
  const Prediction& best = r.top.front().predicted;
  EXPECT_TRUE(best.feasible) << best.reason;
  EXPECT_EQ(r.top.front().strategy.cp, 1);  // the Mamba-2 layers refuse context parallelism
  EXPECT_GT(best.tokens_per_s, 0);
}

}  // namespace
}  // namespace hetplan
