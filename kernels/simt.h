// The few device primitives the kernels are written with, defined twice: as CUDA (nvcc) and on
// top of the CPU emulator (any other compiler). Kernel bodies in the *_kernels.h headers use only
// these, so the same code runs on the GPU and, in CPU tests, under kernels/emulator/.
#pragma once

#include <cstdint>
#include <cstring>

#include "kernels/dtype.h"

#define HETPLAN_PRAGMA(x) _Pragma(#x)
#if defined(__CUDACC__)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#define HETPLAN_DEVICE __device__ __forceinline__
#define HETPLAN_HD __host__ __device__ __forceinline__
#define HETPLAN_UNROLL HETPLAN_PRAGMA(unroll)
#define HETPLAN_UNROLL_BY(n) HETPLAN_PRAGMA(unroll n)
#else
#include <cmath>

#include "kernels/emulator/simt_emulator.h"
#include "kernels/reference/numeric.h"
#define HETPLAN_DEVICE inline
#define HETPLAN_HD inline
#define HETPLAN_UNROLL
#define HETPLAN_UNROLL_BY(n)
#endif

namespace hetplan::kernels::simt {

// ---- where am I (1-D blocks, up to 3-D grids) ----
#if defined(__CUDACC__)
HETPLAN_DEVICE int thread_x() { return static_cast<int>(threadIdx.x); }
HETPLAN_DEVICE int block_threads() { return static_cast<int>(blockDim.x); }
HETPLAN_DEVICE int64_t block_x() { return blockIdx.x; }
HETPLAN_DEVICE int64_t block_y() { return blockIdx.y; }
HETPLAN_DEVICE int64_t block_z() { return blockIdx.z; }
HETPLAN_DEVICE int64_t grid_x() { return gridDim.x; }
HETPLAN_DEVICE int64_t grid_y() { return gridDim.y; }
HETPLAN_DEVICE void sync_threads() { __syncthreads(); }
HETPLAN_DEVICE unsigned char* dynamic_smem() {
  extern __shared__ __align__(16) unsigned char hetplan_smem[];
  return hetplan_smem;
}
#else
inline int thread_x() { return static_cast<int>(emu::thread_idx().x); }
inline int block_threads() { return static_cast<int>(emu::block_dim().x); }
inline int64_t block_x() { return emu::block_idx().x; }
inline int64_t block_y() { return emu::block_idx().y; }
inline int64_t block_z() { return emu::block_idx().z; }
inline int64_t grid_x() { return emu::grid_dim().x; }
inline int64_t grid_y() { return emu::grid_dim().y; }
inline void sync_threads() { emu::sync_threads(); }
inline unsigned char* dynamic_smem() { return emu::dynamic_smem(); }
#endif
HETPLAN_DEVICE int lane() { return thread_x() & 31; }
HETPLAN_DEVICE int warp() { return thread_x() >> 5; }

// ---- warp shuffles (all 32 lanes must take part) ----
// This warp's index as a value the compiler knows is the same in every lane (a broadcast from
// lane 0, as CUTLASS's canonical_warp_idx_sync): what is computed from it then lives in uniform
// registers, so a wgmma descriptor built from it needs no R2UR per use.
HETPLAN_DEVICE int warp_uniform() {
#if defined(__CUDACC__)
  return __shfl_sync(0xffffffffu, warp(), 0);
#else
  return static_cast<int>(emu::shfl_idx(static_cast<uint32_t>(warp()), 0));
#endif
}
HETPLAN_DEVICE float shfl_xor(float v, int lane_mask) {
#if defined(__CUDACC__)
  return __shfl_xor_sync(0xffffffffu, v, lane_mask);
#else
  uint32_t u;
  std::memcpy(&u, &v, 4);
  u = emu::shfl_xor(u, lane_mask);
  std::memcpy(&v, &u, 4);
  return v;
#endif
}

HETPLAN_DEVICE float warp_sum(float v) {
  for (int m = 16; m > 0; m >>= 1) v += shfl_xor(v, m);
  return v;
}
HETPLAN_DEVICE float warp_max(float v) {
  for (int m = 16; m > 0; m >>= 1) v = fmaxf(v, shfl_xor(v, m));
  return v;
}

// Sum over the block; every thread gets it. `scratch` holds 32 floats of shared memory, free
// again when this returns (the trailing barrier lets the caller reuse it at once).
HETPLAN_DEVICE float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int warps = (block_threads() + 31) >> 5;
  if (warps == 1) return v;
  if (lane() == 0) scratch[warp()] = v;
  sync_threads();
  float t = lane() < warps ? scratch[lane()] : 0.0f;
  t = warp_sum(t);
  sync_threads();
  return t;
}

