// Attention forward and backward for Hopper (sm_90a): the same computation as
// attention_kernels.h / attention_backward_kernels.h, with every matrix product on warpgroup MMA
// (wgmma, m64nNk16, operands from 128-byte-swizzled shared memory through descriptors, P and dS
// from registers). In the spirit of FlashAttention-3 (Shah et al. 2024: wgmma, tiles of 128,
// online softmax in registers, causal tiles skipped), without its producer warp, TMA and
// ping-pong schedule: the two warpgroups of a block load their tiles with cp.async themselves.
// Device code in the simt.h dialect: the CPU tests run it under the emulator, which models wgmma
// from the PTX ISA (kernels/experimental/emulator/simt_wgmma.cpp). Launchers: attention_hopper.cu.
//
// Forward, one block of 2 warpgroups per (128 queries, head, batch), warpgroup w owning queries
// 64 w .. 64 w + 63; for each 128-key tile (causal: up to the diagonal):
//   S = Q K^T           wgmma_ss m64n128, A = Q (K-major), B = K (K-major), d / 16 k-steps
//   online softmax of S in registers (rows g, g + 8 of each warp's 16, as in mma.sync)
//   O += P V            wgmma_rs m64n{d}, A = P (registers), B = V (MN-major), 8 k-steps
//   meanwhile the next K, V tile streams into the other buffer.
// Backward, one block of 2 warpgroups per (128 keys, head, batch), warpgroup w owning keys
// 64 w .. 64 w + 63; for each 64-query tile (causal: from the first that sees these keys):
//   S^T = K Q^T, dP^T = V dO^T      wgmma_ss m64n64 (all K-major)
//   P^T = exp(scale S^T - lse), dS^T = P^T (dP^T - D)    in registers; dS^T also to shared
//   dV += P^T dO, dK += dS^T Q      wgmma_rs m64n{d}, B = dO, Q (MN-major)
//   dQ_tile += dS K                 wgmma_ss m64n64: warpgroup w takes half the columns of dQ
//                                   over all 128 keys (d = 128) or all columns over its 64 keys
//                                   (d = 64), A = dS (dS^T stored: MN-major), B = K (MN-major);
//                                   added to the fp32 accumulator with 16-byte atomics.
// Opt-in (HETPLAN_ATTENTION_BWD=wg1): the same backward with one warpgroup per block (64 keys)
// and two (d = 128) or three (d = 64) blocks per SM; dQ then over the block's own 64 keys, all
// columns (d = 128: two m64n64 products, the first half's atomics under the second's product).
#pragma once

#include <cmath>

#include "kernels/attention_kernels.h"
#include "kernels/experimental/simt_wgmma.h"

