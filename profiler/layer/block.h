// A transformer block's shard on one GPU, built from cuBLASLt GEMMs and the kernels/ launchers,
// with its forward (F), input-gradient (B) and weight-gradient (W) passes as separate calls:
//   GPT style:   LayerNorm, QKV (+bias), attention, out-proj, bias+dropout+residual, LayerNorm,
//                FC1 (+bias), GeLU, FC2, bias+dropout+residual;
//   LLaMA style: RMSNorm, QKV, rotary, attention, out-proj, residual, RMSNorm, gate+up, SwiGLU,
//                down, residual.
// Tensor parallelism of width tp runs one rank's shard (heads/tp, ffn/tp) without the collectives.
// Several copies ("sets") of weights and activations rotate so that repeated passes do not run
// from L2. Row-major [tokens, features] activations; weights [out, in] as PyTorch stores them.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "profiler/common/layer_plan.h"
#include "profiler/gemm/lt_gemm.h"

namespace hetplan::profiler {

// Sizes of one rank's shard.
struct BlockDims {
  int64_t batch = 1, seq = 0, tokens = 0, hidden = 0, heads = 0, kv_heads = 0, head_dim = 0;
  int64_t q_dim = 0, kv_dim = 0, qkv_out = 0, ffn = 0, up = 0;
  bool gpt = true;  // LayerNorm + GeLU (+ biases when `bias`), else RMSNorm + SwiGLU
  bool bias = true, rotary = false, causal = true;
  float dropout = 0;
};
BlockDims block_dims(const LayerTimingCase& c);

// A device tensor to check after a pass.
struct CheckedTensor {
  std::string name;
  const void* data = nullptr;
  int64_t count = 0;
  Dtype dtype = Dtype::kBf16;
};

class TransformerBlock {
 public:
  // Empty when this build and GPU can run the case, else why not.
  static std::string unsupported_reason(const LayerTimingCase& c);
  // Bytes one set (weights, saved activations, temporaries, gradients) takes on the device.
  static int64_t set_bytes(const LayerTimingCase& c);

  TransformerBlock(const LayerTimingCase& c, int sets, cudaStream_t stream);
  ~TransformerBlock();
  TransformerBlock(const TransformerBlock&) = delete;
  TransformerBlock& operator=(const TransformerBlock&) = delete;

  int sets() const;
  void forward(int set);
  void backward_input(int set);
  void backward_weight(int set);
  // NaN-poisons every activation, gradient and weight gradient of `set` (before a checked run).
  void poison(int set);
  // What each pass writes, for the written-and-finite check.
  std::vector<CheckedTensor> outputs(int set) const;

  // Activation bytes kept for backward by one set (sum of its saved tensors).
  int64_t saved_bytes() const;
  // cudaMemGetInfo's drop when one set's saved-activation arena was allocated.
  int64_t saved_memgetinfo_bytes() const;
  // Bytes the B pass hands to the W pass (activation gradients W reads).
  int64_t b_to_w_bytes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace hetplan::profiler
