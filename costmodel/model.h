// Model specifications: a model is a sequence of layers that may differ (embedding, transformer
// blocks of different widths or sequence lengths, MoE blocks, LM head with loss). Loaded from
// presets (presets/models/*.yaml), model files (YAML or JSON) or Hugging Face config.json files.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <variant>
#include <vector>

#include "costmodel/document.h"
#include "costmodel/dtype.h"

namespace hetplan {

enum class NormKind { kNone, kLayerNorm, kRmsNorm };
// GeGLU is Gemma's gated GeLU (gate and up projections, as SwiGLU has); squared ReLU is
// Nemotron-H's (relu2, Megatron-LM's --squared-relu).
enum class MlpActivation { kGelu, kRelu, kSwiglu, kGeglu, kSquaredRelu };
// Whether the MLP is gated: three GEMMs (gate, up, down) instead of two.
inline bool is_gated(MlpActivation a) {
  return a == MlpActivation::kSwiglu || a == MlpActivation::kGeglu;
}

// Token (and learned position / token-type) embedding; vocabulary-parallel under tensor
// parallelism.
struct EmbeddingLayer {
  int64_t vocab = 0;
  int64_t max_positions = 0;        // learned position embeddings; 0 with rotary or none
  int64_t token_types = 0;          // BERT segment embeddings
  NormKind norm = NormKind::kNone;  // BERT normalises the embedding output
  double dropout = 0;
};

// Multi-head latent attention (DeepSeek-V2 and V3; Megatron-Core's MLASelfAttention): queries
// through a low-rank bottleneck of q_lora_rank (0: one projection), keys and values up-projected
// from one latent of kv_lora_rank per token, and a rotary part of qk_rope_head_dim per token shared
// by every head. A head's queries and keys have qk_nope_head_dim + qk_rope_head_dim features (the
// block's head_dim), its values v_head_dim.
struct MlaSpec {
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;  // > 0: the block uses MLA
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
  bool operator==(const MlaSpec&) const = default;
};

// A Mamba-2 mixer (Dao and Gu 2024, "Transformers are SSMs", the SSD layer; Megatron-Core's
// MambaMixer): in_proj to z, x, B, C and dt (2 x heads x head_dim + 2 x groups x state + heads),
// a causal depthwise conv1d of conv_kernel over x, B and C, the chunked state-space scan over
// chunks of `chunk` tokens, a gated RMSNorm of its output with z, and out_proj.
struct Mamba2Spec {
  int64_t heads = 0;  // > 0: the block is a Mamba-2 layer
  int64_t head_dim = 0;
  int64_t state = 0;   // the state's size per group (d_state)
  int64_t groups = 1;  // B and C shared by heads / groups heads each (n_groups)
  int64_t conv_kernel = 4;
  int64_t chunk = 128;  // the scan's chunk of tokens (chunk_size)

  bool enabled() const { return heads > 0; }
  int64_t inner() const { return heads * head_dim; }  // d_inner
  // The convolved channels: x, B and C.
  int64_t conv_channels() const { return inner() + 2 * groups * state; }
  bool operator==(const Mamba2Spec&) const = default;
};

// Pre-norm transformer block: attention and MLP (dense or mixture of experts), Megatron-style
// tensor parallelism (column-parallel QKV and up-projections, row-parallel output projections).
// A hybrid model's layer holds one mixer alone (Megatron-Core's hybrid_override_pattern: M a
// Mamba-2 mixer, * attention, - an MLP, E a mixture of experts): heads 0 has no attention,
// ffn_hidden 0 no MLP.
struct TransformerLayer {
  int64_t heads = 0;
  int64_t kv_heads = 0;    // < heads: grouped-query attention
  int64_t head_dim = 0;    // of queries and keys (and values, except under MLA)
  int64_t ffn_hidden = 0;  // per expert for MoE
  MlpActivation activation = MlpActivation::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  bool bias = true;       // attention: QKV and output projection biases
  bool qkv_bias = false;  // q, k and v biases without the output's (Qwen2), where bias is false
  bool mlp_bias = true;   // MLP: up and down projection biases
  bool rotary = false;
  bool causal = true;
  double dropout = 0;
  int64_t experts = 1;  // > 1: mixture of experts (routed experts)
  int64_t top_k = 1;

