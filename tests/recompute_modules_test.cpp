// Megatron-Core's --recompute-modules (issue 37): what each module re-runs in backward and the
// activations it drops, against values worked out by hand from the layer decomposition; the
// strategy key, the rules and the Megatron export.
#include <gtest/gtest.h>

#include "costmodel/layer_ops.h"
#include "costmodel/model.h"
#include "report/export/exporters.h"
#include "search/rules.h"
#include "search/strategy.h"
#include "test_util.h"

namespace hetplan {
namespace {

using testing::contains;
using testing::error_of;
using M = RecomputeModule;

// A LLaMA-style block over 1024 tokens (testing::llama_block).
LayerSpec dense_block() { return testing::llama_block(1024); }

// The same attention with 8 experts of SwiGLU 512, top-2.
LayerSpec moe_block() { return testing::moe_block(8, 2); }

Recomputation selective(std::initializer_list<M> modules) {
  OpGroup g = OpGroup::kDefault;
  for (M m : modules) g = g | module_group(m);
  return {Recompute::kSelective, g};
}

double dropped(const LayerWork& w, std::initializer_list<M> modules) {
  return w.activation(Recompute::kNone) - w.activation(selective(modules));
}

TEST(RecomputeModules, NamesAreMegatronsAndSelectiveAloneIsCoreAttention) {
  RecomputeModule m;
  ASSERT_TRUE(parse_recompute_module("mla_up_proj", m));
  EXPECT_EQ(m, M::kMlaUpProj);
  EXPECT_FALSE(parse_recompute_module("moe_layer", m));
  EXPECT_EQ(recompute_module_names(),
            "core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts");
  EXPECT_EQ(Recomputation(Recompute::kSelective), selective({M::kCoreAttn}));
  // Modules mean nothing outside selective.
  EXPECT_EQ(Recomputation(Recompute::kFull, module_group(M::kMlp)),
            Recomputation(Recompute::kFull));
  // Unfused attention: core_attn as selective alone always meant (Korthikanti et al. 2022).
  LayerShape unfused;
  unfused.flash_attention = false;
  const LayerWork w = layer_work(dense_block(), unfused);
  EXPECT_EQ(w.activation(selective({M::kCoreAttn})), w.activation(Recompute::kSelective));
  EXPECT_LT(w.activation(Recompute::kSelective), w.activation(Recompute::kNone));
}

TEST(RecomputeModules, MlpDropsItsInsideAndRerunsItsForward) {
  const LayerWork w = layer_work(dense_block(), LayerShape{});
  // 1024 tokens x 2816 = 2,883,584 activation elements: its two bf16 inputs (gate and up,
  // 11,534,336 bytes) and its output, fc2's input (5,767,168); fc1's input is the checkpoint's.
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMlp}), 17'301'504.0);
  // fc1, the SwiGLU and fc2 forward run again; at tp 1 there is no collective.
  EXPECT_DOUBLE_EQ(layer_kernels(w, selective({M::kMlp})).recompute, 3);
  EXPECT_DOUBLE_EQ(layer_kernels(w, Recompute::kSelective).recompute, 0);  // flash: nothing
  // A dense block has no MoE, MLA or separate norm: those drop nothing.
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMoe, M::kMoeAct, M::kLayernorm, M::kMlaUpProj}), 0);
  EXPECT_TRUE(has_module(w.modules, M::kMlp));
  EXPECT_FALSE(has_module(w.modules, M::kLayernorm));
  // tp 2 with sequence parallelism: the MLP's gather and reduce-scatter forward run again too,
  // and each rank keeps half the elements.
  LayerShape tp2;
  tp2.tp = 2;
  tp2.sequence_parallel = true;
  const LayerWork w2 = layer_work(dense_block(), tp2);
  EXPECT_DOUBLE_EQ(layer_kernels(w2, selective({M::kMlp})).recompute, 5);
  EXPECT_DOUBLE_EQ(dropped(w2, {M::kMlp}), 17'301'504.0 / 2);
}

TEST(RecomputeModules, MoeActLayernormAndTheWholeMoeLayer) {
  const LayerWork w = layer_work(moe_block(), LayerShape{});
  // 1024 tokens x top-2 = 2048 copies, 256 per expert, of 512 wide: 1,048,576 activation
  // elements. moe_act drops its output (fc2's input, 2,097,152 bytes) and re-runs the SwiGLU.
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMoeAct}), 2'097'152.0);
  EXPECT_DOUBLE_EQ(layer_kernels(w, selective({M::kMoeAct})).recompute, 1);
  // layernorm drops the pre-MLP norm's output (1024 x 1024 x 2 = 2,097,152), which the router
  // keeps, and re-runs that norm (the input norm is fused into the QKV projection).
  EXPECT_DOUBLE_EQ(dropped(w, {M::kLayernorm}), 2'097'152.0);
  EXPECT_DOUBLE_EQ(layer_kernels(w, selective({M::kLayernorm})).recompute, 1);
  EXPECT_DOUBLE_EQ(dropped(w, {M::kLayernorm, M::kMoeAct}), 4'194'304.0);
  // moe keeps the norm's output (its input) and drops the dispatched inputs (2048 x 1024 x 2 =
  // 4,194,304), the activation's inputs (4,194,304) and output (2,097,152) and the experts'
  // outputs kept for the unpermutation (4,194,304): 14,680,064; with moe_act no more.
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMoe}), 14'680'064.0);
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMoe, M::kMoeAct}), 14'680'064.0);
  // It re-runs the router GEMM, top-k, the permutation, fc1, the SwiGLU, fc2 and the
  // unpermutation.
  EXPECT_DOUBLE_EQ(layer_kernels(w, selective({M::kMoe})).recompute, 7);
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMlp}), 0);
}

