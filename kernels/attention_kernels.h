// Fused causal / full self-attention, flash-style (Dao 2023, "FlashAttention-2": online softmax
// over key tiles, nothing of size seq x seq in memory, the backward recomputes P), on tensor
// cores through mma.sync m16n8k16 with ldmatrix fragments and cp.async double buffering.
// bf16 or fp16 in, fp32 accumulate, head_dim 64 or 128. Reference:
// kernels/reference/attention_reference.h. Device code in the simt.h dialect (it also runs in the
// CPU emulator); the backward body is in attention_backward_kernels.h, launchers in attention.cu.
//
// Forward, one block of 4 warps per (64 queries, head, batch):
//   Q tile -> registers (A fragments); for each 64-key tile j (causal: j <= query tile):
//     S = Q K^T (16 x 64 per warp), masked; online softmax in base 2 (row max m, row sum l,
//     rescale O by 2^(m_old - m_new)); O += P V with P reused from S's registers as A fragments;
//     tile j + 1 of K and V streams into the other buffer meanwhile.
//   O / l -> bf16 through shared memory (16-byte stores); lse = (m + log2 l) ln 2 per row.
// Fragment layouts (PTX ISA, mma.m16n8k16): lane = 4 g + q; A regs: (row g | g+8, k 2q | 2q+8),
// B regs: (k 2q | 2q+8, col g), C/D: c0,c1 = (row g, cols 2q, 2q+1), c2,c3 = row g + 8.
#pragma once

#include <cmath>

#include "kernels/launch_shape.h"
#include "kernels/simt.h"
#include "kernels/simt_tensor.h"

