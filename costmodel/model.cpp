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

int64_t block_parameters(const TransformerLayer& b, int64_t hidden, int64_t tp) {
  const int64_t q = b.heads * b.head_dim;
  const int64_t kv = b.kv_heads * b.head_dim;
  // Column-parallel QKV and row-parallel output: weights split tp ways, output bias replicated.
  int64_t attention = hidden * (q + 2 * kv) / tp + q * hidden / tp;
  if (b.bias) attention += (q + 2 * kv) / tp + hidden;
  const int64_t up = b.activation == MlpActivation::kSwiglu ? 2 * b.ffn_hidden : b.ffn_hidden;
  int64_t expert = hidden * up / tp + b.ffn_hidden * hidden / tp;
  if (b.mlp_bias) expert += up / tp + hidden;
  int64_t mlp = expert * b.experts;
  if (b.experts > 1) mlp += hidden * b.experts;  // router, replicated
  return attention + mlp + 2 * norm_parameters(b.norm, hidden);
}

}  // namespace

int64_t layer_parameters(const LayerSpec& layer, int64_t tp, bool unique) {
  const int64_t h = layer.hidden;
  if (const auto* e = layer.embedding()) {
    return e->vocab * h / tp + e->max_positions * h + e->token_types * h +
           norm_parameters(e->norm, h);
  }
  if (const auto* b = layer.block()) return block_parameters(*b, h, tp);
  const auto& head = std::get<LmHeadLayer>(layer.op);
  int64_t p = norm_parameters(head.final_norm, h);
  if (head.transform) p += h * h + h + norm_parameters(NormKind::kLayerNorm, h);
  if (head.output_bias) p += head.vocab / tp;
  if (!head.tied || !unique) p += head.vocab * h / tp;
  return p;
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

bool ModelSpec::is_moe() const {
  for (const auto& l : layers)
    if (const auto* b = l.block(); b && b->experts > 1) return true;
  return false;
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
      if (b->heads <= 0) fail(at + ".heads", "expected a head count > 0");
      if (b->kv_heads <= 0 || b->heads % b->kv_heads != 0)
        fail(at + ".kv_heads",
             fmt::format("expected a divisor of heads ({}), found {}", b->heads, b->kv_heads));
      if (b->head_dim <= 0) fail(at + ".head_dim", "expected a head size > 0");
      if (b->ffn_hidden <= 0) fail(at + ".ffn_hidden", "expected an MLP width > 0");
      if (b->experts <= 0) fail(at + ".experts", "expected 1 (dense) or more experts");
      if (b->top_k <= 0 || b->top_k > b->experts)
        fail(at + ".top_k", fmt::format("expected 1..{} (the expert count)", b->experts));
      if (b->dropout < 0 || b->dropout >= 1) fail(at + ".dropout", "expected 0 <= dropout < 1");
    } else if (const auto* e = l.embedding()) {
      if (e->vocab <= 0) fail(at + ".vocab", "expected a vocabulary size > 0");
      if (e->max_positions < 0) fail(at + ".max_positions", "expected >= 0");
      at_most(at + ".vocab", e->vocab, lim::kVocab);
      at_most(at + ".max_positions", e->max_positions, lim::kSeqLen);
      at_most(at + ".token_types", e->token_types, lim::kVocab);
    } else if (const auto* h = l.head()) {
      if (h->vocab <= 0) fail(at + ".vocab", "expected a vocabulary size > 0");
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