// Two sums over the block at once (one pair of barriers); `scratch` holds 64 floats.
HETPLAN_DEVICE void block_sum2(float& a, float& b, float* scratch) {
  a = warp_sum(a);
  b = warp_sum(b);
  const int warps = (block_threads() + 31) >> 5;
  if (warps == 1) return;
  if (lane() == 0) {
    scratch[warp()] = a;
    scratch[32 + warp()] = b;
  }
  sync_threads();
  a = warp_sum(lane() < warps ? scratch[lane()] : 0.0f);
  b = warp_sum(lane() < warps ? scratch[32 + lane()] : 0.0f);
  sync_threads();
}

// Orders the warp's shared-memory accesses (a warp-wide barrier).
HETPLAN_DEVICE void sync_warp() {
#if defined(__CUDACC__)
  __syncwarp();
#else
  emu::shfl_idx(0, 0);
#endif
}

// ---- named barriers ----
// bar.sync kId, count: waits until `count` threads (a multiple of 32; the warps that take part)
// have arrived at named barrier kId (1 .. 15; 0 is __syncthreads). Orders shared memory as
// __syncthreads does, among those threads only.
template <int kId>
HETPLAN_DEVICE void named_barrier_sync(int count) {
  static_assert(kId >= 1 && kId <= 15, "named barrier ids are 1 .. 15");
#if defined(__CUDACC__)
  asm volatile("bar.sync %0, %1;\n" ::"n"(kId), "r"(count) : "memory");
#else
  emu::named_barrier_sync(kId, count);
#endif
}

// bar.sync id, count with the id in a register (1 .. 15): for a barrier chosen per warpgroup,
// without a branch around it.
HETPLAN_DEVICE void named_barrier_sync(int id, int count) {
#if defined(__CUDACC__)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#else
  emu::named_barrier_sync(id, count);
#endif
}

// bar.arrive id, count: counts the calling threads towards barrier id's current round (of
// `count` threads, the bar.sync-ing ones included) without waiting. Used to order execution (the
// ping-pong forward's turns), not to pass data: nothing here relies on what it orders in memory.
HETPLAN_DEVICE void named_barrier_arrive(int id, int count) {
#if defined(__CUDACC__)
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
#else
  emu::named_barrier_arrive(id, count);
#endif
}

