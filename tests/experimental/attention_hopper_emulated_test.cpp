// The Hopper (wgmma) attention kernels' device code run under the CPU emulator, which models
// wgmma from the PTX ISA (descriptors, 128-byte swizzle, K-/MN-major operands, register A
// fragments, asynchronous completion), against the double-precision reference. Same inputs and
// bounds as attention_emulated_test.cpp; the backward runs from the Hopper forward's o and lse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>

#include "kernels/experimental/attention_hopper_backward_ws_drift_kernels.h"
#include "kernels/experimental/attention_hopper_backward_ws_kernels.h"
#include "kernels/experimental/attention_hopper_kernels.h"
#include "kernels/experimental/emulator/simt_sm90.h"
#include "kernels/experimental/simt_wgmma.h"
#include "kernels/experimental/wgmma_selftest.h"
#include "kernels/reference/attention_reference.h"
#include "tests/kernels/attention_emulated.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;

// kWarpgroups 1: the opt-in backward with one warpgroup per block (HETPLAN_ATTENTION_BWD=wg1).
template <class T, int kD, bool kBulkDq = false, int kWarpgroups = 2>
void check_hopper(int batch, int heads, int seq, bool causal, bool bshd, uint64_t schedule = 0,
                  bool eager = false) {
  testing::AttentionFamily<T> f;  // as kernels/experimental/sm90a/attention_hopper.cu launches
  f.tile = kHopperTile;
  f.threads = kHopperThreads;
  f.backward_tile = 64 * kWarpgroups;
  f.backward_threads = 128 * kWarpgroups;
  f.forward_smem = attention_forward_hopper_smem_bytes<T, kD>();
  f.backward_smem = attention_backward_hopper_smem_bytes<T, kD, kBulkDq, 64 * kWarpgroups>();
  f.forward = attention_forward_hopper_block<T, kD>;
  f.backward = attention_backward_hopper_block<T, kD, kBulkDq, kWarpgroups>;
  testing::check_attention_family<T, kD>(
      f, testing::AttentionCase{batch, heads, seq, causal, bshd, schedule, eager, 201});
}

// Partial tiles, the causal diagonal (both warpgroups' halves), several key tiles.
TEST(AttentionHopperEmulated, Bf16HeadDim64CausalPartialTile) {
  check_hopper<bf16, 64>(1, 2, 200, true, true);
}
TEST(AttentionHopperEmulated, Bf16HeadDim64FullBhsd) {
  check_hopper<bf16, 64>(2, 1, 130, false, false);
}
TEST(AttentionHopperEmulated, Bf16HeadDim128Causal) {
  check_hopper<bf16, 128>(1, 1, 256, true, true);
}
TEST(AttentionHopperEmulated, Fp16HeadDim128FullShortSeq) {
  check_hopper<fp16, 128>(1, 2, 37, false, true);
}
TEST(AttentionHopperEmulated, Bf16HeadDim128FullPartial) {
  check_hopper<bf16, 128>(1, 1, 300, false, true);
}
// Warps alone between barriers in shuffled order; copies landing late or at issue.
TEST(AttentionHopperEmulated, Bf16ShuffledSchedule) {
  check_hopper<bf16, 64>(1, 1, 320, true, true, 7);
}
TEST(AttentionHopperEmulated, Bf16ShuffledScheduleEagerCopies) {
  check_hopper<bf16, 128>(1, 1, 260, false, true, 8, true);
}
// Five key tiles: every forward K/V buffer refilled at least once, under both schedules.
TEST(AttentionHopperEmulated, Bf16FiveTilesShuffledEager) {
  check_hopper<bf16, 64>(1, 1, 520, false, true, 9, true);
  check_hopper<bf16, 64>(1, 1, 600, true, true, 10, false);
}

