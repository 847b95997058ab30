// Warp-specialised variant of the Hopper attention backward, d = 128 (opt-in:
// HETPLAN_ATTENTION_BWD=ws; docs/kernels.md "Hopper attention", item 1, and "Warp-specialised
// backward"). The products and the elementwise work are attention_backward_hopper_block's; what
// changes is who loads the query tiles and how the warps wait for them:
//
//   warpgroup 2 (producer, setmaxnreg.dec 24): for each 64-query tile, once the ring stage is
//     free ("empty" mbarrier), thread t copies row t % 64 of Q (t < 64) or dO (t >= 64) into its
//     128-byte-swizzled position with 16 bulk copies of 16 bytes (the swizzle permutes the 16-byte
//     chunks of a row, so a row is not one contiguous copy), after arrive.expect_tx(256) on the
//     stage's "full" mbarrier; it also stores lse[r] (t < 64) or D[r] (t >= 64). Rows past the end
//     are written as zeros (generic stores, then fence.proxy.async) and arrive without tx.
//   warpgroups 0 and 1 (consumers, setmaxnreg.inc 240): wait on "full", run the tile, arrive on
//     "empty" once the tile's last wgmma reading the stage has retired. They exchange dS^T (each
//     computes half of dQ's columns over all 128 keys) through a double buffer and one named
//     barrier among the 256 consumer threads per tile, instead of two block barriers.
//
// kBulkLoads = false (HETPLAN_ATTENTION_BWD=ws-cpasync): the producer loads the tiles with
// 16-byte cp.async instead (consecutive threads, consecutive chunks), waits for its own copies,
// fences them for the tensor cores (fence.proxy.async) and arrives on "full" without tx. The same
// ring and consumers; a hedge in case 16-byte bulk copies issue too slowly on the GPU.
//
// Same results as the default kernel (same products, same order of accumulation).
#pragma once

#include "kernels/attention_hopper_kernels.h"
#include "kernels/simt_bulk.h"

namespace hetplan::kernels {

constexpr int kHopperWsThreads = 384;  // two consumer warpgroups, one producer warpgroup
constexpr int kHopperWsConsumers = 256;
constexpr int kHopperWsStages = 2;  // ring of Q / dO / lse / D stages
// 24 x 128 + 240 x 256 = 64512: the block's allocation at launch (168 x 384, the launch bound's
// share), which setmaxnreg redistributes; a larger sum would make the .inc wait forever.
constexpr int kHopperWsProducerRegs = 24;
constexpr int kHopperWsConsumerRegs = 240;
constexpr int kHopperWsDsBarrier = 1;  // named barrier id: dS^T written, by both consumers

// K, V; the ring's Q and dO tiles; dS^T twice; per stage lse and D (64 floats each); per stage a
// full and an empty mbarrier; 1 KB of alignment slack.
template <class T, int kD>
constexpr size_t attention_backward_hopper_ws_smem_bytes() {
  return (2 * size_t{kHopperTile} * kD + 2 * size_t{kHopperWsStages} * kHopperBwdQ * kD +
          2 * size_t{kHopperTile} * kHopperBwdQ) *
             sizeof(T) +
         kHopperWsStages * 2 * kHopperBwdQ * sizeof(float) + 2 * kHopperWsStages * 8 + 1024;
}

// The shared-memory layout of the variant (all tiles 1024-byte aligned).
template <class T, int kD>
struct HopperWsSmem {
  static constexpr int kKBytes = kHopperTile * kD * 2;  // K, V: 128 keys
  static constexpr int kQBytes = kHopperBwdQ * kD * 2;  // Q, dO: 64 queries
  static constexpr int kDsBytes = kHopperTile * kHopperBwdQ * 2;
  static_assert(kHopperWsStages * kQBytes >= kHopperTile * kD * 2,
                "the Q stages stage dK and dV (128 rows) at the end");
  unsigned char *k, *v, *q, *dout, *ds;
  float* stats;  // per stage: lse[64], then D[64]
  uint64_t *full, *empty;

