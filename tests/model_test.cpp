#include "costmodel/model.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <map>

#include "costmodel/errors.h"
#include "costmodel/layer_ops.h"

namespace hetplan {
namespace {

// Parameter counts as published by the models' own configs / papers.
TEST(ModelPresets, ParameterCountsMatchPublishedModels) {
  // GPT-2 medium: 354,823,168 (Hugging Face gpt2-medium, tied head).
  EXPECT_EQ(load_model("gpt2-medium").parameters(), 354'823'168);
  // LLaMA-2 7B: 6,738,415,616 (Hugging Face Llama-2-7b-hf, num_parameters()).
  EXPECT_EQ(load_model("llama2-7b").parameters(), 6'738'415'616);
  // LLaMA-2 70B: 68,976,648,192 (grouped-query attention with 8 KV heads).
  EXPECT_EQ(load_model("llama2-70b").parameters(), 68'976'648'192);
  // Mixtral 8x7B: 46,702,792,704 (8 experts of 3 x 4096 x 14336, router 4096 x 8).
  EXPECT_EQ(load_model("mixtral-8x7b").parameters(), 46'702'792'704);
}

TEST(ModelPresets, HandCheckedGpt2MediumBreakdown) {
  ModelSpec m = load_model("gpt2-medium");
  ASSERT_EQ(m.layers.size(), 26u);
  // Embedding: 50257 x 1024 tokens + 1024 x 1024 positions.
  EXPECT_EQ(layer_parameters(m.layers[0]), 52'511'744);
  // Block: QKV 1024x3072+3072, out 1024x1024+1024, MLP 2 x 1024x4096 + 4096 + 1024, 2 LayerNorms.
  EXPECT_EQ(layer_parameters(m.layers[1]), 12'596'224);
  // Tied head holds only its final LayerNorm uniquely, the vocabulary copy on its own stage.
  EXPECT_EQ(layer_parameters(m.layers[25], 1, true), 2'048);
  EXPECT_EQ(layer_parameters(m.layers[25], 1, false), 2'048 + 50'257 * 1024);
  // Tensor parallelism splits the weights and keeps replicated biases and norms whole.
  // tp = 4: QKV 786,432 + 768, out 262,144 + 1,024, fc1 1,048,576 + 1,024, fc2 1,048,576 + 1,024,
  // norms 4,096.
  EXPECT_EQ(layer_parameters(m.layers[1], 4), 3'153'664);
}

TEST(ModelPresets, AllListedPresetsLoad) {
  const char* names[] = {"gpt2-medium", "gpt3-1.3b", "gpt3-2.7b", "gpt3-6.7b", "gpt3-13b",
                         "gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama1-30b",
                         "bert-large", "mixtral-8x7b", "cmpp-9.6b", "cmpp-21b", "cmpp-38.5b",
                         "cmpp-98.5b", "funnel-uneven",
                         // Today's families (2026-12): tests/model_families_test.cpp.
                         "llama3-8b", "llama3-70b", "llama3.1-405b", "qwen3-30b-a3b",
                         "qwen3-235b-a22b", "deepseek-v3", "gpt-oss-120b", "mixtral-8x22b",
                         // Hybrid Mamba-2 models: tests/hybrid_mamba_test.cpp.
                         "nemotron3-nano-30b-a3b",
                         // LatentMoE and a hybrid MTP block: tests/latent_moe_test.cpp.
                         "nemotron3-super-120b-a12b"};
  for (const char* n : names) {
    SCOPED_TRACE(n);
    ModelSpec m = load_model(n);
    EXPECT_EQ(m.name, n);
    EXPECT_GT(m.parameters(), 0);
  }
  EXPECT_EQ(model_presets().size(), std::size(names));
}

TEST(ModelPresets, PaperModelSizesAreAsNamed) {
  // GPT-3 sizes from Brown et al. 2020 Table 2.1, within 3% (vocabulary and biases differ).
  EXPECT_NEAR(load_model("gpt3-175b").parameters() / 1e9, 175, 175 * 0.03);
  EXPECT_NEAR(load_model("gpt3-13b").parameters() / 1e9, 13, 13 * 0.03);
  EXPECT_NEAR(load_model("gpt3-1.3b").parameters() / 1e9, 1.3, 1.3 * 0.03);
  // Controllable-memory paper models, within 3% of their names.
  EXPECT_NEAR(load_model("cmpp-9.6b").parameters() / 1e9, 9.6, 9.6 * 0.03);
  EXPECT_NEAR(load_model("cmpp-21b").parameters() / 1e9, 21, 21 * 0.03);
  EXPECT_NEAR(load_model("cmpp-38.5b").parameters() / 1e9, 38.5, 38.5 * 0.03);
  EXPECT_NEAR(load_model("cmpp-98.5b").parameters() / 1e9, 98.5, 98.5 * 0.03);
}

TEST(ModelPresets, UnevenModelHasUnevenLayers) {
  ModelSpec m = load_model("funnel-uneven");
  LayerShape s;
  const double first = layer_work(m.layers[1], s).model_flops[0];
  const double last = layer_work(m.layers[m.layers.size() - 2], s).model_flops[0];
  EXPECT_NE(m.layers[1].seq_len, m.layers[m.layers.size() - 2].seq_len);
  EXPECT_NE(first, last);
  const double head = layer_work(m.layers.back(), s).model_flops[0];
  EXPECT_GT(head, 2 * first);  // the 256k-token head dominates a block
}

TEST(ModelFlops, MatchesMegatronFormulaForGpt3) {
  // Narayanan et al. 2021 (Megatron-LM, SC'21), eq. 3: per sample
  // 72 s L h^2 (1 + s / (6h) + V / (12 h L)).
  ModelSpec m = load_model("gpt3-175b");
  const double s = 2048, L = 96, h = 12288, V = 50257;
  const double expected = 72 * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  EXPECT_NEAR(model_flops_per_sample(m) / expected, 1.0, 1e-12);
}

TEST(ModelFlops, PerTokenForLlama2_7b) {
  // Per token forward: QKV 2*3h^2, output 2h^2, SwiGLU MLP 2*3*h*f, attention 4*s*h, logits 2*h*V;
  // training = 3x forward.
  ModelSpec m = load_model("llama2-7b");
  const double h = 4096, f = 11008, s = 4096, L = 32, V = 32000;
  const double per_token = 3 * (L * (8 * h * h + 6 * h * f + 4 * s * h) + 2 * h * V);
  EXPECT_NEAR(model_flops_per_sample(m) / s / per_token, 1.0, 1e-12);
}

TEST(ActivationMemory, MatchesKorthikantiFormulaWithoutSequenceParallel) {
  // Korthikanti et al. 2022, "Reducing Activation Recomputation in Large Transformer Models",
  // eq. 2 (tensor parallel): sbh (10 + 24/t + 5as/(ht)) bytes per layer; selective recomputation
  // drops the 5as/(ht) term. We also keep two norms' statistics: 2 x 8 bytes per token.
  ModelSpec m = load_model("gpt3-13b");
  const LayerSpec& block = m.layers[1];
  const double s = 2048, b = 2, h = 5120, a = 40, t = 4;
  LayerShape shape;
  shape.micro_batch = 2;
  shape.tp = 4;
  shape.flash_attention = false;
  LayerWork w = layer_work(block, shape);
  const double stats = 2 * 8 * s * b;
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kNone),
                   s * b * h * (10 + 24 / t + 5 * a * s / (h * t)) + stats);
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kSelective), s * b * h * (10 + 24 / t) + stats);
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kFull), 2 * s * b * h);
}

