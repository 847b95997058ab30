// Fused self-attention, flash-style, forward and backward on tensor cores: softmax(scale Q K^T
// [+ causal mask]) V for q, k, v, o of shape [batch, seq, heads, head_dim] (or [batch, heads,
// seq, head_dim]), bf16 or fp16, fp32 accumulation, head_dim 64 or 128, equal query and key
// lengths. The forward also writes lse = logsumexp of each row of scaled scores ([batch, heads,
// seq], fp32), which the backward uses to recompute P. Launchers are asynchronous on `stream`,
// throw std::invalid_argument for what the device or the kernels do not support (see
// attention_support) and KernelError when a launch fails.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "kernels/dtype.h"

namespace hetplan::kernels {

enum class AttentionLayout {
  kBSHD,  // [batch, seq, heads, head_dim]: what a QKV projection produces (FlashAttention's)
  kBHSD,  // [batch, heads, seq, head_dim]: PyTorch's scaled_dot_product_attention
};

struct AttentionShape {
  int batch = 1, heads = 1, seq = 1, head_dim = 64;
  bool causal = true;
  float scale = 0.0f;  // softmax scale; 0 means 1 / sqrt(head_dim)
  AttentionLayout layout = AttentionLayout::kBSHD;

  float softmax_scale() const;
};

// Empty when the current device can run attention for this element type and head_dim, else why
// not: bf16 needs sm_80+ (tensor-core bf16); on sm_75 fp16 with head_dim 64 runs (head_dim 128
// needs more than its 64 KB of shared memory per block).
std::string attention_support(DType dtype, int head_dim);

// Whether the experimental Hopper (wgmma) attention kernels were built
// (HETPLAN_EXPERIMENTAL_KERNELS) and the current device runs them (compute capability 9.0); the
// entry points below then dispatch to them. Always false in the default build.
bool hopper_attention_available();

// o = softmax(scale q k^T) v, lse saved.
template <class T>
void attention_forward(const T* q, const T* k, const T* v, T* o, float* lse,
                       const AttentionShape& shape, cudaStream_t stream);

// dq, dk, dv from dout and the forward's o and lse. dk and dv are bit-reproducible; dq is summed
// with fp32 atomics (order varies, so its last bits may). Needs a workspace.
template <class T>
void attention_backward(const T* q, const T* k, const T* v, const T* o, const T* dout,
                        const float* lse, T* dq, T* dk, T* dv, const AttentionShape& shape,
                        void* workspace, cudaStream_t stream);
size_t attention_backward_workspace_bytes(const AttentionShape& shape);

// Floating-point operations the way FlashAttention counts them: 4 b h s^2 d for the forward
// (halved when causal), 2.5 times that for the backward (five matrix products to the forward's
// two, recomputation of S included).
double attention_forward_flops(const AttentionShape& shape);
double attention_backward_flops(const AttentionShape& shape);

}  // namespace hetplan::kernels
