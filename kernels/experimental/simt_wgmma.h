// Hopper warpgroup MMA (wgmma, sm_90a) in the simt.h dialect: PTX on an sm_90a GPU, the
// emulator's definitions on the CPU (kernels/experimental/emulator/simt_wgmma.cpp), a trap
// elsewhere (other GPU targets compile the Hopper kernels as stubs the launcher never starts).
//
//   wgmma_desc         shared-memory matrix descriptor, 128-byte swizzle
//   wgmma_ss / _rs     wgmma.mma_async m64nNk16, fp32 accumulate, A from shared memory / registers
//   wgmma_fence, wgmma_commit, wgmma_wait<N>, fence_operand, fence_proxy_async
//
// Tiles: 16-bit elements, rows of 64 elements (128 bytes) in column blocks (a tile of R rows and
// 64 c columns is c blocks of R x 128 bytes), 16-byte chunk index XOR row % 8, blocks 1024-byte
// aligned. The same tile serves as a K-major operand (rows = M or N, columns = K: descriptor start
// advanced by 32 bytes per k-step of 16 within a block, SBO = 1024 between 8-row groups) and as an
// MN-major (transposed) one (rows = K, columns = M or N: start advanced by 16 rows = 2048 bytes
// per k-step, SBO = 1024 between 8-k groups, LBO = R * 128 between 64-column blocks).
#pragma once

#include <type_traits>

#include "kernels/simt.h"
#if !defined(__CUDACC__)
#include "kernels/experimental/emulator/simt_sm90.h"
#endif
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define HETPLAN_WGMMA 1
#include "kernels/experimental/simt_wgmma_ptx.h"
#endif

namespace hetplan::kernels::simt {

// Byte offset of element (row, col) in a swizzled tile of `rows` rows (see above).
HETPLAN_HD uint32_t sw128_offset(int rows, int row, int col) {
  return static_cast<uint32_t>((col >> 6) * rows * 128 + row * 128 +
                               ((((col >> 3) & 7) ^ (row & 7)) << 4) + (col & 7) * 2);
}

// The shared-window address of a pointer into shared memory.
HETPLAN_DEVICE uint32_t smem_u32(const void* p) {
#if defined(__CUDACC__)
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
#else
  return emu::smem_offset(p);
#endif
}

// Descriptor of a 128-byte-swizzled operand at `smem` (PTX ISA "Matrix Descriptor Format").
HETPLAN_DEVICE uint64_t wgmma_desc(const void* smem, uint32_t lbo_bytes, uint32_t sbo_bytes) {
  return static_cast<uint64_t>((smem_u32(smem) >> 4) & 0x3fff) |
         (static_cast<uint64_t>((lbo_bytes >> 4) & 0x3fff) << 16) |
         (static_cast<uint64_t>((sbo_bytes >> 4) & 0x3fff) << 32) | (uint64_t{1} << 62);
}

// `desc` with its start address moved on by `bytes` (a multiple of 16). One add where building the
// descriptor again costs a dozen instructions per wgmma (the 14-bit mask keeps the compiler from
// folding the offset in; the SASS of 2026-11-23 had ~13 integer instructions before each HGMMA).
// A block's shared-memory addresses are below 256 KB, so the start field does not carry.
HETPLAN_DEVICE uint64_t wgmma_desc_advance(uint64_t desc, uint32_t bytes) {
  return desc + (bytes >> 4);
}

// Orders this thread's register and shared-memory accesses before the wgmmas that follow.
HETPLAN_DEVICE void wgmma_fence() {
#if defined(HETPLAN_WGMMA)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#elif !defined(__CUDACC__)
  emu::wgmma_fence();
#endif
}

HETPLAN_DEVICE void wgmma_commit() {
#if defined(HETPLAN_WGMMA)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#elif !defined(__CUDACC__)
  emu::wgmma_commit();
#endif
}

// Waits until at most kPending of this warpgroup's committed wgmma groups are in flight.
template <int kPending>
HETPLAN_DEVICE void wgmma_wait() {
#if defined(HETPLAN_WGMMA)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
#elif !defined(__CUDACC__)
  emu::wgmma_wait(kPending);
#endif
}

// Keeps the compiler from moving accesses to these registers across a wgmma or its wait (the
// hardware reads and writes them asynchronously; CUTLASS calls this warpgroup_fence_operand).
template <int N>
HETPLAN_DEVICE void fence_operand(float (&r)[N]) {
#if defined(__CUDACC__)
  HETPLAN_UNROLL
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
#else
  (void)r;
#endif
}
template <int K, int N>
HETPLAN_DEVICE void fence_operand(float (&r)[K][N]) {
  HETPLAN_UNROLL
  for (int k = 0; k < K; ++k) fence_operand(r[k]);
}
template <int K>
HETPLAN_DEVICE void fence_operand(uint32_t (&r)[K][4]) {
#if defined(__CUDACC__)
  HETPLAN_UNROLL
  for (int k = 0; k < K; ++k) HETPLAN_UNROLL
  for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(r[k][i])::"memory");
#else
  (void)r;
#endif
}

