// hetplan's own model format (YAML or JSON); see docs/formats.md, "Model files".
#include <optional>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"

namespace hetplan {
namespace {

NormKind read_norm(ObjectReader& r, std::string_view key, NormKind fallback) {
  const std::string v =
      r.choice_or(key, {"none", "layernorm", "rmsnorm"}, std::string(to_string(fallback)));
  return v == "none"        ? NormKind::kNone
         : v == "layernorm" ? NormKind::kLayerNorm
                            : NormKind::kRmsNorm;
}

MlpActivation read_activation(ObjectReader& r, MlpActivation fallback) {
  const std::string v = r.choice_or("activation", {"gelu", "relu", "relu2", "swiglu", "geglu"},
                                    std::string(to_string(fallback)));
  return v == "gelu"     ? MlpActivation::kGelu
         : v == "relu"   ? MlpActivation::kRelu
         : v == "relu2"  ? MlpActivation::kSquaredRelu
         : v == "swiglu" ? MlpActivation::kSwiglu
                         : MlpActivation::kGeglu;
}

MlaSpec read_mla(ObjectReader& r) {
  MlaSpec m;
  m.q_lora_rank = r.integer_or("q_lora_rank", 0);
  if (m.q_lora_rank < 0) r.fail("q_lora_rank", "expected 0 (no query bottleneck) or > 0");
  m.kv_lora_rank = r.positive_integer("kv_lora_rank");
  m.qk_nope_head_dim = r.positive_integer("qk_nope_head_dim");
  m.qk_rope_head_dim = r.positive_integer("qk_rope_head_dim");
  m.v_head_dim = r.positive_integer("v_head_dim");
  r.finish();
  return m;
}

// A block description as written: 0 in a size means "derive it" (kv_heads = heads, head_dim =
// hidden / heads, ffn_hidden = 4 x hidden). moe_ffn_hidden (0: ffn_hidden) is the routed experts'
// width, so that one description holds a model's dense blocks (ffn_hidden) and its MoE blocks;
// window_pattern n > 1: every n-th block attends globally, the others in `window`.
struct BlockFields {
  TransformerLayer block;
  int64_t hidden = 0;
  int64_t seq_len = 0;
  int64_t moe_ffn_hidden = 0;
  int64_t window_pattern = 1;
};

// Reads a block description; every field falls back to `defaults`. Sizes derived from the width
// and head count are derived again when those change. Does not call finish().
BlockFields read_block(ObjectReader& r, const BlockFields& defaults) {
  BlockFields out = defaults;
  TransformerLayer& b = out.block;
  const bool shape_changed = r.has("heads") || r.has("hidden");
  out.hidden = r.positive_integer_or("hidden", defaults.hidden);
  out.seq_len = r.positive_integer_or("seq_len", defaults.seq_len);
  b.heads = r.positive_integer_or("heads", defaults.block.heads);
  b.kv_heads = r.positive_integer_or("kv_heads", shape_changed ? 0 : defaults.block.kv_heads);
  b.head_dim = r.positive_integer_or("head_dim", shape_changed ? 0 : defaults.block.head_dim);
  b.ffn_hidden =
      r.positive_integer_or("ffn_hidden", r.has("hidden") ? 0 : defaults.block.ffn_hidden);
  b.activation = read_activation(r, defaults.block.activation);
  b.norm = read_norm(r, "norm", defaults.block.norm);
  // `bias` sets both; `mlp_bias` the MLP's alone (Hugging Face LLaMA's attention_bias/mlp_bias).
  b.bias = r.boolean_or("bias", defaults.block.bias);
  b.mlp_bias = r.boolean_or("mlp_bias", r.has("bias") ? b.bias : defaults.block.mlp_bias);
  b.rotary = r.boolean_or("rotary", defaults.block.rotary);
  b.causal = r.boolean_or("causal", defaults.block.causal);
  b.dropout = r.non_negative_or("dropout", defaults.block.dropout);
  if (b.dropout >= 1)
    r.fail("dropout", fmt::format("expected 0 <= dropout < 1, found {}", b.dropout));
  b.experts = r.positive_integer_or("experts", defaults.block.experts);
  b.top_k = r.positive_integer_or("top_k", defaults.block.top_k);
  out.moe_ffn_hidden = r.positive_integer_or("moe_ffn_hidden", defaults.moe_ffn_hidden);
  b.qkv_bias = r.boolean_or("qkv_bias", defaults.block.qkv_bias);
  b.window = r.integer_or("window", defaults.block.window);
  if (b.window < 0) r.fail("window", "expected 0 (every earlier key) or a window > 0");
  out.window_pattern = r.positive_integer_or("window_pattern", defaults.window_pattern);
  b.qk_norm = r.boolean_or("qk_norm", defaults.block.qk_norm);
  b.post_norms = r.boolean_or("post_norms", defaults.block.post_norms);
  b.attn_softcap = r.non_negative_or("attn_softcap", defaults.block.attn_softcap);
  b.attention_sinks = r.boolean_or("attention_sinks", defaults.block.attention_sinks);
  if (auto mla = r.optional_object("mla")) b.mla = read_mla(*mla);
  b.shared_experts = r.integer_or("shared_experts", defaults.block.shared_experts);
  if (b.shared_experts < 0) r.fail("shared_experts", "expected >= 0");
  b.shared_ffn_hidden =
      r.positive_integer_or("shared_ffn_hidden", defaults.block.shared_ffn_hidden);
  b.shared_expert_gate = r.boolean_or("shared_expert_gate", defaults.block.shared_expert_gate);
  b.moe_latent = r.integer_or("moe_latent", defaults.block.moe_latent);
  if (b.moe_latent < 0) r.fail("moe_latent", "expected 0 (no latent) or a width > 0");
  return out;
}

// Derives the sizes left at 0 and checks the block; `r` is the group the block ends up in.
void complete_block(BlockFields& f, const ObjectReader& r) {
  TransformerLayer& b = f.block;
  if (f.hidden <= 0)
    r.fail("hidden",
           "missing: expected the block width (here or in block:)" + r.misspelling_hint("hidden"));
  if (b.heads <= 0)
    r.fail("heads",
           "missing: expected the number of attention heads" + r.misspelling_hint("heads"));
  if (b.mla.enabled()) {
    if (b.head_dim == 0) b.head_dim = b.mla.qk_nope_head_dim + b.mla.qk_rope_head_dim;
    if (b.kv_heads == 0) b.kv_heads = b.heads;
  }
  if (b.kv_heads == 0) b.kv_heads = b.heads;
  if (b.heads % b.kv_heads != 0)
    r.fail("kv_heads",
           fmt::format("expected a divisor of heads ({}), found {}", b.heads, b.kv_heads));
  if (b.head_dim == 0) {
    if (f.hidden % b.heads != 0)
      r.fail("heads", fmt::format("expected a divisor of hidden ({}) or an explicit head_dim, "
                                  "found {}",
                                  f.hidden, b.heads));
    b.head_dim = f.hidden / b.heads;
  }
  if (b.ffn_hidden == 0) b.ffn_hidden = 4 * f.hidden;
  if (b.top_k > b.experts)
    r.fail("top_k",
           fmt::format("expected at most the expert count ({}), found {}", b.experts, b.top_k));
  if (b.shared_experts > 0 && b.shared_ffn_hidden == 0)
    r.fail("shared_ffn_hidden", "missing: expected the shared experts' MLP width" +
                                    r.misspelling_hint("shared_ffn_hidden"));
}

// The block at position `index` of a group (counted over the whole model for window patterns):
// dense with the group's ffn_hidden for the first `dense` blocks of the model, else its routed
// experts at moe_ffn_hidden.
TransformerLayer block_at(const BlockFields& g, int64_t index, int64_t dense) {
  TransformerLayer b = g.block;
  if (b.window > 0 && g.window_pattern > 1 && (index + 1) % g.window_pattern == 0) b.window = 0;
  if (index < dense) {
    b.experts = 1;
    b.top_k = 1;
    b.shared_experts = 0;
    b.shared_ffn_hidden = 0;
    b.shared_expert_gate = false;
    b.moe_latent = 0;
  } else if (b.is_moe() && g.moe_ffn_hidden > 0) {
    b.ffn_hidden = g.moe_ffn_hidden;
  }
  return b;
}

Mamba2Spec read_mamba(ObjectReader r) {
  Mamba2Spec m;
  m.heads = r.positive_integer("heads");
  m.head_dim = r.positive_integer("head_dim");
  m.state = r.positive_integer("state");
  m.groups = r.positive_integer_or("groups", 1);
  m.conv_kernel = r.positive_integer_or("conv_kernel", 4);
  m.chunk = r.positive_integer_or("chunk", 128);
  r.finish();
  return m;
}

// The blocks of `hybrid_pattern`: one per letter, from the block description and `mamba`.
void hybrid_blocks(ObjectReader& r, const std::string& pattern, const BlockFields& g,
                   ModelSpec& m) {
  if (pattern.empty() || static_cast<int64_t>(pattern.size()) > model_limits::kBlocks)
    r.fail("hybrid_pattern", fmt::format("expected 1 to {} letters", model_limits::kBlocks));
  const bool has_mamba = pattern.find('M') != std::string::npos;
  const Mamba2Spec mamba = has_mamba ? read_mamba(r.object("mamba")) : Mamba2Spec{};
  if (!has_mamba && r.has("mamba")) r.fail("mamba", "a Mamba-2 mixer needs an M in hybrid_pattern");
  for (size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (const std::string why = hybrid_letter_problem(g.block, c); !why.empty())
      r.fail("hybrid_pattern", fmt::format("{} at {}", why, i));
    m.layers.push_back({fmt::format("block{}", i), g.hidden, g.seq_len,
                        hybrid_layer(g.block, c, mamba, g.moe_ffn_hidden)});
  }
}

}  // namespace

ModelSpec parse_model(const Document& doc) {
  ObjectReader r(doc);
  ModelSpec m;
  m.origin = doc.origin;
  m.name = r.string("name");
  m.description = r.string_or("description", "");
  m.source = r.string_or("source", "");
  m.seq_len = r.positive_integer("seq_len");
  const int64_t vocab = r.positive_integer("vocab");
  if (vocab > model_limits::kVocab)
    r.fail("vocab", fmt::format("expected at most {} (hetplan's limit), found {}",
                                model_limits::kVocab, vocab));
  const std::string dtype = r.string_or("dtype", "bf16");
  // tf32: fp32 weights and activations whose GEMMs run on TF32 tensor cores where the GPU has
  // them (PyTorch's torch.backends.cuda.matmul.allow_tf32, or a container that overrides it).
  if (!parse_dtype(dtype, m.dtype) || m.dtype == Dtype::kFp4)
    r.fail("dtype", fmt::format("expected fp32, tf32, fp16, bf16 or fp8, found \"{}\"", dtype));
  const bool tied = r.boolean_or("tie_embeddings", false);
  // DeepSeek's first_k_dense_replace and num_nextn_predict_layers.
  const int64_t dense = r.integer_or("dense_layers", 0);
  if (dense < 0) r.fail("dense_layers", "expected >= 0 (leading blocks without experts)");
  const int64_t mtp = r.integer_or("mtp_layers", 0);
  // Megatron-Core's --mtp-use-repeated-layer: the modules run one module's weights in turn.
  const bool mtp_repeated = r.boolean_or("mtp_repeated", false);
  if (mtp_repeated && mtp < 2) r.fail("mtp_repeated", "expected mtp_layers of 2 or more to repeat");
  if (mtp < 0 || mtp > model_limits::kBlocks)
    r.fail("mtp_layers", fmt::format("expected 0..{} multi-token-prediction modules, found {}",
                                     model_limits::kBlocks, mtp));

  BlockFields defaults;
  defaults.seq_len = m.seq_len;
  std::optional<ObjectReader> block = r.optional_object("block");
  if (block) defaults = read_block(*block, defaults);

  std::vector<std::pair<int64_t, BlockFields>> groups;
  if (r.has("blocks")) {
    if (r.has("layers"))
      r.fail("layers", "give either layers (a count) or blocks (a list), not both");
    for (auto& g : r.objects("blocks")) {
      const int64_t count = g.positive_integer("count");
      if (count > model_limits::kBlocks)
        g.fail("count", fmt::format("expected at most {} blocks (hetplan's limit), found {}",
                                    model_limits::kBlocks, count));
      BlockFields fields = read_block(g, defaults);
      complete_block(fields, g);
      groups.emplace_back(count, fields);
      g.finish();
    }
    if (groups.empty()) r.fail("blocks", "expected at least one group of blocks");
  } else {
    const int64_t count = r.positive_integer("layers");
    if (count > model_limits::kBlocks)
      r.fail("layers", fmt::format("expected at most {} blocks (hetplan's limit), found {}",
                                   model_limits::kBlocks, count));
    if (!block) r.fail("block", "missing: expected the transformer block (hidden, heads, ...)");
    complete_block(defaults, *block);
    groups.emplace_back(count, defaults);
  }
  if (block) block->finish();

  const int64_t first_hidden = groups.front().second.hidden;
  const int64_t last_hidden = groups.back().second.hidden;

  EmbeddingLayer emb;
  emb.vocab = vocab;
  if (auto e = r.optional_object("embedding")) {
    emb.max_positions = e->integer_or("max_positions", 0);
    if (emb.max_positions < 0) e->fail("max_positions", "expected >= 0");
    emb.token_types = e->integer_or("token_types", 0);
    emb.norm = read_norm(*e, "norm", NormKind::kNone);
    emb.dropout = e->non_negative_or("dropout", 0);
    e->finish();
  }
  if (emb.max_positions > 0 && emb.max_positions < m.seq_len)
    r.fail("embedding.max_positions",
           fmt::format("expected at least seq_len ({}) learned positions, found {}", m.seq_len,
                       emb.max_positions));
  m.layers.push_back({"embedding", first_hidden, m.seq_len, emb});

  int64_t index = 0;
  if (r.has("hybrid_pattern")) {
    const std::string pattern = r.string("hybrid_pattern");
    if (r.has("blocks")) r.fail("hybrid_pattern", "give blocks or hybrid_pattern, not both");
    if (groups.front().first != static_cast<int64_t>(pattern.size()))
      r.fail("layers", fmt::format("expected the {} layers of hybrid_pattern, found {}",
                                   pattern.size(), groups.front().first));
    hybrid_blocks(r, pattern, groups.front().second, m);
    index = static_cast<int64_t>(pattern.size());
  } else {
    for (const auto& [count, g] : groups) {
      for (int64_t i = 0; i < count; ++i, ++index)
        m.layers.push_back(
            {fmt::format("block{}", index), g.hidden, g.seq_len, block_at(g, index, dense)});
    }
  }
  if (dense > index)
    r.fail("dense_layers", fmt::format("expected at most the {} blocks, found {}", index, dense));
  // MTP modules after the main model's last block: its block (DeepSeek-V3: "structure identical
  // to the main model's hidden layers"), or in a hybrid model the block of mtp_pattern (Nemotron
  // 3 Super's "*E"), with the next tokens' embedding and the head's loss.
  const LayerSpec last_block = m.layers.back();
  TransformerLayer mtp_block = *last_block.block();
  if (r.has("mtp_pattern")) {
    if (!r.has("hybrid_pattern"))
      r.fail("mtp_pattern", "belongs to a hybrid model (hybrid_pattern)");
    const std::string pattern = r.string("mtp_pattern");
    const BlockFields& g = groups.front().second;
    if (const std::string why = hybrid_mtp_problem(g.block, pattern); !why.empty())
      r.fail("mtp_pattern", why);
    const Mamba2Spec mamba =
        pattern.find('M') != std::string::npos ? read_mamba(r.object("mamba")) : Mamba2Spec{};
    mtp_block = hybrid_mtp_layer(g.block, pattern, mamba, g.moe_ffn_hidden);
  }
  for (int64_t i = 0; i < mtp; ++i) {
    TransformerLayer b = mtp_block;
    b.mtp_vocab = vocab;
    b.mtp_repeat = mtp_repeated && i > 0;
    m.layers.push_back({fmt::format("mtp{}", i), last_block.hidden, last_block.seq_len, b});
  }

  LmHeadLayer head;
  head.vocab = vocab;
  head.tied = tied;
  if (auto h = r.optional_object("head")) {
    head.final_norm = read_norm(*h, "final_norm", NormKind::kLayerNorm);
    head.transform = h->boolean_or("transform", false);
    head.output_bias = h->boolean_or("output_bias", false);
    head.logit_softcap = h->non_negative_or("logit_softcap", 0);
    h->finish();
  } else {
    head.final_norm = defaults.block.norm;
  }
  if (tied && first_hidden != last_hidden)
    r.fail("tie_embeddings", fmt::format("tied embeddings need the same width at both ends "
                                         "({} and {})",
                                         first_hidden, last_hidden));
  m.layers.push_back({"lm_head", last_hidden, groups.back().second.seq_len, head});
  r.finish();
  validate_model(m);
  return m;
}

}  // namespace hetplan