  // Attention variants.
  int64_t window = 0;       // sliding-window attention: keys per query, 0 = every earlier key
  bool qk_norm = false;     // an RMSNorm over each head's queries and keys (Qwen3, Gemma 3)
  bool post_norms = false;  // norms on the attention's and the MLP's outputs too (Gemma 2, 3)
  double attn_softcap = 0;  // tanh soft-capping of the attention logits at this value (Gemma 2)
  bool attention_sinks = false;  // a learned logit per head joins each softmax (GPT-OSS)
  MlaSpec mla;
  Mamba2Spec mamba;  // a hybrid model's Mamba-2 layer (then no attention and no MLP)

  // Mixture of experts beyond the routed ones: experts every token runs (DeepSeek, Qwen2-MoE),
  // each shared_ffn_hidden wide, and Qwen2-MoE's sigmoid gate on their output.
  int64_t shared_experts = 0;
  int64_t shared_ffn_hidden = 0;
  bool shared_expert_gate = false;
  // > 0: LatentMoE (Nemotron 3 Super; Megatron-Core's moe_latent_size): the routed experts work in
  // a latent space of this width. A projection (hidden -> latent, replicated over the tensor
  // group) follows the router, the tokens are dispatched, run through the experts (latent ->
  // ffn_hidden -> latent) and combined at this width, and a second projection (latent -> hidden)
  // precedes the shared experts' add, which run on the full hidden state.
  int64_t moe_latent = 0;

  // > 0: a multi-token-prediction module (DeepSeek-V3's MTP, num_nextn_predict_layers): before
  // the block, the embedding of the next tokens (the main model's table, not held here), a norm of
  // it and of the incoming hidden state and a projection of the two joined (2 x hidden -> hidden);
  // after it the final norm, the logits over this vocabulary (the LM head's weights, not held
  // here) and their loss.
  int64_t mtp_vocab = 0;
  // An MTP module that runs the one before it again, its weights shared (Megatron-Core's
  // --mtp-use-repeated-layer): its work counts, its parameters are the other's.
  bool mtp_repeat = false;

  bool is_moe() const { return experts > 1; }
  // The width of the routed experts' input and output (the latent under LatentMoE).
  int64_t expert_width(int64_t hidden) const { return moe_latent > 0 ? moe_latent : hidden; }
  bool has_attention() const { return heads > 0; }
  bool has_mlp() const { return ffn_hidden > 0; }
  bool qkv_biased() const { return bias || qkv_bias; }
  bool operator==(const TransformerLayer&) const = default;
};

// One layer of a hybrid model from its letter in the pattern (Megatron-Core's
// hybrid_override_pattern, megatron/core/ssm/mamba_hybrid_layer_allocation.py Symbols): M a
// Mamba-2 mixer, * `block`'s attention alone, - its dense MLP alone, E its mixture of experts
// alone (at `moe_ffn_hidden` where > 0). hybrid_letter_problem says what is wrong with a letter
// ("" when nothing is).
TransformerLayer hybrid_layer(const TransformerLayer& block, char letter, const Mamba2Spec& mamba,
                              int64_t moe_ffn_hidden = 0);
// The inverse: a block's letter (M, *, -, E); 0 for a block holding attention and an MLP together,
// which the pattern has no letter for.
char hybrid_letter(const TransformerLayer& b);
std::string hybrid_letter_problem(const TransformerLayer& block, char letter);
// A hybrid model's multi-token-prediction block from its pattern (Nemotron 3 Super's
// mtp_hybrid_override_pattern "*E": attention, then the mixture of experts): one letter, or an
// attention followed by an MLP or MoE (* then - or E), which together are one pre-norm transformer
// block. hybrid_mtp_problem says what is wrong with a pattern ("" when nothing is).
TransformerLayer hybrid_mtp_layer(const TransformerLayer& block, const std::string& pattern,
                                  const Mamba2Spec& mamba, int64_t moe_ffn_hidden = 0);
std::string hybrid_mtp_problem(const TransformerLayer& block, const std::string& pattern);
// The inverse: a block's pattern (its letter, or "*-" / "*E" for attention with an MLP or MoE).
std::string hybrid_mtp_pattern(const TransformerLayer& b);

// Final norm, output projection to the vocabulary, and cross-entropy loss.
struct LmHeadLayer {
  int64_t vocab = 0;
  NormKind final_norm = NormKind::kLayerNorm;
  bool tied = false;       // shares the embedding's weights
  bool transform = false;  // BERT MLM head: dense + GeLU + LayerNorm before the projection
  bool output_bias = false;
  double logit_softcap = 0;  // tanh soft-capping of the logits at this value (Gemma 2)
};

enum class LayerKind { kEmbedding, kTransformer, kLmHead };

struct LayerSpec {
  std::string name;
  int64_t hidden = 0;
  int64_t seq_len = 0;  // tokens per sample at this layer
  std::variant<EmbeddingLayer, TransformerLayer, LmHeadLayer> op;