namespace hetplan::kernels {

template <class T>
struct AttentionParams {
  const T* q;
  const T* k;
  const T* v;
  const T* o;     // backward: the forward's output
  const T* dout;  // backward
  T* out;         // forward
  T* dq;
  T* dk;
  T* dv;
  float* lse;       // [batch, heads, seq]: natural-log sum of exp of the scaled scores
  float* dvec;      // [batch, heads, seq]: rowsum(dO * O), backward
  float* dq_accum;  // [batch, seq, heads, head_dim] fp32, backward
  int64_t stride_b, stride_s, stride_h;  // elements; head_dim is contiguous
  int batch, heads, seq;
  float scale;       // softmax scale (1 / sqrt(head_dim) usually)
  float scale_log2;  // scale * log2(e)
  bool causal;
};

constexpr int kAttnTile = 64;      // queries per forward block = keys per tile (square tiles)
constexpr int kAttnThreads = 128;  // 4 warps, 16 query (forward) or key (backward) rows each
constexpr float kAttnLog2e = 1.4426950408889634f;
constexpr float kAttnLn2 = 0.6931471805599453f;

// Strides and scales for a [batch, seq, heads, head_dim] (bshd) or [batch, heads, seq,
// head_dim] tensor set; pointers are filled in by the caller.
template <class T>
AttentionParams<T> attention_params(int batch, int heads, int seq, int head_dim, bool causal,
                                    float scale, bool bshd) {
  AttentionParams<T> p{};
  const int64_t d = head_dim;
  if (bshd) {
    p.stride_h = d;
    p.stride_s = d * heads;
    p.stride_b = p.stride_s * seq;
  } else {
    p.stride_s = d;
    p.stride_h = d * seq;
    p.stride_b = p.stride_h * heads;
  }
  p.batch = batch;
  p.heads = heads;
  p.seq = seq;
  p.scale = scale;
  p.scale_log2 = scale * kAttnLog2e;
  p.causal = causal;
  return p;
}

// Shared memory of the forward: the Q tile and two buffers each of K and V.
template <class T, int kD>
constexpr size_t attention_forward_smem_bytes() {
  return 5 * size_t{kAttnTile} * kD * sizeof(T);
}

// Element offset of 16-byte chunk `chunk` of row `row` in a tile of kChunks chunks per row.
// Chunk index XOR row % 8: the 8 rows one ldmatrix matrix reads (same logical chunk) fall in 8
// different 16-byte bank groups, so ldmatrix and cp.async run without bank conflicts.
template <int kChunks>
HETPLAN_DEVICE int swz(int row, int chunk) {
  return row * kChunks * 8 + ((chunk ^ (row & 7)) << 3);
}

// A lane's ldmatrix row offsets (elements) within a swizzled tile, for the 16 x 16 block at
// rows [r0, r0 + 16) (r0 a multiple of 16) and chunk pair c (chunks 2c, 2c + 1):
//   rows pattern  (lanes 0-15 rows 0-15 of chunk 2c, lanes 16-31 the same rows of chunk 2c+1):
//                 r0 * row + (lane_rows16<kChunks>() ^ (c << 4))
//   split pattern (lanes 0-7 rows 0-7 chunk 2c, 8-15 rows 0-7 chunk 2c+1, 16-23 rows 8-15 chunk
//                 2c, 24-31 rows 8-15 chunk 2c+1): r0 * row + (lane_split16<kChunks>() ^ (c << 4))
// The XOR moves only chunk bits: chunk (2c + b) ^ (row % 8) = (b ^ row % 8) ^ 2c, and the row
// part of the offset lies in higher bits.
template <int kChunks>
HETPLAN_DEVICE int lane_rows16() {
  const int lane = simt::lane();
  return swz<kChunks>(lane & 15, lane >> 4);
}
template <int kChunks>
HETPLAN_DEVICE int lane_split16() {
  const int lane = simt::lane();
  return swz<kChunks>(((lane >> 4) << 3) + (lane & 7), (lane >> 3) & 1);
}

// Starts the asynchronous load of rows [row0, row0 + 64) of kN heads (the same rows of each,
// strides alike) into swizzled tiles; rows >= seq become zeros. Thread t moves chunks t,
// t + 128, ...: rows t / kChunks + kRows i. Tiles wholly inside the sequence (all but the last)
// take the short form: one 64-bit offset per thread for all kN tiles, a constant step, and no
// test per row (the SASS of 2026-11-23 had a compare, a select and a 64-bit multiply per 16-byte
// copy, about 10 instructions each).
template <class T, int kD, int kN>
HETPLAN_DEVICE void load_tiles(T* const (&tiles)[kN], const T* const (&heads)[kN], int64_t stride_s,
                               int row0, int seq) {
  constexpr int kChunks = kD / 8;
  constexpr int kRows = kAttnThreads / kChunks;  // rows one pass of the block covers
  constexpr int kPerThread = kAttnTile / kRows;
  const int r0 = simt::thread_x() / kChunks, ch = simt::thread_x() % kChunks;
  const int dst = swz<kChunks>(r0, ch);  // kRows is a multiple of 8: same swizzle every pass
  if (row0 + kAttnTile <= seq) {
    const int64_t src = (row0 + r0) * stride_s + ch * 8;
    HETPLAN_UNROLL
    for (int t = 0; t < kN; ++t) {
      HETPLAN_UNROLL
      for (int i = 0; i < kPerThread; ++i)
        simt::cp_async16(tiles[t] + dst + i * kRows * kD, heads[t] + src + i * kRows * stride_s,
                         true);
    }
  } else {
    HETPLAN_UNROLL
    for (int t = 0; t < kN; ++t) {
      HETPLAN_UNROLL
      for (int i = 0; i < kPerThread; ++i) {
        const int r = r0 + i * kRows;
        const bool valid = row0 + r < seq;
        const int64_t src = (valid ? row0 + r : 0) * stride_s + ch * 8;  // row 0 always exists
        simt::cp_async16(tiles[t] + dst + i * kRows * kD, heads[t] + src, valid);
      }
    }
  }
}
template <class T, int kD>
HETPLAN_DEVICE void load_tile(T* tile, const T* head, int64_t stride_s, int row0, int seq) {
  load_tiles<T, kD, 1>({tile}, {head}, stride_s, row0, seq);
}
template <class T, int kD>
HETPLAN_DEVICE void load_tile_pair(T* tile_a, const T* head_a, T* tile_b, const T* head_b,
                                   int64_t stride_s, int row0, int seq) {
  load_tiles<T, kD, 2>({tile_a, tile_b}, {head_a, head_b}, stride_s, row0, seq);
}

// Writes a warp's 16 x kD fp32 accumulator rows (C fragments, times `scale`) to global rows
// row0 + 0..15 (those < seq) through the warp's 16 rows of the shared tile `stage`.
template <class T, int kD>
HETPLAN_DEVICE void store_rows(const float (&acc)[kD / 8][4], float scale0, float scale1, T* stage,
                               int warp_row, T* dst, int64_t stride_s, int row0, int seq) {
  constexpr int kChunks = kD / 8;
  const int lane = simt::lane(), g = lane >> 2, q = lane & 3;
  const int row_g = swz<kChunks>(warp_row + g, 0) + 2 * q;  // chunk dt is row_g ^ (dt << 3)
  HETPLAN_UNROLL
  for (int dt = 0; dt < kD / 8; ++dt) {
    simt::sts32(stage + (row_g ^ (dt << 3)),
                simt::pack2<T>(acc[dt][0] * scale0, acc[dt][1] * scale0));
    simt::sts32(stage + 8 * kD + (row_g ^ (dt << 3)),
                simt::pack2<T>(acc[dt][2] * scale1, acc[dt][3] * scale1));
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

// The forward's end, shared by every forward kernel: a thread's shares of the row sums of rows g
// and g + 8 summed over the quad of lanes that hold those rows ...
HETPLAN_DEVICE void sum_rows_over_quad(float (&l)[2]) {
  HETPLAN_UNROLL
  for (int r = 0; r < 2; ++r) {
    l[r] += simt::shfl_xor(l[r], 1);
    l[r] += simt::shfl_xor(l[r], 2);
  }
}
// ... and lse = ln 2 (m + log2 l) of rows row_g and row_g + 8 (those before seq; m in log2
// units), written by the quad's first lane.
template <class T>
HETPLAN_DEVICE void write_lse(const AttentionParams<T>& p, const float (&m)[2], const float (&l)[2],
                              int row_g, int b, int h) {
  if ((simt::lane() & 3) != 0) return;
  const int64_t stats = (static_cast<int64_t>(b) * p.heads + h) * p.seq;
  HETPLAN_UNROLL
  for (int r = 0; r < 2; ++r) {
    const int row = row_g + 8 * r;
    if (row < p.seq) p.lse[stats + row] = (m[r] + log2f(l[r])) * kAttnLn2;
  }
}

template <class T, int kD>
HETPLAN_DEVICE void attention_forward_block(const AttentionParams<T>& p) {
  constexpr int kChunks = kD / 8;   // 16-byte chunks per row
  constexpr int kKSteps = kD / 16;  // k-steps of S = Q K^T
  constexpr int kTile = kAttnTile * kD;
  T* sq = reinterpret_cast<T*>(simt::dynamic_smem());
  T* sk = sq + kTile;      // two buffers
  T* sv = sk + 2 * kTile;  // two buffers
  const int lane = simt::lane(), warp = simt::warp(), g = lane >> 2, q = lane & 3;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kAttnTile));
  // Causal: the heaviest query tiles (the last ones) start first.
  const int qt = p.causal ? n_tiles - 1 - static_cast<int>(simt::block_x())
                          : static_cast<int>(simt::block_x());
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int q0 = qt * kAttnTile;
  const int kv_tiles = p.causal ? qt + 1 : n_tiles;

  load_tile<T, kD>(sq, p.q + head, p.stride_s, q0, p.seq);
  load_tile_pair<T, kD>(sk, p.k + head, sv, p.v + head, p.stride_s, 0, p.seq);
  simt::cp_async_commit();
  simt::cp_async_wait<0>();
  simt::sync_threads();

  // This warp's 16 query rows as A fragments: lanes 0-15 address rows 0-15 of chunk 2kk, lanes
  // 16-31 the same rows of chunk 2kk + 1 (matrices a0..a3 = rows 0-7|8-15 x k 0-7|8-15).
  const int rows16 = lane_rows16<kChunks>(), split16 = lane_split16<kChunks>();
  uint32_t qa[kKSteps][4];
  HETPLAN_UNROLL
  for (int kk = 0; kk < kKSteps; ++kk)
    simt::ldmatrix_x4<false>(qa[kk], sq + warp * 16 * kD + (rows16 ^ (kk << 4)));

  float o[kD / 8][4] = {};
  float m[2] = {-INFINITY,
                -INFINITY};   // running max of the scaled scores (log2 units), rows g, g+8
  float l[2] = {0.0f, 0.0f};  // this thread's share of the running sum

  for (int j = 0; j < kv_tiles; ++j) {
    const int buf = j & 1;
    if (j + 1 < kv_tiles) {
      load_tile_pair<T, kD>(sk + (buf ^ 1) * kTile, p.k + head, sv + (buf ^ 1) * kTile, p.v + head,
                            p.stride_s, (j + 1) * kAttnTile, p.seq);
      simt::cp_async_commit();
    }
    const T* kt = sk + buf * kTile;
    const T* vt = sv + buf * kTile;

    // S = Q K^T. K is [key][d] = B^T, so plain ldmatrix gives B fragments: lanes 0-7 keys
    // 0-7 chunk 2kk (b0 of n-tile 2pp), 8-15 keys 0-7 chunk 2kk+1 (b1), 16-23 keys 8-15 chunk
    // 2kk (b0 of n-tile 2pp+1), 24-31 keys 8-15 chunk 2kk+1.
    float s[8][4] = {};
    HETPLAN_UNROLL
    for (int kk = 0; kk < kKSteps; ++kk) {
      HETPLAN_UNROLL
      for (int pp = 0; pp < 4; ++pp) {
        uint32_t kb[4];
        simt::ldmatrix_x4<false>(kb, kt + 16 * pp * kD + (split16 ^ (kk << 4)));
        const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
        simt::mma_16816<T>(s[2 * pp], qa[kk], b0);
        simt::mma_16816<T>(s[2 * pp + 1], qa[kk], b1);
      }
    }
    const int kv0 = j * kAttnTile;
    const bool diagonal = p.causal && j == qt;
    if (diagonal || kv0 + kAttnTile > p.seq) {
      HETPLAN_UNROLL
      for (int nt = 0; nt < 8; ++nt) {
        HETPLAN_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int key = kv0 + nt * 8 + 2 * q + (e & 1);
          const int query = q0 + warp * 16 + g + (e >> 1) * 8;
          if (key >= p.seq || (diagonal && key > query)) s[nt][e] = -INFINITY;
        }
      }
    }

    // Online softmax. Row max over the quad (the 4 lanes sharing rows g and g + 8).
    float mx[2] = {-INFINITY, -INFINITY};
    HETPLAN_UNROLL
    for (int nt = 0; nt < 8; ++nt) {
      mx[0] = fmaxf(mx[0], fmaxf(s[nt][0], s[nt][1]));
      mx[1] = fmaxf(mx[1], fmaxf(s[nt][2], s[nt][3]));
    }
    float base[2];
    HETPLAN_UNROLL
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], simt::shfl_xor(mx[r], 1));
      mx[r] = fmaxf(mx[r], simt::shfl_xor(mx[r], 2));
      const float m_new = fmaxf(m[r], mx[r] * p.scale_log2);
      base[r] = m_new == -INFINITY ? 0.0f : m_new;  // a row with nothing unmasked yet
      const float alpha = simt::exp2_fast(m[r] - base[r]);
      m[r] = m_new;
      l[r] *= alpha;
      HETPLAN_UNROLL
      for (int dt = 0; dt < kD / 8; ++dt) {
        o[dt][2 * r] *= alpha;
        o[dt][2 * r + 1] *= alpha;
      }
    }
    HETPLAN_UNROLL
    for (int nt = 0; nt < 8; ++nt) {
      HETPLAN_UNROLL
      for (int e = 0; e < 4; ++e) {
        s[nt][e] = simt::exp2_fast(s[nt][e] * p.scale_log2 - base[e >> 1]);
        l[e >> 1] += s[nt][e];
      }
    }

    // O += P V. P's C fragments of n-tiles 2kk, 2kk+1 are exactly the A fragment of k-step kk.
    // V is [key][d] = B (k x n) row-major, so ldmatrix.trans gives B fragments: lanes 0-15
    // keys 0-15 of chunk 2pp (b0, b1 of n-tile 2pp), lanes 16-31 chunk 2pp + 1.
    HETPLAN_UNROLL
    for (int kk = 0; kk < 4; ++kk) {
      const uint32_t pa[4] = {simt::pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                              simt::pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                              simt::pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                              simt::pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      HETPLAN_UNROLL
      for (int pp = 0; pp < kD / 16; ++pp) {
        uint32_t vb[4];
        simt::ldmatrix_x4<true>(vb, vt + 16 * kk * kD + (rows16 ^ (pp << 4)));
        const uint32_t b0[2] = {vb[0], vb[1]}, b1[2] = {vb[2], vb[3]};
        simt::mma_16816<T>(o[2 * pp], pa, b0);
        simt::mma_16816<T>(o[2 * pp + 1], pa, b1);
      }
    }
    simt::cp_async_wait<0>();  // tile j + 1 has landed (this thread's copies) ...
    simt::sync_threads();      // ... everyone's, and nobody still reads buffer `buf`
  }

  sum_rows_over_quad(l);
  // O through this warp's rows of the (no longer needed) Q tile.
  store_rows<T, kD>(o, 1.0f / l[0], 1.0f / l[1], sq, warp * 16, p.out + head, p.stride_s,
                    q0 + warp * 16, p.seq);
  write_lse(p, m, l, q0 + warp * 16 + g, b, h);
}

