// Models from Hugging Face config.json files: GPT-2, LLaMA / Mistral, Mixtral, Qwen2 and Qwen3
// (dense and MoE), DeepSeek-V2 and V3, Gemma 2 and 3, Phi-3, GPT-OSS, OPT, BERT. Unknown keys are
// allowed here (the file is not ours); missing required keys are errors, and so are keys that
// name what hetplan does not model. Each family's keys and defaults follow its configuration
// class in Hugging Face transformers (src/transformers/models/<family>/configuration_*.py).
#include <algorithm>
#include <optional>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"

namespace hetplan {
namespace {

// Long-context models default to this many tokens per sample; --seq-len overrides.
constexpr int64_t kDefaultMaxSeqLen = 4096;

struct Parts {
  EmbeddingLayer embedding;
  TransformerLayer block;                // the family's block; blocks[i] derive from it
  std::vector<TransformerLayer> blocks;  // one per layer, filled by expand() unless a reader did
  LmHeadLayer head;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t seq_len = 0;
  int64_t mtp_layers = 0;  // DeepSeek-V3's multi-token-prediction modules
  // Their block where it is not the main model's last one (Nemotron 3's mtp pattern).
  std::optional<TransformerLayer> mtp_block;
};

void expand(Parts& p) {
  if (p.blocks.empty()) p.blocks.assign(static_cast<size_t>(p.layers), p.block);
}

int64_t context_length(ObjectReader& r, int64_t fallback) {
  return std::min(r.positive_integer_or("max_position_embeddings", fallback), kDefaultMaxSeqLen);
}

// rope_scaling (Llama 3.x's "llama3", YaRN, linear, ...) stretches the rotary frequencies: it
// changes no FLOP and no byte. It is read so that a malformed one is still an error.
void accept_rope_scaling(ObjectReader& r) {
  if (auto scaling = r.optional_object("rope_scaling")) scaling->keys();
}

Parts read_gpt2(ObjectReader& r) {
  Parts p;
  p.hidden = r.positive_integer("n_embd");
  p.layers = r.positive_integer("n_layer");
  p.block.heads = r.positive_integer("n_head");
  p.block.ffn_hidden = r.positive_integer_or("n_inner", 4 * p.hidden);
  p.block.dropout = r.non_negative_or("resid_pdrop", 0.1);
  p.embedding.max_positions = r.positive_integer_or("n_positions", r.integer_or("n_ctx", 1024));
  p.embedding.vocab = r.positive_integer("vocab_size");
  p.embedding.dropout = r.non_negative_or("embd_pdrop", 0.1);
  p.head.tied = r.boolean_or("tie_word_embeddings", true);
  p.seq_len = p.embedding.max_positions;
  return p;
}

// The decoder every family below shares: RMSNorm, rotary, gated MLP, untied head by default.
// `dense_mlp` false: intermediate_size may be left out (a hybrid model without MLP layers).
Parts read_decoder(ObjectReader& r, MlpActivation activation = MlpActivation::kSwiglu,
                   bool dense_mlp = true) {
  Parts p;
  p.hidden = r.positive_integer("hidden_size");
  p.layers = r.positive_integer("num_hidden_layers");
  p.block.heads = r.positive_integer("num_attention_heads");
  p.block.kv_heads = r.positive_integer_or("num_key_value_heads", p.block.heads);
  p.block.head_dim = r.positive_integer_or("head_dim", p.hidden / p.block.heads);
  p.block.ffn_hidden = dense_mlp ? r.positive_integer("intermediate_size")
                                 : r.positive_integer_or("intermediate_size", 0);
  p.block.activation = activation;
  p.block.norm = NormKind::kRmsNorm;
  p.block.bias = false;
  p.block.mlp_bias = false;
  p.block.rotary = true;
  p.embedding.vocab = r.positive_integer("vocab_size");
  p.head.final_norm = NormKind::kRmsNorm;
  p.head.tied = r.boolean_or("tie_word_embeddings", false);
  p.seq_len = context_length(r, 2048);
  accept_rope_scaling(r);
  return p;
}

Parts read_llama(ObjectReader& r, bool moe) {
  Parts p = read_decoder(r);
  // Hugging Face LlamaAttention gives q, k, v and o biases by attention_bias, LlamaMLP its three
  // projections by mlp_bias.
  p.block.bias = r.boolean_or("attention_bias", false);
  p.block.mlp_bias = r.boolean_or("mlp_bias", false);
  // Mistral's sliding window (every layer; null in Mixtral and most configs).
  p.block.window = r.integer_or("sliding_window", 0);
  if (moe) {
    p.block.experts = r.positive_integer("num_local_experts");
    p.block.top_k = r.positive_integer("num_experts_per_tok");
  }
  return p;
}

Parts read_phi3(ObjectReader& r) {
  // Phi3Attention fuses q, k and v into one projection and Phi3MLP gate and up: the same GEMM
  // work as three and two; sliding_window bounds every layer's keys (2047 in Phi-3-mini-4k).
  Parts p = read_decoder(r);
  p.block.window = r.integer_or("sliding_window", 0);
  p.block.dropout = r.non_negative_or("resid_pdrop", 0);
  return p;
}

// Qwen2 and Qwen3 windows: with use_sliding_window, the layers from max_window_layers on attend
// in sliding_window (transformers' Qwen2Config.layer_types); else none.
void read_qwen_windows(ObjectReader& r, Parts& p) {
  expand(p);
  if (!r.boolean_or("use_sliding_window", false)) return;
  const int64_t window = r.positive_integer("sliding_window");
  const int64_t from = r.integer_or("max_window_layers", p.layers);
  for (int64_t i = std::max<int64_t>(from, 0); i < p.layers; ++i)
    p.blocks[static_cast<size_t>(i)].window = window;
}

// Qwen2-MoE and Qwen3-MoE: MoE every decoder_sparse_step-th layer except mlp_only_layers; the
// others dense at intermediate_size (Qwen2MoeDecoderLayer).
void read_qwen_moe(ObjectReader& r, Parts& p, bool shared_expert) {
  const TransformerLayer dense = p.block;
  TransformerLayer moe = p.block;
  moe.experts = r.positive_integer("num_experts");
  moe.top_k = r.positive_integer("num_experts_per_tok");
  moe.ffn_hidden = r.positive_integer("moe_intermediate_size");
  if (shared_expert) {
    moe.shared_experts = 1;
    moe.shared_ffn_hidden = r.positive_integer("shared_expert_intermediate_size");
    moe.shared_expert_gate = true;  // Qwen2MoeSparseMoeBlock.shared_expert_gate: hidden -> 1
  }
  const int64_t step = r.positive_integer_or("decoder_sparse_step", 1);
  std::vector<int64_t> dense_layers;
  if (r.has("mlp_only_layers")) dense_layers = r.integers("mlp_only_layers");
  p.blocks.clear();
  for (int64_t i = 0; i < p.layers; ++i) {
    const bool is_dense = (i + 1) % step != 0 || std::find(dense_layers.begin(), dense_layers.end(),
                                                           i) != dense_layers.end();
    p.blocks.push_back(is_dense ? dense : moe);
  }
}

Parts read_qwen(ObjectReader& r, bool qwen3, bool moe) {
  Parts p = read_decoder(r);
  if (qwen3) {
    p.block.bias = r.boolean_or("attention_bias", false);
    p.block.qk_norm = true;  // Qwen3Attention.q_norm, k_norm over head_dim
  } else {
    p.block.qkv_bias = true;  // Qwen2Attention: q, k and v with biases, o without
  }
  if (moe) read_qwen_moe(r, p, /*shared_expert=*/!qwen3);
  read_qwen_windows(r, p);
  return p;
}

// DeepSeek-V2 and V3: MLA in every layer, MoE from first_k_dense_replace on (every
// moe_layer_freq-th), n_shared_experts shared experts of moe_intermediate_size, and V3's
// num_nextn_predict_layers MTP modules.
Parts read_deepseek(ObjectReader& r, bool v3) {
  Parts p = read_decoder(r);
  TransformerLayer& b = p.block;
  b.bias = r.boolean_or("attention_bias", false);
  b.mla.q_lora_rank = r.integer_or("q_lora_rank", 0);  // null in DeepSeek-V2-Lite: no bottleneck
  if (b.mla.q_lora_rank < 0) r.fail("q_lora_rank", "expected null or a rank > 0");
  b.mla.kv_lora_rank = r.positive_integer("kv_lora_rank");
  b.mla.qk_nope_head_dim = r.positive_integer("qk_nope_head_dim");
  b.mla.qk_rope_head_dim = r.positive_integer("qk_rope_head_dim");
  b.mla.v_head_dim = r.positive_integer("v_head_dim");
  b.head_dim = b.mla.qk_nope_head_dim + b.mla.qk_rope_head_dim;
  b.kv_heads = b.heads;  // keys and values are up-projected for every head
  TransformerLayer moe = b;
  moe.experts = r.positive_integer("n_routed_experts");
  moe.top_k = r.positive_integer("num_experts_per_tok");
  moe.ffn_hidden = r.positive_integer("moe_intermediate_size");
  moe.shared_experts = r.integer_or("n_shared_experts", 0);
  if (moe.shared_experts < 0) r.fail("n_shared_experts", "expected >= 0");
  moe.shared_ffn_hidden = moe.shared_experts > 0 ? moe.ffn_hidden : 0;
  const int64_t first_dense = r.integer_or("first_k_dense_replace", 0);
  const int64_t freq = r.positive_integer_or("moe_layer_freq", 1);
  if (first_dense < 0) r.fail("first_k_dense_replace", "expected >= 0");
  for (int64_t i = 0; i < p.layers; ++i)
    p.blocks.push_back(i >= first_dense && i % freq == 0 ? moe : b);
  if (v3) {
    p.mtp_layers = r.integer_or("num_nextn_predict_layers", 0);
    if (p.mtp_layers < 0 || p.mtp_layers > model_limits::kBlocks)
      r.fail("num_nextn_predict_layers", "expected 0 or more multi-token-prediction modules");
  }
  return p;
}

// Gemma 2 and 3: GeGLU, four norms per block, a window on all but every pattern-th layer (Gemma 2:
// every other, the first local; Gemma 3: sliding_window_pattern, 6), tied embeddings. Gemma 2
// soft-caps attention and final logits; Gemma 3 normalises queries and keys instead. Gemma 3's
// keys follow transformers' Gemma3TextConfig defaults where the file leaves them out (the released
// configs give only a few): 262208 tokens, 8 heads, 4 KV heads, head_dim 256, window 4096, pattern
// 6 (configuration_gemma3.py at commit 008f5c8c29be84d4721dc6d1e0fcd72300580be4).
Parts read_gemma(ObjectReader& r, bool gemma3) {
  Parts p;
  // Every key has a default in Gemma3TextConfig (2304 wide, 26 layers, MLP 9216); Gemma 2's
  // released configs give all of them.
  auto size = [&](const char* key, int64_t gemma3_default) {
    return gemma3 ? r.positive_integer_or(key, gemma3_default) : r.positive_integer(key);
  };
  p.hidden = size("hidden_size", 2304);
  p.layers = size("num_hidden_layers", 26);
  TransformerLayer& b = p.block;
  b.heads = size("num_attention_heads", 8);
  b.kv_heads = r.positive_integer_or("num_key_value_heads", gemma3 ? 4 : b.heads);
  b.head_dim = size("head_dim", 256);
  b.ffn_hidden = size("intermediate_size", 9216);
  b.activation = MlpActivation::kGeglu;  // gelu_pytorch_tanh on the gate
  b.norm = NormKind::kRmsNorm;
  b.bias = r.boolean_or("attention_bias", false);
  b.mlp_bias = false;
  b.rotary = true;
  b.post_norms = true;  // post_attention_layernorm, pre/post_feedforward_layernorm
  b.qk_norm = gemma3;
  b.attn_softcap = gemma3 ? 0 : r.non_negative_or("attn_logit_softcapping", 0);
  const int64_t window = size("sliding_window", 4096);
  const int64_t pattern = gemma3 ? r.positive_integer_or("sliding_window_pattern", 6) : 2;
  for (int64_t i = 0; i < p.layers; ++i) {
    TransformerLayer layer = b;
    layer.window = (i + 1) % pattern == 0 ? 0 : window;
    p.blocks.push_back(layer);
  }
  p.embedding.vocab = size("vocab_size", 262208);
  p.head.final_norm = NormKind::kRmsNorm;
  p.head.tied = r.boolean_or("tie_word_embeddings", true);
  p.head.logit_softcap = r.non_negative_or("final_logit_softcapping", 0);
  p.seq_len = context_length(r, gemma3 ? 131072 : 8192);
  accept_rope_scaling(r);
  return p;
}

// GPT-OSS: attention with biases and sinks, layer_types alternating sliding and full attention,
// MoE in every layer with biased experts (GptOssExperts: gate_up_proj_bias, down_proj_bias).
Parts read_gpt_oss(ObjectReader& r) {
  Parts p = read_decoder(r);
  TransformerLayer& b = p.block;
  b.bias = r.boolean_or("attention_bias", true);
  b.attention_sinks = true;  // GptOssAttention.sinks: one logit per head
  b.experts = r.positive_integer("num_local_experts");
  b.top_k = r.positive_integer("num_experts_per_tok");
  b.mlp_bias = true;
  const int64_t window = r.positive_integer("sliding_window");
  std::vector<std::string> types;
  if (r.has("layer_types")) types = r.strings("layer_types");
  if (!types.empty() && static_cast<int64_t>(types.size()) != p.layers)
    r.fail("layer_types",
           fmt::format("expected one entry per layer ({}), found {}", p.layers, types.size()));
  for (int64_t i = 0; i < p.layers; ++i) {
    TransformerLayer layer = b;
    const std::string type = types.empty() ? (i % 2 == 0 ? "sliding_attention" : "full_attention")
                                           : types[static_cast<size_t>(i)];
    if (type != "sliding_attention" && type != "full_attention")
      r.fail(fmt::format("layer_types[{}]", i),
             fmt::format("expected sliding_attention or full_attention, found \"{}\"", type));
    layer.window = type == "sliding_attention" ? window : 0;
    p.blocks.push_back(layer);
  }
  return p;
}

// Nemotron-H's MoE fields into `b` (routed experts, the shared expert where
// moe_shared_expert_intermediate_size is given, Nemotron 3 Super's LatentMoE width, which
// Megatron-Bridge's bridge maps as it is); returns the routed experts' width (0: no experts).
int64_t read_nemotron_moe(ObjectReader& r, TransformerLayer& b) {
  if (!r.has("n_routed_experts")) {
    if (r.optional_integer("moe_latent_size"))
      r.fail("moe_latent_size", "a latent needs routed experts (n_routed_experts)");
    return 0;
  }
  b.experts = r.positive_integer("n_routed_experts");
  b.top_k = r.positive_integer("num_experts_per_tok");
  if (const int64_t shared = r.integer_or("moe_shared_expert_intermediate_size", 0); shared > 0) {
    b.shared_experts = r.positive_integer_or("n_shared_experts", 1);
    b.shared_ffn_hidden = shared;
  }
  if (const auto latent = r.optional_integer("moe_latent_size")) {
    if (*latent <= 0) r.fail("moe_latent_size", "expected null (no latent) or a width > 0");
    b.moe_latent = *latent;
  }
  return r.positive_integer("moe_intermediate_size");
}

Mamba2Spec read_nemotron_mamba(ObjectReader& r) {
  Mamba2Spec mamba;
  mamba.heads = r.positive_integer("mamba_num_heads");
  mamba.head_dim = r.positive_integer("mamba_head_dim");
  mamba.state = r.positive_integer("ssm_state_size");
  mamba.groups = r.positive_integer_or("n_groups", 1);
  mamba.conv_kernel = r.positive_integer_or("conv_kernel", 4);
  mamba.chunk = r.positive_integer_or("chunk_size", 128);
  return mamba;
}

// The layers' letters: hybrid_override_pattern, or the newer layers_block_type list of "mamba",
// "attention", "mlp" and "moe"; one per layer.
std::string read_hybrid_pattern(ObjectReader& r, int64_t layers) {
  std::string pattern;
  const bool listed = r.has("layers_block_type");
  if (listed) {
    for (const std::string& t : r.strings("layers_block_type")) {
      const char c = t == "mamba"       ? 'M'
                     : t == "attention" ? '*'
                     : t == "mlp"       ? '-'
                     : t == "moe"       ? 'E'
                                        : '?';
      if (c == '?')
        r.fail("layers_block_type",
               fmt::format("expected mamba, attention, mlp or moe, found \"{}\"", t));
      pattern += c;
    }
  } else {
    pattern = r.string("hybrid_override_pattern");
  }
  if (static_cast<int64_t>(pattern.size()) != layers)
    r.fail(listed ? "layers_block_type" : "hybrid_override_pattern",
           fmt::format("expected one entry per layer ({}), found {}", layers, pattern.size()));
  return pattern;
}

// Nemotron-H and Nemotron 3 (NemotronHConfig: model_type nemotron_h): a hybrid of Mamba-2,
// attention, MLP and MoE layers by their pattern, squared-ReLU MLPs (mlp_hidden_act relu2),
// RMSNorm, no biases; MoE layers as read_nemotron_moe reads them; num_nextn_predict_layers
// multi-token-prediction modules of mtp_hybrid_override_pattern (Nemotron 3 Super: one, "*E").
Parts read_nemotron_h(ObjectReader& r) {
  Parts p = read_decoder(r, MlpActivation::kSquaredRelu, /*dense_mlp=*/false);
  TransformerLayer& b = p.block;
  const std::string act = r.string_or("mlp_hidden_act", "relu2");
  if (act != "relu2")
    r.fail("mlp_hidden_act", fmt::format("expected relu2 (squared ReLU), found \"{}\"", act));
  b.bias = r.boolean_or("attention_bias", false);
  b.mlp_bias = r.boolean_or("mlp_bias", false);
  // Megatron-Bridge's bridge (models/nemotronh/nemotron_h_bridge.py at 067f987df03b): "Mamba
  // doesn't use position embeddings" (position_embedding_type none).
  b.rotary = false;
  const int64_t moe_ffn = read_nemotron_moe(r, b);
  const Mamba2Spec mamba = read_nemotron_mamba(r);
  const std::string pattern = read_hybrid_pattern(r, p.layers);
  if (b.ffn_hidden == 0 && pattern.find('-') != std::string::npos)
    r.fail("intermediate_size", "missing: expected the MLP width of the pattern's - layers");
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (const std::string why = hybrid_letter_problem(b, pattern[i]); !why.empty())
      r.fail("hybrid_override_pattern", fmt::format("{} at {}", why, i));
    p.blocks.push_back(hybrid_layer(b, pattern[i], mamba, moe_ffn));
  }
  p.mtp_layers = r.integer_or("num_nextn_predict_layers", 0);
  if (p.mtp_layers < 0 || p.mtp_layers > model_limits::kBlocks)
    r.fail("num_nextn_predict_layers", "expected 0 or more multi-token-prediction modules");
  if (p.mtp_layers > 0) {
    const std::string mtp = r.string("mtp_hybrid_override_pattern");
    if (const std::string why = hybrid_mtp_problem(b, mtp); !why.empty())
      r.fail("mtp_hybrid_override_pattern", why);
    p.mtp_block = hybrid_mtp_layer(b, mtp, mamba, moe_ffn);
  }
  return p;
}

Parts read_opt(ObjectReader& r) {
  Parts p;
  p.hidden = r.positive_integer("hidden_size");
  p.layers = r.positive_integer("num_hidden_layers");
  p.block.heads = r.positive_integer("num_attention_heads");
  p.block.ffn_hidden = r.positive_integer("ffn_dim");
  p.block.activation = MlpActivation::kRelu;
  p.block.bias = r.boolean_or("enable_bias", true);
  p.block.mlp_bias = p.block.bias;
  p.block.dropout = r.non_negative_or("dropout", 0.1);
  const int64_t positions = r.positive_integer_or("max_position_embeddings", 2048);
  p.embedding.max_positions = positions + 2;  // OPT's learned positions are offset by 2
  p.embedding.vocab = r.positive_integer("vocab_size");
  const int64_t proj = r.integer_or("word_embed_proj_dim", p.hidden);
  if (proj != p.hidden)
    r.fail("word_embed_proj_dim",
           fmt::format("embedding projections ({} != hidden {}) are not modelled", proj, p.hidden));
  p.head.tied = r.boolean_or("tie_word_embeddings", true);
  p.seq_len = positions;
  return p;
}

Parts read_bert(ObjectReader& r) {
  Parts p;
  p.hidden = r.positive_integer("hidden_size");
  p.layers = r.positive_integer("num_hidden_layers");
  p.block.heads = r.positive_integer("num_attention_heads");
  p.block.ffn_hidden = r.positive_integer("intermediate_size");
  p.block.causal = false;
  p.block.dropout = r.non_negative_or("hidden_dropout_prob", 0.1);
  p.embedding.max_positions = r.positive_integer_or("max_position_embeddings", 512);
  p.embedding.token_types = r.integer_or("type_vocab_size", 2);
  p.embedding.vocab = r.positive_integer("vocab_size");
  p.embedding.norm = NormKind::kLayerNorm;
  p.embedding.dropout = p.block.dropout;
  // Post-norm blocks: two LayerNorms per block as pre-norm, the embedding's and none at the end.
  p.head.final_norm = NormKind::kNone;
  p.head.transform = true;
  p.head.output_bias = true;
  p.head.tied = r.boolean_or("tie_word_embeddings", true);
  p.seq_len = p.embedding.max_positions;
  return p;
}

constexpr const char* kSupportedTypes =
    "gpt2, llama, mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, "
    "gemma2, gemma3, gemma3_text, phi3, gpt_oss, nemotron_h, opt, bert";

// The model type a config names, or its architecture's family when model_type is missing.
std::string model_type(ObjectReader& r) {
  std::string type = r.string_or("model_type", "");
  if (!type.empty() || !r.has("architectures")) return type;
  const auto arch = r.strings("architectures");
  if (arch.empty()) return type;
  std::string a = arch.front();
  std::transform(a.begin(), a.end(), a.begin(), ::tolower);
  // Longer names first: "qwen2moe" before "qwen2", "mixtral" before "mistral".
  for (const char* t :
       {"gpt2", "mixtral", "mistral", "llama", "opt", "bert", "qwen3moe", "qwen2moe", "qwen3",
        "qwen2", "deepseekv3", "deepseekv2", "gemma3", "gemma2", "phi3", "gptoss", "nemotronh"}) {
    if (a.find(t) == std::string::npos) continue;
    std::string name = t;
    for (auto [from, to] :
         {std::pair{"qwen3moe", "qwen3_moe"}, std::pair{"qwen2moe", "qwen2_moe"},
          std::pair{"deepseekv3", "deepseek_v3"}, std::pair{"deepseekv2", "deepseek_v2"},
          std::pair{"gptoss", "gpt_oss"}, std::pair{"nemotronh", "nemotron_h"}})
      if (name == from) name = to;
    return name;
  }
  return type;
}

Parts read_parts(ObjectReader& r, const std::string& type) {
  if (type == "gpt2") return read_gpt2(r);
  if (type == "llama" || type == "mistral") return read_llama(r, false);
  if (type == "mixtral") return read_llama(r, true);
  if (type == "qwen2") return read_qwen(r, false, false);
  if (type == "qwen2_moe") return read_qwen(r, false, true);
  if (type == "qwen3") return read_qwen(r, true, false);
  if (type == "qwen3_moe") return read_qwen(r, true, true);
  if (type == "deepseek_v2") return read_deepseek(r, false);
  if (type == "deepseek_v3") return read_deepseek(r, true);
  if (type == "gemma2") return read_gemma(r, false);
  if (type == "gemma3_text") return read_gemma(r, true);
  if (type == "phi3") return read_phi3(r);
  if (type == "gpt_oss") return read_gpt_oss(r);
  if (type == "nemotron_h") return read_nemotron_h(r);
  if (type == "opt") return read_opt(r);
  if (type == "bert") return read_bert(r);
  r.fail("model_type",
         fmt::format("expected a supported Hugging Face model type ({}), found \"{}\"",
                     kSupportedTypes, type));
}

}  // namespace

