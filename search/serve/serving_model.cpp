#include "search/serve/serving_model.h"

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::serve {

namespace {

// Decoder-only block with RMSNorm, no biases, SwiGLU MLP (LLaMA family).
struct LlamaShape {
  const char* name;
  int layers;
  int64_t hidden, heads, kv_heads, head_dim, ffn_hidden;
};

// Figures from the models' Hugging Face configs: meta-llama/Llama-2-70b-hf (Touvron et al. 2023,
// GQA with 8 KV heads) and huggyllama/llama-30b (LLaMA-1 "30B", 32.5B parameters).
constexpr LlamaShape kBuiltin[] = {
    {"llama2-70b", 80, 8192, 64, 8, 128, 28672},
    {"llama1-30b", 60, 6656, 52, 52, 128, 17920},
};

}  // namespace

ServingModel builtin_serving_model(std::string_view name) {
  constexpr double kFp16Bytes = 2;
  for (const auto& s : kBuiltin) {
    if (name != s.name) continue;
    const double q_o = 2.0 * s.hidden * s.heads * s.head_dim;
    const double k_v = 2.0 * s.hidden * s.kv_heads * s.head_dim;
    const double mlp = 3.0 * s.hidden * s.ffn_hidden;
    const double norms = 2.0 * s.hidden;
    ServingModel m;
    m.name = s.name;
    m.num_layers = s.layers;
    m.layer_weight_bytes = (q_o + k_v + mlp + norms) * kFp16Bytes;
    m.kv_bytes_per_token_layer = 2.0 * s.kv_heads * s.head_dim * kFp16Bytes;
    m.activation_bytes_per_token = s.hidden * kFp16Bytes;
    return m;
  }
  throw InputError(fmt::format(
      "unknown model '{}' for serving: until model presets land, `serve` knows llama2-70b and "
      "llama1-30b",
      name));
}

}  // namespace hetplan::serve