// ---- backward helpers: D = rowsum(dO * O) (and zeroing of the dQ accumulator), dQ conversion ----

// Rows in (batch, seq, head) order, kD / 8 threads per row, 8 elements each.
inline LaunchShape attention_rows_shape(int64_t rows, int head_dim) {
  LaunchShape s;
  s.block = 256;
  s.grid_x = ceil_div(rows * (head_dim / 8), s.block);
  return s;
}

template <class T, int kD>
HETPLAN_DEVICE void attention_preprocess_block(const AttentionParams<T>& p) {
  constexpr int kLanes = kD / 8;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.seq * p.heads;
  const int64_t idx = simt::block_x() * simt::block_threads() + simt::thread_x();
  const int64_t row = idx / kLanes;
  const int part = static_cast<int>(idx % kLanes);
  const int h = static_cast<int>(row % p.heads);
  const int s = static_cast<int>((row / p.heads) % p.seq);
  const int64_t b = row / p.heads / p.seq;
  float acc = 0.0f;
  if (row < rows) {
    const int64_t off = b * p.stride_b + s * p.stride_s + h * p.stride_h + part * 8;
    float o[8], d[8];
    simt::load<8>(p.o + off, o);
    simt::load<8>(p.dout + off, d);
    HETPLAN_UNROLL
    for (int e = 0; e < 8; ++e) acc += o[e] * d[e];
    const float zero[4] = {};
    simt::store<4>(p.dq_accum + row * kD + part * 8, zero);
    simt::store<4>(p.dq_accum + row * kD + part * 8 + 4, zero);
  }
  HETPLAN_UNROLL
  for (int mask = kLanes / 2; mask > 0; mask >>= 1) acc += simt::shfl_xor(acc, mask);
  if (row < rows && part == 0) p.dvec[(b * p.heads + h) * p.seq + s] = acc;
}

template <class T, int kD>
HETPLAN_DEVICE void attention_dq_convert_block(const AttentionParams<T>& p) {
  constexpr int kLanes = kD / 8;
  const int64_t rows = static_cast<int64_t>(p.batch) * p.seq * p.heads;
  const int64_t idx = simt::block_x() * simt::block_threads() + simt::thread_x();
  const int64_t row = idx / kLanes;
  if (row >= rows) return;
  const int part = static_cast<int>(idx % kLanes);
  const int h = static_cast<int>(row % p.heads);
  const int s = static_cast<int>((row / p.heads) % p.seq);
  const int64_t b = row / p.heads / p.seq;
  float lo[4], hi[4], out[8];
  simt::load<4>(p.dq_accum + row * kD + part * 8, lo);
  simt::load<4>(p.dq_accum + row * kD + part * 8 + 4, hi);
  HETPLAN_UNROLL
  for (int e = 0; e < 4; ++e) {
    out[e] = lo[e] * p.scale;
    out[e + 4] = hi[e] * p.scale;
  }
  simt::store<8>(p.dq + b * p.stride_b + s * p.stride_s + h * p.stride_h + part * 8, out);
}

}  // namespace hetplan::kernels
