// The C interface of kernels/c_api/hetplan_kernels_c.h: each call picks the element type, runs
// the C++ launcher and turns its exceptions into a status and a message.
#include "kernels/c_api/hetplan_kernels_c.h"

#include <cuda_runtime.h>

#include <exception>
#include <string>

#include "kernels/elementwise.h"
#include "kernels/norms.h"
#include "kernels/rows.h"

#define HK_EXPORT __attribute__((visibility("default")))

namespace {

using hetplan::kernels::bf16;

thread_local std::string last_error;

// Runs `launch` with a null pointer of the element type `dtype` names (for the templates to
// deduce from) and reports what went wrong.
template <class Launch>
int with_dtype(int dtype, const char* what, Launch&& launch) {
  try {
    last_error.clear();
    if (dtype == HK_FP32) {
      launch(static_cast<float*>(nullptr));
    } else if (dtype == HK_BF16) {
      launch(static_cast<bf16*>(nullptr));
    } else {
      last_error = std::string(what) + ": dtype " + std::to_string(dtype) +
                   " (expected HK_FP32 = 0 or HK_BF16 = 1)";
      return 1;
    }
    return 0;
  } catch (const std::exception& e) {
    last_error = std::string(what) + ": " + e.what();
  } catch (...) {
    last_error = std::string(what) + ": unknown error";
  }
  return 1;
}

template <class T>
const T* in(const void* p, T*) {
  return static_cast<const T*>(p);
}
template <class T>
T* out(void* p, T*) {
  return static_cast<T*>(p);
}
cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

}  // namespace

extern "C" {

HK_EXPORT int hk_abi_version(void) { return 2; }

HK_EXPORT const char* hk_last_error(void) { return last_error.c_str(); }

HK_EXPORT int hk_rmsnorm_forward(int dtype, const void* x, const void* gamma, void* y, float* rstd,
                                 int64_t rows, int cols, float eps, void* stream) {
  return with_dtype(dtype, "hk_rmsnorm_forward", [&](auto* t) {
    hetplan::kernels::rmsnorm_forward(in(x, t), in(gamma, t), out(y, t), rstd, rows, cols, eps,
                                      as_stream(stream));
  });
}

HK_EXPORT int hk_rmsnorm_backward_input(int dtype, const void* x, const void* gamma,
                                        const float* rstd, const void* dy, void* dx, int64_t rows,
                                        int cols, void* stream) {
  return with_dtype(dtype, "hk_rmsnorm_backward_input", [&](auto* t) {
    hetplan::kernels::rmsnorm_backward_input(in(x, t), in(gamma, t), rstd, in(dy, t), out(dx, t),
                                             rows, cols, as_stream(stream));
  });
}

HK_EXPORT int hk_rmsnorm_backward_weight(int dtype, const void* x, const float* rstd,
                                         const void* dy, float* dgamma, int64_t rows, int cols,
                                         void* workspace, void* stream) {
  return with_dtype(dtype, "hk_rmsnorm_backward_weight", [&](auto* t) {
    hetplan::kernels::rmsnorm_backward_weight(in(x, t), rstd, in(dy, t), dgamma, rows, cols,
                                              workspace, as_stream(stream));
  });
}

HK_EXPORT size_t hk_norm_weight_workspace_bytes(int64_t rows, int cols) {
  return hetplan::kernels::norm_weight_workspace_bytes(rows, cols);
}

HK_EXPORT int hk_swiglu_forward(int dtype, const void* x, void* y, int64_t rows, int cols,
                                void* stream) {
  return with_dtype(dtype, "hk_swiglu_forward", [&](auto* t) {
    hetplan::kernels::swiglu_forward(in(x, t), out(y, t), rows, cols, as_stream(stream));
  });
}

HK_EXPORT int hk_swiglu_backward(int dtype, const void* x, const void* dout, void* din,
                                 int64_t rows, int cols, void* stream) {
  return with_dtype(dtype, "hk_swiglu_backward", [&](auto* t) {
    hetplan::kernels::swiglu_backward(in(x, t), in(dout, t), out(din, t), rows, cols,
                                      as_stream(stream));
  });
}

HK_EXPORT int hk_rotary_forward(int dtype, const void* x, int64_t x_token_stride, void* y,
                                const float* cos, const float* sin, int64_t tokens, int heads,
                                int head_dim, int seq, void* stream) {
  return with_dtype(dtype, "hk_rotary_forward", [&](auto* t) {
    hetplan::kernels::rotary_forward(in(x, t), out(y, t), cos, sin, tokens, heads, head_dim, seq,
                                     as_stream(stream), x_token_stride);
  });
}

HK_EXPORT int hk_rotary_backward(int dtype, const void* dy, void* dx, const float* cos,
                                 const float* sin, int64_t tokens, int heads, int head_dim, int seq,
                                 void* stream) {
  return with_dtype(dtype, "hk_rotary_backward", [&](auto* t) {
    hetplan::kernels::rotary_backward(in(dy, t), out(dx, t), cos, sin, tokens, heads, head_dim, seq,
                                      as_stream(stream));
  });
}

}  // extern "C"
