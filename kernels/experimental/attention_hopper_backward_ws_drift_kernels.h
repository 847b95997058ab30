// Warp-specialised Hopper attention backward whose consumers drift apart (opt-in:
// HETPLAN_ATTENTION_BWD=ws-drift, d = 128 and d = 64; docs/kernels.md "Consumers that drift
// apart"). The producer ring, the products dS^T, dK and dV are those of the `ws` kernel
// (attention_hopper_backward_ws_kernels.h); what changes is dQ:
//
//   consumer warpgroup w (keys 64 w .. 64 w + 63) computes the partial dQ of the query tile from
//     its own keys only, dQ_w = dS[:, keys_w] K[keys_w, :] (A: its own 64 rows of dS^T in shared
//     memory, MN-major; B: its own rows of K), as m64n64 products (two column halves for d = 128,
//     the second issued while the first is staged). No consumer reads the other's dS^T, so the
//     named barrier between the consumers goes; a warpgroup meets only its own four warps (its
//     dS^T rows come from all four) at a named barrier of its own.
//   The partial goes to the fp32 accumulator through a dQ writer per consumer (warps 10 and 11):
//     staged in the consumer's own buffer (64 rows x d fp32), fence.proxy.async, "dq full"[w];
//     the writer adds each row with one bulk reduce (d x 4 bytes), waits until they have read
//     shared memory and arrives on "dq empty"[w]. Both partials add to the same rows: twice the
//     reduce bytes of the column split.
//   Warps 8 and 9 load the tiles (two rows per thread) as the `ws` producer does.
//
// Between the consumers there are then only the ring's mbarriers: "empty" counts all 256
// consumer threads, each arriving once its own last wgmma reading the stage (dV, dK) has retired,
// so a consumer may run up to the ring's depth (2 tiles) ahead of the other, and a stage is
// refilled only when the slower one is done with it. dS^T needs one buffer: each consumer's rows
// are read by its own dQ products only, which have retired before it writes them again. The one
// meeting left is at the start (K and V, loaded by both consumers, once per block).
//
// dK and dV: the same products and order of accumulation as the default kernel; dQ: the same
// products, summed in fp32 in another order (two partials of 64 keys each).
#pragma once

#include "kernels/experimental/attention_hopper_backward_ws_kernels.h"

