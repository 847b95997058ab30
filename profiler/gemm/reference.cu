#include "profiler/gemm/reference.h"

#include <cmath>
#include <limits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "profiler/cuda_check.h"
#include "profiler/device.h"

namespace hetplan::profiler {
namespace {

struct Dims {
  int64_t m, n, k, batch;
  bool ta, tb;
};

__device__ inline uint64_t hash64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  return x ^ (x >> 33);
}

// One warp per sampled output element: lanes split the k-loop, then a shuffle reduction.
template <typename TIn, typename TOut>
__global__ void reference_kernel(Dims d, const TIn* a, const TIn* b, const TOut* c, int64_t samples,
                                 bool all, double* ref_out, double* got_out) {
  const int64_t s = (blockIdx.x * int64_t(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (s >= samples) return;
  const int64_t total = d.m * d.n * d.batch;
  const int64_t idx = all ? s
                          : static_cast<int64_t>(hash64(static_cast<uint64_t>(s) + 1) %
                                                 static_cast<uint64_t>(total));
  const int64_t bt = idx / (d.m * d.n);
  const int64_t ij = idx % (d.m * d.n);
  const int64_t i = ij % d.m, j = ij / d.m;
  const TIn* A = a + bt * d.m * d.k;
  const TIn* B = b + bt * d.k * d.n;
  double acc = 0;
  for (int64_t l = lane; l < d.k; l += 32) {
    const double x =
        static_cast<double>(static_cast<float>(d.ta ? A[l + i * d.k] : A[i + l * d.m]));
    const double y =
        static_cast<double>(static_cast<float>(d.tb ? B[j + l * d.n] : B[l + j * d.k]));
    acc += x * y;
  }
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_down_sync(0xffffffffu, acc, offset);
  if (lane == 0) {
    ref_out[s] = acc;
    got_out[s] = static_cast<double>(static_cast<float>(c[bt * d.m * d.n + ij]));
  }
}

template <typename TIn, typename TOut>
void launch_reference(const Dims& d, const void* a, const void* b, const void* c, int64_t samples,
                      bool all, double* ref, double* got, cudaStream_t stream) {
  constexpr int kThreads = 256;  // 8 samples per block
  const auto blocks = static_cast<unsigned>((samples * 32 + kThreads - 1) / kThreads);
  reference_kernel<TIn, TOut>
      <<<blocks, kThreads, 0, stream>>>(d, static_cast<const TIn*>(a), static_cast<const TIn*>(b),
                                        static_cast<const TOut*>(c), samples, all, ref, got);
  CUDA_CHECK_LAUNCH();
}

}  // namespace

double gemm_check_threshold(Dtype dtype) {
  switch (dtype) {
    case Dtype::kFp32:
      return 1e-4;
    case Dtype::kTf32:
    case Dtype::kFp16:
      return 5e-3;
    case Dtype::kBf16:
    case Dtype::kFp8:
    case Dtype::kFp4:  // never swept (profiler/common/dtypes.cpp refuses it)
      return 2e-2;
  }
  return 2e-2;
}

GemmCheck check_gemm(Dtype dtype, const GemmDims& shape, const void* a, const void* b,
                     const void* c, cudaStream_t stream, int64_t max_samples) {
  const Dims d{shape.m, shape.n, shape.k, shape.batch, shape.trans_a, shape.trans_b};
  const int64_t total = d.m * d.n * d.batch;
  const bool all = total <= max_samples;
  const int64_t samples = all ? total : max_samples;
  DeviceBuffer ref(static_cast<size_t>(samples) * sizeof(double), "GEMM reference");
  DeviceBuffer got(static_cast<size_t>(samples) * sizeof(double), "GEMM reference");
  double* r = ref.as<double>();
  double* g = got.as<double>();
  switch (dtype) {
    case Dtype::kFp32:
    case Dtype::kTf32:
      launch_reference<float, float>(d, a, b, c, samples, all, r, g, stream);
      break;
    case Dtype::kBf16:
      launch_reference<__nv_bfloat16, __nv_bfloat16>(d, a, b, c, samples, all, r, g, stream);
      break;
    case Dtype::kFp16:
      launch_reference<__half, __half>(d, a, b, c, samples, all, r, g, stream);
      break;
    case Dtype::kFp8:
      launch_reference<__nv_fp8_e4m3, __nv_bfloat16>(d, a, b, c, samples, all, r, g, stream);
      break;
    case Dtype::kFp4:  // never swept (profiler/common/dtypes.cpp refuses it)
      break;
  }
  std::vector<double> hr(static_cast<size_t>(samples)), hg(static_cast<size_t>(samples));
  CUDA_CHECK(
      cudaMemcpyAsync(hr.data(), r, hr.size() * sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(
      cudaMemcpyAsync(hg.data(), g, hg.size() * sizeof(double), cudaMemcpyDeviceToHost, stream));
  CUDA_CHECK(cudaStreamSynchronize(stream));
  double diff2 = 0, ref2 = 0;
  bool nan = false;
  for (size_t s = 0; s < hr.size(); ++s) {
    if (!std::isfinite(hg[s])) nan = true;
    diff2 += (hg[s] - hr[s]) * (hg[s] - hr[s]);
    ref2 += hr[s] * hr[s];
  }
  GemmCheck out;
  out.samples = samples;
  out.threshold = gemm_check_threshold(dtype);
  out.relative_error = nan ? std::numeric_limits<double>::infinity()
                           : (ref2 > 0 ? std::sqrt(diff2 / ref2) : std::sqrt(diff2));
  out.passed = !nan && out.relative_error <= out.threshold;
  return out;
}

}  // namespace hetplan::profiler
