/* A C interface to a few of hetplan's kernels (RMSNorm, SwiGLU, rotary), for callers outside C++
 * (the PyTorch reference harness loads libhetplan_kernels_c.so with ctypes:
 * scripts/reference/fused.py). Buffers are
 * device pointers, row-major and contiguous; `stream` is a cudaStream_t (NULL: the legacy default
 * stream). Launches are asynchronous. Every call returns 0, or nonzero with a message from
 * hk_last_error() (unsupported dtype or row length, a failed launch).
 *
 * dtype: HK_FP32 (float) or HK_BF16 (bfloat16); statistics and weight gradients are fp32. */
#ifndef HETPLAN_KERNELS_C_H
#define HETPLAN_KERNELS_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

enum { HK_FP32 = 0, HK_BF16 = 1 };

/* Raised whenever the functions' meaning changes; callers check it before using the library. */
int hk_abi_version(void);
/* The message of this thread's last failed call ("" when none has failed). */
const char* hk_last_error(void);

/* RMSNorm over the last dimension of [rows, cols]: y = x * rstd * gamma, rstd ([rows]) saved. */
int hk_rmsnorm_forward(int dtype, const void* x, const void* gamma, void* y, float* rstd,
                       int64_t rows, int cols, float eps, void* stream);
/* dx from dy, x, gamma and the saved rstd. */
int hk_rmsnorm_backward_input(int dtype, const void* x, const void* gamma, const float* rstd,
                              const void* dy, void* dx, int64_t rows, int cols, void* stream);
/* dgamma ([cols], fp32, overwritten) = sum over rows of dy * x * rstd; `workspace` holds
 * hk_norm_weight_workspace_bytes(rows, cols) bytes of device memory. */
int hk_rmsnorm_backward_weight(int dtype, const void* x, const float* rstd, const void* dy,
                               float* dgamma, int64_t rows, int cols, void* workspace,
                               void* stream);
size_t hk_norm_weight_workspace_bytes(int64_t rows, int cols);

/* SwiGLU: out[r, c] = silu(in[r, c]) * in[r, cols + c], in is [rows, 2 cols] (gate, then up). */
int hk_swiglu_forward(int dtype, const void* in, void* out, int64_t rows, int cols, void* stream);
/* din ([rows, 2 cols]) from dout ([rows, cols]) and in. */
int hk_swiglu_backward(int dtype, const void* in, const void* dout, void* din, int64_t rows,
                       int cols, void* stream);

/* Rotary position embedding, rotate-half pairing (i, i + head_dim / 2), of x [tokens, heads,
 * head_dim] (position token % seq) into y (contiguous); x's tokens are x_token_stride elements
 * apart (0: contiguous; more: Q or K read in place from a fused QKV output). cos and sin are
 * [seq, head_dim / 2] fp32. */
int hk_rotary_forward(int dtype, const void* x, int64_t x_token_stride, void* y, const float* cos,
                      const float* sin, int64_t tokens, int heads, int head_dim, int seq,
                      void* stream);
/* dx (contiguous) from dy (contiguous): the rotation by the opposite angle. */
int hk_rotary_backward(int dtype, const void* dy, void* dx, const float* cos, const float* sin,
                       int64_t tokens, int heads, int head_dim, int seq, void* stream);

#ifdef __cplusplus
}
#endif

#endif