// The opt-in backward with one warpgroup per block (HETPLAN_ATTENTION_BWD=wg1): 64 keys per
// block, so twice the blocks, each adding dQ over its own keys (d = 128: two column halves in
// turn). Partial tiles, the causal diagonal in every block, fp16, BHSD, shuffled warps.
TEST(AttentionHopperEmulated, Bf16OneWarpgroupHeadDim64CausalPartial) {
  check_hopper<bf16, 64, false, 1>(1, 2, 200, true, true);
}
TEST(AttentionHopperEmulated, Fp16OneWarpgroupHeadDim64FullBhsdShuffled) {
  check_hopper<fp16, 64, false, 1>(2, 1, 130, false, false, 12);
}
TEST(AttentionHopperEmulated, Bf16OneWarpgroupHeadDim128CausalPartialShuffledEager) {
  check_hopper<bf16, 128, false, 1>(1, 1, 300, true, true, 13, true);
}
TEST(AttentionHopperEmulated, Fp16OneWarpgroupHeadDim128Full) {
  check_hopper<fp16, 128, false, 1>(1, 2, 160, false, true);
}
TEST(AttentionHopperEmulated, OneWarpgroupBackwardFitsThreeOrTwoBlocksPerSm) {
  // 58 KB (d = 64) and 106 KB (d = 128) per block, with the H100's 1 KB reserved per block,
  // in its 228 KB per SM: three and two blocks (kernels/experimental/sm90a/attention_hopper.cu's
  // bounds).
  EXPECT_EQ((attention_backward_hopper_smem_bytes<bf16, 64, false, 64>()), 59392u);
  EXPECT_EQ((attention_backward_hopper_smem_bytes<bf16, 128, false, 64>()), 108544u);
  EXPECT_LE(3 * (attention_backward_hopper_smem_bytes<bf16, 64, false, 64>() + 1024), 233472u);
  EXPECT_LE(2 * (attention_backward_hopper_smem_bytes<bf16, 128, false, 64>() + 1024), 233472u);
}

// The opt-in dQ by bulk reduce (HETPLAN_ATTENTION_DQ=bulk, d = 128): partial last query tile
// (rows past seq are not reduced), causal, several query tiles (the staging rows reused after
// the previous tile's wait_group.read), shuffled warps.
TEST(AttentionHopperEmulated, Bf16HeadDim128BulkDqCausalPartial) {
  check_hopper<bf16, 128, true>(1, 1, 300, true, true);
}
TEST(AttentionHopperEmulated, Fp16HeadDim128BulkDqFullBhsdShuffled) {
  check_hopper<fp16, 128, true>(1, 2, 200, false, false, 11);
}

// The opt-in warp-specialised backward (HETPLAN_ATTENTION_BWD=ws, d = 128): a producer
// warpgroup fills a ring of 2 stages with bulk copies behind full / empty mbarriers, the two
// consumer warpgroups meet at one named barrier per tile. Partial last tile (zero rows, arrivals
// without tx), causal (first tile per block varies), several rounds of the ring (both parities),
// BSHD / BHSD, fp16, warps shuffled (consumers drift apart between the named barriers).
template <class T, bool kBulkLoads = true, bool kDqWriter = false>
void check_hopper_ws(int batch, int heads, int seq, bool causal, bool bshd, uint64_t schedule = 0,
                     bool eager = false) {
  testing::AttentionFamily<T> f;  // as kernels/experimental/sm90a/attention_hopper.cu launches
  f.tile = kHopperTile;
  f.threads = kHopperThreads;
  f.backward_threads = kHopperWsThreads;
  f.forward_smem = attention_forward_hopper_smem_bytes<T, 128>();
  f.backward_smem = attention_backward_hopper_ws_smem_bytes<T, 128, kDqWriter>();
  f.forward = attention_forward_hopper_block<T, 128>;
  f.backward = attention_backward_hopper_ws_block<T, 128, kBulkLoads, kDqWriter>;
  testing::check_attention_family<T, 128>(
      f, testing::AttentionCase{batch, heads, seq, causal, bshd, schedule, eager, 201});
}
TEST(AttentionHopperEmulated, Bf16WarpSpecialisedCausalPartial) {
  check_hopper_ws<bf16>(1, 1, 300, true, true);
}
TEST(AttentionHopperEmulated, Bf16WarpSpecialisedFullShuffled) {
  check_hopper_ws<bf16>(1, 1, 260, false, true, 12);
}
TEST(AttentionHopperEmulated, Fp16WarpSpecialisedFullBhsdShuffled) {
  check_hopper_ws<fp16>(1, 2, 200, false, false, 13);
}
TEST(AttentionHopperEmulated, Fp16WarpSpecialisedCausalShortShuffledEager) {
  check_hopper_ws<fp16>(2, 1, 37, true, true, 14, true);
}
// The producer with cp.async (HETPLAN_ATTENTION_BWD=ws-cpasync): copies landing at its wait or
// at issue (eager), rows past the end zero-filled by the copies.
TEST(AttentionHopperEmulated, Bf16WarpSpecialisedCpAsyncCausalPartialShuffled) {
  check_hopper_ws<bf16, false>(1, 1, 300, true, true, 15);
}
TEST(AttentionHopperEmulated, Fp16WarpSpecialisedCpAsyncFullBhsdEager) {
  check_hopper_ws<fp16, false>(1, 2, 200, false, false, 0, true);
}
// The dQ writer (HETPLAN_ATTENTION_BWD=ws-dqw): consumers stage dQ behind "dq full" / "dq empty"
// mbarriers, a warp of the producer adds it with bulk reduces (none for rows past the end). Both
// parities of the dQ barriers (5 query tiles), partial last tile, causal (a block's first tile
// varies), shuffled warps (the writer and the consumers drift), eager copies.
TEST(AttentionHopperEmulated, Bf16WarpSpecialisedDqWriterCausalPartial) {
  check_hopper_ws<bf16, true, true>(1, 1, 300, true, true);
}
TEST(AttentionHopperEmulated, Bf16WarpSpecialisedDqWriterFullShuffled) {
  check_hopper_ws<bf16, true, true>(1, 1, 260, false, true, 16);
}
TEST(AttentionHopperEmulated, Fp16WarpSpecialisedDqWriterFullBhsdShuffled) {
  check_hopper_ws<fp16, true, true>(1, 2, 200, false, false, 17);
}
TEST(AttentionHopperEmulated, Fp16WarpSpecialisedDqWriterCausalShortShuffledEager) {
  check_hopper_ws<fp16, true, true>(2, 1, 37, true, true, 18, true);
}
TEST(AttentionHopperEmulated, Bf16WarpSpecialisedDqWriterCausalPartialShuffledEager) {
  check_hopper_ws<bf16, true, true>(1, 1, 300, true, true, 19, true);
}

