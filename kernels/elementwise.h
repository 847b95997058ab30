// Element-wise kernels of a transformer layer, T = float or bf16 (fp32 math): GeLU and SwiGLU
// forward/backward, bias + dropout + residual forward and its backward, and the fused AdamW step.
// Launchers are asynchronous on `stream` and throw KernelError when a launch fails.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/dtype.h"

namespace hetplan::kernels {

// y = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), element-wise over n values.
template <class T>
void gelu_forward(const T* x, T* y, int64_t n, cudaStream_t stream);
// dx = dy * gelu'(x).
template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, int64_t n, cudaStream_t stream);

// out[r, c] = silu(in[r, c]) * in[r, cols + c]; in is [rows, 2 cols] (gate, then up).
template <class T>
void swiglu_forward(const T* in, T* out, int64_t rows, int cols, cudaStream_t stream);
// din ([rows, 2 cols]) from dout ([rows, cols]) and in.
template <class T>
void swiglu_backward(const T* in, const T* dout, T* din, int64_t rows, int cols,
                     cudaStream_t stream);

// Dropout with drop probability p; the mask of element i is a function of (seed, offset, i)
// only (Philox4x32-10, see philox.h), so the backward recomputes it and nothing is stored.
// Successive calls should advance `offset` by ceil(elements / 4).
struct Dropout {
  float p = 0.0f;
  uint64_t seed = 0;
  uint64_t offset = 0;
};

// y = residual + dropout(x + bias) over [rows, cols]; bias ([cols]) may be null.
template <class T>
void bias_dropout_residual_forward(const T* x, const T* bias, const T* residual, T* y, int64_t rows,
                                   int cols, const Dropout& dropout, cudaStream_t stream);
// dx = dy * keep / (1 - p) over n = rows * cols values. The residual's gradient is dy itself and
// the bias gradient is column_sum(dx) (norms.h), the W-pass part.
template <class T>
void dropout_backward(const T* dy, T* dx, int64_t n, const Dropout& dropout, cudaStream_t stream);

// AdamW hyper-parameters for one step (step counts from 1).
struct AdamWConfig {
  float lr = 1e-4f, beta1 = 0.9f, beta2 = 0.95f, eps = 1e-8f, weight_decay = 0.1f;
  float grad_scale = 1.0f;  // multiplies the gradient first (1 / loss scale, clipping factor)
  int step = 1;
};

// One fused AdamW step over n parameters held in flat buffers: master weights, moments and
// gradients fp32 (updated in place, gradients read), param = bf16(master) written.
void adamw_step(float* master, bf16* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWConfig& config, cudaStream_t stream);

}  // namespace hetplan::kernels
