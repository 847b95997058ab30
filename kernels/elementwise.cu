// Element-wise kernels: CUDA entry points and launchers of elementwise_kernels.h (which says what
// is computed and how); references in reference/elementwise_reference.h.
#include <cmath>

#include "kernels/cuda_check.h"
#include "kernels/elementwise.h"
#include "kernels/elementwise_kernels.h"

namespace hetplan::kernels {
namespace {

template <class T, int kVec, bool kBackward>
__global__ void __launch_bounds__(kFlatThreads) gelu_kernel(GeluArgs<T> a) {
  gelu_block<T, kVec, kBackward>(a);
}
template <class T, int kVec, bool kBackward>
__global__ void __launch_bounds__(256) swiglu_kernel(SwigluArgs<T> a) {
  swiglu_block<T, kVec, kBackward>(a);
}
template <class T, int kVec>
__global__ void __launch_bounds__(256) bias_dropout_residual_kernel(BiasDropoutArgs<T> a) {
  bias_dropout_residual_block<T, kVec>(a);
}
template <class T, int kVec>
__global__ void __launch_bounds__(kFlatThreads) dropout_backward_kernel(DropoutBackwardArgs<T> a) {
  dropout_backward_block<T, kVec>(a);
}
template <int kVec>
__global__ void __launch_bounds__(kFlatThreads) adamw_kernel(AdamWArgs a) {
  adamw_block<kVec>(a);
}

// The whole buffer as one row: 16-byte vectors when every pointer is aligned.
template <class T>
int flat_vector_width(std::initializer_list<const void*> pointers) {
  return row_vector_width<T>(0, pointers);
}

DropoutMask mask_of(const Dropout& d) {
  if (!(d.p >= 0.0f && d.p < 1.0f)) throw std::invalid_argument("dropout: p must be in [0, 1)");
  return {d.seed, d.offset, dropout_threshold(d.p), d.p > 0.0f ? 1.0f / (1.0f - d.p) : 1.0f};
}

}  // namespace

template <class T>
void gelu_forward(const T* x, T* y, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const GeluArgs<T> a{x, nullptr, y, n};
  const int vec = flat_vector_width<T>({x, y});
  const LaunchShape s = flat_shape(n, vec, sm_count());
  if (vec == 1)
    gelu_kernel<T, 1, false><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    gelu_kernel<T, vec16<T>(), false><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void gelu_backward(const T* x, const T* dy, T* dx, int64_t n, cudaStream_t stream) {
  if (n <= 0) return;
  const GeluArgs<T> a{x, dy, dx, n};
  const int vec = flat_vector_width<T>({x, dy, dx});
  const LaunchShape s = flat_shape(n, vec, sm_count());
  if (vec == 1)
    gelu_kernel<T, 1, true><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    gelu_kernel<T, vec16<T>(), true><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, bool kBackward>
void launch_swiglu(const SwigluArgs<T>& a, cudaStream_t stream) {
  if (a.rows <= 0 || a.cols <= 0) return;
  const int vec = row_vector_width<T>(a.cols, {a.in, a.dout, a.out});
  auto* kernel =
      vec == 1 ? &swiglu_kernel<T, 1, kBackward> : &swiglu_kernel<T, vec16<T>(), kBackward>;
  const int block = row_loop_block(a.cols, vec);
  const LaunchShape s =
      row_loop_shape(a.rows, a.cols, vec, sm_count(),
                     resident_blocks(reinterpret_cast<const void*>(kernel), block, 0));
  kernel<<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void swiglu_forward(const T* in, T* out, int64_t rows, int cols, cudaStream_t stream) {
  launch_swiglu<T, false>({in, nullptr, out, rows, cols}, stream);
}

template <class T>
void swiglu_backward(const T* in, const T* dout, T* din, int64_t rows, int cols,
                     cudaStream_t stream) {
  launch_swiglu<T, true>({in, dout, din, rows, cols}, stream);
}

template <class T>
void bias_dropout_residual_forward(const T* x, const T* bias, const T* residual, T* y, int64_t rows,
                                   int cols, const Dropout& dropout, cudaStream_t stream) {
  const BiasDropoutArgs<T> a{x, bias, residual, y, rows, cols, mask_of(dropout)};
  if (rows <= 0 || cols <= 0) return;
  const int vec = row_vector_width<T>(cols, {x, bias, residual, y});
  auto* kernel =
      vec == 1 ? &bias_dropout_residual_kernel<T, 1> : &bias_dropout_residual_kernel<T, vec16<T>()>;
  const int block = row_loop_block(cols, vec);
  const LaunchShape s =
      row_loop_shape(rows, cols, vec, sm_count(),
                     resident_blocks(reinterpret_cast<const void*>(kernel), block, 0));
  kernel<<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void dropout_backward(const T* dy, T* dx, int64_t n, const Dropout& dropout, cudaStream_t stream) {
  const DropoutBackwardArgs<T> a{dy, dx, n, mask_of(dropout)};
  if (n <= 0) return;
  const int vec = flat_vector_width<T>({dy, dx});
  const LaunchShape s = flat_shape(n, vec, sm_count());
  if (vec == 1)
    dropout_backward_kernel<T, 1><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    dropout_backward_kernel<T, vec16<T>()><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

void adamw_step(float* master, bf16* param, const float* grad, float* m, float* v, int64_t n,
                const AdamWConfig& c, cudaStream_t stream) {
  if (c.step < 1) throw std::invalid_argument("adamw_step: step counts from 1");
  if (n <= 0) return;
  const AdamWArgs a{master,
                    param,
                    grad,
                    m,
                    v,
                    n,
                    c.lr,
                    c.beta1,
                    c.beta2,
                    c.eps,
                    c.weight_decay,
                    c.grad_scale,
                    static_cast<float>(1.0 / (1.0 - std::pow(double{c.beta1}, c.step))),
                    static_cast<float>(1.0 / (1.0 - std::pow(double{c.beta2}, c.step)))};
  // 4 values per access: 16 bytes of each fp32 buffer, 8 of the bf16 parameters.
  const bool aligned = flat_vector_width<float>({master, grad, m, v}) == 4 &&
                       reinterpret_cast<uintptr_t>(param) % 8 == 0;
  const int vec = aligned ? 4 : 1;
  const LaunchShape s = flat_shape(n, vec, sm_count());
  if (vec == 1)
    adamw_kernel<1><<<grid_of(s), s.block, 0, stream>>>(a);
  else
    adamw_kernel<4><<<grid_of(s), s.block, 0, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

#define HETPLAN_ELEMENTWISE(T)                                                                   \
  template void gelu_forward<T>(const T*, T*, int64_t, cudaStream_t);                            \
  template void gelu_backward<T>(const T*, const T*, T*, int64_t, cudaStream_t);                 \
  template void swiglu_forward<T>(const T*, T*, int64_t, int, cudaStream_t);                     \
  template void swiglu_backward<T>(const T*, const T*, T*, int64_t, int, cudaStream_t);          \
  template void bias_dropout_residual_forward<T>(const T*, const T*, const T*, T*, int64_t, int, \
                                                 const Dropout&, cudaStream_t);                  \
  template void dropout_backward<T>(const T*, T*, int64_t, const Dropout&, cudaStream_t);
HETPLAN_ELEMENTWISE(float)
HETPLAN_ELEMENTWISE(bf16)
#undef HETPLAN_ELEMENTWISE

}  // namespace hetplan::kernels