// Makes this thread's ordinary shared-memory writes visible to the async proxy (wgmma operands);
// a barrier must follow before another thread's wgmma reads them.
HETPLAN_DEVICE void fence_proxy_async() {
#if defined(HETPLAN_WGMMA)
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#elif !defined(__CUDACC__)
  emu::fence_proxy_async();
#endif
}

[[noreturn]] HETPLAN_DEVICE void wgmma_unavailable() {
#if defined(__CUDACC__)
  __trap();
#endif
  __builtin_unreachable();
}

// d (N / 2 fp32 per thread) = A B + (scale_d ? d : 0), A and B from shared memory; kTransA /
// kTransB: the operand is MN-major.
template <class T, int N, int kTransA, int kTransB>
HETPLAN_DEVICE void wgmma_ss(float (&d)[N / 2], uint64_t a, uint64_t b, bool scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
#if defined(HETPLAN_WGMMA)
  if constexpr (N == 32 && kBf16)
    ptx::wgmma_ss_m64n32_bf16<kTransA, kTransB>(d, a, b, scale_d);
  else if constexpr (N == 32)
    ptx::wgmma_ss_m64n32_f16<kTransA, kTransB>(d, a, b, scale_d);
  else if constexpr (N == 64 && kBf16)
    ptx::wgmma_ss_m64n64_bf16<kTransA, kTransB>(d, a, b, scale_d);
  else if constexpr (N == 64)
    ptx::wgmma_ss_m64n64_f16<kTransA, kTransB>(d, a, b, scale_d);
  else if constexpr (N == 128 && kBf16)
    ptx::wgmma_ss_m64n128_bf16<kTransA, kTransB>(d, a, b, scale_d);
  else
    ptx::wgmma_ss_m64n128_f16<kTransA, kTransB>(d, a, b, scale_d);
#elif defined(__CUDACC__)
  (void)d, (void)a, (void)b, (void)scale_d;
  wgmma_unavailable();
#else
  emu::wgmma_async(d, N, nullptr, a, b, scale_d, kTransA, kTransB, kBf16);
#endif
}

// d = A B + (scale_d ? d : 0), A from registers (mma.sync's A fragment layout, this warp's 16
// rows), B from shared memory.
template <class T, int N, int kTransB>
HETPLAN_DEVICE void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t b, bool scale_d) {
  constexpr bool kBf16 = std::is_same_v<T, bf16>;
#if defined(HETPLAN_WGMMA)
  if constexpr (N == 32 && kBf16)
    ptx::wgmma_rs_m64n32_bf16<kTransB>(d, a, b, scale_d);
  else if constexpr (N == 32)
    ptx::wgmma_rs_m64n32_f16<kTransB>(d, a, b, scale_d);
  else if constexpr (N == 64 && kBf16)
    ptx::wgmma_rs_m64n64_bf16<kTransB>(d, a, b, scale_d);
  else if constexpr (N == 64)
    ptx::wgmma_rs_m64n64_f16<kTransB>(d, a, b, scale_d);
  else if constexpr (N == 128 && kBf16)
    ptx::wgmma_rs_m64n128_bf16<kTransB>(d, a, b, scale_d);
  else
    ptx::wgmma_rs_m64n128_f16<kTransB>(d, a, b, scale_d);
#elif defined(__CUDACC__)
  (void)d, (void)a, (void)b, (void)scale_d;
  wgmma_unavailable();
#else
  emu::wgmma_async(d, N, a, 0, b, scale_d, false, kTransB, kBf16);
#endif
}

// p[0..3] += v[0..3] (16-byte aligned): one vector reduction on sm_90, else four.
HETPLAN_DEVICE void atomic_add4(float* p, float a, float b, float c, float e) {
#if defined(__CUDACC__) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v4.f32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "f"(a), "f"(b), "f"(c),
               "f"(e)
               : "memory");
#elif defined(__CUDACC__)
  atomicAdd(p, a);
  atomicAdd(p + 1, b);
  atomicAdd(p + 2, c);
  atomicAdd(p + 3, e);
#else
  emu::check_global(p, 16, 16);
  p[0] += a;
  p[1] += b;
  p[2] += c;
  p[3] += e;
#endif
}

}  // namespace hetplan::kernels::simt
