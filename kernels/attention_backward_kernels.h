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
// (64 x 64), then fp32 lse log2 e x 2 and D x 2 (64 each).
template <class T, int kD>
constexpr size_t attention_backward_smem_bytes() {
  return (6 * kAttnTile * kD + kAttnTile * kAttnTile) * sizeof(T) + 4 * kAttnTile * sizeof(float);
}

// P^T = exp2(scale_log2 S^T - lse log2 e) for a warp's 16 keys x 64 queries (C fragments of
// the 8 n-tiles), rounded to T: pa holds the A fragments (n-tiles 2kk, 2kk+1 = k-step kk).
// `lse2` is lse times log2 e, as stored in shared memory. kMask: zero where the query or key is
// past the end or (causal) query < key; every exponential is computed and the zeros selected
// after, so no branch goes round an exponential or its load of lse.
template <class T, bool kMask>
HETPLAN_DEVICE void backward_probabilities_mma(const AttentionParams<T>& p, const float (&st)[8][4],
                                               const float* lse2, int key, int q0,
                                               uint32_t (&pa)[4][4]) {
  const int q = simt::lane() & 3;
  HETPLAN_UNROLL
  for (int nt = 0; nt < 8; ++nt) {
    float pv[4];
    HETPLAN_UNROLL
    for (int e = 0; e < 4; ++e) {
      const int ql = nt * 8 + 2 * q + (e & 1);
      pv[e] = simt::exp2_fast(st[nt][e] * p.scale_log2 - lse2[ql]);
      if constexpr (kMask) {
        const int k = key + (e >> 1) * 8, query = q0 + ql;
        if (query >= p.seq || k >= p.seq || (p.causal && query < k)) pv[e] = 0.0f;
      }
    }
    pa[nt >> 1][(nt & 1) * 2] = simt::pack2<T>(pv[0], pv[1]);
    pa[nt >> 1][(nt & 1) * 2 + 1] = simt::pack2<T>(pv[2], pv[3]);
  }
}

// Adds a warp's 16 x 32 block of dQ (C fragments acc[t], columns 8t + 2q + 0..1 of the block)
// to the accumulator rows `row` (query g) and row + row8 (query g + 8). kCheck: only the rows
// with row_ok. Interior tiles take the form without: the SASS of 2026-11-23 had every pair of
// atomics behind a branch of its own, with its 64-bit row address rebuilt inside.
template <bool kCheck>
HETPLAN_DEVICE void add_dq_rows(float* row, int64_t row8, const float (&acc)[4][4],
                                const bool (&row_ok)[2]) {
  HETPLAN_UNROLL
  for (int t = 0; t < 4; ++t) {
    HETPLAN_UNROLL
    for (int r = 0; r < 2; ++r)
      if (!kCheck || row_ok[r])
        simt::atomic_add2(row + r * row8 + 8 * t, acc[t][2 * r], acc[t][2 * r + 1]);
  }
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
  const int tid = simt::thread_x(), lane = simt::lane(), warp = simt::warp_uniform();
  const int g = lane >> 2, q = lane & 3;
  const int kt = static_cast<int>(simt::block_x());  // key tile; low tiles (most work) first
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int64_t row_stats = (static_cast<int64_t>(b) * p.heads + h) * p.seq;  // lse, D rows
  const int k0 = kt * kAttnTile;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kAttnTile));
  const int first = p.causal ? kt : 0;  // earlier query tiles see none of these keys
  const int wk = warp * 16;             // this warp's first key in the tile

  load_tile_pair<T, kD>(sk, p.k + head, sv, p.v + head, p.stride_s, k0, p.seq);
  load_tile_pair<T, kD>(sq, p.q + head, sdo, p.dout + head, p.stride_s, first * kAttnTile, p.seq);
  simt::cp_async_commit();
  {  // lse goes in as lse log2 e (the exponent's term, one multiply per row instead of per use)
    const int r = first * kAttnTile + (tid & 63);
    float stat = 0.0f;
    if (r < p.seq) stat = tid < 64 ? p.lse[row_stats + r] * kAttnLog2e : p.dvec[row_stats + r];
    (tid < 64 ? slse : sd)[tid & 63] = stat;
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
      load_tile_pair<T, kD>(sq + (buf ^ 1) * kTile, p.q + head, sdo + (buf ^ 1) * kTile,
                            p.dout + head, p.stride_s, (i + 1) * kAttnTile, p.seq);
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
    const float* lse2 = slse + buf * kAttnTile;  // lse log2 e
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
    // The masks are tested only where this warp's 16 keys x 64 queries reach one (the causal
    // diagonal, the end of the sequence): the SASS of 2026-11-23 tested every element of every
    // tile, with each exponential and its load of lse under a predicate of its own.
    uint32_t pa[4][4];
    const int warp_key0 = k0 + wk;
    if (q0 + kAttnTile > p.seq || warp_key0 + 16 > p.seq || (p.causal && q0 < warp_key0 + 15))
      backward_probabilities_mma<T, true>(p, st, lse2, warp_key0 + g, q0, pa);
    else
      backward_probabilities_mma<T, false>(p, st, lse2, warp_key0 + g, q0, pa);
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
    // The next tile's lse and D, into the buffers tile i - 1 read (before its own dS barrier,
    // which every warp has passed), as lse log2 e like above: the multiply here, not where the
    // load is issued, and the value no longer held through the dQ products below.
    if (has_next)
      (tid < 64 ? slse : sd)[(buf ^ 1) * kAttnTile + (tid & 63)] =
          tid < 64 ? next_stat * kAttnLog2e : next_stat;

    // This lane's two rows of the dQ accumulator (queries g, g + 8 of the warp's 16), at column
    // 2q: computed once per tile, not per atomic.
    const int query = q0 + warp * 16 + g;
    float* dq_row =
        p.dq_accum + ((static_cast<int64_t>(b) * p.seq + query) * p.heads + h) * kD + 2 * q;
    const int64_t dq_row8 = int64_t{8} * p.heads * kD;  // 8 queries on
    const bool row_ok[2] = {query < p.seq, query + 8 < p.seq};
    const bool all_rows = q0 + warp * 16 + 16 <= p.seq;  // the same in the whole warp

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
      if (all_rows)
        add_dq_rows<false>(dq_row + 32 * dg, dq_row8, acc, row_ok);
      else
        add_dq_rows<true>(dq_row + 32 * dg, dq_row8, acc, row_ok);
    }
    // No barrier here: every read of this tile's Q, dO, lse and D buffers came before the dS
    // barrier above, which all warps have passed, and dS is rewritten only after the next
    // tile's first barrier. (The emulated tests check this with shuffled warps and eager copies.)
  }

  store_rows<T, kD>(dk, p.scale, p.scale, sq, wk, p.dk + head, p.stride_s, k0 + wk, p.seq);
  store_rows<T, kD>(dv, 1.0f, 1.0f, sq, wk, p.dv + head, p.stride_s, k0 + wk, p.seq);
}

}  // namespace hetplan::kernels
