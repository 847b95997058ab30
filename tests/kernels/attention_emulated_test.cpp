// The attention kernels' device code (tensor-core fragments, swizzled tiles, cp.async pipeline,
// online softmax, causal and tail masking) run under the CPU emulator against the double
// precision reference; also the reference's own gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/attention_backward_kernels.h"
#include "kernels/attention_kernels.h"
#include "kernels/reference/attention_reference.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::expect_close;
using testing::poisoned;

// Bounds for bf16 operands (METHOD.md: 1e-3..1e-2); measured under emulation, which rounds P and
// dS to bf16 exactly as the kernel does: forward ~3e-3, backward ~5e-3 (see the test output).
constexpr Tolerance kForwardBf16{1e-2, 8e-2};
constexpr Tolerance kBackwardBf16{1e-2, 8e-2};
constexpr Tolerance kForwardFp16{2e-3, 2e-2};
constexpr Tolerance kBackwardFp16{2e-3, 2e-2};

template <class T, int kD>
void check_attention(int batch, int heads, int seq, bool causal, bool bshd, uint64_t schedule = 0,
                     bool eager = false) {
  SCOPED_TRACE(::testing::Message() << "b " << batch << " h " << heads << " s " << seq << " d "
                                    << kD << (causal ? " causal" : " full")
                                    << (bshd ? " bshd" : " bhsd"));
  const int64_t rows = int64_t{batch} * heads * seq, n = rows * kD;
  const auto q = random_vector<T>(n, -2.0f, 2.0f, 101), k = random_vector<T>(n, -2.0f, 2.0f, 102),
             v = random_vector<T>(n, -1.0f, 1.0f, 103), dout = random_vector<T>(n, -1.0f, 1.0f, 104);
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

  LaunchShape tiles;
  tiles.grid_x = ceil_div(seq, kAttnTile);
  tiles.grid_y = heads;
  tiles.grid_z = batch;
  tiles.block = kAttnThreads;
  tiles.smem = attention_forward_smem_bytes<T, kD>();
  emulate(tiles, [&] { attention_forward_block<T, kD>(p); }, schedule, eager);

  const ref::AttentionDims dims{batch, heads, seq, kD, causal, scale, bshd};
  const auto qf = to_floats(q), kf = to_floats(k), vf = to_floats(v), df = to_floats(dout);
  std::vector<double> o_ref(static_cast<size_t>(n)), lse_ref(static_cast<size_t>(rows));
  ref::attention_forward(qf, kf, vf, dims, o_ref, lse_ref);
  const bool bf = std::is_same_v<T, bf16>;
  expect_close("o", o, o_ref, bf ? kForwardBf16 : kForwardFp16);
  expect_close("lse", lse, lse_ref, {1e-5, 1e-4});

  const LaunchShape pre = attention_rows_shape(rows, kD);
  emulate(pre, [&] { attention_preprocess_block<T, kD>(p); });
  tiles.smem = attention_backward_smem_bytes<T, kD>();
  emulate(tiles, [&] { attention_backward_block<T, kD>(p); }, schedule, eager);
  emulate(pre, [&] { attention_dq_convert_block<T, kD>(p); });

  std::vector<double> dq_ref(static_cast<size_t>(n)), dk_ref(static_cast<size_t>(n)),
      dv_ref(static_cast<size_t>(n));
  ref::attention_backward(qf, kf, vf, to_floats(o), df, lse, dims, dq_ref, dk_ref, dv_ref);
  const Tolerance tb = bf ? kBackwardBf16 : kBackwardFp16;
  expect_close("dq", dq, dq_ref, tb);
  expect_close("dk", dk, dk_ref, tb);
  expect_close("dv", dv, dv_ref, tb);
  // Print the errors: they set the bounds above and the GPU tests'.
  for (const auto& [name, got, want] : {std::tuple{"o", &o, &o_ref}, {"dq", &dq, &dq_ref},
                                        {"dk", &dk, &dk_ref}, {"dv", &dv, &dv_ref}}) {
    const Comparison c = compare(name, to_floats(*got), *want, {1, 1});
    std::printf("    %s: rel_l2 %.2e elementwise %.2e\n", name, c.rel_l2, c.elementwise);
  }
}

// Two query tiles, a partial last tile, causal: the diagonal tile, the tail mask, the pipeline.
TEST(AttentionEmulated, Bf16HeadDim64CausalPartialTile) { check_attention<bf16, 64>(1, 2, 100, true, true); }
TEST(AttentionEmulated, Bf16HeadDim64FullBhsd) { check_attention<bf16, 64>(2, 1, 130, false, false); }
TEST(AttentionEmulated, Bf16HeadDim128Causal) { check_attention<bf16, 128>(1, 1, 128, true, true); }
TEST(AttentionEmulated, Fp16HeadDim128FullShortSeq) { check_attention<fp16, 128>(1, 2, 37, false, true); }
// Warps run alone between barriers in shuffled order, copies landing late (missing waits) or
// early (buffers refilled under a reader): a missing barrier or wait shows as wrong results.
TEST(AttentionEmulated, Bf16ShuffledSchedule) { check_attention<bf16, 64>(1, 1, 192, true, true, 7); }
TEST(AttentionEmulated, Bf16ShuffledScheduleEagerCopies) {
  check_attention<bf16, 64>(1, 1, 192, false, true, 8, true);
}

// The reference's backward against finite differences of its forward (tiny, odd head_dim).
TEST(AttentionReference, GradientsMatchFiniteDifferences) {
  for (bool causal : {true, false}) {
    const ref::AttentionDims a{1, 2, 5, 3, causal, 0.7, true};
    const int64_t n = a.batch * a.heads * a.seq * a.head_dim;
    std::vector<float> q = random_vector<float>(n, -1, 1, 1), k = random_vector<float>(n, -1, 1, 2),
                       v = random_vector<float>(n, -1, 1, 3), w = random_vector<float>(n, -1, 1, 4);
    std::vector<double> o(static_cast<size_t>(n)), lse(static_cast<size_t>(a.batch * a.heads * a.seq));
    auto loss = [&]() {
      ref::attention_forward(q, k, v, a, o, lse);
      double s = 0;
      for (size_t i = 0; i < o.size(); ++i) s += o[i] * w[i];
      return s;
    };
    loss();
    const std::vector<float> of(o.begin(), o.end()), lf(lse.begin(), lse.end());
    std::vector<double> dq(o.size()), dk(o.size()), dv(o.size());
    ref::attention_backward(q, k, v, of, w, lf, a, dq, dk, dv);
    for (auto [x, grad] : {std::pair{&q, &dq}, {&k, &dk}, {&v, &dv}}) {
      for (size_t i = 0; i < x->size(); ++i) {
        const float keep = (*x)[i], h = 1e-3f;
        (*x)[i] = keep + h;
        const double up = loss();
        (*x)[i] = keep - h;
        const double down = loss();
        (*x)[i] = keep;
        EXPECT_NEAR((*grad)[i], (up - down) / (2 * h), 2e-4) << i << (causal ? " causal" : "");
      }
    }
  }
}

}  // namespace
}  // namespace hetplan::kernels
