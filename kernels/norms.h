// LayerNorm and RMSNorm over the last dimension of a row-major [rows, cols] matrix, T = float or
// bf16 (fp32 math). Forward saves per-row statistics (fp32) for the backward; the backward is
// split into the input gradient (B pass) and the weight gradients (W pass, fp32, deterministic).
// Launchers are asynchronous on `stream`; they throw std::invalid_argument for sizes they do not
// support and KernelError when a launch fails. Longest rows: forward 32768 bf16 / 16384 fp32
// values, backward half that (a quarter of each when cols is not a multiple of 8 resp. 4).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/dtype.h"

namespace hetplan::kernels {

// y = (x - mean) * rstd * gamma + beta; mean and rstd ([rows], fp32) saved.
template <class T>
void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, float* mean, float* rstd,
                       int64_t rows, int cols, float eps, cudaStream_t stream);
// dx from dy, x, gamma and the saved mean, rstd.
template <class T>
void layernorm_backward_input(const T* x, const T* gamma, const float* mean, const float* rstd,
                              const T* dy, T* dx, int64_t rows, int cols, cudaStream_t stream);
// dgamma = sum_rows dy * xhat, dbeta = sum_rows dy ([cols], fp32, overwritten).
template <class T>
void layernorm_backward_weight(const T* x, const float* mean, const float* rstd, const T* dy,
                               float* dgamma, float* dbeta, int64_t rows, int cols, void* workspace,
                               cudaStream_t stream);

// y = x * rstd * gamma; rstd ([rows], fp32) saved.
template <class T>
void rmsnorm_forward(const T* x, const T* gamma, T* y, float* rstd, int64_t rows, int cols,
                     float eps, cudaStream_t stream);
template <class T>
void rmsnorm_backward_input(const T* x, const T* gamma, const float* rstd, const T* dy, T* dx,
                            int64_t rows, int cols, cudaStream_t stream);
// dgamma = sum_rows dy * xhat ([cols], fp32, overwritten).
template <class T>
void rmsnorm_backward_weight(const T* x, const float* rstd, const T* dy, float* dgamma,
                             int64_t rows, int cols, void* workspace, cudaStream_t stream);

// out = sum over rows of dy ([cols], fp32): the gradient of a bias added to every row.
template <class T>
void column_sum(const T* dy, float* out, int64_t rows, int cols, void* workspace,
                cudaStream_t stream);

// Workspace bytes the weight-gradient launchers need (partial sums of 256-row chunks).
size_t norm_weight_workspace_bytes(int64_t rows, int cols);

}  // namespace hetplan::kernels
