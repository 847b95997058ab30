#include "profiler/device_check.h"

#include <algorithm>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "profiler/cuda_check.h"
#include "profiler/device.h"

namespace hetplan::profiler {
namespace {

template <typename T>
__global__ void count_kernel(const T* data, int64_t n, unsigned long long* out) {
  unsigned long long bad = 0, zero = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n;
       i += int64_t(gridDim.x) * blockDim.x) {
    const float v = static_cast<float>(data[i]);
    bad += !isfinite(v);
    zero += v == 0.0f;
  }
  for (int off = 16; off > 0; off /= 2) {
    bad += __shfl_down_sync(0xffffffffu, bad, off);
    zero += __shfl_down_sync(0xffffffffu, zero, off);
  }
  if (threadIdx.x % 32 == 0) {
    atomicAdd(out, bad);
    atomicAdd(out + 1, zero);
  }
}

template <typename T>
void launch(const void* data, int64_t n, unsigned long long* out, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t blocks =
      std::max<int64_t>(1, std::min<int64_t>((n + kThreads - 1) / kThreads, 4096));
  count_kernel<T>
      <<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(static_cast<const T*>(data), n, out);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

ValueCounts count_values(const void* data, int64_t count, Dtype dtype, cudaStream_t stream) {
  DeviceBuffer counters(2 * sizeof(unsigned long long), "value counters");
  CUDA_CHECK(cudaMemsetAsync(counters.get(), 0, counters.bytes(), stream));
  auto* out = counters.as<unsigned long long>();
  switch (dtype) {
    case Dtype::kBf16:
      launch<__nv_bfloat16>(data, count, out, stream);
      break;
    case Dtype::kFp16:
      launch<__half>(data, count, out, stream);
      break;
    default:
      launch<float>(data, count, out, stream);
      break;
  }
  unsigned long long host[2] = {0, 0};
  CUDA_CHECK(cudaMemcpyAsync(host, out, sizeof(host), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  return {static_cast<int64_t>(host[0]), static_cast<int64_t>(host[1]), count};
}

}  // namespace hetplan::profiler
