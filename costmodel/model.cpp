#include "costmodel/model.h"

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/preset_table.h"

namespace hetplan {

std::string_view to_string(NormKind kind) {
  switch (kind) {
    case NormKind::kNone:
      return "none";
    case NormKind::kLayerNorm:
      return "layernorm";
    case NormKind::kRmsNorm:
      return "rmsnorm";
  }
  return "?";
}

std::string_view to_string(MlpActivation a) {
  switch (a) {
    case MlpActivation::kGelu:
      return "gelu";
    case MlpActivation::kRelu:
      return "relu";
    case MlpActivation::kSwiglu:
      return "swiglu";
    case MlpActivation::kGeglu:
      return "geglu";
    case MlpActivation::kSquaredRelu:
      return "relu2";
  }
  return "?";
}

std::string_view to_string(LayerKind kind) {
  switch (kind) {
    case LayerKind::kEmbedding:
      return "embedding";
    case LayerKind::kTransformer:
      return "transformer";
    case LayerKind::kLmHead:
      return "lm_head";
  }
  return "?";
}

namespace {

int64_t norm_parameters(NormKind kind, int64_t hidden) {
  switch (kind) {
    case NormKind::kNone:
      return 0;
    case NormKind::kLayerNorm:
      return 2 * hidden;  // gain and bias
    case NormKind::kRmsNorm:
      return hidden;  // gain only
  }
  return 0;
}

// Attention's weights on one tensor-parallel rank: column-parallel QKV (or MLA's up-projections),
// row-parallel output, replicated output bias, MLA's down-projections and their norms replicated
// (Megatron-Core runs them duplicated on every tensor rank), q/k norms of one head's width.
int64_t attention_parameters(const TransformerLayer& b, int64_t hidden, int64_t tp) {
  if (!b.has_attention()) return 0;
  const int64_t heads = b.heads;
  int64_t p = 0;
  int64_t out_in = heads * b.head_dim;  // the output projection's input width
  if (b.mla.enabled()) {
    const MlaSpec& m = b.mla;
    const int64_t qk = m.qk_nope_head_dim + m.qk_rope_head_dim;
    if (m.q_lora_rank > 0) {
      p += hidden * m.q_lora_rank + m.q_lora_rank;  // down-projection and its RMSNorm
      p += m.q_lora_rank * heads * qk / tp;
    } else {
      p += hidden * heads * qk / tp;
    }
    p += hidden * (m.kv_lora_rank + m.qk_rope_head_dim) + m.kv_lora_rank;  // down and norm
    p += m.kv_lora_rank * heads * (m.qk_nope_head_dim + m.v_head_dim) / tp;
    out_in = heads * m.v_head_dim;
  } else {
    const int64_t qkv = (heads + 2 * b.kv_heads) * b.head_dim;
    p += hidden * qkv / tp;
    if (b.qkv_biased()) p += qkv / tp;
  }
  p += out_in * hidden / tp;
  if (b.bias) p += hidden;
  if (b.qk_norm) p += 2 * b.head_dim;  // one gain of head_dim for queries, one for keys
  if (b.attention_sinks) p += heads / tp;
  return p;
}

// One dense MLP of width `ffn` split tp ways (up and gate column-parallel, down row-parallel, the
// down bias replicated).
int64_t mlp_parameters(const TransformerLayer& b, int64_t hidden, int64_t ffn, int64_t tp) {
  const int64_t up = is_gated(b.activation) ? 2 * ffn : ffn;
  int64_t p = hidden * up / tp + ffn * hidden / tp;
  if (b.mlp_bias) p += up / tp + hidden;
  return p;
}

int64_t routed_expert_parameters(const TransformerLayer& b, int64_t hidden, int64_t ep,
                                 int64_t etp) {
  if (!b.is_moe()) return 0;
  return mlp_parameters(b, b.expert_width(hidden), b.ffn_hidden, etp) * (b.experts / ep);
}

// A Mamba-2 mixer on one tensor-parallel rank (Megatron-Core's MambaMixer): in_proj
// column-parallel over z, x, B, C and dt (heads, groups and their channels split tp ways), the
// conv1d's weights and biases over x, B and C, dt_bias, A_log and D per head, the gated norm's
// gain over d_inner, out_proj row-parallel; no biases on the projections.
int64_t mamba_parameters(const Mamba2Spec& m, int64_t hidden, int64_t tp) {
  const int64_t in_proj = 2 * m.inner() + 2 * m.groups * m.state + m.heads;
  return hidden * in_proj / tp + m.conv_channels() * (m.conv_kernel + 1) / tp + 3 * m.heads / tp +
         m.inner() / tp + m.inner() * hidden / tp;
}

int64_t block_parameters(const TransformerLayer& b, int64_t hidden, int64_t tp, int64_t ep,
                         int64_t etp) {
  if (b.mamba.enabled())  // the mixer and its pre-norm
    return mamba_parameters(b.mamba, hidden, tp) + norm_parameters(b.norm, hidden);
  int64_t p = attention_parameters(b, hidden, tp);
  if (!b.has_mlp()) {
    // An attention-only layer (a hybrid model's *): its pre-norm (and post-norm) alone.
    return p + (1 + (b.post_norms ? 1 : 0)) * norm_parameters(b.norm, hidden);
  }
  if (b.is_moe()) {
    p += routed_expert_parameters(b, hidden, ep, etp);
    p += hidden * b.experts;  // router, replicated
    // LatentMoE's projections into the latent and back (TELinear parallel_mode duplicated: whole
    // on every tensor-parallel rank; moe_layer.py at d98e8a64dd).
    if (b.moe_latent > 0) p += 2 * hidden * b.moe_latent;
    p += mlp_parameters(b, hidden, b.shared_ffn_hidden, tp) * b.shared_experts;
    if (b.shared_expert_gate) p += hidden;
  } else {
    p += mlp_parameters(b, hidden, b.ffn_hidden, tp);
  }
  const int64_t mixers = b.has_attention() ? 2 : 1;  // an MLP-only layer (- or E): one pre-norm
  const int64_t norms = mixers * (b.post_norms ? 2 : 1);
  p += norms * norm_parameters(b.norm, hidden);
  if (b.mtp_vocab > 0) {
    // The next tokens' norm and the incoming hidden state's, the projection of the two joined
    // (2h -> h, column-parallel in Megatron-Core) and the final norm before the shared head.
    p += 3 * norm_parameters(b.norm, hidden) + 2 * hidden * hidden / tp;
  }
  return p;
}

}  // namespace

int64_t layer_parameters(const LayerSpec& layer, int64_t tp, bool unique, int64_t ep, int64_t etp) {
  const int64_t h = layer.hidden;
  if (const auto* e = layer.embedding()) {
    return e->vocab * h / tp + e->max_positions * h + e->token_types * h +
           norm_parameters(e->norm, h);
  }
  if (const auto* b = layer.block()) {
    if (b->mtp_repeat && unique) return 0;
    return block_parameters(*b, h, tp, ep, etp > 0 ? etp : tp);
  }
  const auto& head = std::get<LmHeadLayer>(layer.op);
  int64_t p = norm_parameters(head.final_norm, h);
  if (head.transform) p += h * h + h + norm_parameters(NormKind::kLayerNorm, h);
  if (head.output_bias) p += head.vocab / tp;
  if (!head.tied || !unique) p += head.vocab * h / tp;
  return p;
}

int64_t expert_parameters(const LayerSpec& layer, int64_t ep, int64_t etp) {
  const auto* b = layer.block();
  return b ? routed_expert_parameters(*b, layer.hidden, ep, etp) : 0;
}

TransformerLayer hybrid_layer(const TransformerLayer& block, char letter, const Mamba2Spec& mamba,
                              int64_t moe_ffn_hidden) {
  TransformerLayer b = block;
  const auto no_attention = [&b] { b.heads = b.kv_heads = b.head_dim = 0; };
  const auto dense = [&b] {
    b.experts = b.top_k = 1;
    b.shared_experts = b.shared_ffn_hidden = 0;
    b.shared_expert_gate = false;
    b.moe_latent = 0;
  };
  switch (letter) {
    case 'M':
      no_attention();
      dense();
      b.ffn_hidden = 0;
      b.mamba = mamba;
      break;
    case '*':
      dense();
      b.ffn_hidden = 0;
      break;
    case '-':
      no_attention();
      dense();
      break;
    default:  // 'E'
      no_attention();
      if (moe_ffn_hidden > 0) b.ffn_hidden = moe_ffn_hidden;
      break;
  }
  return b;
}

char hybrid_letter(const TransformerLayer& b) {
  if (b.mamba.enabled()) return 'M';
  if (!b.has_mlp()) return '*';
  if (b.has_attention()) return 0;
  return b.is_moe() ? 'E' : '-';
}

std::string hybrid_letter_problem(const TransformerLayer& block, char letter) {
  if (letter != 'M' && letter != '*' && letter != '-' && letter != 'E')
    return fmt::format(
        "expected letters M (Mamba-2), * (attention), - (MLP) and E (mixture of experts), found "
        "'{}'",
        letter);
  if (letter == 'E' && !block.is_moe()) return "an E layer needs experts > 1";
  return "";
}

std::string hybrid_mtp_problem(const TransformerLayer& block, const std::string& pattern) {
  const bool pair =
      pattern.size() == 2 && pattern[0] == '*' && (pattern[1] == '-' || pattern[1] == 'E');
  if (pattern.size() != 1 && !pair)
    return fmt::format(
        "expected one letter, or * followed by - or E (one transformer block), "
        "found \"{}\"",
        pattern);
  for (char c : pattern)
    if (std::string why = hybrid_letter_problem(block, c); !why.empty()) return why;
  return "";
}

TransformerLayer hybrid_mtp_layer(const TransformerLayer& block, const std::string& pattern,
                                  const Mamba2Spec& mamba, int64_t moe_ffn_hidden) {
  if (pattern.size() == 1) return hybrid_layer(block, pattern[0], mamba, moe_ffn_hidden);
  // * with - or E: the block's attention and its MLP (the - layer keeps what * drops).
  TransformerLayer b = hybrid_layer(block, pattern[1], mamba, moe_ffn_hidden);
  b.heads = block.heads;
  b.kv_heads = block.kv_heads;
  b.head_dim = block.head_dim;
  return b;
}

std::string hybrid_mtp_pattern(const TransformerLayer& b) {
  if (const char c = hybrid_letter(b); c != 0) return std::string(1, c);
  return b.is_moe() ? "*E" : "*-";
}

int64_t ModelSpec::num_blocks() const {
  int64_t n = 0;
  for (const auto& l : layers) n += l.kind() == LayerKind::kTransformer;
  return n;
}

int64_t ModelSpec::parameters() const {
  int64_t n = 0;
  for (const auto& l : layers) n += layer_parameters(l, 1, /*unique=*/true);
  return n;
}

int64_t ModelSpec::activated_parameters(bool with_embedding) const {
  int64_t n = 0;
  for (const auto& l : layers) {
    if (const auto* e = l.embedding(); e && !with_embedding) {
      n += layer_parameters(l) - e->vocab * l.hidden;  // positions and norms are added, not indexed
      continue;
    }
    if (const auto* b = l.block(); b && b->mtp_repeat) continue;  // the weights it repeats
    n += layer_parameters(l);
    if (const auto* b = l.block(); b && b->is_moe())
      n -=
          (b->experts - b->top_k) * mlp_parameters(*b, b->expert_width(l.hidden), b->ffn_hidden, 1);
  }
  return n;
}

bool ModelSpec::is_hybrid() const {
  for (const auto& l : layers)
    if (const auto* b = l.block(); b && hybrid_letter(*b) != 0) return true;
  return false;
}

bool ModelSpec::is_moe() const {
  for (const auto& l : layers)
    if (const auto* b = l.block(); b && b->is_moe()) return true;
  return false;
}

namespace {

// What a block mixes with: attention, a Mamba-2 mixer or an MLP, at least one, and a Mamba-2
// layer alone (a hybrid model's M).
template <typename Fail, typename AtMost>
void validate_mixers(const TransformerLayer& b, const std::string& at, const Fail& fail,
                     const AtMost& at_most) {
  namespace lim = model_limits;
  const Mamba2Spec& m = b.mamba;
  if (m.enabled()) {
    if (b.has_attention() || b.has_mlp() || b.is_moe())
      fail(at + ".mamba", "a Mamba-2 layer holds its mixer alone: expected heads 0 and no MLP");
    at_most(at + ".mamba.heads", m.heads, lim::kHeads);
    at_most(at + ".mamba.head_dim", m.head_dim, lim::kWidth);
    at_most(at + ".mamba.state", m.state, lim::kWidth);
    if (m.head_dim <= 0) fail(at + ".mamba.head_dim", "expected a head size > 0");
    if (m.state <= 0) fail(at + ".mamba.state", "expected a state size > 0");
    if (m.groups <= 0 || m.heads % m.groups != 0)
      fail(at + ".mamba.groups",
           fmt::format("expected a divisor of the Mamba heads ({}), found {}", m.heads, m.groups));
    if (m.conv_kernel <= 0 || m.conv_kernel > 64)
      fail(at + ".mamba.conv_kernel", "expected a convolution width of 1..64");
    if (m.chunk <= 0 || m.chunk > lim::kSeqLen)
      fail(at + ".mamba.chunk", "expected a scan chunk of tokens > 0");
    return;
  }
  if (!b.has_attention() && !b.has_mlp())
    fail(at + ".heads", "expected attention heads > 0, an MLP (ffn_hidden > 0) or a Mamba-2 mixer");
  if (b.has_attention()) {
    if (b.kv_heads <= 0 || b.heads % b.kv_heads != 0)
      fail(at + ".kv_heads",
           fmt::format("expected a divisor of heads ({}), found {}", b.heads, b.kv_heads));
    if (b.head_dim <= 0) fail(at + ".head_dim", "expected a head size > 0");
  } else if (b.heads < 0) {
    fail(at + ".heads", "expected a head count >= 0");
  }
  if (b.ffn_hidden < 0) fail(at + ".ffn_hidden", "expected an MLP width >= 0");
  if (b.is_moe() && !b.has_mlp()) fail(at + ".ffn_hidden", "expected the experts' MLP width > 0");
}

// The attention variants, MLA, shared experts and MTP of one block.
template <typename Fail, typename AtMost>
void validate_block_variants(const TransformerLayer& b, const std::string& at, const Fail& fail,
                             const AtMost& at_most) {
  namespace lim = model_limits;
  if (b.window < 0) fail(at + ".window", "expected 0 (every earlier key) or a window > 0");
  at_most(at + ".window", b.window, lim::kSeqLen);
  if (b.attn_softcap < 0) fail(at + ".attn_softcap", "expected 0 (none) or a cap > 0");
  if (b.mla.enabled()) {
    const MlaSpec& m = b.mla;
    for (auto [key, v] :
         {std::pair{"q_lora_rank", m.q_lora_rank}, std::pair{"kv_lora_rank", m.kv_lora_rank},
          std::pair{"qk_nope_head_dim", m.qk_nope_head_dim},
          std::pair{"qk_rope_head_dim", m.qk_rope_head_dim}, std::pair{"v_head_dim", m.v_head_dim}})
      at_most(at + "." + key, v, lim::kWidth);
    if (m.q_lora_rank < 0) fail(at + ".q_lora_rank", "expected 0 (no query bottleneck) or > 0");
    if (m.qk_nope_head_dim <= 0 || m.qk_rope_head_dim <= 0 || m.v_head_dim <= 0)
      fail(at + ".qk_nope_head_dim",
           "MLA needs qk_nope_head_dim, qk_rope_head_dim and v_head_dim > 0");
    if (b.head_dim != m.qk_nope_head_dim + m.qk_rope_head_dim)
      fail(at + ".head_dim",
           fmt::format("expected qk_nope_head_dim + qk_rope_head_dim ({}) under MLA, found {}",
                       m.qk_nope_head_dim + m.qk_rope_head_dim, b.head_dim));
    if (b.kv_heads != b.heads)
      fail(at + ".kv_heads", "MLA up-projects keys and values for every head: expected heads");
  }
  if (b.shared_experts < 0) fail(at + ".shared_experts", "expected >= 0");
  at_most(at + ".shared_experts", b.shared_experts, lim::kHeads);
  at_most(at + ".shared_ffn_hidden", b.shared_ffn_hidden, lim::kWidth);
  if (b.shared_experts > 0 && !b.is_moe())
    fail(at + ".shared_experts", "shared experts belong to a mixture of experts (experts > 1)");
  if (b.shared_experts > 0 && b.shared_ffn_hidden <= 0)
    fail(at + ".shared_ffn_hidden", "expected the shared experts' MLP width > 0");
  if (b.shared_expert_gate && b.shared_experts == 0)
    fail(at + ".shared_expert_gate", "a gate on shared experts needs shared_experts > 0");
  if (b.moe_latent < 0) fail(at + ".moe_latent", "expected 0 (no latent) or a width > 0");
  at_most(at + ".moe_latent", b.moe_latent, lim::kWidth);
  if (b.moe_latent > 0 && !b.is_moe())
    fail(at + ".moe_latent", "a latent belongs to a mixture of experts (experts > 1)");
  if (b.mtp_vocab < 0) fail(at + ".mtp_vocab", "expected >= 0");
  at_most(at + ".mtp_vocab", b.mtp_vocab, lim::kVocab);
}

}  // namespace

// A repeated MTP module follows the one it repeats, alike but for the flag.
template <typename Fail>
void validate_mtp_repeat(const ModelSpec& m, size_t i, const std::string& at, const Fail& fail) {
  const TransformerLayer* prev = i > 0 ? m.layers[i - 1].block() : nullptr;
  TransformerLayer b = *m.layers[i].block();
  b.mtp_repeat = prev ? prev->mtp_repeat : false;
  if (!prev || prev->mtp_vocab == 0 || b != *prev || m.layers[i - 1].hidden != m.layers[i].hidden)
    fail(at + ".mtp_repeat",
         "expected right after an MTP module of the same shape (the one it repeats)");
}

void validate_model(const ModelSpec& m) {
  auto fail = [&](const std::string& key, const std::string& what) {
    throw InputError(m.origin, key, what);
  };
  namespace lim = model_limits;
  auto at_most = [&](const std::string& key, int64_t value, int64_t limit) {
    if (value > limit)
      fail(key, fmt::format("expected at most {} (hetplan's limit, far above any model), found {}",
                            limit, value));
  };
  if (m.layers.empty()) fail("layers", "expected at least one layer");
  if (m.seq_len <= 0) fail("seq_len", "expected a sequence length > 0");
  at_most("seq_len", m.seq_len, lim::kSeqLen);
  at_most("layers", static_cast<int64_t>(m.layers.size()), lim::kBlocks + 2);
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const LayerSpec& l = m.layers[i];
    const std::string at = fmt::format("layers[{}] ({})", i, l.name);
    if (l.hidden <= 0) fail(at + ".hidden", "expected a width > 0");
    if (l.seq_len <= 0) fail(at + ".seq_len", "expected a sequence length > 0");
    at_most(at + ".hidden", l.hidden, lim::kWidth);
    at_most(at + ".seq_len", l.seq_len, lim::kSeqLen);
    if (const auto* b = l.block()) {
      at_most(at + ".heads", b->heads, lim::kHeads);
      at_most(at + ".head_dim", b->head_dim, lim::kWidth);
      at_most(at + ".ffn_hidden", b->ffn_hidden, lim::kWidth);
      at_most(at + ".experts", b->experts, lim::kHeads);
      validate_mixers(*b, at, fail, at_most);
      if (b->experts <= 0) fail(at + ".experts", "expected 1 (dense) or more experts");
      if (b->top_k <= 0 || b->top_k > b->experts)
        fail(at + ".top_k", fmt::format("expected 1..{} (the expert count)", b->experts));
      if (b->dropout < 0 || b->dropout >= 1) fail(at + ".dropout", "expected 0 <= dropout < 1");
      validate_block_variants(*b, at, fail, at_most);
      if (b->mtp_repeat) validate_mtp_repeat(m, i, at, fail);
    } else if (const auto* e = l.embedding()) {
      if (e->vocab <= 0) fail(at + ".vocab", "expected a vocabulary size > 0");
      if (e->max_positions < 0) fail(at + ".max_positions", "expected >= 0");
      at_most(at + ".vocab", e->vocab, lim::kVocab);
      at_most(at + ".max_positions", e->max_positions, lim::kSeqLen);
      at_most(at + ".token_types", e->token_types, lim::kVocab);
    } else if (const auto* h = l.head()) {
      if (h->vocab <= 0) fail(at + ".vocab", "expected a vocabulary size > 0");
      if (h->logit_softcap < 0) fail(at + ".logit_softcap", "expected 0 (none) or a cap > 0");
      at_most(at + ".vocab", h->vocab, lim::kVocab);
    }
  }
}

