// Row-wise kernels of a transformer: softmax cross-entropy over [tokens, vocab] logits,
// embedding gather and scatter-add backward, rotary position embedding. T = float or bf16 (fp32
// math). Launchers are asynchronous on `stream` and throw KernelError when a launch fails.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace hetplan::kernels {

// loss[t] = logsumexp(logits[t, :]) - logits[t, label[t]] (fp32), lse[t] saved for the backward;
// labels < 0 are ignored (loss 0). One read of the logits; any vocab size and alignment.
template <class T>
void cross_entropy_forward(const T* logits, const int32_t* labels, float* loss, float* lse,
                           int64_t tokens, int64_t vocab, cudaStream_t stream);
// dlogits = (softmax(logits) - onehot(label)) * dloss[t] per row; zero rows for ignored labels.
template <class T>
void cross_entropy_backward(const T* logits, const int32_t* labels, const float* lse,
                            const float* dloss, T* dlogits, int64_t tokens, int64_t vocab,
                            cudaStream_t stream);

// out[t, :] = weight[ids[t], :]; ids in [0, vocab).
template <class T>
void embedding_forward(const int32_t* ids, const T* weight, T* out, int64_t tokens, int hidden,
                       cudaStream_t stream);
// dweight[v, :] += sum of dout[t, :] over t with ids[t] == v, dweight fp32 [vocab, hidden].
// Deterministic: the ids are radix-sorted (stable, CUB) and each touched row is summed by one
// block in token order, so repeated runs give identical bits. Needs a workspace.
template <class T>
void embedding_backward(const int32_t* ids, const T* dout, float* dweight, int64_t tokens,
                        int64_t vocab, int hidden, void* workspace, size_t workspace_bytes,
                        cudaStream_t stream);
size_t embedding_backward_workspace_bytes(int64_t tokens, int64_t vocab);

// cos and sin tables ([seq, head_dim / 2], fp32) of angle pos * base^(-2i / head_dim).
void rotary_tables(float* cos, float* sin, int seq, int head_dim, float base, cudaStream_t stream);
// Rotary embedding of x [tokens, heads, head_dim] (tokens = batch * seq, position t % seq),
// LLaMA's rotate-half pairing (i, i + head_dim / 2), into y (contiguous). head_dim even. x's
// tokens are x_token_stride elements apart (0: contiguous; more: Q or K inside a fused QKV
// projection's output, read in place); y may equal x when x is contiguous.
template <class T>
void rotary_forward(const T* x, T* y, const float* cos, const float* sin, int64_t tokens, int heads,
                    int head_dim, int seq, cudaStream_t stream, int64_t x_token_stride = 0);
// dx from dy: the rotation by the opposite angle.
template <class T>
void rotary_backward(const T* dy, T* dx, const float* cos, const float* sin, int64_t tokens,
                     int heads, int head_dim, int seq, cudaStream_t stream);

}  // namespace hetplan::kernels
