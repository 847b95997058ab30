// Warp-specialised variant of the Hopper attention backward, d = 128 (opt-in:
// HETPLAN_ATTENTION_BWD=ws; docs/kernels.md "Warp-specialised
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
// kDqWriter (HETPLAN_ATTENTION_BWD=ws-dqw; bulk producer only): FlashAttention-3's dQ writer.
// Warp 11 (the producer warpgroup's last) no longer loads; warps 8-10 load the 128 rows of each
// tile. The consumers stage their dQ tile (fp32) in shared memory, fence it for the async proxy
// and arrive on their half's "dq full" mbarrier instead of adding it with red.global.add; the
// writer waits on it, adds each of the half's 64 rows to the accumulator with one bulk reduce
// (cp.reduce.async.bulk .add.f32), waits until they have read shared memory and arrives on
// "dq empty", which the consumers wait on before staging the next tile. One buffer per half
// (docs/kernels.md, "Warp-specialised backward": why not two).
//
// Same products as the default kernel, dK and dV in the same order of accumulation; dQ's fp32
// additions into the accumulator (from the blocks of different key tiles) in another order.
#pragma once

#include "kernels/experimental/attention_hopper_kernels.h"
#include "kernels/experimental/simt_bulk.h"

namespace hetplan::kernels {

constexpr int kHopperWsThreads = 384;  // two consumer warpgroups, one producer warpgroup
constexpr int kHopperWsConsumers = 256;
constexpr int kHopperWsStages = 2;  // ring of Q / dO / lse / D stages
// 24 x 128 + 240 x 256 = 64512: the block's allocation at launch (168 x 384, the launch bound's
// share), which setmaxnreg redistributes; a larger sum would make the .inc wait forever.
constexpr int kHopperWsProducerRegs = 24;
constexpr int kHopperWsConsumerRegs = 240;
constexpr int kHopperWsDsBarrier = 1;  // named barrier id: dS^T written, by both consumers
// kDqWriter: the staged dQ rows (64 columns of fp32) lie 68 floats apart, so that the float2
// stores of a warp's 8 rows g (68 g = 4 g mod 32 banks) fall into distinct banks.
constexpr int kHopperWsDqRowFloats = 68;
constexpr int kHopperWsDqWriterWarp = 11;

// K, V; the ring's Q and dO tiles; dS^T twice; per stage lse and D (64 floats each); per stage a
// full and an empty mbarrier; kDqWriter: "dq full" and "dq empty" per consumer, then the staged
// dQ (2 halves x 64 rows); 1 KB of alignment slack. d = 128: 165,920 bytes, 200,768 with the
// writer (the 227 KB opt-in limit is 232,448).
template <class T, int kD, bool kDqWriter = false>
constexpr size_t attention_backward_hopper_ws_smem_bytes() {
  return (2 * size_t{kHopperTile} * kD + 2 * size_t{kHopperWsStages} * kHopperBwdQ * kD +
          2 * size_t{kHopperTile} * kHopperBwdQ) *
             sizeof(T) +
         kHopperWsStages * 2 * kHopperBwdQ * sizeof(float) + 2 * kHopperWsStages * 8 +
         (kDqWriter ? 2 * 2 * 8 + 2 * size_t{kHopperBwdQ} * kHopperWsDqRowFloats * sizeof(float)
                    : 0) +
         1024;
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
  uint64_t *dq_full, *dq_empty;  // kDqWriter: per consumer warpgroup
  float* dq;                     // kDqWriter: consumer w's 64 rows from row 64 w

  HETPLAN_DEVICE explicit HopperWsSmem(unsigned char* base) {
    k = base;
    v = k + kKBytes;
    q = v + kKBytes;                        // kHopperWsStages tiles, contiguous
    dout = q + kHopperWsStages * kQBytes;   // kHopperWsStages tiles
    ds = dout + kHopperWsStages * kQBytes;  // two buffers
    stats = reinterpret_cast<float*>(ds + 2 * kDsBytes);
    full = reinterpret_cast<uint64_t*>(stats + kHopperWsStages * 2 * kHopperBwdQ);
    empty = full + kHopperWsStages;
    dq_full = empty + kHopperWsStages;
    dq_empty = dq_full + 2;
    dq = reinterpret_cast<float*>(dq_empty + 2);
  }
};

// Row `id` (0 .. 63: Q, 64 .. 127: dO) of query tile i into stage `stage`, with its lse or D.
template <class T, int kD, bool kBulkLoads>
HETPLAN_DEVICE void ws_produce_row(const AttentionParams<T>& p, const HopperWsSmem<T, kD>& sm,
                                   int64_t head, int64_t row_stats, int i, int stage, int id) {
  constexpr int kQ = kHopperBwdQ;
  constexpr int kRowBytes = kD * 2;
  const int r = id & (kQ - 1);
  const bool is_q = id < kQ;
  const T* src = (is_q ? p.q : p.dout) + head;
  const float* stat = is_q ? p.lse : p.dvec;
  unsigned char* tile = (is_q ? sm.q : sm.dout) + stage * HopperWsSmem<T, kD>::kQBytes;
  const int row = i * kQ + r;
  const bool valid = row < p.seq;
  simt::sts_f32(sm.stats + stage * 2 * kQ + id, valid ? stat[row_stats + row] : 0.0f);
  if constexpr (!kBulkLoads) {
    // Threads id % 64 = u take chunks u, u + 64, ... of their tensor's tile (rows past the end
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

// The producer: fills stage (i - first) % kHopperWsStages with query tile i, `kLoaders` threads
// (the producer warpgroup's first) over its 128 rows. "full" counts the rows, not the threads.
template <class T, int kD, bool kBulkLoads, int kLoaders>
HETPLAN_DEVICE void ws_produce(const AttentionParams<T>& p, const HopperWsSmem<T, kD>& sm,
                               int64_t head, int64_t row_stats, int first, int n_tiles) {
  constexpr int kRows = 2 * kHopperBwdQ;
  static_assert(kLoaders == kRows || kBulkLoads, "the cp.async producer needs 128 threads");
  const int t = simt::thread_x() - kHopperWsConsumers;  // 0 .. kLoaders - 1
  for (int i = first; i < n_tiles; ++i) {
    const int stage = (i - first) % kHopperWsStages, round = (i - first) / kHopperWsStages;
    simt::mbarrier_wait(sm.empty + stage, (round & 1) ^ 1);  // round 0 passes at once
    if constexpr (kLoaders == kRows) {
      ws_produce_row<T, kD, kBulkLoads>(p, sm, head, row_stats, i, stage, t);
    } else {
      HETPLAN_UNROLL
      for (int id = t; id < kRows; id += kLoaders)
        ws_produce_row<T, kD, kBulkLoads>(p, sm, head, row_stats, i, stage, id);
    }
  }
}

// The dQ writer (kDqWriter: warp kHopperWsDqWriterWarp): for each tile and each consumer's half
// of the columns, waits until the half is staged, adds its rows to the accumulator with one
// 256-byte bulk reduce each (lane l: rows l and l + 32; none past the end), waits until they
// have read shared memory and frees the half. Each lane arrives on "dq empty" after its own
// wait (a bulk group belongs to its thread), so the barrier counts 32.
template <class T, int kD>
HETPLAN_DEVICE void ws_write_dq(const AttentionParams<T>& p, const HopperWsSmem<T, kD>& sm, int b,
                                int h, int first, int n_tiles) {
  constexpr int kQ = kHopperBwdQ;
  const int lane = simt::lane();
  for (int i = first; i < n_tiles; ++i) {
    const int round = i - first;
    HETPLAN_UNROLL
    for (int half = 0; half < 2; ++half) {
      simt::mbarrier_wait(sm.dq_full + half, round & 1);
      HETPLAN_UNROLL
      for (int k = 0; k < 2; ++k) {
        const int row = lane + 32 * k, query = i * kQ + row;
        if (query < p.seq)
          simt::bulk_reduce_add_f32(
              p.dq_accum + ((static_cast<int64_t>(b) * p.seq + query) * p.heads + h) * kD +
                  half * 64,
              sm.dq + (half * kQ + row) * kHopperWsDqRowFloats, 64 * sizeof(float));
      }
      simt::bulk_commit();
      simt::bulk_wait_read<0>();
      simt::mbarrier_arrive(sm.dq_empty + half);
    }
  }
}

// kDqWriter, in a consumer: this warp's 16 rows x 64 columns of dQ (m64n64 fragment) into the
// half's staging rows once the writer has freed them, fenced for the bulk reduces, announced.
template <class T, int kD>
HETPLAN_DEVICE void ws_stage_dq(const HopperWsSmem<T, kD>& sm, const float (&dq)[32], int wg,
                                int wq, int round) {
  const int lane = simt::lane(), g = lane >> 2, q = lane & 3;
  simt::mbarrier_wait(sm.dq_empty + wg, (round & 1) ^ 1);  // round 0 passes at once
  float* rows = sm.dq + (wg * kHopperBwdQ + wq * 16 + g) * kHopperWsDqRowFloats + 2 * q;
  HETPLAN_UNROLL
  for (int j = 0; j < 8; ++j) {
    simt::sts_f32x2(rows + 8 * j, dq[4 * j], dq[4 * j + 1]);
    simt::sts_f32x2(rows + 8 * kHopperWsDqRowFloats + 8 * j, dq[4 * j + 2], dq[4 * j + 3]);
  }
  simt::fence_proxy_async();  // the rows reach the writer's bulk reduces (async proxy)
  simt::mbarrier_arrive(sm.dq_full + wg);
}

// One query tile's S^T = K Q^T and dP^T = V dO^T (64 keys x 64 queries per warpgroup; `qt` and
// `dot` the stage's Q and dO tiles, `stats` its lse then D), then P^T (zero where masked) rounded
// to T into `s` and dS^T = P^T (dP^T - D) into `dp`. `key_row` is the thread's first key, `q0`
// the tile's first query. Shared by the ws variants; the elementwise part
// (backward_probabilities) by every Hopper backward.
template <class T, int kD>
HETPLAN_DEVICE void ws_scores(const AttentionParams<T>& p, const HopperWsSmem<T, kD>& sm,
                              const unsigned char* qt, const unsigned char* dot, const float* stats,
                              int wg, int key_row, int q0, float (&s)[kHopperBwdQ / 2],
                              float (&dp)[kHopperBwdQ / 2]) {
  constexpr int kQ = kHopperBwdQ;
  const float* lse = stats;
  const float* dvec = stats + kQ;
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
  backward_probabilities<T, kQ>(p, lse, dvec, key_row, q0, s, dp);
}

template <class T, int kD, bool kBulkLoads = true, bool kDqWriter = false>
HETPLAN_DEVICE void attention_backward_hopper_ws_block(const AttentionParams<T>& p) {
  static_assert(kD == 128, "the warp-specialised backward is written for d = 128");
  static_assert(kBulkLoads || !kDqWriter, "the dQ writer goes with the bulk producer");
  constexpr int kProducers = kHopperWsThreads - kHopperWsConsumers;
  constexpr int kQ = kHopperBwdQ;
  using Smem = HopperWsSmem<T, kD>;
  const Smem sm(hopper_smem());
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
      simt::mbarrier_init(sm.full + s, 2 * kQ);  // the tile's rows (with their bytes)
      simt::mbarrier_init(sm.empty + s, kHopperWsConsumers);
    }
    if constexpr (kDqWriter) {
      for (int half = 0; half < 2; ++half) {
        simt::mbarrier_init(sm.dq_full + half, kHopperWsConsumers / 2);  // the half's consumer
        simt::mbarrier_init(sm.dq_empty + half, 32);                     // the writer's lanes
      }
    }
    simt::fence_proxy_async();  // the inits reach the bulk copies' complete_tx (async proxy)
  }
  simt::sync_threads();  // the only block-wide barrier
  if (wg == 2) {
    simt::setmaxnreg<kHopperWsProducerRegs, false>();
    if constexpr (kDqWriter) {
      if (warp == kHopperWsDqWriterWarp)
        ws_write_dq<T, kD>(p, sm, b, h, first, n_tiles);
      else
        ws_produce<T, kD, kBulkLoads, kProducers - 32>(p, sm, head, row_stats, first, n_tiles);
    } else {
      ws_produce<T, kD, kBulkLoads, kProducers>(p, sm, head, row_stats, first, n_tiles);
    }
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
    // dS^T alternates between two buffers: a consumer writes buffer (i - first) & 1 only after
    // the named barrier of tile i - 1, which the other consumer reaches after its dQ of tile
    // i - 2 (the last reader of that buffer) has retired.
    unsigned char* sds = sm.ds + ((i - first) & 1) * Smem::kDsBytes;
    const int q0 = i * kQ;

    float s[kQ / 2], dp[kQ / 2];
    ws_scores<T, kD>(p, sm, qt, dot, sm.stats + stage * 2 * kQ, wg, k0 + key_local, q0, s, dp);
    // Both as A fragments, dS^T also into shared memory for dQ.
    uint32_t pa[kQ / 16][4], sa[kQ / 16][4];
    issue_dv_dk<T, kD, kQ>(s, dp, pa, sa, sds, key_local, qt, dot, dv, dk);
    // The dQ products read dS^T next, both consumers' halves of it.
    simt::named_barrier_sync<kHopperWsDsBarrier>(kHopperWsConsumers);

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

    if constexpr (kDqWriter)
      ws_stage_dq(sm, dq, wg, wq, i - first);
    else
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
