#include "profiler/device_fill.h"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "profiler/cuda_check.h"

namespace hetplan::profiler {
namespace {

// splitmix64: a good 64-bit mix, cheap on the GPU.
__device__ inline uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

template <typename T>
__global__ void fill_kernel(T* out, int64_t count, uint64_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float u = static_cast<float>(mix(seed ^ static_cast<uint64_t>(i)) >> 40) *
                    (1.0f / 16777216.0f);  // [0, 1) from the top 24 bits
    out[i] = T((2.0f * u - 1.0f) * scale);
  }
}

template <typename T>
void launch_fill(void* data, int64_t count, uint64_t seed, float scale, cudaStream_t stream) {
  if (count <= 0) return;
  constexpr int kThreads = 256;
  const int64_t blocks = std::min<int64_t>((count + kThreads - 1) / kThreads, 65536);
  fill_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<T*>(data),
                                                                         count, seed, scale);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void fill_uniform(void* data, int64_t count, Dtype dtype, uint64_t seed, float scale,
                  cudaStream_t stream) {
  switch (dtype) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      return launch_fill<float>(data, count, seed, scale, stream);
    case Dtype::kBf16:
      return launch_fill<__nv_bfloat16>(data, count, seed, scale, stream);
    case Dtype::kFp16:
      return launch_fill<__half>(data, count, seed, scale, stream);
    case Dtype::kFp8:
      return launch_fill<__nv_fp8_e4m3>(data, count, seed, scale, stream);
    case Dtype::kFp4:  // never swept (profiler/common/dtypes.cpp refuses it)
      return;
  }
}

int gemm_input_bytes(Dtype dtype) { return dtype_bytes(dtype); }

int gemm_output_bytes(Dtype dtype) { return dtype == Dtype::kFp8 ? 2 : dtype_bytes(dtype); }

}  // namespace hetplan::profiler