// ---- math: the fast hardware forms on the GPU ----
#if defined(__CUDACC__)
// ex2.approx.ftz: one MUFU.EX2. exp2f adds a range test and two multiplies per call to keep
// results under 2^-126 as subnormals, which a softmax does not need (they flush to 0 here). Not
// volatile, so the compiler may compute it where a select follows instead of branching round it.
HETPLAN_DEVICE float exp2_fast(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
HETPLAN_DEVICE float exp_fast(float x) { return __expf(x); }
HETPLAN_DEVICE float log_fast(float x) { return __logf(x); }
HETPLAN_DEVICE float rsqrt(float x) { return rsqrtf(x); }
HETPLAN_DEVICE float div_fast(float a, float b) { return __fdividef(a, b); }
#else
inline float exp2_fast(float x) { return std::exp2(x); }
inline float exp_fast(float x) { return std::exp(x); }
inline float log_fast(float x) { return std::log(x); }
inline float rsqrt(float x) { return 1.0f / std::sqrt(x); }
inline float div_fast(float a, float b) { return a / b; }
#endif

// ---- element conversions (round to nearest even) ----
HETPLAN_DEVICE float to_f32(float v) { return v; }
HETPLAN_DEVICE float to_f32(bf16 v) {
#if defined(__CUDACC__)
  return __uint_as_float(static_cast<uint32_t>(v.bits) << 16);
#else
  return bf16_bits_to_float(v.bits);
#endif
}
HETPLAN_DEVICE float to_f32(fp16 v) {
#if defined(__CUDACC__)
  return __half2float(__ushort_as_half(v.bits));
#else
  return fp16_bits_to_float(v.bits);
#endif
}

template <class T>
HETPLAN_DEVICE T from_f32(float f);
template <>
HETPLAN_DEVICE float from_f32<float>(float f) {
  return f;
}
template <>
HETPLAN_DEVICE bf16 from_f32<bf16>(float f) {
#if defined(__CUDACC__)
  return bf16{__bfloat16_as_ushort(__float2bfloat16_rn(f))};
#else
  return bf16{float_to_bf16_bits(f)};
#endif
}
template <>
HETPLAN_DEVICE fp16 from_f32<fp16>(float f) {
#if defined(__CUDACC__)
  return fp16{__half_as_ushort(__float2half_rn(f))};
#else
  return fp16{float_to_fp16_bits(f)};
#endif
}

// Two floats as one 32-bit register of two 16-bit values, `lo` in the low half (the layout
// mma.sync and ldmatrix use).
template <class T>
HETPLAN_DEVICE uint32_t pack2(float lo, float hi) {
  return static_cast<uint32_t>(from_f32<T>(lo).bits) |
         (static_cast<uint32_t>(from_f32<T>(hi).bits) << 16);
}

// ---- memory: N contiguous elements in one access of N * sizeof(T) bytes (aligned to it) ----
template <int kBytes>
struct Bits {
  static constexpr int kSize = kBytes;  // sizeof() is larger for 2 bytes
  uint32_t w[kBytes >= 4 ? kBytes / 4 : 1];
};

template <int kBytes>
HETPLAN_DEVICE Bits<kBytes> load_bits(const void* p) {
  Bits<kBytes> b{};
#if defined(__CUDACC__)
  if constexpr (kBytes == 16) {
    const uint4 v = *static_cast<const uint4*>(p);
    b.w[0] = v.x, b.w[1] = v.y, b.w[2] = v.z, b.w[3] = v.w;
  } else if constexpr (kBytes == 8) {
    const uint2 v = *static_cast<const uint2*>(p);
    b.w[0] = v.x, b.w[1] = v.y;
  } else if constexpr (kBytes == 4) {
    b.w[0] = *static_cast<const uint32_t*>(p);
  } else {
    static_assert(kBytes == 2);
    b.w[0] = *static_cast<const uint16_t*>(p);
  }
#else
  emu::check_global(p, kBytes, kBytes);
  std::memcpy(b.w, p, kBytes);
#endif
  return b;
}

template <int kBytes>
HETPLAN_DEVICE void store_bits(void* p, const Bits<kBytes>& b) {
#if defined(__CUDACC__)
  if constexpr (kBytes == 16) {
    *static_cast<uint4*>(p) = make_uint4(b.w[0], b.w[1], b.w[2], b.w[3]);
  } else if constexpr (kBytes == 8) {
    *static_cast<uint2*>(p) = make_uint2(b.w[0], b.w[1]);
  } else if constexpr (kBytes == 4) {
    *static_cast<uint32_t*>(p) = b.w[0];
  } else {
    static_assert(kBytes == 2);
    *static_cast<uint16_t*>(p) = static_cast<uint16_t>(b.w[0]);
  }
#else
  emu::check_global(p, kBytes, kBytes);
  std::memcpy(p, b.w, kBytes);
#endif
}

// The N elements of T held in raw bits, widened to fp32.
template <class T, int N>
HETPLAN_DEVICE void unpack(const Bits<N * sizeof(T)>& b, float (&out)[N]) {
  T v[N];
  memcpy(v, b.w, sizeof v);
  HETPLAN_UNROLL
  for (int i = 0; i < N; ++i) out[i] = to_f32(v[i]);
}

// Loads N elements of T at p (aligned to N * sizeof(T)) widened to fp32.
template <int N, class T>
HETPLAN_DEVICE void load(const T* p, float (&out)[N]) {
  unpack<T, N>(load_bits<N * sizeof(T)>(p), out);
}

// Rounds N fp32 values to T and stores them at p (aligned to N * sizeof(T)).
template <int N, class T>
HETPLAN_DEVICE void store(T* p, const float (&in)[N]) {
  T v[N];
  HETPLAN_UNROLL
  for (int i = 0; i < N; ++i) v[i] = from_f32<T>(in[i]);
  Bits<N * sizeof(T)> b{};
  memcpy(b.w, v, sizeof v);
  store_bits<N * sizeof(T)>(p, b);
}

// Shared memory: 16-byte vector load, 4- and 2-byte stores (aligned to their size).
HETPLAN_DEVICE Bits<16> lds16(const void* p) {
  Bits<16> b{};
#if defined(__CUDACC__)
  const uint4 v = *static_cast<const uint4*>(p);
  b.w[0] = v.x, b.w[1] = v.y, b.w[2] = v.z, b.w[3] = v.w;
#else
  emu::check_shared(p, 16, 16);
  std::memcpy(b.w, p, 16);
#endif
  return b;
}
HETPLAN_DEVICE void sts32(void* p, uint32_t v) {
#if defined(__CUDACC__)
  *static_cast<uint32_t*>(p) = v;
#else
  emu::check_shared(p, 4, 4);
  std::memcpy(p, &v, 4);
  emu::note_generic_smem_write(p, 4);
#endif
}
HETPLAN_DEVICE void sts16(void* p, uint16_t v) {
#if defined(__CUDACC__)
  *static_cast<uint16_t*>(p) = v;
#else
  emu::check_shared(p, 2, 2);
  std::memcpy(p, &v, 2);
  emu::note_generic_smem_write(p, 2);
#endif
}

// ---- atomics ----
HETPLAN_DEVICE void atomic_add(float* p, float v) {
#if defined(__CUDACC__)
  atomicAdd(p, v);
#else
  emu::check_global(p, 4, 4);
  *p += v;
#endif
}

// p[0] += a, p[1] += b; one vector atomic on sm_90, two scalar ones before.
HETPLAN_DEVICE void atomic_add2(float* p, float a, float b) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  atomicAdd(reinterpret_cast<float2*>(p), make_float2(a, b));
#elif defined(__CUDACC__)
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
#else
  emu::check_global(p, 8, 8);
  p[0] += a;
  p[1] += b;
#endif
}

}  // namespace hetplan::kernels::simt
