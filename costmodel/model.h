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
enum class MlpActivation { kGelu, kRelu, kSwiglu };

// Token (and learned position / token-type) embedding; vocabulary-parallel under tensor
// parallelism.
struct EmbeddingLayer {
  int64_t vocab = 0;
  int64_t max_positions = 0;        // learned position embeddings; 0 with rotary or none
  int64_t token_types = 0;          // BERT segment embeddings
  NormKind norm = NormKind::kNone;  // BERT normalises the embedding output
  double dropout = 0;
};

// Pre-norm transformer block: attention and MLP (dense or mixture of experts), Megatron-style
// tensor parallelism (column-parallel QKV and up-projections, row-parallel output projections).
struct TransformerLayer {
  int64_t heads = 0;
  int64_t kv_heads = 0;  // < heads: grouped-query attention
  int64_t head_dim = 0;
  int64_t ffn_hidden = 0;  // per expert for MoE
  MlpActivation activation = MlpActivation::kGelu;
  NormKind norm = NormKind::kLayerNorm;
  bool bias = true;      // attention: QKV and output projection biases
  bool mlp_bias = true;  // MLP: up and down projection biases
  bool rotary = false;
  bool causal = true;
  double dropout = 0;
  int64_t experts = 1;  // > 1: mixture of experts
  int64_t top_k = 1;
};

// Final norm, output projection to the vocabulary, and cross-entropy loss.
struct LmHeadLayer {
  int64_t vocab = 0;
  NormKind final_norm = NormKind::kLayerNorm;
  bool tied = false;       // shares the embedding's weights
  bool transform = false;  // BERT MLM head: dense + GeLU + LayerNorm before the projection
  bool output_bias = false;
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

  int64_t num_blocks() const;  // transformer layers
  // Unique parameters (tied weights counted once).
  int64_t parameters() const;
  // Whether any block is a mixture of experts.
  bool is_moe() const;
};

// Parameters held by one layer on one tensor-parallel rank of width `tp` (a tied head holds a copy
// of the embedding on its own stage, as Megatron-LM does; `unique` = false counts that copy).
int64_t layer_parameters(const LayerSpec& layer, int64_t tp = 1, bool unique = true);

// Reads a model: a preset name, a model file (YAML or JSON) or a Hugging Face config.json.
// `seq_len` > 0 overrides the sequence length of every layer that follows the model's default.
ModelSpec load_model(const std::string& name_or_path, int64_t seq_len = 0);
// Parses a model document in hetplan's own format.
ModelSpec parse_model(const Document& doc);
// Builds a model from a Hugging Face config.json (GPT-2, LLaMA/Mistral, Mixtral, OPT, BERT).
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
