// The GEMMs of a layer's passes. A framework's Linear stores W as [out, in] row-major and computes
// Y[T, out] = X[T, in] W^T. cuBLAS is column-major, where a row-major [r, c] matrix reads as its
// transpose, so (PyTorch's own calls, see aten/src/ATen/native/cuda/Blas.cpp):
//   F  Y^T  = op_T(W)  X^T         -> TN, m = out, n = T,   k = in
//   B  dX^T = W^T      dY^T        -> NN, m = in,  n = T,   k = out
//   W  dW^T = X^T      op_T(dY^T)  -> NT, m = in,  n = out, k = T
// with T = micro_batch * seq_len tokens. Megatron tensor parallelism of width t splits the
// column-parallel layers' `out` (QKV, FC1 / gate+up, the vocabulary of the LM head) and the
// row-parallel layers' `in` (attention output, FC2) by t. Attention scores and values run inside
// the fused attention kernel and are timed there, not here.
#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/common/layer_plan.h"

namespace hetplan::profiler {
namespace {

void add_linear(std::vector<LayerGemm>& out, const std::string& name, int64_t in, int64_t outs,
                int64_t tokens) {
  out.push_back({name, Pass::kForward, GemmShape{outs, tokens, in, 1, true, false}});
  out.push_back({name, Pass::kBackwardInput, GemmShape{in, tokens, outs, 1, false, false}});
  out.push_back({name, Pass::kBackwardWeight, GemmShape{in, outs, tokens, 1, false, true}});
}

int64_t kv_heads_per_rank(const TransformerLayer& b, int64_t tp) {
  const int64_t kv = b.kv_heads > 0 ? b.kv_heads : b.heads;
  return kv >= tp ? kv / tp : 1;  // fewer KV heads than ranks: each rank keeps a copy of one
}

}  // namespace

std::string_view to_string(Pass pass) {
  switch (pass) {
    case Pass::kForward:
      return "F";
    case Pass::kBackwardInput:
      return "B";
    case Pass::kBackwardWeight:
      return "W";
  }
  return "?";
}

bool tp_divides(const LayerSpec& layer, int64_t tp) {
  if (tp < 1) return false;
  if (const auto* b = layer.block()) {
    const int64_t kv = b->kv_heads > 0 ? b->kv_heads : b->heads;
    return b->heads % tp == 0 && b->ffn_hidden % tp == 0 && (kv % tp == 0 || tp % kv == 0);
  }
  if (const auto* h = layer.head()) return h->vocab >= tp;
  return true;
}

std::vector<LayerGemm> layer_gemms(const LayerSpec& layer, int64_t micro_batch, int64_t tp) {
  if (!tp_divides(layer, tp))
    throw InputError(fmt::format("layer {}: tensor width {} does not divide its heads or FFN",
                                 layer.name, tp));
  std::vector<LayerGemm> out;
  const int64_t tokens = micro_batch * layer.seq_len;
  const int64_t h = layer.hidden;
  if (const auto* b = layer.block()) {
    const int64_t d = b->head_dim > 0 ? b->head_dim : h / b->heads;
    const int64_t q = b->heads / tp * d;
    const int64_t kv = kv_heads_per_rank(*b, tp) * d;
    const int64_t ffn = b->ffn_hidden / tp;
    const int64_t experts = std::max<int64_t>(1, b->experts);
    // MoE: each expert sees top_k / experts of the tokens on average (balanced routing).
    const int64_t expert_tokens =
        experts > 1 ? std::max<int64_t>(1, tokens * b->top_k / experts) : tokens;
    add_linear(out, "qkv", h, q + 2 * kv, tokens);
    add_linear(out, "attn_out", q, h, tokens);
    if (experts > 1) add_linear(out, "router", h, experts, tokens);
    const int64_t up = b->activation == MlpActivation::kSwiglu ? 2 * ffn : ffn;  // gate + up fused
    add_linear(out, experts > 1 ? "expert_fc1" : "fc1", h, up, expert_tokens);
    add_linear(out, experts > 1 ? "expert_fc2" : "fc2", ffn, h, expert_tokens);
  } else if (const auto* head = layer.head()) {
    if (head->transform) add_linear(out, "mlm_transform", h, h, tokens);
    add_linear(out, "lm_head", h, (head->vocab + tp - 1) / tp, tokens);
  }
  return out;
}

}  // namespace hetplan::profiler
