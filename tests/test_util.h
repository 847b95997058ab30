// Small helpers shared by tests: substring checks, the message of the InputError a call throws,
// runs of device indices, a strategy from its JSON text, and LLaMA-style blocks to cost.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "search/strategy.h"

namespace hetplan::testing {

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

// The message of the `Error` (InputError unless said) `f` throws; empty when it throws none.
template <class Error = InputError>
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// The integers from `from` up to `to` (not included): a run of device indices.
inline std::vector<int64_t> range(int64_t from, int64_t to) {
  std::vector<int64_t> out;
  for (int64_t i = from; i < to; ++i) out.push_back(i);
  return out;
}

// A strategy from its JSON text, as a strategy file "s.json" holding it would be read.
inline Strategy read_strategy(const std::string& json) {
  const Json j = Json::parse(json);
  return strategy_from_json(ObjectReader(j, "s.json"));
}

// A LLaMA-style block: hidden 1024, 16 heads of 64 (4 KV heads), SwiGLU 2816, RMSNorm, rotary, no
// biases, over `seq` tokens.
inline LayerSpec llama_block(int64_t seq) {
  TransformerLayer b;
  b.heads = 16;
  b.kv_heads = 4;
  b.head_dim = 64;
  b.ffn_hidden = 2816;
  b.activation = MlpActivation::kSwiglu;
  b.norm = NormKind::kRmsNorm;
  b.bias = b.mlp_bias = false;
  b.rotary = true;
  return {"block0", 1024, seq, b};
}

// The same block with a mixture of `experts` MLPs of width 512, `top_k` of them a token.
inline LayerSpec moe_block(int64_t experts, int64_t top_k, int64_t seq = 1024) {
  LayerSpec l = llama_block(seq);
  TransformerLayer b = *l.block();
  b.ffn_hidden = 512;
  b.experts = experts;
  b.top_k = top_k;
  return {"block0", 1024, seq, b};
}

}  // namespace hetplan::testing
