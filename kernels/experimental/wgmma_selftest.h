// A known-answer test of the three wgmma operand forms the Hopper attention kernels use, run by
// one warpgroup: under the emulator (tests/experimental/attention_hopper_emulated_test.cpp) and on
// an sm_90a GPU (kernels/experimental/sm90a/wgmma_selftest.cu,
// tests/gpu/kernel_properties_test.cpp). If the hardware read a descriptor differently from the
// emulator's model, this names the form.
//   form 0: A and B K-major from shared memory, N = 64        (S = Q K^T, S^T = K Q^T, dP^T)
//   form 1: A from registers, B MN-major over two 64-column blocks (LBO), N = 128   (P V, dV, dK)
//   form 2: A MN-major and B MN-major from shared memory, N = 64   (dQ = dS K)
// Values: A[m][k] = 1 where k == m % 16, else 0; B[k][n] = k + 16 (n % 16): integers below 256,
// exact in bf16 and in the fp32 sums, so D[m][n] = m % 16 + 16 (n % 16) exactly.
//
// The first GPU run (2026-11-22, H100) gave a constant for every element of every form (4.094 for
// N = 64, 8.125 for N = 128: sums of bf16 values none of which the test writes) while the attention
// kernels, which issue the same forms through the same wrappers, were right. The harness then
// differed from the kernels' in two ways, now variants (kWgmmaSelftestVariants, bit flags):
//   bit 0 (kSelftestAsyncFill): tiles filled with cp.async from a global image of shared memory,
//          as the kernels load their tiles, instead of with ordinary 2-byte stores;
//   bit 1 (kSelftestGroupPerForm): one commit group and wait per form, accumulators pinned
//          (fence_operand) around each, as the kernels do, instead of one group for all three.
// Variant 3 is the kernels' way and the one the GPU test requires; the others are reported. Each
// variant also copies its shared memory back out (generic loads after the waits), so that a wrong
// product can be told apart from tiles that never held the operands.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/experimental/simt_wgmma.h"
#include "kernels/reference/numeric.h"
#include "kernels/simt_tensor.h"

