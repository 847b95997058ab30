// Input patterns and result checks for the collective sweep. Every rank's input is small integers
// (-2, -1, 1, 2) that differ by rank and position, so sums over up to 128 ranks stay exact in bf16
// (8 significant bits: integers up to 256) and a misplaced chunk shows as a wrong value; receive
// buffers start as NaN (all bits set), so an element never written fails the check. Nothing is
// ever timed on zeros.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "profiler/collectives/collective.h"
#include "profiler/collectives/cuda_util.h"

namespace hetplan::profiler::coll {

// The value rank `rank` holds at position `i` of its (whole-array) input.
__host__ __device__ inline float pattern_value(int rank, size_t i) {
  const int k = static_cast<int>((i * 7 + static_cast<size_t>(rank) * 13) & 3);
  return k == 0 ? -2.f : k == 1 ? -1.f : k == 2 ? 1.f : 2.f;
}

template <typename T>
__device__ inline T from_float(float v);
template <>
__device__ inline float from_float<float>(float v) {
  return v;
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16(v);
}
template <>
__device__ inline __half from_float<__half>(float v) {
  return __float2half(v);
}

__device__ inline float to_float(float v) { return v; }
__device__ inline float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ inline float to_float(__half v) { return __half2float(v); }

template <typename T>
__global__ void fill_kernel(T* buf, size_t n, int rank, size_t offset) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x)
    buf[i] = from_float<T>(pattern_value(rank, offset + i));
}

// `Expected` is a functor with `__device__ float operator()(size_t i) const`.
template <typename T, typename Expected>
__global__ void check_kernel(const T* buf, size_t n, Expected expected, float tolerance,
                             unsigned long long* errors) {
  unsigned long long local = 0;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    const float got = to_float(buf[i]);
    const float want = expected(i);
    if (!(fabsf(got - want) <= tolerance * fmaxf(1.f, fabsf(want)))) ++local;
  }
  if (local) atomicAdd(errors, local);
}

inline unsigned grid_for(size_t n) {
  const size_t blocks = (n + 255) / 256;
  return static_cast<unsigned>(blocks < 1024 ? (blocks ? blocks : 1) : 1024);
}

// Fills `n` elements of `buf` with rank's pattern starting at whole-array position `offset`.
inline void fill_pattern(void* buf, size_t n, Dtype dtype, int rank, size_t offset,
                         cudaStream_t stream) {
  switch (dtype) {
    case Dtype::kFp32:
      fill_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<float*>(buf), n, rank, offset);
      break;
    case Dtype::kBf16:
      fill_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__nv_bfloat16*>(buf), n, rank,
                                                   offset);
      break;
    case Dtype::kFp16:
      fill_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<__half*>(buf), n, rank, offset);
      break;
    default:
      break;  // rejected earlier by nccl_type()
  }
  CUDA_CHECK(cudaGetLastError());
}

// Sums stay exact up to 128 ranks; beyond, allow bf16/fp16 rounding.
inline float check_tolerance(Dtype dtype, int nranks) {
  if (nranks <= 128 || dtype == Dtype::kFp32) return 0.f;
  return 1e-2f;
}

template <typename Expected>
void check_buffer(const void* buf, size_t n, Dtype dtype, Expected expected, float tolerance,
                  unsigned long long* errors, cudaStream_t stream) {
  switch (dtype) {
    case Dtype::kFp32:
      check_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const float*>(buf), n, expected,
                                                    tolerance, errors);
      break;
    case Dtype::kBf16:
      check_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const __nv_bfloat16*>(buf), n,
                                                    expected, tolerance, errors);
      break;
    case Dtype::kFp16:
      check_kernel<<<grid_for(n), 256, 0, stream>>>(static_cast<const __half*>(buf), n, expected,
                                                    tolerance, errors);
      break;
    default:
      break;
  }
  CUDA_CHECK(cudaGetLastError());
}

// The usual init: the send buffer holds positions [0, send_count) of the rank's pattern.
inline void init_send(const RankBuffers& b, cudaStream_t stream) {
  fill_pattern(b.send, b.send_count, b.dtype, b.rank, 0, stream);
}

}  // namespace hetplan::profiler::coll
