// LayerNorm and RMSNorm: the CUDA entry points and launchers of the kernels in norms_kernels.h,
// which say what is computed and how; the references are in reference/norms_reference.h.
#include "kernels/cuda_check.h"
#include "kernels/norms.h"
#include "kernels/norms_kernels.h"

#include <stdexcept>
#include <string>

namespace hetplan::kernels {
namespace {

template <class T, int kVec, NormKind kKind>
__global__ void __launch_bounds__(kNormMaxThreads) norm_forward_kernel(NormForwardArgs<T> a) {
  norm_forward_block<T, kVec, kKind>(a);
}

template <class T, int kVec, NormKind kKind>
__global__ void __launch_bounds__(kNormMaxThreads)
    norm_backward_input_kernel(NormBackwardArgs<T> a) {
  norm_backward_input_block<T, kVec, kKind>(a);
}

template <class T, int kVec, ColumnKind kKind>
__global__ void __launch_bounds__(32 * kColumnWarps) column_partials_kernel(ColumnArgs<T> a) {
  column_partials_block<T, kVec, kKind>(a);
}

__global__ void column_finish_kernel(ColumnFinishArgs a) { column_finish_block(a); }

void check_row(int64_t rows, int64_t cols, int vec, int iters, const char* what) {
  if (rows < 0 || !norm_row_fits(cols, vec, iters))
    throw std::invalid_argument(std::string(what) + ": unsupported row length " +
                                std::to_string(cols));
}

template <class T, NormKind kKind>
void launch_forward(const NormForwardArgs<T>& a, cudaStream_t stream) {
  const int vec = row_vector_width<T>(a.cols, {a.x, a.gamma, a.beta, a.y});
  check_row(a.rows, a.cols, vec, kNormForwardIters, "norm forward");
  if (a.rows == 0) return;
  const LaunchShape s = norm_forward_shape(a.rows, a.cols, vec);
  if (vec == 1)
    norm_forward_kernel<T, 1, kKind><<<grid_of(s), s.block, s.smem, stream>>>(a);
  else
    norm_forward_kernel<T, vec16<T>(), kKind><<<grid_of(s), s.block, s.smem, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, NormKind kKind>
void launch_backward_input(const NormBackwardArgs<T>& a, cudaStream_t stream) {
  const int vec = row_vector_width<T>(a.cols, {a.x, a.gamma, a.dy, a.dx});
  check_row(a.rows, a.cols, vec, kNormBackwardIters, "norm backward");
  if (a.rows == 0) return;
  const LaunchShape s = norm_row_shape(a.rows, a.cols, vec);
  if (vec == 1)
    norm_backward_input_kernel<T, 1, kKind><<<grid_of(s), s.block, s.smem, stream>>>(a);
  else
    norm_backward_input_kernel<T, vec16<T>(), kKind><<<grid_of(s), s.block, s.smem, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
}

template <class T, ColumnKind kKind>
void launch_columns(ColumnArgs<T> a, float* out_g, float* out_b, void* workspace,
                    cudaStream_t stream) {
  if (a.cols <= 0 || a.rows < 0) throw std::invalid_argument("column reduction: bad size");
  const int64_t chunks = column_chunks(a.rows);
  if (chunks > 65535) throw std::invalid_argument("column reduction: too many rows");
  if (a.rows == 0) {
    HETPLAN_CUDA_CHECK(cudaMemsetAsync(out_g, 0, a.cols * sizeof(float), stream));
    if (out_b) HETPLAN_CUDA_CHECK(cudaMemsetAsync(out_b, 0, a.cols * sizeof(float), stream));
    return;
  }
  a.partial_g = static_cast<float*>(workspace);
  a.partial_b = a.partial_g + chunks * a.cols;
  const int vec = row_vector_width<T>(a.cols, {a.x, a.dy});
  const LaunchShape s = column_partials_shape(a.rows, a.cols, vec);
  if (vec == 1)
    column_partials_kernel<T, 1, kKind><<<grid_of(s), s.block, s.smem, stream>>>(a);
  else
    column_partials_kernel<T, vec16<T>(), kKind><<<grid_of(s), s.block, s.smem, stream>>>(a);
  HETPLAN_CHECK_LAUNCH();
  const LaunchShape f = column_finish_shape(a.cols);
  column_finish_kernel<<<grid_of(f), f.block, 0, stream>>>({a.partial_g, out_g, chunks, a.cols});
  HETPLAN_CHECK_LAUNCH();
  if (out_b) {
    column_finish_kernel<<<grid_of(f), f.block, 0, stream>>>({a.partial_b, out_b, chunks, a.cols});
    HETPLAN_CHECK_LAUNCH();
  }
}

}  // namespace

size_t norm_weight_workspace_bytes(int64_t rows, int cols) {
  return static_cast<size_t>(2 * column_chunks(rows) * cols) * sizeof(float);
}

template <class T>
void layernorm_forward(const T* x, const T* gamma, const T* beta, T* y, float* mean, float* rstd,
                       int64_t rows, int cols, float eps, cudaStream_t stream) {
  launch_forward<T, NormKind::kLayerNorm>({x, gamma, beta, y, mean, rstd, rows, cols, eps}, stream);
}

template <class T>
void layernorm_backward_input(const T* x, const T* gamma, const float* mean, const float* rstd,
                              const T* dy, T* dx, int64_t rows, int cols, cudaStream_t stream) {
  launch_backward_input<T, NormKind::kLayerNorm>({x, gamma, mean, rstd, dy, dx, rows, cols},
                                                 stream);
}

template <class T>
void layernorm_backward_weight(const T* x, const float* mean, const float* rstd, const T* dy,
                               float* dgamma, float* dbeta, int64_t rows, int cols, void* workspace,
                               cudaStream_t stream) {
  launch_columns<T, ColumnKind::kLayerNorm>({x, mean, rstd, dy, nullptr, nullptr, rows, cols},
                                            dgamma, dbeta, workspace, stream);
}

template <class T>
void rmsnorm_forward(const T* x, const T* gamma, T* y, float* rstd, int64_t rows, int cols,
                     float eps, cudaStream_t stream) {
  launch_forward<T, NormKind::kRmsNorm>({x, gamma, nullptr, y, nullptr, rstd, rows, cols, eps},
                                        stream);
}

template <class T>
void rmsnorm_backward_input(const T* x, const T* gamma, const float* rstd, const T* dy, T* dx,
                            int64_t rows, int cols, cudaStream_t stream) {
  launch_backward_input<T, NormKind::kRmsNorm>({x, gamma, nullptr, rstd, dy, dx, rows, cols},
                                               stream);
}

template <class T>
void rmsnorm_backward_weight(const T* x, const float* rstd, const T* dy, float* dgamma,
                             int64_t rows, int cols, void* workspace, cudaStream_t stream) {
  launch_columns<T, ColumnKind::kRmsNorm>({x, nullptr, rstd, dy, nullptr, nullptr, rows, cols},
                                          dgamma, nullptr, workspace, stream);
}

template <class T>
void column_sum(const T* dy, float* out, int64_t rows, int cols, void* workspace,
                cudaStream_t stream) {
  launch_columns<T, ColumnKind::kSum>({nullptr, nullptr, nullptr, dy, nullptr, nullptr, rows, cols},
                                      out, nullptr, workspace, stream);
}

#define HETPLAN_NORMS(T)                                                                           \
  template void layernorm_forward<T>(const T*, const T*, const T*, T*, float*, float*, int64_t,    \
                                     int, float, cudaStream_t);                                    \
  template void layernorm_backward_input<T>(const T*, const T*, const float*, const float*,        \
                                            const T*, T*, int64_t, int, cudaStream_t);             \
  template void layernorm_backward_weight<T>(const T*, const float*, const float*, const T*,       \
                                             float*, float*, int64_t, int, void*, cudaStream_t);   \
  template void rmsnorm_forward<T>(const T*, const T*, T*, float*, int64_t, int, float,            \
                                   cudaStream_t);                                                  \
  template void rmsnorm_backward_input<T>(const T*, const T*, const float*, const T*, T*, int64_t, \
                                          int, cudaStream_t);                                      \
  template void rmsnorm_backward_weight<T>(const T*, const float*, const T*, float*, int64_t, int, \
                                           void*, cudaStream_t);                                   \
  template void column_sum<T>(const T*, float*, int64_t, int, void*, cudaStream_t);
HETPLAN_NORMS(float)
HETPLAN_NORMS(bf16)
#undef HETPLAN_NORMS

}  // namespace hetplan::kernels
