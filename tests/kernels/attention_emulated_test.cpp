// The attention kernels' device code (tensor-core fragments, swizzled tiles, cp.async pipeline,
// online softmax, causal and tail masking) run under the CPU emulator against the double
// precision reference; also the reference's own gradients against finite differences.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/attention_backward_kernels.h"
#include "kernels/attention_kernels.h"
#include "kernels/reference/attention_reference.h"
#include "tests/kernels/attention_emulated.h"

namespace hetplan::kernels {
namespace {

using testing::AttentionCase;

template <class T, int kD>
void check_attention(int batch, int heads, int seq, bool causal, bool bshd, uint64_t schedule = 0,
                     bool eager = false) {
  testing::AttentionFamily<T> f;  // as kernels/attention.cu launches
  f.tile = kAttnTile;
  f.threads = kAttnThreads;
  f.forward_smem = attention_forward_smem_bytes<T, kD>();
  f.backward_smem = attention_backward_smem_bytes<T, kD>();
  f.forward = attention_forward_block<T, kD>;
  f.backward = attention_backward_block<T, kD>;
  testing::check_attention_family<T, kD>(
      f, AttentionCase{batch, heads, seq, causal, bshd, schedule, eager, 101});
}

// Two query tiles, a partial last tile, causal: the diagonal tile, the tail mask, the pipeline.
TEST(AttentionEmulated, Bf16HeadDim64CausalPartialTile) {
  check_attention<bf16, 64>(1, 2, 100, true, true);
}
TEST(AttentionEmulated, Bf16HeadDim64FullBhsd) {
  check_attention<bf16, 64>(2, 1, 130, false, false);
}
TEST(AttentionEmulated, Bf16HeadDim128Causal) { check_attention<bf16, 128>(1, 1, 128, true, true); }
TEST(AttentionEmulated, Fp16HeadDim128FullShortSeq) {
  check_attention<fp16, 128>(1, 2, 37, false, true);
}
// Warps run alone between barriers in shuffled order, copies landing late (missing waits) or
// early (buffers refilled under a reader): a missing barrier or wait shows as wrong results.
TEST(AttentionEmulated, Bf16ShuffledSchedule) {
  check_attention<bf16, 64>(1, 1, 192, true, true, 7);
}
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
    std::vector<double> o(static_cast<size_t>(n)),
        lse(static_cast<size_t>(a.batch * a.heads * a.seq));
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
