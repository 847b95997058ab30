// Low-precision recipes in the layer decomposition and the cost model: which GEMMs run in fp8 /
// fp4, the quantisation kernels' bytes, the weight copies, and the fp4 dtype (values by hand).
#include <gtest/gtest.h>

#include "costmodel/cost_model.h"
#include "costmodel/layer_ops.h"
#include "costmodel/precision.h"
#include "costmodel/profile.h"
#include "test_util.h"

namespace hetplan {
namespace {

// A LLaMA-style block over 1024 tokens (testing::llama_block).
LayerSpec block() { return testing::llama_block(1024); }

double memory_bytes(const LayerWork& w, const std::string& kernel) {
  double b = 0;
  for (const auto& m : w.memory_ops)
    if (m.kernel == kernel) b += m.bytes;
  return b;
}

CalibrationFile datasheet(const std::string& gpu) {
  return load_calibration(default_calibration_dir() / "datasheet" / (gpu + ".json"));
}

TEST(Precision, NamesAndTheFp4Dtype) {
  for (Precision p : kAllPrecisions) {
    Precision q;
    ASSERT_TRUE(parse_precision(to_string(p), q));
    EXPECT_EQ(q, p);
  }
  Precision q;
  EXPECT_FALSE(parse_precision("fp8", q));
  EXPECT_EQ(quantized_dtype(Precision::kNvfp4), Dtype::kFp4);
  EXPECT_EQ(quantized_dtype(Precision::kMxfp8), Dtype::kFp8);
  EXPECT_EQ(dtype_bytes(Dtype::kFp4), 0.5);
  Dtype d;
  ASSERT_TRUE(parse_dtype("fp4", d));
  EXPECT_EQ(d, Dtype::kFp4);
  // The measured dtypes (calibration sweeps) are still the five: fp4 has priors only.
  EXPECT_EQ(std::size(kAllDtypes), 5u);
}

TEST(Precision, QuantisationBytesPerElementOfEachRecipe) {
  // A bf16 element (2 bytes) read, and written in both orientations:
  EXPECT_EQ(quantize_bytes_per_element(Precision::kBf16), 0);
  EXPECT_EQ(quantize_bytes_per_element(Precision::kFp8Delayed), 2 + 2 * 1);      // cast-transpose
  EXPECT_EQ(quantize_bytes_per_element(Precision::kFp8Current), 2 + 2 + 2 * 1);  // amax pass first
  EXPECT_EQ(quantize_bytes_per_element(Precision::kFp8Blockwise), 2 + 2 * (1 + 4.0 / 128));
  EXPECT_EQ(quantize_bytes_per_element(Precision::kMxfp8), 2 + 2 * (1 + 1.0 / 32));
  EXPECT_EQ(quantize_bytes_per_element(Precision::kNvfp4), 2 + 2 + 2 * (0.5 + 1.0 / 16));
}

TEST(Precision, Fp8RecipeQuantisesTheLinearLayersOnly) {
  LayerShape s;
  s.precision = Precision::kFp8Delayed;
  const LayerWork w = layer_work(block(), s);
  int quantized = 0;
  for (const auto& g : w.gemms) {
    EXPECT_TRUE(g.quantized) << g.name;  // qkv, attn_out, fc1, fc2: every GEMM of the block
    EXPECT_EQ(g.dtype, Dtype::kFp8);
    ++quantized;
  }
  EXPECT_EQ(quantized, 12);
  ASSERT_EQ(w.attention.size(), 2u);  // the attention core stays bf16 (no fp8 attention)
  // Inputs quantised in forward: 1024 tokens x (1024 + 1024 + 1024 + 2816) inputs x 4 bytes =
  // 24,117,248; output gradients in backward: 1024 x (1536 + 1024 + 5632 + 1024) x 4 = 37,748,736.
  EXPECT_DOUBLE_EQ(memory_bytes(w, "quantize_input"), 24'117'248.0);
  EXPECT_DOUBLE_EQ(memory_bytes(w, "quantize_grad"), 37'748'736.0);
  // Weights: 1024 x 1536 + 1024 x 1024 + 1024 x 5632 + 2816 x 1024 = 11,272,192 parameters; fp8
  // copies both ways, 2 bytes each (22,544,384), quantised once per step reading 2 and writing 2.
  EXPECT_DOUBLE_EQ(w.low_precision_weight_bytes, 22'544'384.0);
  EXPECT_DOUBLE_EQ(w.weight_quantize_bytes, 45'088'768.0);
  // bf16: none of it.
  const LayerWork plain = layer_work(block(), LayerShape{});
  EXPECT_EQ(memory_bytes(plain, "quantize_input"), 0);
  EXPECT_EQ(plain.low_precision_weight_bytes, 0);
  for (const auto& g : plain.gemms) EXPECT_FALSE(g.quantized);
}

TEST(Precision, RouterEmbeddingAndHeadStayInBf16) {
  LayerShape s;
  s.precision = Precision::kMxfp8;
  const ModelSpec m = load_model("qwen3-30b-a3b");
  const LayerWork moe = layer_work(m.layers[1], s);
  for (const auto& g : moe.gemms) EXPECT_EQ(g.quantized, g.name != "router") << g.name;
  const LayerWork head = layer_work(m.layers.back(), s);
  for (const auto& g : head.gemms) EXPECT_FALSE(g.quantized) << g.name;
  EXPECT_EQ(memory_bytes(head, "quantize_input"), 0);
}

TEST(Precision, Fp8GemmsRunAtTheFp8RateAndFp4FallsBackToFp8OnHopper) {
  const ClusterSpec cluster = load_cluster("dgx-h100:1,dgx-b200:1");
  const CostModel cost(fit_profile({datasheet("h100-sxm"), datasheet("b200")}), cluster);
  const GpuSpec& h100 = cluster.groups[0].node.gpu;
  const GpuSpec& b200 = cluster.groups[1].node.gpu;
  const GemmShape big{8192, 8192, 8192, 1, true, false};
  // Twice the peak at the same fraction of it (the H100's fp8 prior): about half the time.
  const double ratio = cost.gemm_s(h100, Dtype::kFp8, big) / cost.gemm_s(h100, Dtype::kBf16, big);
  EXPECT_GT(ratio, 0.45);
  EXPECT_LT(ratio, 0.6);
  EXPECT_EQ(cost.compute_dtype(h100, Dtype::kFp4), Dtype::kFp8);
  EXPECT_EQ(cost.compute_dtype(b200, Dtype::kFp4), Dtype::kFp4);
  EXPECT_LT(cost.gemm_s(b200, Dtype::kFp4, big), 0.6 * cost.gemm_s(b200, Dtype::kFp8, big));
  // A GEMM-bound layer is faster in fp8, its quantisation included.
  LayerShape s;
  s.micro_batch = 4;
  const LayerSpec l = load_model("llama3-8b").layers[1];
  const LayerTimes bf16 = cost.layer_times_from_ops(h100, layer_work(l, s), Recompute::kNone,
                                                    CommGroup{}, Dtype::kBf16);
  s.precision = Precision::kFp8Delayed;
  const LayerTimes fp8 = cost.layer_times_from_ops(h100, layer_work(l, s), Recompute::kNone,
                                                   CommGroup{}, Dtype::kBf16);
  EXPECT_LT(fp8.pass_s[0], 0.8 * bf16.pass_s[0]);
  EXPECT_GT(fp8.pass_s[0], 0.4 * bf16.pass_s[0]);
}

}  // namespace
}  // namespace hetplan