namespace hetplan::kernels {

constexpr int kHopperThreads = 256;  // two warpgroups
constexpr int kHopperTile = 128;     // forward: queries per block and keys per tile;
                                     // backward: keys per block
constexpr int kHopperBwdQ = 64;      // backward: queries per tile

constexpr int kHopperStages = 3;  // forward: K/V buffers

// Dynamic shared memory, with 1 KB of slack to align the tiles to 1024 bytes: forward Q and three
// K/V stages (225 KB at d = 128, of the H100's 227 KB per block).
template <class T, int kD>
constexpr size_t attention_forward_hopper_smem_bytes() {
  return (1 + 2 * kHopperStages) * size_t{kHopperTile} * kD * sizeof(T) + 1024;
}
// The backward's dQ staging rows when dQ goes out by bulk reduce (kBulkDq): 64 fp32 columns and 8
// of padding, so that the 4 rows of a half-warp's 8-byte stores fall in disjoint banks (rows stay
// 16-byte aligned, as the bulk copy requires).
constexpr int kHopperDqRowFloats = 72;
// kKeys: keys per block (64 per warpgroup).
template <class T, int kD, bool kBulkDq = false, int kKeys = kHopperTile>
constexpr size_t attention_backward_hopper_smem_bytes() {
  return (2 * size_t{kKeys} * kD + 4 * size_t{kHopperBwdQ} * kD + size_t{kKeys} * kHopperBwdQ) *
             sizeof(T) +
         4 * kHopperBwdQ * sizeof(float) +
         (kBulkDq ? size_t{kKeys} * kHopperDqRowFloats * sizeof(float) : 0) + 1024;
}

// The dynamic shared memory, 1024-byte aligned.
HETPLAN_DEVICE unsigned char* hopper_smem() {
  unsigned char* raw = simt::dynamic_smem();
  return raw + ((1024 - simt::smem_u32(raw) % 1024) % 1024);
}

// Starts the asynchronous load of rows [row0, row0 + kRows) of one head into a 128-byte-swizzled
// tile (simt_wgmma.h); rows >= seq become zeros. Consecutive threads (kThreads of them, from
// thread 0) take consecutive chunks: chunk i * kThreads + tid is row r0 + i * kRowStep, column
// chunk tid % kChunks. The source pointer and the swizzled offset are computed once and stepped
// (kRowStep is a multiple of 8, so the swizzle pattern repeats): a 64-bit multiply per chunk
// otherwise, ~130 instructions per backward tile in the SASS of 2026-11-23.
template <class T, int kD, int kRows, int kThreads = kHopperThreads>
HETPLAN_DEVICE void load_tile_sw128(unsigned char* tile, const T* head, int64_t stride_s, int row0,
                                    int seq) {
  constexpr int kChunks = kD / 8;
  constexpr int kRowStep = kThreads / kChunks;
  static_assert(kRows * kChunks % kThreads == 0 && kThreads % kChunks == 0);
  static_assert(kRowStep % 8 == 0, "the swizzle must repeat from one step to the next");
  const int tid = simt::thread_x();
  const int r0 = tid / kChunks, ch = tid % kChunks;
  const T* src = head + static_cast<int64_t>(row0 + r0) * stride_s + ch * 8;
  const uint32_t offset = simt::sw128_offset(kRows, r0, ch * 8);
  if (row0 + kRows <= seq) {  // every tile but the last: no test per chunk
    HETPLAN_UNROLL
    for (int i = 0; i < kRows * kChunks / kThreads; ++i)
      simt::cp_async16(tile + offset + i * kRowStep * 128, src + i * kRowStep * stride_s, true);
    return;
  }
  HETPLAN_UNROLL
  for (int i = 0; i < kRows * kChunks / kThreads; ++i) {
    const bool valid = row0 + r0 + i * kRowStep < seq;
    simt::cp_async16(tile + offset + i * kRowStep * 128,
                     valid ? src + i * kRowStep * stride_s : head, valid);
  }
}

// K-major operand at rows [row0, ...) of a tile of kRows rows, k-step kk (16 columns).
template <int kRows>
HETPLAN_DEVICE uint64_t kmajor_desc(const unsigned char* tile, int row0, int kk) {
  return simt::wgmma_desc_advance(simt::wgmma_desc(tile, 16, 1024),
                                  (kk >> 2) * kRows * 128 + row0 * 128 + (kk & 3) * 32);
}
// MN-major operand: k-step kk covers tile rows 16 kk .. + 15, columns from col0 on.
template <int kRows>
HETPLAN_DEVICE uint64_t mnmajor_desc(const unsigned char* tile, int col0, int kk) {
  return simt::wgmma_desc_advance(simt::wgmma_desc(tile, kRows * 128, 1024),
                                  (col0 >> 6) * kRows * 128 + (col0 & 63) * 2 + kk * 16 * 128);
}

// Writes a warp's 16 rows of an accumulator (wgmma layout: acc[4 j + e] at row g + 8 (e >> 1),
// column 8 j + 2 q + (e & 1)), times scale0 (row g) / scale1 (row g + 8), to global rows
// row0 + 0..15 (< seq), through the warp's 16 rows of `stage` (16-byte stores).
template <class T, int kD>
HETPLAN_DEVICE void store_acc_rows(const float (&acc)[kD / 2], float scale0, float scale1, T* stage,
                                   int warp_row, T* dst, int64_t stride_s, int row0, int seq) {
  constexpr int kChunks = kD / 8;
  const int lane = simt::lane(), g = lane >> 2, q = lane & 3;
  const int row_g = swz<kChunks>(warp_row + g, 0) + 2 * q;
  HETPLAN_UNROLL
  for (int j = 0; j < kD / 8; ++j) {
    simt::sts32(stage + (row_g ^ (j << 3)),
                simt::pack2<T>(acc[4 * j] * scale0, acc[4 * j + 1] * scale0));
    simt::sts32(stage + 8 * kD + (row_g ^ (j << 3)),
                simt::pack2<T>(acc[4 * j + 2] * scale1, acc[4 * j + 3] * scale1));
  }
  simt::sync_warp();
  HETPLAN_UNROLL
  for (int c = lane; c < 16 * kChunks; c += 32) {
    const int r = c / kChunks, ch = c % kChunks;
    if (row0 + r < seq)
      simt::store_bits<16>(dst + (row0 + r) * stride_s + ch * 8,
                           simt::lds16(stage + swz<kChunks>(warp_row + r, ch)));
  }
  simt::sync_warp();
}

// P (or dS) accumulators of 16 columns kk as an A fragment (rows g, g + 8; mma.sync layout).
template <class T, int kN>
HETPLAN_DEVICE void acc_to_a(const float (&s)[kN / 2], int kk, uint32_t (&a)[4]) {
  a[0] = simt::pack2<T>(s[8 * kk], s[8 * kk + 1]);
  a[1] = simt::pack2<T>(s[8 * kk + 2], s[8 * kk + 3]);
  a[2] = simt::pack2<T>(s[8 * kk + 4], s[8 * kk + 5]);
  a[3] = simt::pack2<T>(s[8 * kk + 6], s[8 * kk + 7]);
}

// Masks one tile of scores (keys past the end; causal: keys after the query) and folds it into
// the running softmax: m, l updated, s becomes P = 2^(scale_log2 s - m) in place; returns the
// factor by which the output accumulated so far must be rescaled, per row (g, g + 8).
template <int kN>
HETPLAN_DEVICE void softmax_tile(float (&s)[kN / 2], float (&m)[2], float (&l)[2],
                                 float (&alpha)[2], int kv0, int row_base, bool diagonal, int seq,
                                 float scale_log2) {
  const int q = simt::lane() & 3;
  if (diagonal || kv0 + kN > seq) {
    HETPLAN_UNROLL
    for (int i = 0; i < kN / 2; ++i) {
      const int key = kv0 + 8 * (i >> 2) + 2 * q + (i & 1);
      const int query = row_base + 8 * ((i >> 1) & 1);
      if (key >= seq || (diagonal && key > query)) s[i] = -INFINITY;
    }
  }
  float mx[2] = {-INFINITY, -INFINITY};
  HETPLAN_UNROLL
  for (int i = 0; i < kN / 2; ++i) mx[(i >> 1) & 1] = fmaxf(mx[(i >> 1) & 1], s[i]);
  float base[2];
  HETPLAN_UNROLL
  for (int r = 0; r < 2; ++r) {
    mx[r] = fmaxf(mx[r], simt::shfl_xor(mx[r], 1));  // over the quad sharing the row
    mx[r] = fmaxf(mx[r], simt::shfl_xor(mx[r], 2));
    const float m_new = fmaxf(m[r], mx[r] * scale_log2);
    base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing unmasked yet
    alpha[r] = simt::exp2_fast(m[r] - base[r]);
    m[r] = m_new;
    l[r] *= alpha[r];
  }
  HETPLAN_UNROLL
  for (int i = 0; i < kN / 2; ++i) {
    s[i] = simt::exp2_fast(s[i] * scale_log2 - base[(i >> 1) & 1]);
    l[(i >> 1) & 1] += s[i];
  }
}

// The forward's end, for warp `warp`'s 16 query rows of the block's tile from q0 (warp w of the
// block holds rows 16 w .. + 15): O / l stored through the warp's 16 rows of `stage` (the Q
// tile, which the caller's barrier has made free), and lse.
template <class T, int kD>
HETPLAN_DEVICE void forward_epilogue(const AttentionParams<T>& p, const float (&o)[kD / 2],
                                     const float (&m)[2], float (&l)[2], T* stage, int warp,
                                     int64_t head, int q0, int b, int h) {
  sum_rows_over_quad(l);
  store_acc_rows<T, kD>(o, 1.0f / l[0], 1.0f / l[1], stage, warp * 16, p.out + head, p.stride_s,
                        q0 + warp * 16, p.seq);
  write_lse(p, m, l, q0 + warp * 16 + (simt::lane() >> 2), b, h);
}

// Forward. Per warpgroup and key tile j, FlashAttention-3's intra-warpgroup overlap: S_{j+1} =
// Q K_{j+1}^T is issued before O += P_j V_j, so the softmax of tile j + 1 runs on the CUDA cores
// while the tensor cores do P_j V_j. K/V tiles are three-buffered: tile j + 2 streams in during
// iteration j into the buffer of tile j - 1, which no wgmma reads any more.
template <class T, int kD>
HETPLAN_DEVICE void attention_forward_hopper_block(const AttentionParams<T>& p) {
  constexpr int kTileBytes = kHopperTile * kD * 2;
  constexpr int kN = kHopperTile;  // keys per tile
  unsigned char* sq = hopper_smem();
  unsigned char* sk = sq + kTileBytes;                  // kHopperStages buffers
  unsigned char* sv = sk + kHopperStages * kTileBytes;  // kHopperStages buffers
  const int lane = simt::lane(), warp = simt::warp_uniform(), g = lane >> 2;
  const int wg = warp >> 2, wq = warp & 3;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kHopperTile));
  const int qt = p.causal ? n_tiles - 1 - static_cast<int>(simt::block_x())
                          : static_cast<int>(simt::block_x());
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int q0 = qt * kHopperTile;
  const int kv_tiles = p.causal ? qt + 1 : n_tiles;
  const int row_base = q0 + wg * 64 + wq * 16 + g;  // this thread's first query row
  auto load_kv = [&](int tile) {
    const int st = tile % kHopperStages;
    load_tile_sw128<T, kD, kHopperTile>(sk + st * kTileBytes, p.k + head, p.stride_s, tile * kN,
                                        p.seq);
    load_tile_sw128<T, kD, kHopperTile>(sv + st * kTileBytes, p.v + head, p.stride_s, tile * kN,
                                        p.seq);
  };
  auto issue_s = [&](float(&s)[kN / 2], int tile) {
    const unsigned char* kt = sk + (tile % kHopperStages) * kTileBytes;
    HETPLAN_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk)
      simt::wgmma_ss<T, kN, 0, 0>(s, kmajor_desc<kHopperTile>(sq, wg * 64, kk),
                                  kmajor_desc<kHopperTile>(kt, 0, kk), kk > 0);
  };

  float o[kD / 2] = {};
  uint32_t pa[kN / 16][4];
  auto issue_pv = [&](int tile) {
    const unsigned char* vt = sv + (tile % kHopperStages) * kTileBytes;
    HETPLAN_UNROLL
    for (int kk = 0; kk < kN / 16; ++kk)
      simt::wgmma_rs<T, kD, 1>(o, pa[kk], mnmajor_desc<kHopperTile>(vt, 0, kk), true);
  };

  load_tile_sw128<T, kD, kHopperTile>(sq, p.q + head, p.stride_s, q0, p.seq);
  load_kv(0);
  simt::cp_async_commit();
  if (kv_tiles > 1) {
    load_kv(1);
    simt::cp_async_commit();
    simt::cp_async_wait<1>();  // Q and tile 0
  } else {
    simt::cp_async_wait<0>();
  }
  simt::fence_proxy_async();
  simt::sync_threads();

  float m[2] = {-INFINITY, -INFINITY};  // running max (log2 units) of rows g, g + 8
  float l[2] = {0.0f, 0.0f};            // this thread's share of the running sums
  float alpha[2];
  float s[kN / 2];
  simt::wgmma_fence();
  issue_s(s, 0);
  simt::wgmma_commit();
  simt::wgmma_wait<0>();
  simt::fence_operand(s);
  softmax_tile<kN>(s, m, l, alpha, 0, row_base, p.causal && qt == 0, p.seq, p.scale_log2);
  HETPLAN_UNROLL
  for (int kk = 0; kk < kN / 16; ++kk) acc_to_a<T, kN>(s, kk, pa[kk]);

  // Steady state: every iteration has a next tile (straight-line code between a wgmma and its
  // wait, which ptxas needs to keep the wgmmas asynchronous); the last tile's P V follows.
  for (int j = 0; j + 1 < kv_tiles; ++j) {
    simt::cp_async_wait<0>();   // tile j + 1 has landed (this thread's copies) ...
    simt::fence_proxy_async();  // ... visible to the tensor cores ...
    simt::sync_threads();       // ... everyone's; iteration j - 1 is over in every warp
    if (j + 2 < kv_tiles) {
      load_kv(j + 2);
      simt::cp_async_commit();
    }
    // The fences around the issue pin the accumulators and P's registers in place while the
    // tensor cores own them (CUTLASS's warpgroup_fence_operand), so that the compiler neither
    // moves nor reuses them before the waits.
    simt::fence_operand(o);
    simt::fence_operand(pa);
    simt::wgmma_fence();
    issue_s(s, j + 1);
    simt::wgmma_commit();
    issue_pv(j);
    simt::wgmma_commit();
    simt::fence_operand(s);
    simt::fence_operand(o);
    simt::fence_operand(pa);
    simt::wgmma_wait<1>();  // S_{j+1}; P_j V_j may still run
    simt::fence_operand(s);
    softmax_tile<kN>(s, m, l, alpha, (j + 1) * kN, row_base, p.causal && j + 1 == qt, p.seq,
                     p.scale_log2);
    simt::wgmma_wait<0>();
    simt::fence_operand(o);
    simt::fence_operand(pa);
    HETPLAN_UNROLL
    for (int i = 0; i < kD / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
    HETPLAN_UNROLL
    for (int kk = 0; kk < kN / 16; ++kk) acc_to_a<T, kN>(s, kk, pa[kk]);
  }
  simt::fence_operand(o);
  simt::fence_operand(pa);
  simt::wgmma_fence();
  issue_pv(kv_tiles - 1);
  simt::wgmma_commit();
  simt::fence_operand(o);
  simt::fence_operand(pa);
  simt::wgmma_wait<0>();
  simt::fence_operand(o);
  simt::fence_operand(pa);

  // O through this warp's 16 rows of the Q tile: every wgmma reading Q has retired in this
  // warpgroup, but the other may still run its last S, so first a barrier.
  simt::sync_threads();
  forward_epilogue<T, kD>(p, o, m, l, reinterpret_cast<T*>(sq), warp, head, q0, b, h);
}

}  // namespace hetplan::kernels

#include "kernels/experimental/attention_hopper_backward_kernels.h"
