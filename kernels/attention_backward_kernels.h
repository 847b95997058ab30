// Attention backward, FlashAttention-2's algorithm (Dao 2023, Algorithm 2): one block of 4 warps
// per (64-key tile, head, batch), each warp owning 16 keys. K and V stay in shared memory; for
// each 64-query tile i (causal: from the diagonal tile on), with Q_i, dO_i, lse_i and
// D_i = rowsum(dO_i * O_i) double-buffered:
//   S^T = K Q_i^T, P^T = exp(scale S^T - lse)   (16 keys x 64 queries per warp, recomputed)
//   dV += P^T dO_i
//   dP^T = V dO_i^T, dS^T = P^T * (dP^T - D)
//   dK += dS^T Q_i
//   dQ_i += dS K: dS^T goes through shared memory, each warp takes 16 queries and adds its
//   products to an fp32 accumulator with atomics (float2 atomics on sm_90). The order of those
//   additions varies from run to run: dQ is not bit-reproducible, dK and dV are.
// dK (times scale) and dV go out through shared memory at the end; dQ = scale * accumulator is
// converted by attention_dq_convert_block. Same tiles, swizzle and fragment layouts as the
// forward (attention_kernels.h).
#pragma once

#include "kernels/attention_kernels.h"

namespace hetplan::kernels {

// Shared memory of the backward, in elements of T: K, V, Q x 2, dO x 2 (64 x kD each), dS^T
// (64 x 64), then fp32 lse x 2 and D x 2 (64 each).
template <class T, int kD>
constexpr size_t attention_backward_smem_bytes() {
  return (6 * kAttnTile * kD + kAttnTile * kAttnTile) * sizeof(T) + 4 * kAttnTile * sizeof(float);
}

template <class T, int kD>
HETPLAN_DEVICE void attention_backward_block(const AttentionParams<T>& p) {
  constexpr int kChunks = kD / 8;
  constexpr int kKSteps = kD / 16;
  constexpr int kTile = kAttnTile * kD;
  T* sk = reinterpret_cast<T*>(simt::dynamic_smem());
  T* sv = sk + kTile;
  T* sq = sv + kTile;        // two buffers
  T* sdo = sq + 2 * kTile;   // two buffers
  T* sds = sdo + 2 * kTile;  // [64 keys][64 queries], 8 chunks per row
  float* slse = reinterpret_cast<float*>(sds + kAttnTile * kAttnTile);  // two buffers of 64
  float* sd = slse + 2 * kAttnTile;                                     // two buffers of 64
  const int tid = simt::thread_x(), lane = simt::lane(), warp = simt::warp();
  const int g = lane >> 2, q = lane & 3;
  const int kt = static_cast<int>(simt::block_x());  // key tile; low tiles (most work) first
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int64_t row_stats = (static_cast<int64_t>(b) * p.heads + h) * p.seq;  // lse, D rows
  const int k0 = kt * kAttnTile;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kAttnTile));
  const int first = p.causal ? kt : 0;  // earlier query tiles see none of these keys
  const int wk = warp * 16;             // this warp's first key in the tile

  load_tile<T, kD>(sk, p.k + head, p.stride_s, k0, p.seq);
  load_tile<T, kD>(sv, p.v + head, p.stride_s, k0, p.seq);
  load_tile<T, kD>(sq, p.q + head, p.stride_s, first * kAttnTile, p.seq);
  load_tile<T, kD>(sdo, p.dout + head, p.stride_s, first * kAttnTile, p.seq);
  simt::cp_async_commit();
  {
    const int r = first * kAttnTile + (tid & 63);
    const float* src = tid < 64 ? p.lse : p.dvec;
    (tid < 64 ? slse : sd)[tid & 63] = r < p.seq ? src[row_stats + r] : 0.0f;
  }

  const int rows16 = lane_rows16<kChunks>(), split16 = lane_split16<kChunks>();
  const int ds_split16 = lane_split16<8>();
  const int ds_row = swz<8>(wk + g, 0) + 2 * q;  // this lane's dS^T element, chunk 0, row g
  float dk[kD / 8][4] = {}, dv[kD / 8][4] = {};
  for (int i = first; i < n_tiles; ++i) {
    const int buf = (i - first) & 1;
    const bool has_next = i + 1 < n_tiles;
    float next_stat = 0.0f;  // lse (threads 0-63) or D (64-127) of the next tile, stored late
    if (has_next) {
      load_tile<T, kD>(sq + (buf ^ 1) * kTile, p.q + head, p.stride_s, (i + 1) * kAttnTile, p.seq);
      load_tile<T, kD>(sdo + (buf ^ 1) * kTile, p.dout + head, p.stride_s, (i + 1) * kAttnTile,
                       p.seq);
      simt::cp_async_commit();
      const int r = (i + 1) * kAttnTile + (tid & 63);
      if (r < p.seq) next_stat = (tid < 64 ? p.lse : p.dvec)[row_stats + r];
      simt::cp_async_wait<1>();  // all but the group just issued: tile i is here
    } else {
      simt::cp_async_wait<0>();
    }
    simt::sync_threads();
    const T* qt = sq + buf * kTile;
    const T* dot = sdo + buf * kTile;
    const float* lse = slse + buf * kAttnTile;
    const float* dvec = sd + buf * kAttnTile;
    const int q0 = i * kAttnTile;

    // S^T = K Q^T: A = this warp's 16 keys (plain ldmatrix, as Q in the forward); B = Q^T,
    // stored [query][d] = B^T (plain ldmatrix, as K in the forward).
    float st[8][4] = {};
    HETPLAN_UNROLL
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t ka[4];
      simt::ldmatrix_x4<false>(ka, sk + wk * kD + (rows16 ^ (kk << 4)));
      HETPLAN_UNROLL
      for (int pp = 0; pp < 4; ++pp) {
        uint32_t qb[4];
        simt::ldmatrix_x4<false>(qb, qt + 16 * pp * kD + (split16 ^ (kk << 4)));
        const uint32_t b0[2] = {qb[0], qb[1]}, b1[2] = {qb[2], qb[3]};
        simt::mma_16816<T>(st[2 * pp], ka, b0);
        simt::mma_16816<T>(st[2 * pp + 1], ka, b1);
      }
    }
    // P^T, zero where masked (query past the end, key past the end, causal query < key). Its
    // rounded copy pa (A fragments: n-tiles 2kk, 2kk+1 = k-step kk) serves dV and dS alike.
    uint32_t pa[4][4];
    HETPLAN_UNROLL
    for (int nt = 0; nt < 8; ++nt) {
      float pv[4];
      HETPLAN_UNROLL
      for (int e = 0; e < 4; ++e) {
        const int key = k0 + wk + g + (e >> 1) * 8;
        const int ql = nt * 8 + 2 * q + (e & 1);
        const int query = q0 + ql;
        const bool masked = query >= p.seq || key >= p.seq || (p.causal && query < key);
        pv[e] = masked ? 0.0f : simt::exp2_fast(st[nt][e] * p.scale_log2 - lse[ql] * kAttnLog2e);
      }
      pa[nt >> 1][(nt & 1) * 2] = simt::pack2<T>(pv[0], pv[1]);
      pa[nt >> 1][(nt & 1) * 2 + 1] = simt::pack2<T>(pv[2], pv[3]);
    }
    // dV += P^T dO: B = dO stored [query][d] = B row-major: ldmatrix.trans (as V forward).
    HETPLAN_UNROLL
    for (int kk = 0; kk < 4; ++kk) {
      HETPLAN_UNROLL
      for (int pp = 0; pp < kD / 16; ++pp) {
        uint32_t ob[4];
        simt::ldmatrix_x4<true>(ob, dot + 16 * kk * kD + (rows16 ^ (pp << 4)));
        const uint32_t b0[2] = {ob[0], ob[1]}, b1[2] = {ob[2], ob[3]};
        simt::mma_16816<T>(dv[2 * pp], pa[kk], b0);
        simt::mma_16816<T>(dv[2 * pp + 1], pa[kk], b1);
      }
    }
    // dP^T = V dO^T: A = this warp's 16 rows of V, B = dO^T stored [query][d] (plain).
    float ds[8][4] = {};
    HETPLAN_UNROLL
    for (int kk = 0; kk < kKSteps; ++kk) {
      uint32_t va[4];
      simt::ldmatrix_x4<false>(va, sv + wk * kD + (rows16 ^ (kk << 4)));
      HETPLAN_UNROLL
      for (int pp = 0; pp < 4; ++pp) {
        uint32_t ob[4];
        simt::ldmatrix_x4<false>(ob, dot + 16 * pp * kD + (split16 ^ (kk << 4)));
        const uint32_t b0[2] = {ob[0], ob[1]}, b1[2] = {ob[2], ob[3]};
        simt::mma_16816<T>(ds[2 * pp], va, b0);
        simt::mma_16816<T>(ds[2 * pp + 1], va, b1);
      }
    }
    // dS^T = P^T (dP^T - D), then its A fragments (sa) and its copy in shared memory.
    uint32_t sa[4][4];
    HETPLAN_UNROLL
    for (int nt = 0; nt < 8; ++nt) {
      float pv[4];
      const uint32_t lo = pa[nt >> 1][(nt & 1) * 2], hi = pa[nt >> 1][(nt & 1) * 2 + 1];
      pv[0] = simt::to_f32(T{static_cast<uint16_t>(lo & 0xffffu)});
      pv[1] = simt::to_f32(T{static_cast<uint16_t>(lo >> 16)});
      pv[2] = simt::to_f32(T{static_cast<uint16_t>(hi & 0xffffu)});
      pv[3] = simt::to_f32(T{static_cast<uint16_t>(hi >> 16)});
      HETPLAN_UNROLL
      for (int e = 0; e < 4; ++e) ds[nt][e] = pv[e] * (ds[nt][e] - dvec[nt * 8 + 2 * q + (e & 1)]);
      sa[nt >> 1][(nt & 1) * 2] = simt::pack2<T>(ds[nt][0], ds[nt][1]);
      sa[nt >> 1][(nt & 1) * 2 + 1] = simt::pack2<T>(ds[nt][2], ds[nt][3]);
      simt::sts32(sds + (ds_row ^ (nt << 3)), sa[nt >> 1][(nt & 1) * 2]);
      simt::sts32(sds + 8 * kAttnTile + (ds_row ^ (nt << 3)), sa[nt >> 1][(nt & 1) * 2 + 1]);
    }
    // dK += dS^T Q: B = Q stored [query][d] row-major: ldmatrix.trans.
    HETPLAN_UNROLL
    for (int kk = 0; kk < 4; ++kk) {
      HETPLAN_UNROLL
      for (int pp = 0; pp < kD / 16; ++pp) {
        uint32_t qb[4];
        simt::ldmatrix_x4<true>(qb, qt + 16 * kk * kD + (rows16 ^ (pp << 4)));
        const uint32_t b0[2] = {qb[0], qb[1]}, b1[2] = {qb[2], qb[3]};
        simt::mma_16816<T>(dk[2 * pp], sa[kk], b0);
        simt::mma_16816<T>(dk[2 * pp + 1], sa[kk], b1);
      }
    }
    simt::sync_threads();  // all of dS^T is in shared memory

    // dQ_i += dS K for this warp's 16 queries, 32 columns of d at a time. A = dS: stored as
    // dS^T [key][query], so ldmatrix.trans of (keys 16kk + 0-7 | 8-15) x (queries 16 warp +
    // 0-7 | 8-15) gives a0..a3 (lanes 0-7, 8-15, 16-23, 24-31 address the four). B = K stored
    // [key][d] row-major: ldmatrix.trans.
    HETPLAN_UNROLL_BY(1)
    for (int dg = 0; dg < kD / 32; ++dg) {
      float acc[4][4] = {};
      HETPLAN_UNROLL
      for (int kk = 0; kk < 4; ++kk) {
        uint32_t a4[4];
        simt::ldmatrix_x4<true>(a4, sds + 16 * kk * kAttnTile + (ds_split16 ^ (warp << 4)));
        HETPLAN_UNROLL
        for (int pp = 0; pp < 2; ++pp) {
          uint32_t kb[4];
          simt::ldmatrix_x4<true>(kb, sk + 16 * kk * kD + (rows16 ^ ((2 * dg + pp) << 4)));
          const uint32_t b0[2] = {kb[0], kb[1]}, b1[2] = {kb[2], kb[3]};
          simt::mma_16816<T>(acc[2 * pp], a4, b0);
          simt::mma_16816<T>(acc[2 * pp + 1], a4, b1);
        }
      }
      HETPLAN_UNROLL
      for (int t = 0; t < 4; ++t) {
        const int col = (4 * dg + t) * 8 + 2 * q;
        HETPLAN_UNROLL
        for (int r = 0; r < 2; ++r) {
          const int query = q0 + warp * 16 + g + 8 * r;
          if (query < p.seq)
            simt::atomic_add2(
                p.dq_accum + ((static_cast<int64_t>(b) * p.seq + query) * p.heads + h) * kD + col,
                acc[t][2 * r], acc[t][2 * r + 1]);
        }
      }
    }
    if (has_next) (tid < 64 ? slse : sd)[(buf ^ 1) * kAttnTile + (tid & 63)] = next_stat;
    // No barrier here: every read of this tile's Q, dO, lse and D buffers came before the dS
    // barrier above, which all warps have passed, and dS is rewritten only after the next
    // tile's first barrier. (The emulated tests check this with shuffled warps and eager copies.)
  }

  store_rows<T, kD>(dk, p.scale, p.scale, sq, wk, p.dk + head, p.stride_s, k0 + wk, p.seq);
  store_rows<T, kD>(dv, 1.0f, 1.0f, sq, wk, p.dv + head, p.stride_s, k0 + wk, p.seq);
}

}  // namespace hetplan::kernels