namespace hetplan::kernels {

constexpr int kWgmmaSelftestForms = 3;
constexpr int kWgmmaSelftestVariants = 4;
constexpr int kSelftestAsyncFill = 1, kSelftestGroupPerForm = 2;
constexpr int kWgmmaSelftestFloats = 64;        // per thread and form (N / 2, N <= 128)
constexpr int kWgmmaSelftestTileBytes = 22528;  // the four tiles below
constexpr size_t kWgmmaSelftestSmem = kWgmmaSelftestTileBytes + 1024;
// Output floats per variant: the accumulators, then the shared-memory image read back.
constexpr size_t kWgmmaSelftestOutFloats =
    size_t{kWgmmaSelftestForms} * 128 * kWgmmaSelftestFloats + kWgmmaSelftestTileBytes / 4;

// Tile offsets in the (1024-byte aligned) shared memory; rows of 128 bytes whatever their use.
constexpr int kSelftestAKmaj = 0;       // A: 64 rows (m) x 16 columns (k), K-major
constexpr int kSelftestBKmaj = 8192;    // B^T: 64 rows (n) x 16 columns (k), K-major
constexpr int kSelftestBMnmaj = 16384;  // B: 16 rows (k) x 128 columns (n): 2 blocks of 2 KB
constexpr int kSelftestAMnmaj = 20480;  // A^T: 16 rows (k) x 64 columns (m)

// D[m][n] of every form.
inline float wgmma_selftest_expected(int m, int n) {
  return static_cast<float>(m % 16 + 16 * (n % 16));
}

// Row and column of accumulator i of thread t (the m64nNk16 D fragment).
inline void wgmma_selftest_position(int t, int i, int& m, int& n) {
  const int lane = t % 32, g = lane / 4, q = lane % 4;
  m = 16 * (t / 32) + g + 8 * ((i >> 1) & 1);
  n = 8 * (i >> 2) + 2 * q + (i & 1);
}

// The operand values (see the top of the file).
HETPLAN_HD float wgmma_selftest_a(int m, int k) { return k == m % 16 ? 1.0f : 0.0f; }
HETPLAN_HD float wgmma_selftest_b(int k, int n) { return static_cast<float>(k + 16 * (n % 16)); }

// Calls put(byte offset, value) for every operand element of the four tiles (host or device).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Put>
HETPLAN_HD void wgmma_selftest_for_each(int first, int step, Put&& put) {
  for (int i = first; i < 64 * 16; i += step) {
    const int r = i / 16, c = i % 16;  // r: m or n, c: k
    put(kSelftestAKmaj + static_cast<int>(simt::sw128_offset(64, r, c)), wgmma_selftest_a(r, c));
    put(kSelftestBKmaj + static_cast<int>(simt::sw128_offset(64, r, c)), wgmma_selftest_b(c, r));
    put(kSelftestAMnmaj + static_cast<int>(simt::sw128_offset(16, c, r)), wgmma_selftest_a(r, c));
  }
  for (int i = first; i < 16 * 128; i += step) {
    const int k = i / 128, n = i % 128;
    put(kSelftestBMnmaj + static_cast<int>(simt::sw128_offset(16, k, n)), wgmma_selftest_b(k, n));
  }
}

// The tiles' bytes as bf16 bits (unwritten parts zero): the source of the cp.async fill, and what
// the read-back must equal where the operands lie.
inline std::vector<uint16_t> wgmma_selftest_image() {
  std::vector<uint16_t> image(kWgmmaSelftestTileBytes / 2, 0);
  wgmma_selftest_for_each(0, 1, [&](int offset, float v) {
    image[static_cast<size_t>(offset / 2)] = float_to_bf16_bits(v);
  });
  return image;
}

// Run by 128 threads with kWgmmaSelftestSmem bytes of dynamic shared memory; `image` is
// wgmma_selftest_image() in global memory. Writes out[(form * 128 + thread) *
// kWgmmaSelftestFloats + i] (N / 2 values per form), then the shared-memory tiles as read back.
template <int kVariant>
HETPLAN_DEVICE void wgmma_selftest_block(const uint16_t* image, float* out) {
  unsigned char* smem = simt::dynamic_smem();
  smem += (1024 - simt::smem_u32(smem) % 1024) % 1024;
  const int t = simt::thread_x();
  if constexpr ((kVariant & kSelftestAsyncFill) != 0) {
    for (int c = t; c < kWgmmaSelftestTileBytes / 16; c += 128)
      simt::cp_async16(smem + 16 * c, image + 8 * c, true);
    simt::cp_async_commit();
    simt::cp_async_wait<0>();
  } else {
    // The part of the image the operands do not cover is zeroed as the copy would leave it.
    for (int c = t; c < kWgmmaSelftestTileBytes / 4; c += 128) simt::sts32(smem + 4 * c, 0u);
    simt::sync_threads();
    wgmma_selftest_for_each(t, 128, [&](int offset, float v) {
      simt::sts16(smem + offset, simt::from_f32<bf16>(v).bits);
    });
  }
  simt::fence_proxy_async();
  simt::sync_threads();

  const int lane = t % 32, g = lane / 4, q = lane % 4;
  const uint32_t a_regs[4] = {
      simt::pack2<bf16>(wgmma_selftest_a(g, 2 * q), wgmma_selftest_a(g, 2 * q + 1)),
      simt::pack2<bf16>(wgmma_selftest_a(g + 8, 2 * q), wgmma_selftest_a(g + 8, 2 * q + 1)),
      simt::pack2<bf16>(wgmma_selftest_a(g, 2 * q + 8), wgmma_selftest_a(g, 2 * q + 9)),
      simt::pack2<bf16>(wgmma_selftest_a(g + 8, 2 * q + 8), wgmma_selftest_a(g + 8, 2 * q + 9))};
  const uint64_t a_k = simt::wgmma_desc(smem + kSelftestAKmaj, 16, 1024);
  const uint64_t b_k = simt::wgmma_desc(smem + kSelftestBKmaj, 16, 1024);
  const uint64_t b_mn = simt::wgmma_desc(smem + kSelftestBMnmaj, 16 * 128, 1024);
  const uint64_t a_mn = simt::wgmma_desc(smem + kSelftestAMnmaj, 16 * 128, 1024);
  float d0[32], d1[64], d2[32];
  if constexpr ((kVariant & kSelftestGroupPerForm) != 0) {
    simt::wgmma_fence();
    simt::wgmma_ss<bf16, 64, 0, 0>(d0, a_k, b_k, false);
    simt::wgmma_commit();
    simt::fence_operand(d0);
    simt::wgmma_wait<0>();
    simt::fence_operand(d0);
    simt::wgmma_fence();
    simt::wgmma_rs<bf16, 128, 1>(d1, a_regs, b_mn, false);
    simt::wgmma_commit();
    simt::fence_operand(d1);
    simt::wgmma_wait<0>();
    simt::fence_operand(d1);
    simt::wgmma_fence();
    simt::wgmma_ss<bf16, 64, 1, 1>(d2, a_mn, b_mn, false);
    simt::wgmma_commit();
    simt::fence_operand(d2);
    simt::wgmma_wait<0>();
    simt::fence_operand(d2);
  } else {
    simt::wgmma_fence();
    simt::wgmma_ss<bf16, 64, 0, 0>(d0, a_k, b_k, false);
    simt::wgmma_rs<bf16, 128, 1>(d1, a_regs, b_mn, false);
    simt::wgmma_ss<bf16, 64, 1, 1>(d2, a_mn, b_mn, false);
    simt::wgmma_commit();
    simt::wgmma_wait<0>();
    simt::fence_operand(d0);
    simt::fence_operand(d1);
    simt::fence_operand(d2);
  }
  float* mine = out + t * kWgmmaSelftestFloats;
  HETPLAN_UNROLL
  for (int i = 0; i < 32; ++i) mine[i] = d0[i];
  mine += 128 * kWgmmaSelftestFloats;
  HETPLAN_UNROLL
  for (int i = 0; i < 64; ++i) mine[i] = d1[i];
  mine += 128 * kWgmmaSelftestFloats;
  HETPLAN_UNROLL
  for (int i = 0; i < 32; ++i) mine[i] = d2[i];
  // The tiles as the generic proxy sees them now (16 bytes at a time, as raw bits in floats).
  float* back = out + size_t{kWgmmaSelftestForms} * 128 * kWgmmaSelftestFloats;
  for (int c = t; c < kWgmmaSelftestTileBytes / 16; c += 128) {
    const simt::Bits<16> b = simt::lds16(smem + 16 * c);
    simt::Bits<16> copy = b;
    simt::store_bits<16>(back + 4 * c, copy);
  }
}

// What one variant's output says: wrong accumulators per form, read-back 16-bit words that differ
// from the image, and a description of the first differences and the commonest wrong values.
struct WgmmaSelftestReport {
  int wrong[kWgmmaSelftestForms] = {};
  int image_wrong = 0;
  std::string detail;
};

inline WgmmaSelftestReport wgmma_selftest_check(const std::vector<float>& out) {
  WgmmaSelftestReport r;
  std::ostringstream os;
  const int n_of_form[kWgmmaSelftestForms] = {64, 128, 64};
  for (int form = 0; form < kWgmmaSelftestForms; ++form) {
    std::map<float, int> values;
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < n_of_form[form] / 2; ++i) {
        int m = 0, n = 0;
        wgmma_selftest_position(t, i, m, n);
        const float got = out.at(static_cast<size_t>((form * 128 + t) * kWgmmaSelftestFloats + i));
        if (got == wgmma_selftest_expected(m, n)) continue;
        if (r.wrong[form]++ < 3)
          os << " form " << form << " D[" << m << "][" << n << "] = " << got << " (want "
             << wgmma_selftest_expected(m, n) << ");";
        ++values[got];
      }
    if (r.wrong[form] > 0) {
      os << " form " << form << ": " << r.wrong[form] << " wrong, values";
      int shown = 0;
      for (const auto& [v, count] : values)
        if (shown++ < 4) os << " " << v << " x" << count;
      os << ";";
    }
  }
  const std::vector<uint16_t> image = wgmma_selftest_image();
  const size_t base = size_t{kWgmmaSelftestForms} * 128 * kWgmmaSelftestFloats;
  for (size_t w = 0; w < image.size(); ++w) {
    uint32_t word;
    std::memcpy(&word, &out.at(base + w / 2), 4);
    const auto got = static_cast<uint16_t>(w % 2 ? word >> 16 : word & 0xffffu);
    if (got != image[w] && r.image_wrong++ < 3)
      os << " shared memory byte " << 2 * w << " reads " << got << " (want " << image[w] << ");";
  }
  if (r.image_wrong > 0)
    os << " " << r.image_wrong << " shared-memory words differ from the image;";
  r.detail = os.str();
  return r;
}

}  // namespace hetplan::kernels