namespace hetplan::kernels {

constexpr int kHopperDriftLoaders = 64;     // warps 8 and 9: the tiles' 128 rows, two each
constexpr int kHopperDriftWriterWarp = 10;  // warp 10 + w writes consumer w's dQ
constexpr int kHopperDriftKvBarrier = 1;    // named barrier id: K and V loaded (256 threads)
constexpr int kHopperDriftDsBarrier = 2;    // ids 2 and 3: a warpgroup's dS^T rows written

// A staged dQ row: d fp32 columns and 4 of padding, so that the float2 stores of a warp's 8 rows
// g (stride 4 g mod 32 banks) and 4 lanes q (2 q) hit all 32 banks once. Rows stay 16-byte
// aligned (the bulk reduce's rule).
template <int kD>
constexpr int kDriftDqRowFloats = kD + 4;

// K, V; the ring's Q and dO tiles; one dS^T buffer (128 keys x 64 queries); per stage lse and D;
// full and empty per stage, "dq full" and "dq empty" per consumer; the two consumers' staged dQ
// (64 rows each); 1 KB of alignment slack. d = 128: 217,152 bytes (the opt-in limit: 232,448);
// d = 64: 118,848.
template <class T, int kD>
constexpr size_t attention_backward_hopper_ws_drift_smem_bytes() {
  return (2 * size_t{kHopperTile} * kD + 2 * size_t{kHopperWsStages} * kHopperBwdQ * kD +
          size_t{kHopperTile} * kHopperBwdQ) *
             sizeof(T) +
         kHopperWsStages * 2 * kHopperBwdQ * sizeof(float) + 2 * kHopperWsStages * 8 + 2 * 2 * 8 +
         2 * size_t{kHopperBwdQ} * kDriftDqRowFloats<kD> * sizeof(float) + 1024;
}

// The `ws` layout up to dS^T (so that its producer runs unchanged), then one dS^T buffer instead
// of two, the stats, the barriers and the staged dQ.
template <class T, int kD>
HETPLAN_DEVICE HopperWsSmem<T, kD> drift_smem(unsigned char* base) {
  using Smem = HopperWsSmem<T, kD>;
  Smem sm(base);
  sm.stats = reinterpret_cast<float*>(sm.ds + Smem::kDsBytes);
  sm.full = reinterpret_cast<uint64_t*>(sm.stats + kHopperWsStages * 2 * kHopperBwdQ);
  sm.empty = sm.full + kHopperWsStages;
  sm.dq_full = sm.empty + kHopperWsStages;
  sm.dq_empty = sm.dq_full + 2;
  sm.dq = reinterpret_cast<float*>(sm.dq_empty + 2);
  return sm;
}

// Consumer w's dQ writer (one warp): per tile, once the consumer has staged its 64 rows, lane l
// adds rows l and l + 32 (none past the end) to the accumulator with one bulk reduce each, waits
// until they have read shared memory and frees the buffer ("dq empty" counts the 32 lanes: a
// bulk group belongs to its thread).
template <class T, int kD>
HETPLAN_DEVICE void drift_write_dq(const AttentionParams<T>& p, const HopperWsSmem<T, kD>& sm,
                                   int w, int b, int h, int first, int n_tiles) {
  constexpr int kQ = kHopperBwdQ;
  const int lane = simt::lane();
  for (int i = first; i < n_tiles; ++i) {
    simt::mbarrier_wait(sm.dq_full + w, (i - first) & 1);
    HETPLAN_UNROLL
    for (int k = 0; k < 2; ++k) {
      const int row = lane + 32 * k, query = i * kQ + row;
      if (query < p.seq)
        simt::bulk_reduce_add_f32(
            p.dq_accum + ((static_cast<int64_t>(b) * p.seq + query) * p.heads + h) * kD,
            sm.dq + (w * kQ + row) * kDriftDqRowFloats<kD>, kD * sizeof(float));
    }
    simt::bulk_commit();
    simt::bulk_wait_read<0>();
    simt::mbarrier_arrive(sm.dq_empty + w);
  }
}

// This warp's 16 rows x 64 columns (m64n64 fragment) of a dQ partial into columns col0 .. + 63
// of its consumer's staging rows `rows` (the warp's first row, lane's quad offset applied here).
template <int kD>
HETPLAN_DEVICE void drift_stage_dq(float* rows, const float (&dq)[32], int col0) {
  constexpr int kRow = kDriftDqRowFloats<kD>;
  const int lane = simt::lane(), g = lane >> 2, q = lane & 3;
  float* at = rows + g * kRow + col0 + 2 * q;
  HETPLAN_UNROLL
  for (int j = 0; j < 8; ++j) {
    simt::sts_f32x2(at + 8 * j, dq[4 * j], dq[4 * j + 1]);
    simt::sts_f32x2(at + 8 * kRow + 8 * j, dq[4 * j + 2], dq[4 * j + 3]);
  }
}

// bar.sync among the 128 threads of consumer warpgroup wg (ids 2 and 3), which alone read and
// write its rows of dS^T.
HETPLAN_DEVICE void warpgroup_sync(int wg) {
  if (wg == 0)
    simt::named_barrier_sync<kHopperDriftDsBarrier>(kHopperWsConsumers / 2);
  else
    simt::named_barrier_sync<kHopperDriftDsBarrier + 1>(kHopperWsConsumers / 2);
}

// dQ_w, columns col0 .. + 63 = dS[:, keys_w] K[keys_w, col0 ..]: A = dS, read MN-major from the
// warpgroup's rows of dS^T; B = its rows of K, MN-major. Issued and committed, not waited for.
template <class T>
HETPLAN_DEVICE void drift_issue_dq(float (&dq)[32], const unsigned char* sds,
                                   const unsigned char* sk, int wg, int col0) {
  simt::wgmma_fence();
  HETPLAN_UNROLL
  for (int kk = 0; kk < 4; ++kk)
    simt::wgmma_ss<T, 64, 1, 1>(dq, mnmajor_desc<kHopperTile>(sds, 0, 4 * wg + kk),
                                mnmajor_desc<kHopperTile>(sk, col0, 4 * wg + kk), kk > 0);
  simt::wgmma_commit();
  simt::fence_operand(dq);
}

template <class T, int kD>
HETPLAN_DEVICE void attention_backward_hopper_ws_drift_block(const AttentionParams<T>& p) {
  static_assert(kD == 64 || kD == 128, "ws-drift is written for d = 64 and d = 128");
  constexpr int kQ = kHopperBwdQ;
  constexpr int kRow = kDriftDqRowFloats<kD>;
  const HopperWsSmem<T, kD> sm = drift_smem<T, kD>(hopper_smem());
  const int tid = simt::thread_x(), lane = simt::lane(), warp = simt::warp_uniform();
  const int g = lane >> 2, wg = warp >> 2, wq = warp & 3;
  const int kt = static_cast<int>(simt::block_x());  // key tile; low tiles (most work) first
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int64_t row_stats = (static_cast<int64_t>(b) * p.heads + h) * p.seq;
  const int k0 = kt * kHopperTile;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kQ));
  const int first = p.causal ? k0 / kQ : 0;  // earlier query tiles see none of these keys

  if (tid == 0) {
    for (int s = 0; s < kHopperWsStages; ++s) {
      simt::mbarrier_init(sm.full + s, 2 * kQ);               // the tile's rows (with their bytes)
      simt::mbarrier_init(sm.empty + s, kHopperWsConsumers);  // both consumers, every thread
    }
    for (int w = 0; w < 2; ++w) {
      simt::mbarrier_init(sm.dq_full + w, kHopperWsConsumers / 2);  // consumer w's threads
      simt::mbarrier_init(sm.dq_empty + w, 32);                     // its writer's lanes
    }
    simt::fence_proxy_async();  // the inits reach the bulk copies' complete_tx (async proxy)
  }
  simt::sync_threads();  // the only block-wide barrier
  if (wg == 2) {
    // The `ws` split, 24 / 240. ptxas (CUDA 13.0): the loaders' two rows per thread spill 16
    // bytes (72 loaded) at 24, off the consumers' path; 32 / 232 removes that but spills 40
    // bytes (68 loaded) in the fp16 d = 128 consumers, per tile.
    simt::setmaxnreg<kHopperWsProducerRegs, false>();
    if (warp >= kHopperDriftWriterWarp)
      drift_write_dq<T, kD>(p, sm, warp - kHopperDriftWriterWarp, b, h, first, n_tiles);
    else
      ws_produce<T, kD, true, kHopperDriftLoaders>(p, sm, head, row_stats, first, n_tiles);
    return;
  }
  simt::setmaxnreg<kHopperWsConsumerRegs, true>();

  const int key_local = wg * 64 + wq * 16 + g;          // this thread's first key row in the block
  float* dq_rows = sm.dq + (wg * kQ + wq * 16) * kRow;  // this warp's 16 staging rows
  load_tile_sw128<T, kD, kHopperTile>(sm.k, p.k + head, p.stride_s, k0, p.seq);
  load_tile_sw128<T, kD, kHopperTile>(sm.v, p.v + head, p.stride_s, k0, p.seq);
  simt::cp_async_commit();
  simt::cp_async_wait<0>();
  simt::fence_proxy_async();  // K and V reach the tensor cores ...
  simt::named_barrier_sync<kHopperDriftKvBarrier>(kHopperWsConsumers);  // ... once per block

  float dk[kD / 2] = {}, dv[kD / 2] = {};
  for (int i = first; i < n_tiles; ++i) {
    const int stage = (i - first) % kHopperWsStages, round = (i - first) / kHopperWsStages;
    simt::mbarrier_wait(sm.full + stage, round & 1);
    const unsigned char* qt = sm.q + stage * HopperWsSmem<T, kD>::kQBytes;
    const unsigned char* dot = sm.dout + stage * HopperWsSmem<T, kD>::kQBytes;
    float s[kQ / 2], dp[kQ / 2];
    ws_scores<T, kD>(p, sm, qt, dot, sm.stats + stage * 2 * kQ, wg, k0 + key_local, i * kQ, s, dp);
    // Both as A fragments, dS^T also into this warpgroup's rows of shared memory for its dQ.
    // Their only readers are the warpgroup's dQ products of the last tile; a warp's wait retires
    // its own part of a wgmma (its 16 rows of dQ, which read every row of dS^T), so the four
    // warps meet before writing.
    uint32_t pa[kQ / 16][4], sa[kQ / 16][4];
    warpgroup_sync(wg);  // its four warps' dQ products of the last tile have all retired
    issue_dv_dk<T, kD, kQ>(s, dp, pa, sa, sm.ds, key_local, qt, dot, dv, dk);
    // The dQ products read dS^T next: the whole warpgroup's rows, not the other consumer's.
    warpgroup_sync(wg);

    float dq0[32];
    drift_issue_dq<T>(dq0, sm.ds, sm.k, wg, 0);
    simt::wgmma_wait<0>();  // dV and dK (the stage's last readers here) and dQ's first half
    simt::fence_operand(dv);
    simt::fence_operand(dk);
    simt::fence_operand(pa);
    simt::fence_operand(sa);
    simt::fence_operand(dq0);
    simt::mbarrier_arrive(sm.empty + stage);  // this consumer is done with the stage

    if constexpr (kD == 128) {
      float dq1[32];
      drift_issue_dq<T>(dq1, sm.ds, sm.k, wg, 64);  // runs while the first half is staged
      simt::mbarrier_wait(sm.dq_empty + wg, ((i - first) & 1) ^ 1);  // round 0 passes at once
      drift_stage_dq<kD>(dq_rows, dq0, 0);
      simt::wgmma_wait<0>();
      simt::fence_operand(dq1);
      drift_stage_dq<kD>(dq_rows, dq1, 64);
    } else {
      simt::mbarrier_wait(sm.dq_empty + wg, ((i - first) & 1) ^ 1);  // round 0 passes at once
      drift_stage_dq<kD>(dq_rows, dq0, 0);
    }
    simt::fence_proxy_async();  // the rows reach the writer's bulk reduces (async proxy)
    simt::mbarrier_arrive(sm.dq_full + wg);
  }

  // dK and dV go out through this warp's own staging rows once the writer has read the last
  // tile's dQ from them: no meeting with the other consumer, whose stage may still be in use.
  simt::mbarrier_wait(sm.dq_empty + wg, ((n_tiles - first) & 1) ^ 1);
  T* stage = reinterpret_cast<T*>(sm.dq + wg * kQ * kRow);
  store_acc_rows<T, kD>(dk, p.scale, p.scale, stage, wq * 16, p.dk + head, p.stride_s,
                        k0 + warp * 16, p.seq);
  store_acc_rows<T, kD>(dv, 1.0f, 1.0f, stage, wq * 16, p.dv + head, p.stride_s, k0 + warp * 16,
                        p.seq);
}

}  // namespace hetplan::kernels