// Consumers that drift apart (HETPLAN_ATTENTION_BWD=ws-drift, d = 64 and 128): dQ split by keys,
// each consumer's partial through its own dQ writer warp, no barrier between the consumers but
// the ring's mbarriers. Partial last tile, causal / full, both parities of the ring and the dQ
// buffers (5 query tiles), BSHD / BHSD, fp16 / bf16, shuffled schedules (the consumers up to the
// ring's depth apart) and eager copies.
template <class T, int kD>
void check_hopper_ws_drift(int batch, int heads, int seq, bool causal, bool bshd,
                           uint64_t schedule = 0, bool eager = false) {
  testing::AttentionFamily<T> f;  // as kernels/experimental/sm90a/attention_hopper.cu launches
  f.tile = kHopperTile;
  f.threads = kHopperThreads;
  f.backward_threads = kHopperWsThreads;
  f.forward_smem = attention_forward_hopper_smem_bytes<T, kD>();
  f.backward_smem = attention_backward_hopper_ws_drift_smem_bytes<T, kD>();
  f.forward = attention_forward_hopper_block<T, kD>;
  f.backward = attention_backward_hopper_ws_drift_block<T, kD>;
  testing::check_attention_family<T, kD>(
      f, testing::AttentionCase{batch, heads, seq, causal, bshd, schedule, eager, 201});
}
// The budget of docs/kernels.md ("Consumers that drift apart"), within the H100's opt-in limit
// of 232,448 bytes per block.
TEST(AttentionHopperEmulated, WsDriftSharedMemoryFitsTheOptInLimit) {
  EXPECT_EQ((attention_backward_hopper_ws_drift_smem_bytes<bf16, 128>()), 217152u);
  EXPECT_EQ((attention_backward_hopper_ws_drift_smem_bytes<fp16, 128>()), 217152u);
  EXPECT_EQ((attention_backward_hopper_ws_drift_smem_bytes<bf16, 64>()), 118848u);
  EXPECT_LE((attention_backward_hopper_ws_drift_smem_bytes<bf16, 128>()), 232448u);
}
TEST(AttentionHopperEmulated, Bf16WsDriftHeadDim128CausalPartial) {
  check_hopper_ws_drift<bf16, 128>(1, 1, 300, true, true);
}
TEST(AttentionHopperEmulated, Bf16WsDriftHeadDim128CausalPartialShuffledEager) {
  check_hopper_ws_drift<bf16, 128>(1, 1, 300, true, true, 20, true);
}
TEST(AttentionHopperEmulated, Bf16WsDriftHeadDim128FullShuffled) {
  check_hopper_ws_drift<bf16, 128>(1, 1, 260, false, true, 21);
}
TEST(AttentionHopperEmulated, Fp16WsDriftHeadDim128FullBhsdShuffled) {
  check_hopper_ws_drift<fp16, 128>(1, 2, 200, false, false, 22);
}
TEST(AttentionHopperEmulated, Fp16WsDriftHeadDim128CausalShortShuffledEager) {
  check_hopper_ws_drift<fp16, 128>(2, 1, 37, true, true, 23, true);
}
TEST(AttentionHopperEmulated, Bf16WsDriftHeadDim64CausalPartialShuffled) {
  check_hopper_ws_drift<bf16, 64>(1, 2, 300, true, true, 24);
}
TEST(AttentionHopperEmulated, Bf16WsDriftHeadDim64FullBhsdEager) {
  check_hopper_ws_drift<bf16, 64>(2, 1, 130, false, false, 0, true);
}
TEST(AttentionHopperEmulated, Fp16WsDriftHeadDim64CausalShuffledEager) {
  check_hopper_ws_drift<fp16, 64>(1, 1, 320, true, false, 25, true);
}

