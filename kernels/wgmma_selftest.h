// A known-answer test of the three wgmma operand forms the Hopper attention kernels use, run by
// one warpgroup: under the emulator (tests/kernels/attention_hopper_emulated_test.cpp) and on an
// sm_90a GPU (kernels/sm90a/wgmma_selftest.cu, tests/gpu/kernel_properties_test.cpp). If the
// hardware read a descriptor differently from the emulator's model, this names the form.
//   form 0: A and B K-major from shared memory, N = 64        (S = Q K^T, S^T = K Q^T, dP^T)
//   form 1: A from registers, B MN-major over two 64-column blocks (LBO), N = 128   (P V, dV, dK)
//   form 2: A MN-major and B MN-major from shared memory, N = 64   (dQ = dS K)
// Values: A[m][k] = 1 where k == m % 16, else 0; B[k][n] = k + 16 (n % 16): integers below 256,
// exact in bf16 and in the fp32 sums, so D[m][n] = m % 16 + 16 (n % 16) exactly.
#pragma once

#include <cstring>

#include "kernels/simt_wgmma.h"

namespace hetplan::kernels {

constexpr int kWgmmaSelftestForms = 3;
constexpr int kWgmmaSelftestFloats = 64;  // per thread and form (N / 2, N <= 128)
constexpr size_t kWgmmaSelftestSmem = 22528 + 1024;

// D[m][n] of every form.
inline float wgmma_selftest_expected(int m, int n) { return static_cast<float>(m % 16 + 16 * (n % 16)); }

// Row and column of accumulator i of thread t (the m64nNk16 D fragment).
inline void wgmma_selftest_position(int t, int i, int& m, int& n) {
  const int lane = t % 32, g = lane / 4, q = lane % 4;
  m = 16 * (t / 32) + g + 8 * ((i >> 1) & 1);
  n = 8 * (i >> 2) + 2 * q + (i & 1);
}

// Run by 128 threads with kWgmmaSelftestSmem bytes of dynamic shared memory; writes
// out[(form * 128 + thread) * kWgmmaSelftestFloats + i] (N / 2 values per form).
HETPLAN_DEVICE void wgmma_selftest_block(float* out) {
  unsigned char* smem = simt::dynamic_smem();
  smem += (1024 - simt::smem_u32(smem) % 1024) % 1024;
  // Rows of 128 bytes whatever their use: 64-row tiles take 8 KB, 16-row ones 2 KB per block.
  unsigned char* a_kmaj = smem;            // A: 64 rows (m) x 16 columns (k), K-major
  unsigned char* b_kmaj = smem + 8192;     // B^T: 64 rows (n) x 16 columns (k), K-major
  unsigned char* b_mnmaj = smem + 16384;   // B: 16 rows (k) x 128 columns (n): 2 blocks of 2 KB
  unsigned char* a_mnmaj = smem + 20480;   // A^T: 16 rows (k) x 64 columns (m)
  const int t = simt::thread_x();
  auto put = [](unsigned char* tile, int rows, int r, int c, float v) {
    const uint16_t bits = simt::from_f32<bf16>(v).bits;
    std::memcpy(tile + simt::sw128_offset(rows, r, c), &bits, 2);
  };
  for (int i = t; i < 64 * 16; i += 128) {
    const int r = i / 16, c = i % 16;  // r: m or n, c: k
    put(a_kmaj, 64, r, c, c == r % 16 ? 1.0f : 0.0f);
    put(b_kmaj, 64, r, c, static_cast<float>(c + 16 * (r % 16)));
    put(a_mnmaj, 16, c, r, c == r % 16 ? 1.0f : 0.0f);
  }
  for (int i = t; i < 16 * 128; i += 128) {
    const int k = i / 128, n = i % 128;
    put(b_mnmaj, 16, k, n, static_cast<float>(k + 16 * (n % 16)));
  }
  simt::fence_proxy_async();
  simt::sync_threads();

  const int lane = t % 32, g = lane / 4, q = lane % 4;
  auto ident = [](int row, int k) { return row == k ? 1.0f : 0.0f; };
  const uint32_t a_regs[4] = {simt::pack2<bf16>(ident(g, 2 * q), ident(g, 2 * q + 1)),
                              simt::pack2<bf16>(ident(g + 8, 2 * q), ident(g + 8, 2 * q + 1)),
                              simt::pack2<bf16>(ident(g, 2 * q + 8), ident(g, 2 * q + 9)),
                              simt::pack2<bf16>(ident(g + 8, 2 * q + 8), ident(g + 8, 2 * q + 9))};
  float d0[32], d1[64], d2[32];
  simt::wgmma_fence();
  simt::wgmma_ss<bf16, 64, 0, 0>(d0, simt::wgmma_desc(a_kmaj, 16, 1024), simt::wgmma_desc(b_kmaj, 16, 1024), false);
  simt::wgmma_rs<bf16, 128, 1>(d1, a_regs, simt::wgmma_desc(b_mnmaj, 16 * 128, 1024), false);
  simt::wgmma_ss<bf16, 64, 1, 1>(d2, simt::wgmma_desc(a_mnmaj, 16 * 128, 1024),
                                 simt::wgmma_desc(b_mnmaj, 16 * 128, 1024), false);
  simt::wgmma_commit();
  simt::wgmma_wait<0>();
  simt::fence_operand(d0);
  simt::fence_operand(d1);
  simt::fence_operand(d2);
  float* mine = out + t * kWgmmaSelftestFloats;
  for (int i = 0; i < 32; ++i) mine[i] = d0[i];
  mine += 128 * kWgmmaSelftestFloats;
  for (int i = 0; i < 64; ++i) mine[i] = d1[i];
  mine += 128 * kWgmmaSelftestFloats;
  for (int i = 0; i < 32; ++i) mine[i] = d2[i];
}

}  // namespace hetplan::kernels
