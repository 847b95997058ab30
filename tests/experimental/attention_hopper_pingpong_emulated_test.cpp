// The opt-in ping-pong forward (HETPLAN_ATTENTION_FWD=pingpong / pingpong-cpasync,
// kernels/experimental/attention_hopper_forward_pingpong_kernels.h) under the CPU emulator: O and
// lse against the double-precision reference, and bit for bit against the default wgmma forward
// (same products and softmax in the same order per row). Plus the emulator's bar.arrive, which the
// ping-pong turns use.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/experimental/attention_hopper_forward_pingpong_kernels.h"
#include "kernels/experimental/attention_hopper_kernels.h"
#include "kernels/experimental/emulator/simt_sm90.h"
#include "kernels/experimental/simt_bulk.h"
#include "kernels/reference/attention_reference.h"
#include "tests/kernels/attention_emulated.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;

struct ForwardOut {
  std::vector<float> o, lse;
};

// Runs `forward` with `threads` per block on the case's inputs (as check_attention_family makes
// them); returns O (widened) and lse.
template <class T, int kD>
ForwardOut run_forward(void (*forward)(const AttentionParams<T>&), int threads, size_t smem,
                       const testing::AttentionCase& c) {
  const int64_t rows = int64_t{c.batch} * c.heads * c.seq, n = rows * kD;
  const auto q = random_vector<T>(n, -2.0f, 2.0f, c.seed),
             k = random_vector<T>(n, -2.0f, 2.0f, c.seed + 1),
             v = random_vector<T>(n, -1.0f, 1.0f, c.seed + 2);
  auto o = testing::poisoned<T>(n);
  std::vector<float> lse(static_cast<size_t>(rows), NAN);
  emu::GlobalScope scope;
  for (const auto* t : {&q, &k, &v}) scope.add(t->data(), t->size());
  scope.add(o.data(), o.size());
  scope.add(lse.data(), lse.size());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  AttentionParams<T> p = attention_params<T>(c.batch, c.heads, c.seq, kD, c.causal, scale, c.bshd);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.out = o.data();
  p.lse = lse.data();
  LaunchShape tiles;
  tiles.grid_x = ceil_div(c.seq, kHopperTile);
  tiles.grid_y = c.heads;
  tiles.grid_z = c.batch;
  tiles.block = threads;
  tiles.smem = static_cast<int64_t>(smem);
  emulate(
      tiles, [&] { forward(p); }, c.schedule, c.eager);
  return {to_floats(o), lse};
}

// The ping-pong forward against the reference and against the default kernel's bits.
template <class T, int kD, bool kBulkLoads = true>
void check_pingpong(int batch, int heads, int seq, bool causal, bool bshd, uint64_t schedule = 0,
                    bool eager = false) {
  SCOPED_TRACE(::testing::Message()
               << "b " << batch << " h " << heads << " s " << seq << " d " << kD
               << (causal ? " causal" : " full") << (bshd ? " bshd" : " bhsd") << " seed "
               << schedule << (eager ? " eager" : "") << (kBulkLoads ? "" : " cp.async"));
  const testing::AttentionCase c{batch, heads, seq, causal, bshd, schedule, eager, 301};
  const ForwardOut got =
      run_forward<T, kD>(attention_forward_pingpong_block<T, kD, kBulkLoads>, kPingpongThreads,
                         attention_forward_pingpong_smem_bytes<T, kD>(), c);
  const ForwardOut base = run_forward<T, kD>(attention_forward_hopper_block<T, kD>, kHopperThreads,
                                             attention_forward_hopper_smem_bytes<T, kD>(), c);

  const int64_t rows = int64_t{batch} * heads * seq, n = rows * kD;
  const ref::AttentionDims dims{batch, heads, seq, kD, causal, 1.0f / std::sqrt(float{kD}), bshd};
  const auto qf = to_floats(random_vector<T>(n, -2.0f, 2.0f, c.seed));
  const auto kf = to_floats(random_vector<T>(n, -2.0f, 2.0f, c.seed + 1));
  const auto vf = to_floats(random_vector<T>(n, -1.0f, 1.0f, c.seed + 2));
  std::vector<double> o_ref(static_cast<size_t>(n)), lse_ref(static_cast<size_t>(rows));
  ref::attention_forward(qf, kf, vf, dims, o_ref, lse_ref);
  const Tolerance tol = std::is_same_v<T, bf16> ? testing::kAttentionBf16 : testing::kAttentionFp16;
  testing::expect_close("o", got.o, o_ref, tol);
  testing::expect_close("lse", got.lse, lse_ref, {1e-5, 1e-4});
  const Comparison cmp = compare("o", got.o, o_ref, {1, 1});
  std::printf("    o: rel_l2 %.2e elementwise %.2e\n", cmp.rel_l2, cmp.elementwise);

  // The same bits as the default forward (NaN-safe: compared as bytes).
  ASSERT_EQ(got.o.size(), base.o.size());
  int64_t differ = 0;
  for (size_t i = 0; i < got.o.size(); ++i)
    differ += std::memcmp(&got.o[i], &base.o[i], sizeof(float)) != 0;
  for (size_t i = 0; i < got.lse.size(); ++i)
    differ += std::memcmp(&got.lse[i], &base.lse[i], sizeof(float)) != 0;
  EXPECT_EQ(differ, 0) << "values of O and lse that differ from the default forward's";
}

