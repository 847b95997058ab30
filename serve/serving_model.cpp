#include "serve/serving_model.h"

#include <algorithm>

#include "costmodel/errors.h"

namespace hetplan::serve {

ServingModel serving_model_from(const ModelSpec& model, Dtype dtype) {
  const double bytes = dtype_bytes(dtype);
  ServingModel out;
  out.name = model.name;
  for (const auto& layer : model.layers) {
    const TransformerLayer* block = layer.block();
    if (block == nullptr) continue;  // embedding and LM head stay with the clients' ends
    ++out.num_layers;
    out.layer_weight_bytes =
        std::max(out.layer_weight_bytes, static_cast<double>(layer_parameters(layer)) * bytes);
    const int64_t kv_heads = block->kv_heads > 0 ? block->kv_heads : block->heads;
    out.kv_bytes_per_token_layer =
        std::max(out.kv_bytes_per_token_layer,
                 2.0 * static_cast<double>(kv_heads * block->head_dim) * bytes);
    out.activation_bytes_per_token =
        std::max(out.activation_bytes_per_token, static_cast<double>(layer.hidden) * bytes);
  }
  if (out.num_layers == 0)
    throw InputError(model.origin, "layers", "expected at least one transformer block to serve");
  return out;
}

}  // namespace hetplan::serve