TEST(ActivationMemory, MatchesKorthikantiFormulaWithSequenceParallel) {
  // Korthikanti et al. 2022, eq. 4 and 6: sbh/t (34 + 5as/h); selective: 34 sbh / t.
  ModelSpec m = load_model("gpt3-175b");
  const LayerSpec& block = m.layers[1];
  const double s = 2048, b = 1, h = 12288, a = 96, t = 8;
  LayerShape shape;
  shape.tp = 8;
  shape.sequence_parallel = true;
  shape.flash_attention = false;
  LayerWork w = layer_work(block, shape);
  const double stats = 2 * 8 * s * b / t;
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kNone), s * b * h / t * (34 + 5 * a * s / h) + stats);
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kSelective), s * b * h / t * 34 + stats);
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kFull), 2 * s * b * h / t);
}

TEST(ActivationMemory, FlashAttentionKeepsNoScoreMatrices) {
  ModelSpec m = load_model("gpt3-13b");
  LayerShape shape;
  shape.flash_attention = true;
  LayerWork w = layer_work(m.layers[1], shape);
  const double s = 2048, h = 5120, a = 40;
  // 34 sbh + norm statistics + the fp32 logsumexp (4 bytes per head and token).
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kNone), 34 * s * h + 2 * 8 * s + 4 * a * s);
  EXPECT_DOUBLE_EQ(w.activation(Recompute::kSelective), w.activation(Recompute::kNone));
}