std::vector<PresetInfo> model_presets() {
  std::vector<PresetInfo> out;
  for (const auto& p : embedded_presets()) {
    if (p.kind != "models") continue;
    ModelSpec m = parse_model(parse_document(p.text, std::string(p.path), DocumentFormat::kYaml));
    out.push_back({m.name, m.description});
  }
  return out;
}

ModelSpec with_seq_len(const ModelSpec& model, int64_t seq_len) {
  if (seq_len <= 0 || seq_len == model.seq_len) return model;
  if (seq_len > model_limits::kSeqLen)
    throw InputError(
        fmt::format("--seq-len: expected at most {} tokens (hetplan's limit), found {}",
                    model_limits::kSeqLen, seq_len));
  ModelSpec out = model;
  for (auto& l : out.layers) {
    // Layers at other lengths (a funnel) scale with the input length.
    const int64_t scaled = l.seq_len * seq_len / model.seq_len;
    if (scaled * model.seq_len != l.seq_len * seq_len || scaled <= 0)
      throw InputError(model.origin, "seq_len",
                       fmt::format("--seq-len {} does not scale layer {} (sequence {} of {}) to a "
                                   "whole number of tokens",
                                   seq_len, l.name, l.seq_len, model.seq_len));
    l.seq_len = scaled;
    if (auto* e = std::get_if<EmbeddingLayer>(&l.op);
        e && e->max_positions > 0 && e->max_positions < seq_len)
      throw InputError(model.origin, "embedding.max_positions",
                       fmt::format("the model has {} learned positions; --seq-len {} needs more",
                                   e->max_positions, seq_len));
  }
  out.seq_len = seq_len;
  return out;
}

ModelSpec load_model(const std::string& name_or_path, int64_t seq_len) {
  ModelSpec model;
  if (const EmbeddedPreset* p = find_preset("models", name_or_path)) {
    model = parse_model(parse_document(p->text, std::string(p->path), DocumentFormat::kYaml));
  } else if (looks_like_file_path(name_or_path) || std::filesystem::exists(name_or_path)) {
    Document doc = load_document(name_or_path);
    // A Hugging Face config.json has "model_type"; ours has "layers" or "blocks".
    if (doc.root.is_object() &&
        (doc.root.contains("model_type") || doc.root.contains("architectures")))
      model = model_from_hf_config(doc);
    else
      model = parse_model(doc);
  } else {
    std::string names;
    for (const auto& info : model_presets()) names += (names.empty() ? "" : ", ") + info.name;
    throw InputError(
        fmt::format("unknown model \"{}\": expected a preset ({}) or a model file "
                    "(.yaml, .json, or a Hugging Face config.json)",
                    name_or_path, names));
  }
  validate_model(model);
  return with_seq_len(model, seq_len);
}

}  // namespace hetplan