  HETPLAN_DEVICE explicit HopperWsSmem(unsigned char* base) {
    k = base;
    v = k + kKBytes;
    q = v + kKBytes;                        // kHopperWsStages tiles, contiguous
    dout = q + kHopperWsStages * kQBytes;   // kHopperWsStages tiles
    ds = dout + kHopperWsStages * kQBytes;  // two buffers
    stats = reinterpret_cast<float*>(ds + 2 * kDsBytes);
    full = reinterpret_cast<uint64_t*>(stats + kHopperWsStages * 2 * kHopperBwdQ);
    empty = full + kHopperWsStages;
  }
};

// The producer warpgroup: fills stage (i - first) % kHopperWsStages with query tile i.
template <class T, int kD, bool kBulkLoads>
HETPLAN_DEVICE void ws_produce(const AttentionParams<T>& p, const HopperWsSmem<T, kD>& sm,
                               int64_t head, int64_t row_stats, int first, int n_tiles) {
  constexpr int kQ = kHopperBwdQ;
  constexpr int kRowBytes = kD * 2;
  const int t = simt::thread_x() - kHopperWsConsumers;  // 0 .. 127
  const int r = t & (kQ - 1);
  const bool is_q = t < kQ;
  const T* src = (is_q ? p.q : p.dout) + head;
  const float* stat = is_q ? p.lse : p.dvec;
  for (int i = first; i < n_tiles; ++i) {
    const int stage = (i - first) % kHopperWsStages, round = (i - first) / kHopperWsStages;
    simt::mbarrier_wait(sm.empty + stage, (round & 1) ^ 1);  // round 0 passes at once
    unsigned char* tile = (is_q ? sm.q : sm.dout) + stage * HopperWsSmem<T, kD>::kQBytes;
    const int row = i * kQ + r;
    const bool valid = row < p.seq;
    simt::sts_f32(sm.stats + stage * 2 * kQ + t, valid ? stat[row_stats + row] : 0.0f);
    if constexpr (!kBulkLoads) {
      // Threads t % 64 = u take chunks u, u + 64, ... of their tensor's tile (rows past the end
      // zero-filled by the copy itself). Not unrolled: at 24 registers the unrolled addresses
      // spill (ptxas: 116 bytes against 12).
      HETPLAN_UNROLL_BY(1)
      for (int k = 0; k < kD / 8; ++k) {
        const int c = k * kQ + r, rr = c / (kD / 8), ch = c % (kD / 8);
        const bool ok = i * kQ + rr < p.seq;
        simt::cp_async16(tile + simt::sw128_offset(kQ, rr, ch * 8),
                         src + (ok ? i * kQ + rr : 0) * p.stride_s + ch * 8, ok);
      }
      simt::cp_async_commit();
      simt::cp_async_wait<0>();
      simt::fence_proxy_async();  // the tile reaches the consumers' wgmmas (async proxy)
      simt::mbarrier_arrive(sm.full + stage);
    } else if (valid) {
      simt::mbarrier_arrive_expect_tx(sm.full + stage, kRowBytes);
      const T* from = src + row * p.stride_s;
      HETPLAN_UNROLL
      for (int ch = 0; ch < kD / 8; ++ch)
        simt::bulk_copy_g2s(tile + simt::sw128_offset(kQ, r, ch * 8), from + ch * 8, 16,
                            sm.full + stage);
    } else {
      // Zeros, not garbage: dP^T = V dO^T of a row past the end is multiplied by P^T = 0, and
      // 0 * NaN would poison dK.
      HETPLAN_UNROLL
      for (int ch = 0; ch < kD / 8; ++ch) {
        unsigned char* at = tile + simt::sw128_offset(kQ, r, ch * 8);
        HETPLAN_UNROLL
        for (int w = 0; w < 4; ++w) simt::sts32(at + 4 * w, 0u);
      }
      simt::fence_proxy_async();  // the zeros reach the consumers' wgmmas (async proxy)
      simt::mbarrier_arrive(sm.full + stage);
    }
  }
}

template <class T, int kD, bool kBulkLoads = true>
HETPLAN_DEVICE void attention_backward_hopper_ws_block(const AttentionParams<T>& p) {
  static_assert(kD == 128, "the warp-specialised backward is written for d = 128");
  constexpr int kQ = kHopperBwdQ;
  using Smem = HopperWsSmem<T, kD>;
  const Smem sm(hopper_smem());
  const int tid = simt::thread_x(), lane = simt::lane(), warp = simt::warp();
  const int g = lane >> 2, q = lane & 3, wg = warp >> 2, wq = warp & 3;
  const int kt = static_cast<int>(simt::block_x());  // key tile; low tiles (most work) first
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int64_t row_stats = (static_cast<int64_t>(b) * p.heads + h) * p.seq;
  const int k0 = kt * kHopperTile;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kQ));
  const int first = p.causal ? k0 / kQ : 0;  // earlier query tiles see none of these keys

  if (tid == 0) {
    for (int s = 0; s < kHopperWsStages; ++s) {
      simt::mbarrier_init(sm.full + s, 128);  // the producer's threads (with their bytes)
      simt::mbarrier_init(sm.empty + s, kHopperWsConsumers);
    }
    simt::fence_proxy_async();  // the inits reach the bulk copies' complete_tx (async proxy)
  }
  simt::sync_threads();  // the only block-wide barrier
  if (wg == 2) {
    simt::setmaxnreg<kHopperWsProducerRegs, false>();
    ws_produce<T, kD, kBulkLoads>(p, sm, head, row_stats, first, n_tiles);
    return;
  }
  simt::setmaxnreg<kHopperWsConsumerRegs, true>();

  const int key_local = wg * 64 + wq * 16 + g;  // this thread's first key row in the block
  const int col0 = wg * 64;                     // this warpgroup's half of dQ's columns
  load_tile_sw128<T, kD, kHopperTile>(sm.k, p.k + head, p.stride_s, k0, p.seq);
  load_tile_sw128<T, kD, kHopperTile>(sm.v, p.v + head, p.stride_s, k0, p.seq);
  simt::cp_async_commit();
  simt::cp_async_wait<0>();
  simt::fence_proxy_async();  // K and V reach the tensor cores ...
  simt::named_barrier_sync<kHopperWsDsBarrier>(kHopperWsConsumers);  // ... every consumer's

  float dk[kD / 2] = {}, dv[kD / 2] = {};
  for (int i = first; i < n_tiles; ++i) {
    const int stage = (i - first) % kHopperWsStages, round = (i - first) / kHopperWsStages;
    simt::mbarrier_wait(sm.full + stage, round & 1);
    const unsigned char* qt = sm.q + stage * Smem::kQBytes;
    const unsigned char* dot = sm.dout + stage * Smem::kQBytes;
    const float* lse = sm.stats + stage * 2 * kQ;
    const float* dvec = lse + kQ;
    // dS^T alternates between two buffers: a consumer writes buffer (i - first) & 1 only after
    // the named barrier of tile i - 1, which the other consumer reaches after its dQ of tile
    // i - 2 (the last reader of that buffer) has retired.
    unsigned char* sds = sm.ds + ((i - first) & 1) * Smem::kDsBytes;
    const int q0 = i * kQ;

    // S^T = K Q^T and dP^T = V dO^T (64 keys x 64 queries per warpgroup).
    float s[kQ / 2], dp[kQ / 2];
    simt::wgmma_fence();
    HETPLAN_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk)
      simt::wgmma_ss<T, kQ, 0, 0>(s, kmajor_desc<kHopperTile>(sm.k, wg * 64, kk),
                                  kmajor_desc<kQ>(qt, 0, kk), kk > 0);
    HETPLAN_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk)
      simt::wgmma_ss<T, kQ, 0, 0>(dp, kmajor_desc<kHopperTile>(sm.v, wg * 64, kk),
                                  kmajor_desc<kQ>(dot, 0, kk), kk > 0);
    simt::wgmma_commit();
    simt::wgmma_wait<0>();
    simt::fence_operand(s);
    simt::fence_operand(dp);

    // P^T (zero where masked) rounded to T, dS^T = P^T (dP^T - D); both as A fragments, dS^T
    // also into shared memory for dQ.
    HETPLAN_UNROLL
    for (int e = 0; e < kQ / 2; ++e) {
      const int key = k0 + key_local + 8 * ((e >> 1) & 1);
      const int ql = 8 * (e >> 2) + 2 * q + (e & 1);
      const int query = q0 + ql;
      const bool masked = query >= p.seq || key >= p.seq || (p.causal && query < key);
      const float pv = masked ? 0.0f : simt::exp2_fast(s[e] * p.scale_log2 - lse[ql] * kAttnLog2e);
      s[e] = simt::to_f32(simt::from_f32<T>(pv));
      dp[e] = s[e] * (dp[e] - dvec[ql]);
    }
    uint32_t pa[kQ / 16][4], sa[kQ / 16][4];
    HETPLAN_UNROLL
    for (int kk = 0; kk < kQ / 16; ++kk) {
      acc_to_a<T, kQ>(s, kk, pa[kk]);
      acc_to_a<T, kQ>(dp, kk, sa[kk]);
      const int c = 16 * kk + 2 * q;
      simt::sts32(sds + simt::sw128_offset(kHopperTile, key_local, c), sa[kk][0]);
      simt::sts32(sds + simt::sw128_offset(kHopperTile, key_local + 8, c), sa[kk][1]);
      simt::sts32(sds + simt::sw128_offset(kHopperTile, key_local, c + 8), sa[kk][2]);
      simt::sts32(sds + simt::sw128_offset(kHopperTile, key_local + 8, c + 8), sa[kk][3]);
    }

    // dV += P^T dO, dK += dS^T Q (B: the stage's 64 x d tiles, MN-major).
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
    simt::fence_proxy_async();  // dS^T (ordinary stores) is read by wgmma next ...
    simt::named_barrier_sync<kHopperWsDsBarrier>(kHopperWsConsumers);  // ... both halves

    // dQ[:, col0 .. col0 + 64) = dS K: A = dS (dS^T stored, MN-major), B = K (MN-major).
    float dq[32];
    simt::wgmma_fence();
    HETPLAN_UNROLL
    for (int kk = 0; kk < kHopperTile / 16; ++kk)
      simt::wgmma_ss<T, 64, 1, 1>(dq, mnmajor_desc<kHopperTile>(sds, 0, kk),
                                  mnmajor_desc<kHopperTile>(sm.k, col0, kk), kk > 0);
    simt::wgmma_commit();
    simt::fence_operand(dq);
    simt::wgmma_wait<0>();  // dV, dK and dQ: the stage's last readers
    simt::fence_operand(dv);
    simt::fence_operand(dk);
    simt::fence_operand(pa);
    simt::fence_operand(sa);
    simt::fence_operand(dq);
    simt::mbarrier_arrive(sm.empty + stage);  // the producer may refill it

    add_dq_red<kD>(p, dq, q0 + wq * 16, col0, b, h);
  }

  // The Q stages become the output staging area once both consumers' last wgmmas retired.
  simt::named_barrier_sync<kHopperWsDsBarrier>(kHopperWsConsumers);
  T* stage = reinterpret_cast<T*>(sm.q);
  store_acc_rows<T, kD>(dk, p.scale, p.scale, stage, warp * 16, p.dk + head, p.stride_s,
                        k0 + warp * 16, p.seq);
  store_acc_rows<T, kD>(dv, 1.0f, 1.0f, stage, warp * 16, p.dv + head, p.stride_s, k0 + warp * 16,
                        p.seq);
}

}  // namespace hetplan::kernels
