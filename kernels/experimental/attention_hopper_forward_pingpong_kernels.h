// Warp-specialised, ping-pong variant of the Hopper attention forward (opt-in:
// HETPLAN_ATTENTION_FWD=pingpong or pingpong-cpasync; docs/kernels.md "Ping-pong forward"), after
// FlashAttention-3 (Shah et al. 2024, Section 3.1). The products and the online softmax are
// attention_forward_hopper_block's, in the same order per query row, so O and lse are the same
// bits; what changes is who loads K and V and when each warpgroup may issue its wgmmas:
//
//   warpgroup 2 (producer, setmaxnreg.dec 24): for each 128-key tile, once the ring stage is free
//     ("empty" mbarrier, count 256: every consumer thread after its wait retiring the stage's
//     last reader), thread t copies row t of K and of V into the stage's 128-byte-swizzled tiles:
//     32 bulk copies of 16 bytes after arrive.expect_tx on the stage's "full" mbarrier (count
//     128), or (kBulkLoads = false) 32 cp.async of 16 bytes, its own wait, fence.proxy.async
//     and a plain arrive. Rows past the end are zeros (a P of 0 times garbage V could be NaN).
//   warpgroups 0 and 1 (consumers, setmaxnreg.inc 240), each its 64 query rows, Q loaded once by
//     both with cp.async: per key tile j, wait on "full", then their turn: warpgroup w syncs on
//     named barrier kPingpongTurn + w, issues S_{j+1} = Q K_{j+1}^T and O += P_j V_j (the
//     default kernel's intra-warpgroup overlap), and arrives on the other's barrier; its softmax
//     of S_{j+1} then runs while the other warpgroup's products occupy the tensor cores.
//     Warpgroup 1 arrives once before its first turn, so warpgroup 0 goes first; every wgmma
//     issue of a warpgroup is inside a turn (S_0 alone first, P_last V_last alone last), so each
//     warpgroup takes kv_tiles + 1 turns and warpgroup 1 gives up its last one without an arrive
//     (no arrival is left over when the block ends).
#pragma once

#include "kernels/experimental/attention_hopper_kernels.h"
#include "kernels/experimental/simt_bulk.h"

namespace hetplan::kernels {

constexpr int kPingpongThreads = 384;  // two consumer warpgroups, one producer warpgroup
constexpr int kPingpongConsumers = 256;
constexpr int kPingpongStages = 3;  // ring of K / V stages
// 24 x 128 + 240 x 256 = 64512: the block's allocation at launch (168 x 384, the launch bound's
// share), which setmaxnreg redistributes.
constexpr int kPingpongProducerRegs = 24;
constexpr int kPingpongConsumerRegs = 240;
constexpr int kPingpongQBarrier = 1;  // named barrier: Q landed (both consumers); O staging
constexpr int kPingpongTurn = 2;      // named barriers 2, 3: warpgroup 0's, 1's turn to issue

// Q, then per stage K and V (128 keys each), then per stage a full and an empty mbarrier; 1 KB
// of alignment slack. d = 128: 230,448 bytes (the H100's opt-in limit is 232,448); d = 64:
// 115,760.
template <class T, int kD>
constexpr size_t attention_forward_pingpong_smem_bytes() {
  return (1 + 2 * size_t{kPingpongStages}) * kHopperTile * kD * sizeof(T) +
         2 * kPingpongStages * 8 + 1024;
}

template <class T, int kD>
struct PingpongSmem {
  static constexpr int kTileBytes = kHopperTile * kD * 2;
  unsigned char *q, *k, *v;  // k, v: kPingpongStages tiles each
  uint64_t *full, *empty;