TEST(LayerOps, GemmShapesFollowCublasConventions) {
  ModelSpec m = load_model("llama2-7b");
  LayerShape shape;
  shape.micro_batch = 2;
  shape.tp = 2;
  LayerWork w = layer_work(m.layers[1], shape);
  const int64_t T = 2 * 4096;
  auto find = [&](const std::string& name, Pass pass) -> const GemmOp* {
    for (const auto& g : w.gemms)
      if (g.name == name && g.pass == pass) return &g;
    return nullptr;
  };
  const GemmOp* fwd = find("fc1", Pass::kForward);
  ASSERT_NE(fwd, nullptr);
  EXPECT_EQ(fwd->shape, (GemmShape{2 * 11008 / 2, T, 4096, 1, true, false}));
  const GemmOp* dgrad = find("fc1", Pass::kBackwardInput);
  ASSERT_NE(dgrad, nullptr);
  EXPECT_EQ(dgrad->shape, (GemmShape{4096, T, 11008, 1, false, false}));
  const GemmOp* wgrad = find("fc1", Pass::kBackwardWeight);
  ASSERT_NE(wgrad, nullptr);
  EXPECT_EQ(wgrad->shape, (GemmShape{4096, 11008, T, 1, false, true}));
  // Two all-reduces forward and two backward of the whole activation without SP.
  int fwd_ar = 0, bwd_ar = 0;
  for (const auto& c : w.comms) {
    EXPECT_EQ(c.kind, CollectiveKind::kAllReduce);
    EXPECT_DOUBLE_EQ(c.bytes, T * 4096.0 * 2);
    (c.pass == Pass::kForward ? fwd_ar : bwd_ar)++;
  }
  EXPECT_EQ(fwd_ar, 2);
  EXPECT_EQ(bwd_ar, 2);
}

