// Attention backward for Hopper (sm_90a); the algorithm is summarised in
// attention_hopper_kernels.h, which includes this file. dK, dV bit-reproducible; dQ by fp32
// atomics (16-byte reductions) into p.dq_accum, converted by attention_dq_convert_block.
// kBulkDq (d = 128, opt-in: HETPLAN_ATTENTION_DQ=bulk, docs/kernels.md "dQ by bulk reduce"): each
// warp writes its 16 rows of the dQ tile to shared memory and 16 of its lanes add one row each to
// p.dq_accum with a bulk reduce (cp.reduce.async.bulk .add.f32), instead of 8 red.global.add.v4.f32
// per thread and tile.
#pragma once

#include "kernels/experimental/attention_hopper_kernels.h"
#include "kernels/experimental/simt_bulk.h"

namespace hetplan::kernels {

// This warp's 16 rows x 64 columns of dQ (m64n64 accumulator fragment) added to the fp32
// accumulator with 16-byte reductions: lanes q and q ^ 1 swap halves so that each holds 4
// consecutive columns of one row (even q: row g, odd q: row g + 8). The swaps come first (every
// lane takes part in a shuffle); then one row pointer and one bounds test serve all 8
// reductions, each a single red.global.add for the whole warp. (Written as an if / else per
// reduction with the address inside, the SASS of 2026-11-23 had even and odd lanes take turns,
// each half issuing its own reduction, and ~35 instructions per reduction to rebuild the 64-bit
// address behind a branch.)
template <int kD, class T>
HETPLAN_DEVICE void add_dq_red(const AttentionParams<T>& p, const float (&dq)[32], int row0,
                               int col0, int b, int h) {
  const int lane = simt::lane(), g = lane >> 2, q = lane & 3;
  const bool even = (q & 1) == 0;
  float v[32];
  HETPLAN_UNROLL
  for (int j = 0; j < 8; ++j) {
    const float give0 = even ? dq[4 * j + 2] : dq[4 * j];
    const float give1 = even ? dq[4 * j + 3] : dq[4 * j + 1];
    const float got0 = simt::shfl_xor(give0, 1), got1 = simt::shfl_xor(give1, 1);
    v[4 * j] = even ? dq[4 * j] : got0;
    v[4 * j + 1] = even ? dq[4 * j + 1] : got1;
    v[4 * j + 2] = even ? got0 : dq[4 * j + 2];
    v[4 * j + 3] = even ? got1 : dq[4 * j + 3];
  }
  const int query = row0 + g + (even ? 0 : 8);
  if (query >= p.seq) return;
  float* row = p.dq_accum + ((static_cast<int64_t>(b) * p.seq + query) * p.heads + h) * kD + col0 +
               2 * (q & 2);
  HETPLAN_UNROLL
  for (int j = 0; j < 8; ++j)
    simt::atomic_add4(row + 8 * j, v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
}

// The same with bulk reduces (d = 128): the warp writes its 16 rows to `rows` (shared memory,
// kHopperDqRowFloats apart), lane r < 16 adds row r (256 bytes: columns col0 .. + 63) to the
// accumulator. The previous tile's reduces read `rows` until their issuing lanes' wait.
template <class T>
HETPLAN_DEVICE void add_dq_bulk(const AttentionParams<T>& p, const float (&dq)[32], float* rows,
                                int row0, int col0, int b, int h) {
  const int lane = simt::lane(), g = lane >> 2, q = lane & 3;
  if (lane < 16) simt::bulk_wait_read<0>();
  simt::sync_warp();
  HETPLAN_UNROLL
  for (int j = 0; j < 8; ++j) {
    float* at = rows + g * kHopperDqRowFloats + 8 * j + 2 * q;
    simt::sts_f32x2(at, dq[4 * j], dq[4 * j + 1]);
    simt::sts_f32x2(at + 8 * kHopperDqRowFloats, dq[4 * j + 2], dq[4 * j + 3]);
  }
  simt::fence_proxy_async();  // the rows reach the bulk reduce (async proxy) ...
  simt::sync_warp();          // ... of another lane
  const int query = row0 + lane;
  if (lane < 16 && query < p.seq) {
    simt::bulk_reduce_add_f32(
        p.dq_accum + ((static_cast<int64_t>(b) * p.seq + query) * p.heads + h) * 128 + col0,
        rows + lane * kHopperDqRowFloats, 64 * sizeof(float));
  }
  if (lane < 16) simt::bulk_commit();
}

// P^T and dS^T of one query tile from its S^T and dP^T accumulators (m64nkQ fragments: this
// thread's keys key_row and key_row + 8, queries q0 + 8 (e >> 2) + 2 q + (e & 1)): P^T =
// 2^(scale_log2 S^T - log2(e) lse), zero where masked, rounded to T, into `s`; dS^T = P^T (dP^T -
// D) into `dp`. kMask: test each element (query or key past the end; causal: query before key).
template <class T, int kQ, bool kMask>
HETPLAN_DEVICE void backward_probabilities_pass(const AttentionParams<T>& p, const float* lse,
                                                const float* dvec, int key_row, int q0,
                                                float (&s)[kQ / 2], float (&dp)[kQ / 2]) {
  const int q = simt::lane() & 3;
  HETPLAN_UNROLL
  for (int e = 0; e < kQ / 2; ++e) {
    const int ql = 8 * (e >> 2) + 2 * q + (e & 1);
    float pv = simt::exp2_fast(s[e] * p.scale_log2 - lse[ql] * kAttnLog2e);
    if constexpr (kMask) {
      const int key = key_row + 8 * ((e >> 1) & 1);
      const int query = q0 + ql;
      if (query >= p.seq || key >= p.seq || (p.causal && query < key)) pv = 0.0f;
    }
    s[e] = simt::to_f32(simt::from_f32<T>(pv));
    dp[e] = s[e] * (dp[e] - dvec[ql]);
  }
}

// The same for every Hopper backward. The masks are tested only in warps whose 16 keys x kQ
// queries reach one (the causal diagonal, the end of the sequence); elsewhere, most tiles of a
// long sequence, the loop is straight-line code: every exponential computed, no comparison per
// element and no branch round the exponential (the masked form computes them all too and
// selects, so the compiler has no reason to branch there either: the SASS of 2026-11-23 had
// each MUFU.EX2 and its shared-memory load of lse behind a branch of its own, docs/kernels.md).
// Unmasked elements get the same arithmetic as before, so the results are bit-identical.
template <class T, int kQ>
HETPLAN_DEVICE void backward_probabilities(const AttentionParams<T>& p, const float* lse,
                                           const float* dvec, int key_row, int q0,
                                           float (&s)[kQ / 2], float (&dp)[kQ / 2]) {
  const int warp_key0 = key_row - (simt::lane() >> 2);  // the warp's keys: warp_key0 .. + 15
  const bool edge = q0 + kQ > p.seq || warp_key0 + 16 > p.seq || (p.causal && q0 < warp_key0 + 15);
  if (edge)
    backward_probabilities_pass<T, kQ, true>(p, lse, dvec, key_row, q0, s, dp);
  else
    backward_probabilities_pass<T, kQ, false>(p, lse, dvec, key_row, q0, s, dp);
}

// P^T and dS^T (from backward_probabilities) as the A fragments of the dV and dK products (pa,
// sa: the caller's, pinned until its wgmma wait), dS^T also into `sds` (128 keys x 64 queries,
// swizzled) for dQ; then dV += P^T dO and dK += dS^T Q issued (B: the tile's 64 x d Q and dO,
// MN-major) and committed, and dS^T's stores fenced for the tensor cores. The caller's barrier
// follows. The fences pin the registers the tensor cores own until the wait (CUTLASS's
// warpgroup_fence_operand). kKeys: the keys (rows) of `sds`.
template <class T, int kD, int kQ, int kKeys = kHopperTile>
HETPLAN_DEVICE void issue_dv_dk(const float (&s)[kQ / 2], const float (&dp)[kQ / 2],
                                uint32_t (&pa)[kQ / 16][4], uint32_t (&sa)[kQ / 16][4],
                                unsigned char* sds, int key_local, const unsigned char* qt,
                                const unsigned char* dot, float (&dv)[kD / 2],
                                float (&dk)[kD / 2]) {
  const int q = simt::lane() & 3;
  HETPLAN_UNROLL
  for (int kk = 0; kk < kQ / 16; ++kk) {
    acc_to_a<T, kQ>(s, kk, pa[kk]);
    acc_to_a<T, kQ>(dp, kk, sa[kk]);
    // a0 / a2: row g, columns 16 kk + 2q (+ 8); a1 / a3: row g + 8.
    const int c = 16 * kk + 2 * q;
    simt::sts32(sds + simt::sw128_offset(kKeys, key_local, c), sa[kk][0]);
    simt::sts32(sds + simt::sw128_offset(kKeys, key_local + 8, c), sa[kk][1]);
    simt::sts32(sds + simt::sw128_offset(kKeys, key_local, c + 8), sa[kk][2]);
    simt::sts32(sds + simt::sw128_offset(kKeys, key_local + 8, c + 8), sa[kk][3]);
  }
  simt::fence_operand(dv);
  simt::fence_operand(dk);
  simt::fence_operand(pa);
  simt::fence_operand(sa);
  simt::wgmma_fence();
  HETPLAN_UNROLL
  for (int kk = 0; kk < kQ / 16; ++kk)
    simt::wgmma_rs<T, kD, 1>(dv, pa[kk], mnmajor_desc<kQ>(dot, 0, kk), true);
  HETPLAN_UNROLL
  for (int kk = 0; kk < kQ / 16; ++kk)
    simt::wgmma_rs<T, kD, 1>(dk, sa[kk], mnmajor_desc<kQ>(qt, 0, kk), true);
  simt::wgmma_commit();
  simt::fence_operand(dv);
  simt::fence_operand(dk);
  simt::fence_operand(pa);
  simt::fence_operand(sa);
  simt::fence_proxy_async();  // dS^T (ordinary stores) is read by wgmma next
}

// kWarpgroups: 2 (the default: 128 keys per block, one block per SM) or 1 (opt-in,
// HETPLAN_ATTENTION_BWD=wg1: 64 keys per block and two (d = 128) or three (d = 64) blocks per
// SM, so that one block's elementwise work and dQ reductions can run while another's products
// occupy the tensor cores; the two warpgroups of one block meet at two barriers per tile and so
// work in lockstep, leaving the tensor cores idle meanwhile).
template <class T, int kD, bool kBulkDq = false, int kWarpgroups = 2>
HETPLAN_DEVICE void attention_backward_hopper_block(const AttentionParams<T>& p) {
  static_assert(!kBulkDq || (kD == 128 && kWarpgroups == 2),
                "the bulk-reduce dQ is written for d = 128 and two warpgroups");
  static_assert(kWarpgroups == 1 || kWarpgroups == 2);
  constexpr int kKeys = 64 * kWarpgroups;  // keys per block
  constexpr int kThreads = 128 * kWarpgroups;
  constexpr int kKBytes = kKeys * kD * 2;        // K, V
  constexpr int kQBytes = kHopperBwdQ * kD * 2;  // Q, dO: 64 queries
  constexpr int kQ = kHopperBwdQ;
  unsigned char* sk = hopper_smem();
  unsigned char* sv = sk + kKBytes;
  unsigned char* sq = sv + kKBytes;                              // two buffers
  unsigned char* sdo = sq + 2 * kQBytes;                         // two buffers
  unsigned char* sds = sdo + 2 * kQBytes;                        // dS^T: kKeys x 64 queries
  float* slse = reinterpret_cast<float*>(sds + kKeys * kQ * 2);  // two buffers of 64
  float* sd = slse + 2 * kQ;                                     // two buffers of 64
  float* sdq = sd + 2 * kQ;  // kBulkDq: 128 rows of kHopperDqRowFloats, warp w's 16 from 16 w
  const int tid = simt::thread_x(), lane = simt::lane(), warp = simt::warp_uniform();
  const int g = lane >> 2, wg = warp >> 2, wq = warp & 3;
  const int kt = static_cast<int>(simt::block_x());  // key tile; low tiles (most work) first
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int64_t row_stats = (static_cast<int64_t>(b) * p.heads + h) * p.seq;
  const int k0 = kt * kKeys;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kQ));
  const int first = p.causal ? k0 / kQ : 0;     // earlier query tiles see none of these keys
  const int key_local = wg * 64 + wq * 16 + g;  // this thread's first key row in the block
  // dQ = dS K in m64n64 products: with two warpgroups and d = 128, warpgroup w takes columns
  // 64 w .. + 63 over all 128 keys; otherwise each warpgroup takes all columns (kDqHalves
  // products of 64, one after the other) over its own 64 keys (the warpgroups, or blocks, then
  // add to the same accumulator). Either way every operand starts at a 64-column block, the
  // canonical layout.
  constexpr bool kSplitKeys = kD == 64 || kWarpgroups == 1;
  constexpr int kDqSteps = kSplitKeys ? 4 : kKeys / 16;
  constexpr int kDqHalves = kSplitKeys ? kD / 64 : 1;
  const int dq_kk0 = kSplitKeys ? 4 * wg : 0;
  auto dq_col0 = [&](int half) { return kSplitKeys ? 64 * half : 64 * wg; };