  HETPLAN_DEVICE explicit PingpongSmem(unsigned char* base) {
    q = base;
    k = q + kTileBytes;
    v = k + kPingpongStages * kTileBytes;
    full = reinterpret_cast<uint64_t*>(v + kPingpongStages * kTileBytes);
    empty = full + kPingpongStages;
  }
};

// The producer's share of key tile `tile` into stage `st`: row t of K and of V (bulk copies), or
// chunks t, t + 128, ... of both tiles (cp.async).
template <class T, int kD, bool kBulkLoads>
HETPLAN_DEVICE void pingpong_produce_tile(const AttentionParams<T>& p,
                                          const PingpongSmem<T, kD>& sm, int64_t head, int tile,
                                          int st, int t) {
  constexpr int kChunks = kD / 8;
  constexpr int kProducers = kPingpongThreads - kPingpongConsumers;
  unsigned char* kt = sm.k + st * PingpongSmem<T, kD>::kTileBytes;
  unsigned char* vt = sm.v + st * PingpongSmem<T, kD>::kTileBytes;
  const int row0 = tile * kHopperTile;
  if constexpr (!kBulkLoads) {
    // Not unrolled: at 24 registers the unrolled addresses would spill (as in the WS backward).
    HETPLAN_UNROLL_BY(1)
    for (int i = 0; i < 2 * kHopperTile * kChunks / kProducers; ++i) {
      const int c = (i * kProducers + t) % (kHopperTile * kChunks);
      const bool is_v = i * kProducers >= kHopperTile * kChunks;
      const int r = c / kChunks, ch = c % kChunks;
      const bool ok = row0 + r < p.seq;
      const T* src = (is_v ? p.v : p.k) + head + (ok ? row0 + r : 0) * p.stride_s + ch * 8;
      simt::cp_async16((is_v ? vt : kt) + simt::sw128_offset(kHopperTile, r, ch * 8), src, ok);
    }
    simt::cp_async_commit();
    simt::cp_async_wait<0>();
    simt::fence_proxy_async();  // the tiles reach the consumers' wgmmas (async proxy)
    simt::mbarrier_arrive(sm.full + st);
  } else {
    static_assert(kProducers == kHopperTile, "one K row and one V row per producer thread");
    const int row = row0 + t;
    if (row < p.seq) {
      simt::mbarrier_arrive_expect_tx(sm.full + st, 2 * kD * sizeof(T));
      const T* k_row = p.k + head + row * p.stride_s;
      const T* v_row = p.v + head + row * p.stride_s;
      HETPLAN_UNROLL_BY(1)  // at 24 registers the unrolled loop spills (ptxas: 16 bytes)
      for (int ch = 0; ch < kChunks; ++ch) {
        const int at = simt::sw128_offset(kHopperTile, t, ch * 8);
        simt::bulk_copy_g2s(kt + at, k_row + ch * 8, 16, sm.full + st);
        simt::bulk_copy_g2s(vt + at, v_row + ch * 8, 16, sm.full + st);
      }
    } else {
      HETPLAN_UNROLL
      for (int ch = 0; ch < kChunks; ++ch) {
        const int at = simt::sw128_offset(kHopperTile, t, ch * 8);
        HETPLAN_UNROLL
        for (int w = 0; w < 4; ++w) {
          simt::sts32(kt + at + 4 * w, 0u);
          simt::sts32(vt + at + 4 * w, 0u);
        }
      }
      simt::fence_proxy_async();  // the zeros reach the consumers' wgmmas (async proxy)
      simt::mbarrier_arrive(sm.full + st);
    }
  }
}

template <class T, int kD, bool kBulkLoads = true>
HETPLAN_DEVICE void attention_forward_pingpong_block(const AttentionParams<T>& p) {
  constexpr int kN = kHopperTile;  // keys per tile
  using Smem = PingpongSmem<T, kD>;
  const Smem sm(hopper_smem());
  const int tid = simt::thread_x(), lane = simt::lane(), warp = simt::warp_uniform();
  const int g = lane >> 2, wg = warp >> 2, wq = warp & 3;
  const int n_tiles = static_cast<int>(ceil_div(p.seq, kHopperTile));
  const int qt = p.causal ? n_tiles - 1 - static_cast<int>(simt::block_x())
                          : static_cast<int>(simt::block_x());
  const int h = static_cast<int>(simt::block_y()), b = static_cast<int>(simt::block_z());
  const int64_t head = b * p.stride_b + h * p.stride_h;
  const int q0 = qt * kHopperTile;
  const int kv_tiles = p.causal ? qt + 1 : n_tiles;

  if (tid == 0) {
    for (int s = 0; s < kPingpongStages; ++s) {
      simt::mbarrier_init(sm.full + s, kPingpongThreads - kPingpongConsumers);
      simt::mbarrier_init(sm.empty + s, kPingpongConsumers);
    }
    simt::fence_proxy_async();  // the inits reach the bulk copies' complete_tx (async proxy)
  }
  simt::sync_threads();  // the only block-wide barrier
  if (wg == 2) {
    simt::setmaxnreg<kPingpongProducerRegs, false>();
    const int t = tid - kPingpongConsumers;
    for (int tile = 0; tile < kv_tiles; ++tile) {
      const int st = tile % kPingpongStages, round = tile / kPingpongStages;
      simt::mbarrier_wait(sm.empty + st, (round & 1) ^ 1);  // round 0 passes at once
      pingpong_produce_tile<T, kD, kBulkLoads>(p, sm, head, tile, st, t);
    }
    return;
  }
  simt::setmaxnreg<kPingpongConsumerRegs, true>();

  const int my_turn = kPingpongTurn + wg, other_turn = kPingpongTurn + (wg ^ 1);
  if (wg == 1) simt::named_barrier_arrive(kPingpongTurn, kPingpongConsumers);  // 0 goes first
  const int row_base = q0 + wg * 64 + wq * 16 + g;  // this thread's first query row
  auto issue_s = [&](float(&s)[kN / 2], int tile) {
    const unsigned char* kt = sm.k + (tile % kPingpongStages) * Smem::kTileBytes;
    HETPLAN_UNROLL
    for (int kk = 0; kk < kD / 16; ++kk)
      simt::wgmma_ss<T, kN, 0, 0>(s, kmajor_desc<kHopperTile>(sm.q, wg * 64, kk),
                                  kmajor_desc<kHopperTile>(kt, 0, kk), kk > 0);
  };
  float o[kD / 2] = {};
  uint32_t pa[kN / 16][4];
  auto issue_pv = [&](int tile) {
    const unsigned char* vt = sm.v + (tile % kPingpongStages) * Smem::kTileBytes;
    HETPLAN_UNROLL
    for (int kk = 0; kk < kN / 16; ++kk)
      simt::wgmma_rs<T, kD, 1>(o, pa[kk], mnmajor_desc<kHopperTile>(vt, 0, kk), true);
  };
  auto wait_full = [&](int tile) {
    simt::mbarrier_wait(sm.full + tile % kPingpongStages, (tile / kPingpongStages) & 1);
  };

  load_tile_sw128<T, kD, kHopperTile>(sm.q, p.q + head, p.stride_s, q0, p.seq);
  simt::cp_async_commit();
  simt::cp_async_wait<0>();
  simt::fence_proxy_async();  // Q reaches the tensor cores ...
  simt::named_barrier_sync<kPingpongQBarrier>(kPingpongConsumers);  // ... both consumers' rows

  float m[2] = {-INFINITY, -INFINITY};  // running max (log2 units) of rows g, g + 8
  float l[2] = {0.0f, 0.0f};            // this thread's share of the running sums
  float alpha[2];
  float s[kN / 2];
  wait_full(0);
  simt::named_barrier_sync(my_turn, kPingpongConsumers);
  simt::wgmma_fence();
  issue_s(s, 0);
  simt::wgmma_commit();
  simt::named_barrier_arrive(other_turn, kPingpongConsumers);
  simt::wgmma_wait<0>();
  simt::fence_operand(s);
  softmax_tile<kN>(s, m, l, alpha, 0, row_base, p.causal && qt == 0, p.seq, p.scale_log2);
  HETPLAN_UNROLL
  for (int kk = 0; kk < kN / 16; ++kk) acc_to_a<T, kN>(s, kk, pa[kk]);

  // Steady state, as the default kernel's (straight-line code between each wgmma and its wait),
  // the issue inside this warpgroup's turn. Stage j is released once P_j V_j has retired; S_j
  // retired an iteration earlier.
  for (int j = 0; j + 1 < kv_tiles; ++j) {
    wait_full(j + 1);
    simt::named_barrier_sync(my_turn, kPingpongConsumers);
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
    simt::named_barrier_arrive(other_turn, kPingpongConsumers);
    simt::wgmma_wait<1>();  // S_{j+1}; P_j V_j may still run
    simt::fence_operand(s);
    softmax_tile<kN>(s, m, l, alpha, (j + 1) * kN, row_base, p.causal && j + 1 == qt, p.seq,
                     p.scale_log2);
    simt::wgmma_wait<0>();
    simt::fence_operand(o);
    simt::fence_operand(pa);
    simt::mbarrier_arrive(sm.empty + j % kPingpongStages);  // K_j, V_j read by no wgmma now
    HETPLAN_UNROLL
    for (int i = 0; i < kD / 2; ++i) o[i] *= alpha[(i >> 1) & 1];
    HETPLAN_UNROLL
    for (int kk = 0; kk < kN / 16; ++kk) acc_to_a<T, kN>(s, kk, pa[kk]);
  }
  simt::named_barrier_sync(my_turn, kPingpongConsumers);
  simt::fence_operand(o);
  simt::fence_operand(pa);
  simt::wgmma_fence();
  issue_pv(kv_tiles - 1);
  simt::wgmma_commit();
  simt::fence_operand(o);
  simt::fence_operand(pa);
  if (wg == 0) simt::named_barrier_arrive(other_turn, kPingpongConsumers);  // 1's last turn
  simt::wgmma_wait<0>();
  simt::fence_operand(o);
  simt::fence_operand(pa);

  // O through this warp's 16 rows of the Q tile, which overlap the other warpgroup's Q rows:
  // first both consumers' last S must have retired. The last stage is not released: the
  // producer is done.
  simt::named_barrier_sync<kPingpongQBarrier>(kPingpongConsumers);
  forward_epilogue<T, kD>(p, o, m, l, reinterpret_cast<T*>(sm.q), warp, head, q0, b, h);
}

}  // namespace hetplan::kernels
