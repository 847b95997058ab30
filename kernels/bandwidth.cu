// Bandwidth probe and random fill: CUDA entry points and launchers of bandwidth_kernels.h.
#include "kernels/bandwidth.h"
#include "kernels/bandwidth_kernels.h"
#include "kernels/cuda_check.h"

namespace hetplan::kernels {
namespace {

__global__ void __launch_bounds__(kProbeThreads) copy_kernel(CopyArgs a) { copy_block(a); }
__global__ void __launch_bounds__(kProbeThreads) read_reduce_kernel(ReduceArgs a) {
  read_reduce_block(a);
}
// One block adds the per-block partials in a fixed order.
__global__ void __launch_bounds__(kProbeThreads)
    reduce_finish_kernel(const float* partial, int n, float* sum) {
  __shared__ float scratch[32];
  float s = 0.0f;
  for (int i = threadIdx.x; i < n; i += blockDim.x) s += partial[i];
  s = simt::block_sum(s, scratch);
  if (threadIdx.x == 0) *sum = s;
}
template <class T>
__global__ void fill_kernel(FillArgs<T> a) {
  fill_block<T>(a);
}
__global__ void fill_int_kernel(FillIntArgs a) { fill_int_block(a); }

LaunchShape fill_shape(int64_t n) {
  LaunchShape s;
  s.block = 256;
  s.grid_x = grid_stride_blocks(ceil_div(n, 4), s.block, sm_count(), 8);
  return s;
}

}  // namespace

void copy_probe(const void* src, void* dst, int64_t bytes, cudaStream_t stream) {
  if (bytes <= 0) return;
  if (reinterpret_cast<uintptr_t>(src) % 16 || reinterpret_cast<uintptr_t>(dst) % 16)
    throw std::invalid_argument("copy_probe: buffers must be 16-byte aligned");
  const LaunchShape s = probe_shape(bytes, sm_count());
  copy_kernel<<<grid_of(s), s.block, 0, stream>>>(
      {static_cast<const unsigned char*>(src), static_cast<unsigned char*>(dst), bytes});
  HETPLAN_CHECK_LAUNCH();
}

size_t read_reduce_workspace_floats() { return static_cast<size_t>(sm_count()) * 8; }

void read_reduce_probe(const float* src, int64_t n, float* sum, float* workspace,
                       cudaStream_t stream) {
  if (reinterpret_cast<uintptr_t>(src) % 16)
    throw std::invalid_argument("read_reduce_probe: source must be 16-byte aligned");
  const LaunchShape s = probe_shape(n * 4, sm_count());
  read_reduce_kernel<<<grid_of(s), s.block, s.smem, stream>>>({src, n, workspace});
  HETPLAN_CHECK_LAUNCH();
  reduce_finish_kernel<<<1, kProbeThreads, 0, stream>>>(workspace, static_cast<int>(s.grid_x), sum);
  HETPLAN_CHECK_LAUNCH();
}

template <class T>
void fill_uniform(T* p, int64_t n, float lo, float hi, uint64_t seed, cudaStream_t stream) {
  if (n <= 0) return;
  const LaunchShape s = fill_shape(n);
  fill_kernel<T><<<grid_of(s), s.block, 0, stream>>>({p, n, lo, hi, seed});
  HETPLAN_CHECK_LAUNCH();
}

void fill_uniform_ints(int32_t* p, int64_t n, int32_t lo, int32_t hi, uint64_t seed,
                       cudaStream_t stream) {
  if (n <= 0) return;
  if (hi <= lo) throw std::invalid_argument("fill_uniform_ints: empty range");
  const LaunchShape s = fill_shape(n);
  fill_int_kernel<<<grid_of(s), s.block, 0, stream>>>(
      {p, n, lo, static_cast<uint64_t>(static_cast<int64_t>(hi) - lo), seed});
  HETPLAN_CHECK_LAUNCH();
}

template void fill_uniform<float>(float*, int64_t, float, float, uint64_t, cudaStream_t);
template void fill_uniform<bf16>(bf16*, int64_t, float, float, uint64_t, cudaStream_t);
template void fill_uniform<fp16>(fp16*, int64_t, float, float, uint64_t, cudaStream_t);

}  // namespace hetplan::kernels