// Bytes of the memory-bound kernels, written out by hand from what each kernel reads and writes
// (the kernel bench counts the same: gelu_bwd 6 bytes per bf16 element, swiglu_bwd 10 per output).
TEST(LayerOps, MemoryBoundBytesOfAGpt2Block) {
  const ModelSpec m = load_model("gpt2-medium");  // hidden 1024, MLP 4096, biases, dropout 0.1
  LayerShape shape;
  shape.micro_batch = 2;
  LayerWork w = layer_work(m.layers[1], shape);
  const double T = 2 * 1024, h = 1024, f = 4096;
  std::map<std::string, double> bytes[kNumPasses];
  for (const auto& op : w.memory_ops) bytes[static_cast<int>(op.pass)][op.kernel] += op.bytes;
  const auto& F = bytes[0];
  const auto& B = bytes[1];
  const auto& W = bytes[2];
  EXPECT_DOUBLE_EQ(F.at("gelu_fwd"), T * f * 4);
  EXPECT_DOUBLE_EQ(B.at("gelu_bwd"), T * f * 6);  // dy, x -> dx
  // Two residual branches: dropout (x -> y, mask), then the add; backward dropout and the add of
  // the residual stream's two gradients.
  EXPECT_DOUBLE_EQ(F.at("dropout_fwd"), 2 * T * h * 5);
  EXPECT_DOUBLE_EQ(F.at("residual_add"), 2 * T * h * 6);
  EXPECT_DOUBLE_EQ(B.at("dropout_bwd"), 2 * T * h * 5);
  EXPECT_DOUBLE_EQ(B.at("residual_grad_add"), 2 * T * h * 6);
  EXPECT_DOUBLE_EQ(B.at("qkv_grad_concat"), T * 3 * h * 4);
  // Bias gradients: column sums of dy for qkv (3h), attn_out (h), fc1 (f), fc2 (h).
  EXPECT_DOUBLE_EQ(W.at("bias_grad"), T * (3 * h + h + f + h) * 2);
  // Fused gradient accumulation: only the biases and the two LayerNorms' gains and biases.
  EXPECT_DOUBLE_EQ(W.at("grad_accumulate"), (3 * h + h + f + h + 4 * h) * 10);
  EXPECT_EQ(w.gemm_weight_params, static_cast<int64_t>(3 * h * h + h * h + 2 * h * f));
  shape.grad_accumulation_fusion = false;
  const LayerWork unfused = layer_work(m.layers[1], shape);
  double added = 0;
  for (const auto& op : unfused.memory_ops)
    if (op.kernel == "grad_accumulate") added += op.bytes;
  EXPECT_DOUBLE_EQ(added, static_cast<double>(unfused.params) * 10);
}

TEST(LayerOps, SwigluBackwardReadsItsInputsAndTheHeadRunsMegatronsCrossEntropy) {
  const ModelSpec m = load_model("llama2-7b");  // MLP 11008, vocab 32000, no biases
  LayerShape shape;
  const double T = 4096, f = 11008, v = 32000;
  const LayerWork block = layer_work(m.layers[1], shape);
  std::map<std::string, double> total;
  for (const auto& op : block.memory_ops) total[op.kernel] += op.bytes;
  EXPECT_DOUBLE_EQ(total.at("swiglu_fwd"), T * f * 6);
  EXPECT_DOUBLE_EQ(total.at("swiglu_bwd"), T * f * 10);  // dy, gate, up -> dgate, dup
  EXPECT_EQ(total.count("bias_grad"), 0u);
  EXPECT_EQ(total.count("dropout_fwd"), 0u);
  const LayerWork head = layer_work(m.layers.back(), shape);
  std::map<std::string, double> ce[kNumPasses];
  for (const auto& op : head.memory_ops) ce[static_cast<int>(op.pass)][op.kernel] += op.bytes;
  // Forward: to fp32 (2 + 4), max (4), subtract (8), exp (8), sum (4), divide (8) per logit.
  double fwd = 0;
  for (const char* k :
       {"ce_to_fp32", "ce_max", "ce_subtract_max", "ce_exp", "ce_sum", "ce_normalise"})
    fwd += ce[0].at(k);
  EXPECT_DOUBLE_EQ(fwd, T * v * 38);
  EXPECT_DOUBLE_EQ(ce[1].at("ce_grad_scale") + ce[1].at("ce_grad_to_act"), T * v * 14);
  // The embedding's weight gradient is a dense table (zeroed, rows of dy added), then added into
  // the fp32 main gradient (the lookup is no GEMM: never fused).
  const LayerWork emb = layer_work(m.layers.front(), shape);
  std::map<std::string, double> e;
  for (const auto& op : emb.memory_ops) e[op.kernel] += op.bytes;
  EXPECT_DOUBLE_EQ(e.at("embedding_fwd"), T * 4096 * 2 * 2);
  EXPECT_DOUBLE_EQ(e.at("embedding_bwd"), T * 4096 * 2 + v * 4096 * 2);
  EXPECT_DOUBLE_EQ(e.at("grad_accumulate"), v * 4096 * 10);
}