ModelSpec model_from_hf_config(const Document& doc) {
  ObjectReader top(doc);
  std::string type = model_type(top);
  // Gemma 3's multimodal config holds the language model in text_config (its vision tower is not
  // modelled: the text model is what trains on text).
  std::optional<ObjectReader> text;
  if (type == "gemma3") {
    text.emplace(top.object("text_config"));
    type = "gemma3_text";
  }
  ObjectReader& r = text ? *text : top;
  Parts p = read_parts(r, type);
  if (p.layers > model_limits::kBlocks)
    r.fail(type == "gpt2" ? "n_layer" : "num_hidden_layers",
           fmt::format("expected at most {} layers (hetplan's limit), found {}",
                       model_limits::kBlocks, p.layers));
  expand(p);
  for (auto& b : p.blocks) {
    if (b.kv_heads == 0 && b.has_attention()) b.kv_heads = b.heads;
    if (b.head_dim == 0 && b.has_attention()) {
      if (p.hidden % b.heads != 0)
        throw InputError(doc.origin, "num_attention_heads",
                         "expected a divisor of the hidden size");
      b.head_dim = p.hidden / b.heads;
    }
    if (b.window < 0) r.fail("sliding_window", "expected null or a window > 0");
  }
  p.head.vocab = p.embedding.vocab;

  ModelSpec m;
  m.origin = doc.origin;
  std::string name = top.string_or("_name_or_path", "");
  if (name.empty()) name = std::filesystem::path(doc.origin).parent_path().filename().string();
  m.name = name.empty() ? type : name;
  m.description =
      fmt::format("{} from a Hugging Face config ({} layers, hidden {})", type, p.layers, p.hidden);
  m.source = doc.origin;
  m.seq_len = p.seq_len;
  // torch_dtype is how the checkpoint is stored (often float32 or float16), not how it trains:
  // mixed-precision training computes in bf16 (fp16 where the GPU has no bf16), as the
  // frameworks do. A model file's `dtype` chooses otherwise.
  m.dtype = Dtype::kBf16;
  m.layers.push_back({"embedding", p.hidden, m.seq_len, p.embedding});
  for (int64_t i = 0; i < p.layers; ++i)
    m.layers.push_back(
        {fmt::format("block{}", i), p.hidden, m.seq_len, p.blocks[static_cast<size_t>(i)]});
  for (int64_t i = 0; i < p.mtp_layers; ++i) {
    // DeepSeek-V3: the main model's last layer's structure; Nemotron 3: its own pattern's.
    TransformerLayer b = p.mtp_block ? *p.mtp_block : p.blocks.back();
    b.mtp_vocab = p.embedding.vocab;
    m.layers.push_back({fmt::format("mtp{}", i), p.hidden, m.seq_len, b});
  }
  m.layers.push_back({"lm_head", p.hidden, m.seq_len, p.head});
  validate_model(m);
  return m;
}

}  // namespace hetplan