// One key tile (the first and last turns only), a partial tile, the causal diagonal in both
// warpgroups' halves, several rounds of the 3-stage ring (both parities of every barrier), d 64
// and 128, BSHD / BHSD, fp16, shuffled warps (the consumers drift within their turns, the
// producer runs ahead), bulk copies or cp.async landing at their wait or at issue.
TEST(AttentionPingpongEmulated, Bf16HeadDim128CausalPartial) {
  check_pingpong<bf16, 128>(1, 1, 300, true, true);
}
TEST(AttentionPingpongEmulated, Bf16HeadDim128FullSevenTilesShuffled) {
  check_pingpong<bf16, 128>(1, 1, 840, false, true, 21);
}
TEST(AttentionPingpongEmulated, Fp16HeadDim128FullBhsdShuffledEager) {
  check_pingpong<fp16, 128>(1, 2, 200, false, false, 22, true);
}
TEST(AttentionPingpongEmulated, Fp16HeadDim128CausalShortTwoBatches) {
  check_pingpong<fp16, 128>(2, 1, 37, true, true, 23);
}
TEST(AttentionPingpongEmulated, Bf16HeadDim64CausalFiveTilesShuffledEager) {
  check_pingpong<bf16, 64>(1, 1, 600, true, true, 24, true);
}
TEST(AttentionPingpongEmulated, Fp16HeadDim64FullBhsd) {
  check_pingpong<fp16, 64>(2, 1, 130, false, false);
}
TEST(AttentionPingpongEmulated, Bf16HeadDim128CpAsyncCausalShuffled) {
  check_pingpong<bf16, 128, false>(1, 1, 520, true, true, 25);
}
TEST(AttentionPingpongEmulated, Fp16HeadDim128CpAsyncFullBhsdEager) {
  check_pingpong<fp16, 128, false>(1, 2, 450, false, false, 0, true);
}

// The turns: per block, the warps' wgmma issues (emu::set_wgmma_issue_hook) fall into runs of
// one warpgroup that alternate, warpgroup 0 first, kv_tiles + 1 runs each; in every run each
// warp of the warpgroup issues the turn's wgmmas (d / 16 for S_0, d / 16 + 8 for S_{j+1} and
// P_j V_j, 8 for the last P V) and no other warp issues in between. Returns "" or the first
// difference.
template <int kD>
std::string turn_violation(const std::vector<int>& warps, int kv_tiles) {
  std::vector<std::pair<int, std::vector<int>>> runs;  // warpgroup, issues per warp
  for (const int w : warps) {
    if (runs.empty() || runs.back().first != w / 4) runs.push_back({w / 4, std::vector<int>(4)});
    ++runs.back().second[static_cast<size_t>(w % 4)];
  }
  if (static_cast<int>(runs.size()) != 2 * (kv_tiles + 1))
    return std::to_string(runs.size()) + " runs of one warpgroup's issues, not " +
           std::to_string(2 * (kv_tiles + 1));
  for (size_t r = 0; r < runs.size(); ++r) {
    const int turn = static_cast<int>(r / 2);
    const int want = turn == 0 ? kD / 16 : turn == kv_tiles ? 8 : kD / 16 + 8;
    if (runs[r].first != static_cast<int>(r % 2))
      return "run " + std::to_string(r) + " is warpgroup " + std::to_string(runs[r].first);
    for (int w = 0; w < 4; ++w)
      if (runs[r].second[static_cast<size_t>(w)] != want)
        return "run " + std::to_string(r) + ": warp " + std::to_string(w) + " of warpgroup " +
               std::to_string(runs[r].first) + " issues " +
               std::to_string(runs[r].second[static_cast<size_t>(w)]) + " wgmmas, not " +
               std::to_string(want);
  }
  return "";
}