TEST(LayerOps, FlashAttentionRunsTheNextKernelHeadSize) {
  // FlashAttention-2 rounds the head size up to a multiple of 32 up to 192, else to 256: GPT-3
  // 2.7B's heads of 80 run as 96. The executed FLOPs (what the time follows) grow by 96/80; the
  // model FLOPs (what MFU counts) do not. Heads of 64 run as they are.
  LayerShape shape;
  shape.flash_attention = true;
  auto check = [&](const char* model, double kernel_over_true) {
    ModelSpec m = load_model(model);
    const LayerWork w = layer_work(m.layers[1], shape);
    const auto* b = m.layers[1].block();
    const double full = 4.0 * b->heads * m.layers[1].seq_len * m.layers[1].seq_len * b->head_dim;
    ASSERT_EQ(w.attention.size(), 2u);
    EXPECT_DOUBLE_EQ(w.attention[0].flops, full / 2 * kernel_over_true) << model;  // causal
    EXPECT_DOUBLE_EQ(w.attention[1].flops, 2.5 * full / 2 * kernel_over_true) << model;
  };
  EXPECT_EQ(load_model("gpt3-2.7b").layers[1].block()->head_dim, 80);
  check("gpt3-2.7b", 96.0 / 80.0);
  check("gpt2-medium", 1.0);
}

TEST(LayerOps, TensorWidthMustDivideHeads) {
  ModelSpec m = load_model("gpt2-medium");
  LayerShape shape;
  shape.tp = 3;
  EXPECT_THROW(layer_work(m.layers[1], shape), InputError);
  EXPECT_NE(tensor_parallel_problem(m, 3), "");
  EXPECT_EQ(tensor_parallel_problem(m, 4), "");
}

TEST(ModelLoading, UnknownPresetListsTheKnownOnes) {
  try {
    load_model("gpt5");
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("gpt2-medium"), std::string::npos);
  }
}

TEST(ModelLoading, SeqLenOverrideScalesFunnelLayers) {
  ModelSpec m = load_model("funnel-uneven", 4096);
  EXPECT_EQ(m.layers[1].seq_len, 4096);
  EXPECT_EQ(m.layers[m.layers.size() - 2].seq_len, 1024);
  EXPECT_THROW(load_model("gpt2-medium", 2048), InputError);  // only 1024 learned positions
}

}  // namespace
}  // namespace hetplan

namespace hetplan {
namespace {

void expect_model_error(const std::string& yaml, const std::string& key_path) {
  try {
    parse_model(parse_document(yaml, "m.yaml", DocumentFormat::kYaml));
    FAIL() << "accepted: " << yaml;
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), key_path) << e.what();
    EXPECT_EQ(e.origin(), "m.yaml");
  }
}

const char* kGood = "name: t\nseq_len: 128\nvocab: 1000\n";

TEST(ModelFile, BadModelsNameTheKey) {
  const std::string base = kGood;
  expect_model_error(base + "block: {hidden: 64}\nlayers: 2\n", "block.heads");  // missing
  expect_model_error(base + "block: {hidden: -64, heads: 4}\nlayers: 2\n", "block.hidden");
  expect_model_error(base + "block: {hidden: 64, heads: 4, colour: red}\nlayers: 2\n",
                     "block.colour");  // unknown key
  expect_model_error(base + "block: {hidden: 64, heads: 4, kv_heads: 3}\nlayers: 2\n",
                     "block.kv_heads");
  expect_model_error(base + "block: {hidden: 64, heads: 5}\nlayers: 2\n", "block.heads");
  expect_model_error(base + "block: {hidden: 64, heads: 4}\nlayers: 0\n", "layers");
  expect_model_error(base + "block: {hidden: 64, heads: 4, activation: tanh}\nlayers: 2\n",
                     "block.activation");
  expect_model_error(base + "block: {hidden: 64, heads: 4}\nblocks: [{count: 2, heads: 0}]\n",
                     "blocks[0].heads");
  expect_model_error("name: t\nvocab: 1000\nblock: {hidden: 64, heads: 4}\nlayers: 2\n", "seq_len");
  expect_model_error(base + "block: {hidden: 64, heads: 4, experts: 2, top_k: 3}\nlayers: 2\n",
                     "block.top_k");
}