TEST(RecomputeModules, MlaUpProjectionsAndSharedExperts) {
  const ModelSpec m = load_model("deepseek-v3");
  const LayerWork w = layer_work(m.layers[4], LayerShape{});  // the first MoE layer, 4096 tokens
  // mla_up_proj drops the queries and keys (4096 x 128 heads x 192 x 2 = 201,326,592 each), the
  // values (x 128: 134,217,728) and the normed KV latent (4096 x 512 x 2 = 4,194,304).
  EXPECT_DOUBLE_EQ(dropped(w, {M::kMlaUpProj}), 541'065'216.0);
  // It re-runs the two latents' norms, q_up, kv_up, rotary and the keys' join.
  EXPECT_DOUBLE_EQ(layer_kernels(w, selective({M::kMlaUpProj})).recompute, 6);
  // layernorm: MLA's input norm is apart, and the MoE's: two outputs of 4096 x 7168 x 2.
  EXPECT_DOUBLE_EQ(dropped(w, {M::kLayernorm}), 2 * 58'720'256.0);
  // One shared expert of 2048: its activation's inputs and output over 4096 tokens.
  EXPECT_DOUBLE_EQ(dropped(w, {M::kSharedExperts}), 4096.0 * 2048 * 2 * 3);
  // What the model has.
  const OpGroup has = recompute_modules_of(m);
  for (M x : {M::kCoreAttn, M::kMlp, M::kMoeAct, M::kLayernorm, M::kMlaUpProj, M::kMoe,
              M::kSharedExperts})
    EXPECT_TRUE(has_module(has, x)) << to_string(x);
  const OpGroup llama = recompute_modules_of(load_model("llama3-8b"));
  EXPECT_EQ(modules_of(llama), (std::vector<M>{M::kCoreAttn, M::kMlp}));
}

using testing::read_strategy;

TEST(RecomputeModules, StrategyKeyReadsWritesAndNamesWhatItExpects) {
  const Strategy s =
      read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
               "recompute": "selective", "recompute_modules": ["mlp", "mla_up_proj"]})");
  EXPECT_EQ(s.recomputation(), selective({M::kMlp, M::kMlaUpProj}));
  EXPECT_EQ(s.recompute_label(), "selective(mla_up_proj,mlp)");
  EXPECT_EQ(to_json(s)["recompute_modules"], Json::parse(R"(["mla_up_proj", "mlp"])"));
  // Selective alone writes no modules, as before.
  const Strategy old =
      read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                                "recompute": "selective"})");
  EXPECT_FALSE(to_json(old).contains("recompute_modules"));
  EXPECT_EQ(old.recomputation(), Recomputation(Recompute::kSelective));
  const std::string unknown = error_of([] {
    read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
             "recompute": "selective", "recompute_modules": ["moe_layer"]})");
  });
  EXPECT_TRUE(contains(unknown, "recompute_modules")) << unknown;
  EXPECT_TRUE(contains(unknown, "core_attn, moe_act, layernorm")) << unknown;
  EXPECT_TRUE(contains(unknown, "\"moe_layer\"")) << unknown;
  const std::string full = error_of([] {
    read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
             "recompute": "full", "recompute_modules": ["mlp"]})");
  });
  EXPECT_TRUE(contains(full, "needs recompute \"selective\", found \"full\"")) << full;
}

TEST(RecomputeModules, RulesRefuseModulesTheModelOrFrameworkLacks) {
  const ModelSpec llama = load_model("llama3-8b");
  const FrameworkSpec mc = load_framework("megatron-core"), ds = load_framework("deepspeed");
  auto broken = [](const ModelSpec& model, const FrameworkSpec& f, const Strategy& s) {
    const auto v = first_broken_rule({model, f, 8}, s);
    return v ? v->key + ": " + v->reason : std::string("none");
  };
  Strategy s;
  s.global_batch = 8;
  s.dp = 8;
  s.recompute = Recompute::kSelective;
  s.recompute_modules = module_group(M::kMlaUpProj);
  EXPECT_EQ(broken(llama, mc, s),
            "recompute_modules: recompute_modules mla_up_proj: the model has no MLA attention "
            "(Megatron-Core: mla_up_proj is only supported with multi_latent_attention)");
  s.recompute_modules = module_group(M::kMoeAct);
  EXPECT_TRUE(contains(broken(llama, mc, s), "moe_act is only supported with moe_grouped_gemm"));
  s.recompute_modules = module_group(M::kMlp);
  EXPECT_EQ(broken(llama, mc, s), "none");
  EXPECT_EQ(broken(llama, ds, s),
            "recompute_modules: deepspeed recomputes the modules core_attn selectively, not mlp");
}

TEST(RecomputeModules, MegatronExportSpellsOutTheModules) {
  const ModelSpec m = load_model("deepseek-v3");
  Strategy s = read_strategy(R"({"dp": 1, "tp": 1, "pp": 1, "micro_batch": 1, "global_batch": 1,
                        "recompute": "selective",
                        "recompute_modules": ["mla_up_proj", "mlp"]})");
  const std::string text = export_megatron(m, s, {}).text;
  EXPECT_TRUE(contains(text,
                       "  --recompute-granularity selective\n"
                       "  --recompute-modules mla_up_proj mlp\n"))
      << text;
  s.recompute_modules = OpGroup::kDefault;  // core_attn, Megatron-Core's default: not spelled out
  EXPECT_FALSE(contains(export_megatron(m, s, {}).text, "--recompute-modules"));
}

}  // namespace
}  // namespace hetplan