  LayerKind kind() const { return static_cast<LayerKind>(op.index()); }
  const TransformerLayer* block() const { return std::get_if<TransformerLayer>(&op); }
  const EmbeddingLayer* embedding() const { return std::get_if<EmbeddingLayer>(&op); }
  const LmHeadLayer* head() const { return std::get_if<LmHeadLayer>(&op); }
};

struct ModelSpec {
  std::string name;
  std::string description;
  std::string source;   // where its figures come from (paper, config)
  std::string origin;   // the file or preset it was read from
  int64_t seq_len = 0;  // default sequence length (tokens per sample at the input)
  Dtype dtype = Dtype::kBf16;
  std::vector<LayerSpec> layers;

  int64_t num_blocks() const;  // transformer layers (multi-token-prediction modules included)
  // Unique parameters (tied weights counted once).
  int64_t parameters() const;
  // Parameters one token's forward multiplies: all but the routed experts it is not sent to
  // (experts - top_k of them per MoE block) and the input embedding table, which it only indexes
  // (DeepSeek-V3's and GPT-OSS's convention: 36.6B of 671B, 5.1B of 117B). `with_embedding` adds
  // the table back (Qwen's and Mixtral's: 3.3B of Qwen3-30B-A3B's 30.5B).
  int64_t activated_parameters(bool with_embedding = false) const;
  // Whether any block is a mixture of experts.
  bool is_moe() const;
  // Any block holds one mixer alone (a hybrid model's layer: costmodel/model.h hybrid_layer).
  bool is_hybrid() const;
};

// Parameters held by one layer on one rank: tensor-parallel width `tp`, and for the routed experts
// of an MoE block `ep` expert-parallel ranks each holding experts / ep of them at the expert
// tensor width `etp` (0: tp, Megatron-Core's default). A tied head holds a copy of the embedding
// on its own stage, as Megatron-LM does; `unique` = false counts that copy, and a repeated MTP
// module's (TransformerLayer::mtp_repeat) weights, which `unique` counts at the module it
// repeats.
int64_t layer_parameters(const LayerSpec& layer, int64_t tp = 1, bool unique = true, int64_t ep = 1,
                         int64_t etp = 0);
// Of those, the routed experts' (sharded over ep x etp, their gradients reduced over the expert
// data-parallel group).
int64_t expert_parameters(const LayerSpec& layer, int64_t ep = 1, int64_t etp = 1);

// Reads a model: a preset name, a model file (YAML or JSON) or a Hugging Face config.json.
// `seq_len` > 0 overrides the sequence length of every layer that follows the model's default.
ModelSpec load_model(const std::string& name_or_path, int64_t seq_len = 0);
// Parses a model document in hetplan's own format.
ModelSpec parse_model(const Document& doc);
// Builds a model from a Hugging Face config.json: gpt2, llama (with Llama 3.x rope scaling),
// mistral, mixtral, qwen2, qwen2_moe, qwen3, qwen3_moe, deepseek_v2, deepseek_v3, gemma2, gemma3
// (its text model), phi3, gpt_oss, opt, bert.
ModelSpec model_from_hf_config(const Document& doc);
// Returns a copy with the sequence length changed (layers scale with it when they followed it).
ModelSpec with_seq_len(const ModelSpec& model, int64_t seq_len);
// Checks internal consistency; throws InputError naming `model.origin`.
void validate_model(const ModelSpec& model);

// Sizes beyond these are input errors: far above any model trained (the largest have about 100
// blocks, widths near 2^15, vocabularies near 2^18, contexts of 2^20 tokens), and small enough
// that hetplan's parameter, byte and FLOP counts stay exact in 64 bits.
namespace model_limits {
constexpr int64_t kBlocks = 100'000;
constexpr int64_t kWidth = int64_t{1} << 20;  // hidden, ffn_hidden, head_dim
constexpr int64_t kHeads = int64_t{1} << 16;  // heads, experts
constexpr int64_t kVocab = int64_t{1} << 27;
constexpr int64_t kSeqLen = int64_t{1} << 26;
}  // namespace model_limits

// Model presets: name and one-line description, from presets/models/.
struct PresetInfo {
  std::string name;
  std::string description;
};
std::vector<PresetInfo> model_presets();

std::string_view to_string(NormKind kind);
std::string_view to_string(MlpActivation activation);
std::string_view to_string(LayerKind kind);

}  // namespace hetplan