TEST(ModelFile, GoodModelWithGroupsOfBlocks) {
  ModelSpec m = parse_model(parse_document(
      std::string(kGood) + "block: {hidden: 64, heads: 4}\nblocks: [{count: 2}, {count: 1, "
                           "hidden: 128, heads: 8, seq_len: 64}]\n",
      "m.yaml", DocumentFormat::kYaml));
  ASSERT_EQ(m.layers.size(), 5u);  // embedding, 3 blocks, head
  EXPECT_EQ(m.layers[3].hidden, 128);
  EXPECT_EQ(m.layers[3].block()->head_dim, 16);
  EXPECT_EQ(m.layers[3].block()->ffn_hidden, 512);  // re-derived from the new width
  EXPECT_EQ(m.layers[3].seq_len, 64);
  EXPECT_EQ(m.layers[1].block()->ffn_hidden, 256);
}

TEST(HfConfig, LlamaAndGpt2ConfigsMatchThePresets) {
  const std::string llama = R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
    "hidden_size": 4096, "intermediate_size": 11008, "num_attention_heads": 32,
    "num_hidden_layers": 32, "num_key_value_heads": 32, "vocab_size": 32000,
    "max_position_embeddings": 4096, "rms_norm_eps": 1e-05, "tie_word_embeddings": false,
    "torch_dtype": "float16", "hidden_act": "silu"})";
  ModelSpec m = model_from_hf_config(parse_document(llama, "config.json", DocumentFormat::kJson));
  EXPECT_EQ(m.parameters(), load_model("llama2-7b").parameters());
  EXPECT_EQ(m.dtype,
            Dtype::kBf16);  // torch_dtype float16 is the checkpoint's storage, not training
  const std::string gpt2 = R"({"model_type": "gpt2", "n_embd": 1024, "n_layer": 24,
    "n_head": 16, "n_positions": 1024, "vocab_size": 50257, "n_inner": null})";
  m = model_from_hf_config(parse_document(gpt2, "config.json", DocumentFormat::kJson));
  EXPECT_EQ(m.parameters(), 354'823'168);
  const std::string mixtral = R"({"model_type": "mixtral", "hidden_size": 4096,
    "intermediate_size": 14336, "num_attention_heads": 32, "num_hidden_layers": 32,
    "num_key_value_heads": 8, "vocab_size": 32000, "num_local_experts": 8,
    "num_experts_per_tok": 2, "max_position_embeddings": 32768})";
  m = model_from_hf_config(parse_document(mixtral, "config.json", DocumentFormat::kJson));
  EXPECT_EQ(m.parameters(), 46'702'792'704);
  EXPECT_EQ(m.seq_len, 4096);  // long contexts default to 4096 tokens
}

// A config.json file (tests/data/hf, TinyLlama's sizes): named after its folder, and the model of
// the hand-written model file with the same sizes.
TEST(HfConfig, AConfigFileLoadsAsTheModelFileOfItsSizes) {
  const ModelSpec hf =
      load_model(std::string(HETPLAN_TEST_DATA) + "/hf/tinyllama-1.1b/config.json");
  const ModelSpec yaml =
      load_model(std::string(HETPLAN_EXTERNAL_DATA) + "/../models/tinyllama-1.1b.yaml");
  EXPECT_EQ(hf.name, "tinyllama-1.1b");
  EXPECT_EQ(hf.parameters(), yaml.parameters());
  EXPECT_EQ(hf.seq_len, 2048);
  ASSERT_EQ(hf.layers.size(), 24u);  // embedding, 22 blocks, LM head
  EXPECT_EQ(hf.layers[1].block()->kv_heads, 4);
  EXPECT_EQ(hf.layers[1].block()->ffn_hidden, 5632);
}

