// Tensor-core and asynchronous-copy primitives for the attention kernels, in the simt.h dialect:
// PTX on the GPU, the emulator's definitions on the CPU.
//
//   ldmatrix_x4        ldmatrix.sync.aligned.m8n8.x4(.trans).shared.b16 (sm_75+)
//   mma_16816<T>       mma.sync.aligned.m16n8k16.row.col.f32.{bf16,f16} (sm_80+); on sm_75 fp16
//                      as two m16n8k8 (bf16 has no tensor-core path there: it traps)
//   cp_async16         cp.async.cg.shared.global, 16 bytes, zero-filled when !valid (sm_80+);
//                      on sm_75 a synchronous 16-byte copy, so the pipeline is correct but serial
#pragma once

#include <type_traits>

#include "kernels/simt.h"

namespace hetplan::kernels::simt {

#if defined(__CUDACC__)
HETPLAN_DEVICE uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}
#endif

// Lane l gives the address of row l % 8 of matrix l / 8 (16 bytes, 16-byte aligned); r[i] gets
// this lane's fragment of matrix i: row lane / 4, columns 2 (lane % 4) and +1 (low half first);
// transposed, the rows and columns of each 8x8 matrix swap.
template <bool kTranspose>
HETPLAN_DEVICE void ldmatrix_x4(uint32_t (&r)[4], const void* smem_row) {
#if defined(__CUDACC__)
  if constexpr (kTranspose)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(smem_row)));
  else
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(smem_address(smem_row)));
#else
  emu::ldmatrix(r, 4, kTranspose, smem_row);
#endif
}

// d += a * b for a 16x16 A (4 registers, row-major fragments), a 16x8 B (2 registers,
// column-major fragments) and a 16x8 fp32 D, per the PTX ISA's m16n8k16 fragment layouts.
template <class T>
HETPLAN_DEVICE void mma_16816(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, bf16>)
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
        "{%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  if constexpr (std::is_same_v<T, fp16>) {
    // k 0..7 then k 8..15: A registers {0, 1} with B register 0, then {2, 3} with 1.
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(b[0]));
    asm volatile(
        "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[2]), "r"(a[3]), "r"(b[1]));
  } else {
    __trap();  // bf16 tensor cores need sm_80; the launcher refuses this case
  }
#endif
#else
  const float c[4] = {d[0], d[1], d[2], d[3]};
  emu::mma_m16n8k16(d, a, b, c, std::is_same_v<T, bf16>);
#endif
}

// 16 bytes global -> shared, asynchronous; zeros when !valid (`src` must still be a mapped
// address, it is not read).
HETPLAN_DEVICE void cp_async16(void* smem, const void* src, bool valid) {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_address(smem)),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#else
  *static_cast<uint4*>(smem) = valid ? *static_cast<const uint4*>(src) : make_uint4(0, 0, 0, 0);
#endif
#else
  emu::cp_async16(smem, src, valid ? 16 : 0);
#endif
}

HETPLAN_DEVICE void cp_async_commit() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
#else
  emu::cp_async_commit();
#endif
}

// Waits until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
HETPLAN_DEVICE void cp_async_wait() {
#if defined(__CUDACC__)
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
#else
  emu::cp_async_wait(kPending);
#endif
}

}  // namespace hetplan::kernels::simt