  load_tile_sw128<T, kD, kKeys, kThreads>(sk, p.k + head, p.stride_s, k0, p.seq);
  load_tile_sw128<T, kD, kKeys, kThreads>(sv, p.v + head, p.stride_s, k0, p.seq);
  load_tile_sw128<T, kD, kQ, kThreads>(sq, p.q + head, p.stride_s, first * kQ, p.seq);
  load_tile_sw128<T, kD, kQ, kThreads>(sdo, p.dout + head, p.stride_s, first * kQ, p.seq);
  simt::cp_async_commit();
  if (tid < 2 * kQ) {
    const int r = first * kQ + (tid & 63);
    (tid < kQ ? slse : sd)[tid & 63] =
        r < p.seq ? (tid < kQ ? p.lse : p.dvec)[row_stats + r] : 0.0f;
  }

  float dk[kD / 2] = {}, dv[kD / 2] = {};
  for (int i = first; i < n_tiles; ++i) {
    const int buf = (i - first) & 1;
    simt::cp_async_wait<0>();   // tile i has landed ...
    simt::fence_proxy_async();  // ... visible to the tensor cores, as is dS^T below ...
    simt::sync_threads();       // ... everyone's; iteration i - 1 is over in every warp
    // The next tile streams in during this one. Its lse and D go through a register and reach
    // shared memory only at the end of the iteration, so that no warp waits for the load here.
    const bool has_next = i + 1 < n_tiles;
    float next_stat = 0.0f;
    if (has_next) {
      load_tile_sw128<T, kD, kQ, kThreads>(sq + (buf ^ 1) * kQBytes, p.q + head, p.stride_s,
                                           (i + 1) * kQ, p.seq);
      load_tile_sw128<T, kD, kQ, kThreads>(sdo + (buf ^ 1) * kQBytes, p.dout + head, p.stride_s,
                                           (i + 1) * kQ, p.seq);
      simt::cp_async_commit();
      const int r = (i + 1) * kQ + (tid & 63);
      if (tid < 2 * kQ && r < p.seq) next_stat = (tid < kQ ? p.lse : p.dvec)[row_stats + r];
    }
    const unsigned char* qt = sq + buf * kQBytes;
    const unsigned char* dot = sdo + buf * kQBytes;
    const float* lse = slse + buf * kQ;
    const float* dvec = sd + buf * kQ;
    const int q0 = i * kQ;

    // S^T = K Q^T and dP^T = V dO^T (64 keys x 64 queries per warpgroup).
    float s[kQ / 2], dp[kQ / 2];
    simt::wgmma_fence();
    HETPLAN_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk)
      simt::wgmma_ss<T, kQ, 0, 0>(s, kmajor_desc<kKeys>(sk, wg * 64, kk),
                                  kmajor_desc<kQ>(qt, 0, kk), kk > 0);
    HETPLAN_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk)
      simt::wgmma_ss<T, kQ, 0, 0>(dp, kmajor_desc<kKeys>(sv, wg * 64, kk),
                                  kmajor_desc<kQ>(dot, 0, kk), kk > 0);
    simt::wgmma_commit();
    simt::wgmma_wait<0>();
    simt::fence_operand(s);
    simt::fence_operand(dp);

    // P^T (zero where masked) rounded to T, dS^T = P^T (dP^T - D); both as A fragments, dS^T
    // also into shared memory for dQ.
    backward_probabilities<T, kQ>(p, lse, dvec, k0 + key_local, q0, s, dp);
    uint32_t pa[kQ / 16][4], sa[kQ / 16][4];
    issue_dv_dk<T, kD, kQ, kKeys>(s, dp, pa, sa, sds, key_local, qt, dot, dv, dk);
    // dV and dK run on while the warps meet at the barrier: all of dS^T is in shared memory.
    simt::sync_threads();

    // dQ[:, col0 .. col0 + 64) (+)= dS K: A = dS (dS^T stored, MN-major), B = K (MN-major),
    // each 64 columns (kDqHalves) a commit group of its own, so that the first half's
    // reductions run while the tensor cores do the second.
    float dq[kDqHalves][32];
    simt::wgmma_fence();
    HETPLAN_UNROLL
    for (int half = 0; half < kDqHalves; ++half) {
      HETPLAN_UNROLL
      for (int kk = 0; kk < kDqSteps; ++kk)
        simt::wgmma_ss<T, 64, 1, 1>(dq[half], mnmajor_desc<kKeys>(sds, 0, dq_kk0 + kk),
                                    mnmajor_desc<kKeys>(sk, dq_col0(half), dq_kk0 + kk), kk > 0);
      simt::wgmma_commit();
    }
    simt::fence_operand(dq);
    HETPLAN_UNROLL
    for (int half = 0; half < kDqHalves; ++half) {
      if (half + 1 < kDqHalves)
        simt::wgmma_wait<1>();  // dV, dK and the first half
      else
        simt::wgmma_wait<0>();  // all
      simt::fence_operand(dv);
      simt::fence_operand(dk);
      simt::fence_operand(pa);
      simt::fence_operand(sa);
      simt::fence_operand(dq);
      if constexpr (kBulkDq) {
        add_dq_bulk(p, dq[half], sdq + warp * 16 * kHopperDqRowFloats, q0 + wq * 16, dq_col0(half),
                    b, h);
      } else {
        add_dq_red<kD>(p, dq[half], q0 + wq * 16, dq_col0(half), b, h);
      }
    }
    // The other stats buffer was last read before this iteration's first barrier.
    if (has_next && tid < 2 * kQ) (tid < kQ ? slse : sd)[(buf ^ 1) * kQ + (tid & 63)] = next_stat;
  }
  if constexpr (kBulkDq) {
    if (lane < 16) simt::bulk_wait_read<0>();  // the last tile's rows are read before the exit
  }

  simt::sync_threads();  // the Q and dO buffers become the output staging area
  T* stage = reinterpret_cast<T*>(sq);
  store_acc_rows<T, kD>(dk, p.scale, p.scale, stage, warp * 16, p.dk + head, p.stride_s,
                        k0 + warp * 16, p.seq);
  store_acc_rows<T, kD>(dv, 1.0f, 1.0f, stage, warp * 16, p.dv + head, p.stride_s, k0 + warp * 16,
                        p.seq);
}

}  // namespace hetplan::kernels