TEST(HfConfig, LlamaAttentionAndMlpBiasesAreSeparate) {
  // Llama 3.2 1B (hidden 2048, 16 layers, 32 heads, 8 KV heads, ffn 8192, tied 128256 vocab):
  // 1,235,814,400 parameters without biases. attention_bias adds q, k, v and o biases (2048 +
  // 512 + 512 + 2048 per layer), mlp_bias gate, up and down biases (8192 + 8192 + 2048).
  auto config = [](bool attention, bool mlp) {
    return fmt::format(R"({{"model_type": "llama", "hidden_size": 2048,
      "intermediate_size": 8192, "num_attention_heads": 32, "num_key_value_heads": 8,
      "num_hidden_layers": 16, "vocab_size": 128256, "tie_word_embeddings": true,
      "attention_bias": {}, "mlp_bias": {}}})",
                       attention, mlp);
  };
  auto params = [&](bool attention, bool mlp) {
    return model_from_hf_config(
               parse_document(config(attention, mlp), "config.json", DocumentFormat::kJson))
        .parameters();
  };
  EXPECT_EQ(params(false, false), 1'235'814'400);
  EXPECT_EQ(params(true, false), 1'235'814'400 + 16 * 5'120);
  EXPECT_EQ(params(false, true), 1'235'814'400 + 16 * 18'432);
  EXPECT_EQ(params(true, true), 1'235'814'400 + 16 * 23'552);
}

TEST(ModelFile, MlpBiasDefaultsToBias) {
  auto block = [](const std::string& fields) {
    const ModelSpec m = parse_model(parse_document(
        std::string(kGood) + "block: {hidden: 64, heads: 4" + fields + "}\nlayers: 1\n", "m.yaml",
        DocumentFormat::kYaml));
    return *m.layers[1].block();
  };
  EXPECT_TRUE(block("").bias);
  EXPECT_TRUE(block("").mlp_bias);
  EXPECT_FALSE(block(", bias: false").mlp_bias);
  const TransformerLayer b = block(", bias: false, mlp_bias: true");
  EXPECT_FALSE(b.bias);
  EXPECT_TRUE(b.mlp_bias);
}

TEST(ModelFile, SizesBeyondHetplansLimitsAreInputErrors) {
  // Five billion blocks once ran out of memory, a huge vocabulary overflowed the parameter count.
  const std::string block = "block: {hidden: 64, heads: 4}\n";
  auto key_of_error = [](const std::string& text) -> std::string {
    try {
      parse_model(parse_document(text, "m.yaml", DocumentFormat::kYaml));
    } catch (const InputError& e) {
      return e.key_path();
    }
    return "no error";
  };
  EXPECT_EQ(key_of_error(std::string(kGood) + block + "layers: 5000000000\n"), "layers");
  EXPECT_EQ(key_of_error(std::string(kGood) + block + "layers: 100001\n"), "layers");
  EXPECT_EQ(key_of_error(std::string(kGood) + block + "layers: 100000\n"), "no error");
  EXPECT_EQ(
      key_of_error("name: t\nseq_len: 128\nvocab: 9223372036854775807\n" + block + "layers: 1\n"),
      "vocab");
  EXPECT_EQ(key_of_error(std::string(kGood) + "block: {hidden: 2097152, heads: 4}\nlayers: 1\n"),
            "layers[0] (embedding).hidden");  // the first layer at that width
  EXPECT_THROW(with_seq_len(load_model("gpt2-medium"), int64_t{1} << 40), InputError);
}