// The emulator's wgmma itself on the known-answer test of kernels/experimental/wgmma_selftest.h,
// every variant (the GPU test HopperKernelProperties.WgmmaOperandFormsGiveTheKnownProduct runs the
// same code on the hardware).
template <int kVariant>
void run_selftest(bool eager) {
  SCOPED_TRACE(::testing::Message() << "variant " << kVariant << (eager ? " eager" : ""));
  const std::vector<uint16_t> image = wgmma_selftest_image();
  std::vector<float> out(kWgmmaSelftestOutFloats, NAN);
  emu::GlobalScope scope;
  scope.add(image.data(), image.size());
  scope.add(out.data(), out.size());
  LaunchShape one;
  one.block = 128;
  one.smem = kWgmmaSelftestSmem;
  emulate(
      one, [&] { wgmma_selftest_block<kVariant>(image.data(), out.data()); }, 0, eager);
  const WgmmaSelftestReport r = wgmma_selftest_check(out);
  EXPECT_EQ(r.wrong[0] + r.wrong[1] + r.wrong[2] + r.image_wrong, 0) << r.detail;
}

TEST(WgmmaEmulated, OperandFormsGiveTheKnownProduct) {
  for (bool eager : {false, true}) {
    run_selftest<0>(eager);
    run_selftest<1>(eager);
    run_selftest<2>(eager);
    run_selftest<3>(eager);
  }
}

// One warpgroup fills two 64 x 16 K-major tiles with 0.5 through ordinary stores and multiplies
// them (D = 16 * 0.25 everywhere), with the steps the PTX ISA requires switched off one at a time.
struct WgmmaSteps {
  bool proxy_fence = true, wgmma_fence = true;
};
void small_wgmma(const WgmmaSteps& steps, bool& nan_before, bool& right_after) {
  LaunchShape one;
  one.block = 128;
  one.smem = 2 * 8192 + 1024;
  nan_before = right_after = true;
  emulate(one, [&] {
    unsigned char* smem = hopper_smem();
    for (int i = simt::thread_x(); i < 2 * 8192 / 2; i += 128)
      simt::sts16(smem + 2 * i, simt::from_f32<bf16>(0.5f).bits);
    if (steps.proxy_fence) simt::fence_proxy_async();
    simt::sync_threads();
    float d[32];
    if (steps.wgmma_fence) simt::wgmma_fence();
    simt::wgmma_ss<bf16, 64, 0, 0>(d, simt::wgmma_desc(smem, 16, 1024),
                                   simt::wgmma_desc(smem + 8192, 16, 1024), false);
    simt::wgmma_commit();
    nan_before = nan_before && std::isnan(d[0]);
    simt::wgmma_wait<0>();
    right_after = right_after && d[0] == 16 * 0.25f;
  });
}

// A missing wait shows: the accumulators read as NaN until wgmma_wait retires the group.
TEST(WgmmaEmulated, AccumulatorsAreUndefinedBeforeTheWait) {
  bool nan_before = false, right_after = false;
  small_wgmma({}, nan_before, right_after);
  EXPECT_TRUE(nan_before);
  EXPECT_TRUE(right_after);
}

// Ordinary stores reach the tensor cores only through fence.proxy.async (PTX ISA, "Async
// proxy"); without it the emulator refuses the read, where the GPU may read stale data.
TEST(WgmmaEmulated, GenericStoresNeedTheProxyFence) {
  bool nan_before = false, right_after = false;
  WgmmaSteps steps;
  steps.proxy_fence = false;
  EXPECT_THROW(
      {
        try {
          small_wgmma(steps, nan_before, right_after);
        } catch (const std::runtime_error& e) {
          EXPECT_NE(std::string(e.what()).find("fence.proxy.async"), std::string::npos) << e.what();
          throw;
        }
      },
      std::runtime_error);
}

// A wgmma needs a wgmma.fence since the thread last touched registers (its start, or a wait).
TEST(WgmmaEmulated, WgmmaNeedsItsFence) {
  bool nan_before = false, right_after = false;
  WgmmaSteps steps;
  steps.wgmma_fence = false;
  EXPECT_THROW(small_wgmma(steps, nan_before, right_after), std::runtime_error);
}

}  // namespace
}  // namespace hetplan::kernels
