// The Hopper (wgmma) attention kernels' device code run under the CPU emulator, which models
// wgmma from the PTX ISA (descriptors, 128-byte swizzle, K-/MN-major operands, register A
// fragments, asynchronous completion), against the double-precision reference. Same inputs and
// bounds as attention_emulated_test.cpp; the backward runs from the Hopper forward's o and lse.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "kernels/attention_hopper_kernels.h"
#include "kernels/emulator/simt_emulator.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/simt_wgmma.h"
#include "kernels/wgmma_selftest.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::expect_close;
using testing::poisoned;

template <class T, int kD>
void check_hopper(int batch, int heads, int seq, bool causal, bool bshd, uint64_t schedule = 0,
                  bool eager = false) {
  SCOPED_TRACE(::testing::Message() << "b " << batch << " h " << heads << " s " << seq << " d "
                                    << kD << (causal ? " causal" : " full")
                                    << (bshd ? " bshd" : " bhsd"));
  const int64_t rows = int64_t{batch} * heads * seq, n = rows * kD;
  const auto q = random_vector<T>(n, -2.0f, 2.0f, 201), k = random_vector<T>(n, -2.0f, 2.0f, 202),
             v = random_vector<T>(n, -1.0f, 1.0f, 203), dout = random_vector<T>(n, -1.0f, 1.0f, 204);
  auto o = poisoned<T>(n), dq = poisoned<T>(n), dk = poisoned<T>(n), dv = poisoned<T>(n);
  std::vector<float> lse(static_cast<size_t>(rows), NAN), dvec(static_cast<size_t>(rows), NAN),
      dq_accum(static_cast<size_t>(n), NAN);
  emu::GlobalScope scope;
  for (const auto* t : {&q, &k, &v, &dout}) scope.add(t->data(), t->size());
  for (auto* t : {&o, &dq, &dk, &dv}) scope.add(t->data(), t->size());
  for (auto* t : {&lse, &dvec, &dq_accum}) scope.add(t->data(), t->size());

  const float scale = 1.0f / std::sqrt(static_cast<float>(kD));
  AttentionParams<T> p = attention_params<T>(batch, heads, seq, kD, causal, scale, bshd);
  p.q = q.data();
  p.k = k.data();
  p.v = v.data();
  p.o = o.data();
  p.dout = dout.data();
  p.out = o.data();
  p.dq = dq.data();
  p.dk = dk.data();
  p.dv = dv.data();
  p.lse = lse.data();
  p.dvec = dvec.data();
  p.dq_accum = dq_accum.data();

  LaunchShape tiles;  // as kernels/sm90a/attention_hopper.cu launches
  tiles.grid_x = ceil_div(seq, kHopperTile);
  tiles.grid_y = heads;
  tiles.grid_z = batch;
  tiles.block = kHopperThreads;
  tiles.smem = attention_forward_hopper_smem_bytes<T, kD>();
  emulate(tiles, [&] { attention_forward_hopper_block<T, kD>(p); }, schedule, eager);

  const ref::AttentionDims dims{batch, heads, seq, kD, causal, scale, bshd};
  const auto qf = to_floats(q), kf = to_floats(k), vf = to_floats(v), df = to_floats(dout);
  std::vector<double> o_ref(static_cast<size_t>(n)), lse_ref(static_cast<size_t>(rows));
  ref::attention_forward(qf, kf, vf, dims, o_ref, lse_ref);
  const bool bf = std::is_same_v<T, bf16>;
  const Tolerance tol = bf ? Tolerance{1e-2, 8e-2} : Tolerance{2e-3, 2e-2};
  expect_close("o", o, o_ref, tol);
  expect_close("lse", lse, lse_ref, {1e-5, 1e-4});

  const LaunchShape pre = attention_rows_shape(rows, kD);
  emulate(pre, [&] { attention_preprocess_block<T, kD>(p); });
  tiles.smem = attention_backward_hopper_smem_bytes<T, kD>();
  emulate(tiles, [&] { attention_backward_hopper_block<T, kD>(p); }, schedule, eager);
  emulate(pre, [&] { attention_dq_convert_block<T, kD>(p); });

  std::vector<double> dq_ref(static_cast<size_t>(n)), dk_ref(static_cast<size_t>(n)),
      dv_ref(static_cast<size_t>(n));
  ref::attention_backward(qf, kf, vf, to_floats(o), df, lse, dims, dq_ref, dk_ref, dv_ref);
  expect_close("dq", dq, dq_ref, tol);
  expect_close("dk", dk, dk_ref, tol);
  expect_close("dv", dv, dv_ref, tol);
  for (const auto& [name, got, want] : {std::tuple{"o", &o, &o_ref}, {"dq", &dq, &dq_ref},
                                        {"dk", &dk, &dk_ref}, {"dv", &dv, &dv_ref}}) {
    const Comparison c = compare(name, to_floats(*got), *want, {1, 1});
    std::printf("    %s: rel_l2 %.2e elementwise %.2e\n", name, c.rel_l2, c.elementwise);
  }
}