// OPT and BERT against the parameter counts their checkpoints have (Hugging Face's
// `num_parameters()` of facebook/opt-125m, 125,239,296, and of bert-base-uncased as
// BertForMaskedLM, 109,514,298: the encoder without the pooler, with the MLM head's transform and
// output bias, the decoder tied), from their config.json fields.
TEST(HfConfig, OptAndBertConfigsHaveTheirCheckpointsParameterCounts) {
  const auto load = [](const std::string& json) {
    return model_from_hf_config(parse_document(json, "config.json", DocumentFormat::kJson));
  };
  const std::string opt_sizes = R"("hidden_size": 768, "num_hidden_layers": 12,
    "num_attention_heads": 12, "ffn_dim": 3072, "vocab_size": 50272,
    "max_position_embeddings": 2048, "word_embed_proj_dim": 768, "enable_bias": true,
    "do_layer_norm_before": true, "dropout": 0.1)";
  ModelSpec opt = load(R"({"model_type": "opt", )" + opt_sizes + "}");
  EXPECT_EQ(opt.parameters(), 125'239'296);
  EXPECT_EQ(opt.seq_len, 2048);
  EXPECT_EQ(opt.layers[0].embedding()->max_positions, 2050);  // OPT's positions start at 2
  EXPECT_EQ(opt.layers[1].block()->activation, MlpActivation::kRelu);
  EXPECT_TRUE(opt.layers[1].block()->causal);
  // Without model_type the architecture names it.
  EXPECT_EQ(load(R"({"architectures": ["OPTForCausalLM"], )" + opt_sizes + "}").parameters(),
            125'239'296);

  ModelSpec bert = load(R"({"architectures": ["BertForMaskedLM"], "model_type": "bert",
    "hidden_size": 768, "num_hidden_layers": 12, "num_attention_heads": 12,
    "intermediate_size": 3072, "vocab_size": 30522, "max_position_embeddings": 512,
    "type_vocab_size": 2, "hidden_dropout_prob": 0.1})");
  EXPECT_EQ(bert.parameters(), 109'514'298);
  EXPECT_EQ(bert.seq_len, 512);
  EXPECT_FALSE(bert.layers[1].block()->causal);
  EXPECT_EQ(bert.layers[0].embedding()->token_types, 2);
}

TEST(HfConfig, UnsupportedOrIncompleteConfigsAreErrors) {
  try {
    model_from_hf_config(
        parse_document(R"({"model_type": "t5"})", "c.json", DocumentFormat::kJson));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "model_type");
  }
  try {
    model_from_hf_config(parse_document(R"({"model_type": "llama", "hidden_size": 64})", "c.json",
                                        DocumentFormat::kJson));
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(e.key_path(), "num_hidden_layers");
  }
  // What hetplan does not model, and sizes that do not make a model, name their key.
  const auto key_of = [](const std::string& json) {
    try {
      model_from_hf_config(parse_document(json, "c.json", DocumentFormat::kJson));
    } catch (const InputError& e) {
      return e.key_path();
    }
    return std::string("accepted");
  };
  // OPT-350m projects its 512-wide embeddings to the 1024-wide blocks.
  EXPECT_EQ(key_of(R"({"model_type": "opt", "hidden_size": 1024, "num_hidden_layers": 24,
    "num_attention_heads": 16, "ffn_dim": 4096, "vocab_size": 50272,
    "word_embed_proj_dim": 512})"),
            "word_embed_proj_dim");
  EXPECT_EQ(key_of(R"({"model_type": "bert", "hidden_size": 770, "num_hidden_layers": 2,
    "num_attention_heads": 12, "intermediate_size": 3072, "vocab_size": 100})"),
            "num_attention_heads");
  EXPECT_EQ(key_of(R"({"n_embd": 64, "n_layer": 100001, "n_head": 4, "vocab_size": 100,
    "architectures": ["GPT2LMHeadModel"]})"),
            "n_layer");
}

}  // namespace
}  // namespace hetplan