template <class T, int kD, bool kBulkLoads = true>
void check_turns(int seq, bool causal, uint64_t schedule) {
  SCOPED_TRACE(::testing::Message()
               << "s " << seq << (causal ? " causal" : " full") << " seed " << schedule);
  std::vector<std::vector<int>> per_block;  // blocks run one after another
  uint64_t serial = 0;
  emu::set_wgmma_issue_hook([&](int warp) {
    if (per_block.empty() || emu::block_serial() != serial) {
      per_block.emplace_back();
      serial = emu::block_serial();
    }
    per_block.back().push_back(warp);
  });
  const testing::AttentionCase c{1, 1, seq, causal, true, schedule, false, 401};
  run_forward<T, kD>(attention_forward_pingpong_block<T, kD, kBulkLoads>, kPingpongThreads,
                     attention_forward_pingpong_smem_bytes<T, kD>(), c);
  emu::set_wgmma_issue_hook({});
  const int n_tiles = static_cast<int>(ceil_div(seq, kHopperTile));
  ASSERT_EQ(static_cast<int>(per_block.size()), n_tiles);
  for (int bx = 0; bx < n_tiles; ++bx) {
    const int kv_tiles = causal ? n_tiles - bx : n_tiles;  // heaviest query tiles first
    EXPECT_EQ(turn_violation<kD>(per_block[static_cast<size_t>(bx)], kv_tiles), "")
        << "block " << bx;
  }
}

TEST(AttentionPingpongEmulated, WarpgroupsTakeTurnsAtTheTensorCores) {
  check_turns<bf16, 64>(520, false, 0);
  check_turns<bf16, 64>(520, true, 31);
  check_turns<fp16, 128, false>(300, false, 32);
}

// ---- bar.arrive in the emulator ----

std::string run_block(int threads, const std::function<void()>& body, uint64_t seed = 0) {
  try {
    emu::LaunchOptions o;
    o.schedule_seed = seed;
    emu::launch({1, 1, 1}, {static_cast<unsigned>(threads), 1, 1}, 256, body, o);
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// Warp 1 writes, then bar.arrive; warp 0 bar.syncs and reads: it sees the value, in index order
// and shuffled; the arriving warp does not wait (it runs on past the barrier and finishes).
TEST(BulkEmulated, NamedBarrierArriveReleasesTheSyncingWarps) {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{5}, uint64_t{6}}) {
    std::vector<float> out(32, -1.0f);
    emu::GlobalScope scope;
    scope.add(out.data(), out.size());
    const std::string error = run_block(
        64,
        [&] {
          float* buf = reinterpret_cast<float*>(simt::dynamic_smem());
          const int lane = simt::lane();
          if (simt::warp() == 1) {
            buf[lane] = static_cast<float>(2 * lane);
            simt::named_barrier_arrive(4, 64);
          } else {
            simt::named_barrier_sync(4, 64);
            out[static_cast<size_t>(lane)] = buf[lane];
          }
        },
        seed);
    EXPECT_EQ(error, "");
    for (int t = 0; t < 32; ++t) EXPECT_EQ(out[static_cast<size_t>(t)], 2.0f * t) << t;
  }
}

// Work the arriving warp does after its bar.arrive (here a store it should have made before)
// comes after the released warp's reads, in both schedules: a release made too early shows.
TEST(BulkEmulated, NamedBarrierArriveLetsTheOtherWarpsRunFirst) {
  for (const uint64_t seed : {uint64_t{0}, uint64_t{7}}) {
    std::vector<float> out(32, -1.0f);
    emu::GlobalScope scope;
    scope.add(out.data(), out.size());
    const std::string error = run_block(
        64,
        [&] {
          float* buf = reinterpret_cast<float*>(simt::dynamic_smem());
          const int lane = simt::lane();
          if (simt::warp() == 1) {
            buf[lane] = 0.0f;
            simt::named_barrier_arrive(4, 64);
            buf[lane] = 1.0f;  // too late for warp 0
          } else {
            simt::named_barrier_sync(4, 64);
            out[static_cast<size_t>(lane)] = buf[lane];
          }
        },
        seed);
    EXPECT_EQ(error, "");
    for (int t = 0; t < 32; ++t) EXPECT_EQ(out[static_cast<size_t>(t)], 0.0f) << t;
  }
}

// Arrivals that no bar.sync consumes before the block ends are an error.
TEST(BulkEmulated, NamedBarrierArrivalLeftOverAtTheEndThrows) {
  const std::string error = run_block(64, [] {
    if (simt::warp() == 1) simt::named_barrier_arrive(5, 64);
  });
  EXPECT_NE(error.find("named barrier 5: the block ends with 32 of 64 arrivals"), std::string::npos)
      << error;
}

// bar.arrive with a count below the threads taking part completes rounds of the arriving warp
// alone, which the round check reports.
TEST(BulkEmulated, NamedBarrierArriveCountBelowTheParticipantsThrows) {
  const std::string error = run_block(64, [] {
    if (simt::warp() == 1) {
      simt::named_barrier_arrive(6, 32);
    } else {
      simt::named_barrier_sync(6, 32);
    }
  });
  EXPECT_NE(error.find("does not match the threads that take part"), std::string::npos) << error;
}

}  // namespace
}  // namespace hetplan::kernels
