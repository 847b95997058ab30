// Models from Hugging Face config.json files: GPT-2, LLaMA / Mistral, Mixtral, OPT, BERT.
// Unknown keys are allowed here (the file is not ours); missing required keys are errors.
#include <algorithm>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/model.h"

namespace hetplan {
namespace {

// Long-context models default to this many tokens per sample; --seq-len overrides.
constexpr int64_t kDefaultMaxSeqLen = 4096;

struct Parts {
  EmbeddingLayer embedding;
  TransformerLayer block;
  LmHeadLayer head;
  int64_t hidden = 0;
  int64_t layers = 0;
  int64_t seq_len = 0;
};

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

Parts read_llama(ObjectReader& r, bool moe) {
  Parts p;
  p.hidden = r.positive_integer("hidden_size");
  p.layers = r.positive_integer("num_hidden_layers");
  p.block.heads = r.positive_integer("num_attention_heads");
  p.block.kv_heads = r.positive_integer_or("num_key_value_heads", p.block.heads);
  p.block.head_dim = r.positive_integer_or("head_dim", p.hidden / p.block.heads);
  p.block.ffn_hidden = r.positive_integer("intermediate_size");
  p.block.activation = MlpActivation::kSwiglu;
  p.block.norm = NormKind::kRmsNorm;
  // Hugging Face LlamaAttention gives q, k, v and o biases by attention_bias, LlamaMLP its three
  // projections by mlp_bias.
  p.block.bias = r.boolean_or("attention_bias", false);
  p.block.mlp_bias = r.boolean_or("mlp_bias", false);
  p.block.rotary = true;
  if (moe) {
    p.block.experts = r.positive_integer("num_local_experts");
    p.block.top_k = r.positive_integer("num_experts_per_tok");
  }
  p.embedding.vocab = r.positive_integer("vocab_size");
  p.head.final_norm = NormKind::kRmsNorm;
  p.head.tied = r.boolean_or("tie_word_embeddings", false);
  p.seq_len = std::min(r.positive_integer_or("max_position_embeddings", 2048), kDefaultMaxSeqLen);
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

}  // namespace

ModelSpec model_from_hf_config(const Document& doc) {
  ObjectReader r(doc);
  std::string type = r.string_or("model_type", "");
  if (type.empty() && r.has("architectures")) {
    const auto arch = r.strings("architectures");
    if (!arch.empty()) {
      std::string a = arch.front();
      std::transform(a.begin(), a.end(), a.begin(), ::tolower);
      for (const char* t : {"gpt2", "mixtral", "mistral", "llama", "opt", "bert"})
        if (a.find(t) != std::string::npos) {
          type = t;
          break;
        }
    }
  }
  Parts p;
  if (type == "gpt2") {
    p = read_gpt2(r);
  } else if (type == "llama" || type == "mistral") {
    p = read_llama(r, false);
  } else if (type == "mixtral") {
    p = read_llama(r, true);
  } else if (type == "opt") {
    p = read_opt(r);
  } else if (type == "bert") {
    p = read_bert(r);
  } else {
    r.fail("model_type", fmt::format("expected a supported Hugging Face model type (gpt2, llama, "
                                     "mistral, mixtral, opt, bert), found \"{}\"",
                                     type));
  }
  if (p.layers > model_limits::kBlocks)
    r.fail(type == "gpt2" ? "n_layer" : "num_hidden_layers",
           fmt::format("expected at most {} layers (hetplan's limit), found {}",
                       model_limits::kBlocks, p.layers));
  if (p.block.kv_heads == 0) p.block.kv_heads = p.block.heads;
  if (p.block.head_dim == 0) {
    if (p.hidden % p.block.heads != 0)
      throw InputError(doc.origin, "num_attention_heads", "expected a divisor of the hidden size");
    p.block.head_dim = p.hidden / p.block.heads;
  }
  p.head.vocab = p.embedding.vocab;

  ModelSpec m;
  m.origin = doc.origin;
  std::string name = r.string_or("_name_or_path", "");
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
    m.layers.push_back({fmt::format("block{}", i), p.hidden, m.seq_len, p.block});
  m.layers.push_back({"lm_head", p.hidden, m.seq_len, p.head});
  validate_model(m);
  return m;
}

}  // namespace hetplan