// Partial tiles, the causal diagonal (both warpgroups' halves), several key tiles.
TEST(AttentionHopperEmulated, Bf16HeadDim64CausalPartialTile) { check_hopper<bf16, 64>(1, 2, 200, true, true); }
TEST(AttentionHopperEmulated, Bf16HeadDim64FullBhsd) { check_hopper<bf16, 64>(2, 1, 130, false, false); }
TEST(AttentionHopperEmulated, Bf16HeadDim128Causal) { check_hopper<bf16, 128>(1, 1, 256, true, true); }
TEST(AttentionHopperEmulated, Fp16HeadDim128FullShortSeq) { check_hopper<fp16, 128>(1, 2, 37, false, true); }
TEST(AttentionHopperEmulated, Bf16HeadDim128FullPartial) { check_hopper<bf16, 128>(1, 1, 300, false, true); }
// Warps alone between barriers in shuffled order; copies landing late or at issue.
TEST(AttentionHopperEmulated, Bf16ShuffledSchedule) { check_hopper<bf16, 64>(1, 1, 320, true, true, 7); }
TEST(AttentionHopperEmulated, Bf16ShuffledScheduleEagerCopies) {
  check_hopper<bf16, 128>(1, 1, 260, false, true, 8, true);
}
// Five key tiles: every forward K/V buffer refilled at least once, under both schedules.
TEST(AttentionHopperEmulated, Bf16FiveTilesShuffledEager) {
  check_hopper<bf16, 64>(1, 1, 520, false, true, 9, true);
  check_hopper<bf16, 64>(1, 1, 600, true, true, 10, false);
}

// The emulator's wgmma itself on the known-answer test of kernels/wgmma_selftest.h (the GPU
// test KernelProperties.WgmmaOperandFormsGiveTheKnownProduct runs the same code on the hardware).
TEST(WgmmaEmulated, OperandFormsGiveTheKnownProduct) {
  std::vector<float> out(static_cast<size_t>(kWgmmaSelftestForms) * 128 * kWgmmaSelftestFloats, NAN);
  LaunchShape one;
  one.block = 128;
  one.smem = kWgmmaSelftestSmem;
  emulate(one, [&] { wgmma_selftest_block(out.data()); });
  const int n_of_form[kWgmmaSelftestForms] = {64, 128, 64};
  for (int form = 0; form < kWgmmaSelftestForms; ++form)
    for (int t = 0; t < 128; ++t)
      for (int i = 0; i < n_of_form[form] / 2; ++i) {
        int m = 0, n = 0;
        wgmma_selftest_position(t, i, m, n);
        ASSERT_EQ(out[static_cast<size_t>((form * 128 + t) * kWgmmaSelftestFloats + i)],
                  wgmma_selftest_expected(m, n))
            << "form " << form << " thread " << t << " element " << i;
      }
}

// A missing wait shows: the accumulators read as NaN until wgmma_wait retires the group.
TEST(WgmmaEmulated, AccumulatorsAreUndefinedBeforeTheWait) {
  LaunchShape one;
  one.block = 128;
  one.smem = 2 * 8192 + 1024;
  bool nan_before = true, finite_after = true;
  emulate(one, [&] {
    unsigned char* smem = hopper_smem();
    for (int i = simt::thread_x(); i < 2 * 8192 / 2; i += 128) {
      const uint16_t bits = simt::from_f32<bf16>(0.5f).bits;
      std::memcpy(smem + 2 * i, &bits, 2);
    }
    simt::sync_threads();
    float d[32];
    simt::wgmma_ss<bf16, 64, 0, 0>(d, simt::wgmma_desc(smem, 16, 1024),
                                   simt::wgmma_desc(smem + 8192, 16, 1024), false);
    simt::wgmma_commit();
    nan_before = nan_before && std::isnan(d[0]);
    simt::wgmma_wait<0>();
    finite_after = finite_after && d[0] == 16 * 0.25f;
  });
  EXPECT_TRUE(nan_before);
  EXPECT_TRUE(finite_after);
}

}  // namespace
}  // namespace hetplan::kernels
