// --layers MODEL planning: the layer GEMMs (from costmodel's layer_work) and the timing cases.
#include "profiler/common/layer_plan.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace hetplan::profiler {
namespace {

bool has_case(const std::vector<GemmCase>& cases, const GemmShape& s, const std::string& origin) {
  return std::any_of(cases.begin(), cases.end(),
                     [&](const GemmCase& c) { return c.shape == s && c.origin == origin; });
}

TEST(LayerPlan, IdenticalBlocksFormOneGroup) {
  const ModelSpec m = load_model("gpt2-medium");
  const auto groups = group_identical_layers(m);
  ASSERT_EQ(groups.size(), 3u);  // embedding, 24 blocks, LM head
  EXPECT_EQ(groups[1].count, 24);
  EXPECT_EQ(groups[1].name, "block0..block23");
}

TEST(LayerPlan, Gpt2MediumGemmsHaveFrameworkTransposes) {
  const ModelSpec m = load_model("gpt2-medium");
  const auto cases = layer_gemm_cases(m, {1, 2, 4, 8}, {1, 2, 4, 8}, {Dtype::kBf16});
  // Per micro-batch and width: 4 block linears and the LM head, each F, B and W.
  EXPECT_EQ(cases.size(), 4u * 4u * 5u * 3u);
  // QKV at micro-batch 1, tp 1 (hidden 1024, 1024 tokens, out 3 * 1024):
  //   F TN (m = out, n = tokens, k = in), B NN (m = in, n = tokens, k = out), W NT (m = in,
  //   n = out, k = tokens).
  const std::string qkv = "gpt2-medium/block0..block23/qkv/";
  EXPECT_TRUE(has_case(cases, {3072, 1024, 1024, 1, true, false}, qkv + "F/mb1/tp1"));
  EXPECT_TRUE(has_case(cases, {1024, 1024, 3072, 1, false, false}, qkv + "B/mb1/tp1"));
  EXPECT_TRUE(has_case(cases, {1024, 3072, 1024, 1, false, true}, qkv + "W/mb1/tp1"));
  // fc2 at tp 4 is row-parallel: in = 4096 / 4; micro-batch 8 gives 8192 tokens.
  EXPECT_TRUE(has_case(cases, {1024, 8192, 1024, 1, true, false},
                       "gpt2-medium/block0..block23/fc2/F/mb8/tp4"));
  // LM head: vocabulary 50257 padded to a multiple of 128 * tp (Megatron-LM): 50304 at tp 1,
  // 50432 / 2 = 25216 at tp 2.
  EXPECT_TRUE(
      has_case(cases, {50304, 1024, 1024, 1, true, false}, "gpt2-medium/lm_head/logits/F/mb1/tp1"));
  EXPECT_TRUE(
      has_case(cases, {25216, 1024, 1024, 1, true, false}, "gpt2-medium/lm_head/logits/F/mb1/tp2"));
}

TEST(LayerPlan, SharedShapesAreMeasuredOnceWithBothOrigins) {
  const ModelSpec m = load_model("gpt2-medium");
  const auto cases = layer_gemm_cases(m, {1}, {1, 4}, {Dtype::kBf16});
  const auto items = gemm_items(cases, "layer_gemm", false);
  // attn_out F at tp 1 (k = 1024) and fc2 F at tp 4 (k = 4096 / 4) are the same product.
  const auto it = std::find_if(items.begin(), items.end(), [](const PlanItem& i) {
    return i.key == "gemm/bf16/1024x1024x1024x1/TN";
  });
  ASSERT_NE(it, items.end());
  const Json& origins = it->spec["origins"];
  EXPECT_NE(
      std::find(origins.begin(), origins.end(), "gpt2-medium/block0..block23/attn_out/F/mb1/tp1"),
      origins.end());
  EXPECT_NE(std::find(origins.begin(), origins.end(), "gpt2-medium/block0..block23/fc2/F/mb1/tp4"),
            origins.end());
  EXPECT_LT(items.size(), cases.size());
}

TEST(LayerPlan, WidthsThatDoNotDivideAreSkippedWithAReason) {
  const ModelSpec m = load_model("llama2-7b");
  std::vector<std::string> skipped;
  const auto cases = layer_gemm_cases(m, {1}, {3, 2}, {Dtype::kBf16}, &skipped);
  ASSERT_EQ(skipped.size(), 1u);
  EXPECT_NE(skipped[0].find("tp 3"), std::string::npos);
  EXPECT_EQ(cases.size(), 5u * 3u);  // tp 2 only
}

TEST(LayerPlan, TimingCasesPerStyle) {
  const auto gpt =
      layer_timing_cases(load_model("gpt2-medium"), {1, 2, 4, 8}, {1, 2, 4, 8}, Dtype::kBf16);
  ASSERT_EQ(gpt.size(), 16u);
  EXPECT_EQ(gpt[0].style, "gpt");
  EXPECT_TRUE(gpt[0].bias);
  EXPECT_EQ(gpt[0].head_dim, 64);
  const auto llama = layer_timing_cases(load_model("llama2-7b"), {2}, {2}, Dtype::kBf16);
  ASSERT_EQ(llama.size(), 1u);
  const LayerTimingCase& c = llama[0];
  EXPECT_EQ(c.style, "llama");
  EXPECT_TRUE(c.rotary);
  EXPECT_FALSE(c.bias);
  EXPECT_EQ(layer_key(c), "layer/llama/bf16/b2/s4096/h4096/a32/g32/d128/f11008/tp2/nobias");
  const LayerTimingCase back = layer_case_from_spec(to_spec(c));
  EXPECT_EQ(layer_key(back), layer_key(c));
  // Mixture-of-experts blocks are not timed as layers.
  EXPECT_TRUE(layer_timing_cases(load_model("mixtral-8x7b"), {1}, {1}, Dtype::kBf16).empty());
}

// What `calibrate --layers` plans: one item per distinct case, keyed so that a resumed run finds
// it, with a spec the GPU side rebuilds the case from (every field, not only those in the key).
TEST(LayerPlan, TimingItemsAreDistinctAndTheirSpecsRebuildTheCase) {
  auto cases = layer_timing_cases(load_model("bert-large"), {1, 2}, {1}, Dtype::kBf16);
  ASSERT_EQ(cases.size(), 2u);
  EXPECT_FALSE(cases[0].causal);
  EXPECT_EQ(layer_key(cases[0]), "layer/gpt/bf16/b1/s512/h1024/a16/g16/d64/f4096/tp1/full/p0.1");
  cases.push_back(cases[0]);  // the same block planned twice (two models) is measured once
  const std::vector<PlanItem> items = layer_timing_items(cases, false);
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0].key, layer_key(cases[0]));
  EXPECT_EQ(items[1].label, "bert-large gpt b2 s512 tp1");
  // A larger micro-batch takes longer; the quick plan repeats the passes fewer times.
  EXPECT_GT(items[1].estimate_s, items[0].estimate_s);
  EXPECT_LT(layer_timing_items(cases, true)[0].estimate_s, items[0].estimate_s);
  EXPECT_GT(items[0].estimate_s, 0.05);  // set-up alone

  LayerTimingCase c = layer_timing_cases(load_model("llama2-70b"), {4}, {8}, Dtype::kFp16)[0];
  c.dropout = 0.25;
  const LayerTimingCase back = layer_case_from_spec(to_spec(c));
  EXPECT_EQ(back.model, "llama2-70b");
  EXPECT_EQ(back.style, "llama");
  EXPECT_EQ(back.dtype, Dtype::kFp16);
  EXPECT_EQ(back.micro_batch, 4);
  EXPECT_EQ(back.tp, 8);
  EXPECT_EQ(back.kv_heads, 8);
  EXPECT_EQ(back.head_dim, 128);
  EXPECT_EQ(back.ffn_hidden, 28672);
  EXPECT_TRUE(back.rotary);
  EXPECT_FALSE(back.bias);
  EXPECT_TRUE(back.causal);
  EXPECT_DOUBLE_EQ(back.dropout, 0.25);
  EXPECT_EQ(layer_key(back), layer_key(c));
}

TEST(LayerPlan, ExpectedActivationMatchesLayerWork) {
  const ModelSpec m = load_model("llama2-7b");
  const auto cases = layer_timing_cases(m, {1}, {1}, Dtype::kBf16);
  ASSERT_EQ(cases.size(), 1u);
  LayerShape shape;
  const double want = layer_work(m.layers[1], shape).activation(Recompute::kNone);
  EXPECT_DOUBLE_EQ(expected_activation_bytes(cases[0]), want);
  EXPECT_GT(want, 0);
}

}  // namespace
}  // namespace hetplan::profiler
