// Properties of the kernels beyond matching their references: reproducibility of the dropout
// mask and of the attention backward's dK and dV, layout independence of attention, agreement of
// the GPU backward with a fully CPU-computed one, and refusal of unsupported sizes.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include "kernels/attention.h"
#include "kernels/bandwidth.h"
#include "kernels/device_buffer.h"
#include "kernels/elementwise.h"
#include "kernels/norms.h"
#include "kernels/reference/attention_reference.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/numeric.h"

namespace hetplan::kernels {
namespace {

bool gpu_visible() {
  int n = 0;
  return cudaGetDeviceCount(&n) == cudaSuccess && n > 0;
}

#define REQUIRE_GPU() \
  if (!gpu_visible()) GTEST_SKIP() << "no GPU visible"

template <class T>
DeviceBuffer<T> random(int64_t n, float lo, float hi, uint64_t seed) {
  DeviceBuffer<T> b(static_cast<size_t>(n));
  fill_uniform(b.get(), n, lo, hi, seed, nullptr);
  return b;
}

template <class T>
bool same_bits(const DeviceBuffer<T>& a, const DeviceBuffer<T>& b) {
  const auto x = a.download(), y = b.download();
  return std::memcmp(x.data(), y.data(), x.size() * sizeof(T)) == 0;
}

TEST(KernelProperties, DropoutMaskIsAFunctionOfSeedOffsetAndIndex) {
  REQUIRE_GPU();
  const int64_t rows = 64, cols = 1000;
  auto x = random<bf16>(rows * cols, -1, 1, 1), res = random<bf16>(rows * cols, -1, 1, 2);
  DeviceBuffer<bf16> y1(rows * cols), y2(rows * cols), y3(rows * cols);
  bias_dropout_residual_forward<bf16>(x.get(), nullptr, res.get(), y1.get(), rows, cols,
                                      {0.2f, 7, 0}, nullptr);
  bias_dropout_residual_forward<bf16>(x.get(), nullptr, res.get(), y2.get(), rows, cols,
                                      {0.2f, 7, 0}, nullptr);
  bias_dropout_residual_forward<bf16>(x.get(), nullptr, res.get(), y3.get(), rows, cols,
                                      {0.2f, 7, 16000}, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(same_bits(y1, y2));
  EXPECT_FALSE(same_bits(y1, y3));  // another offset, another mask
}

TEST(KernelProperties, AttentionBackwardDkDvAreReproducibleDqNearly) {
  REQUIRE_GPU();
  AttentionShape s;
  s.batch = 2;
  s.heads = 3;
  s.seq = 300;
  s.head_dim = 128;
  if (!attention_support(DType::kBF16, 128).empty())
    GTEST_SKIP() << attention_support(DType::kBF16, 128);
  const int64_t n = int64_t{s.batch} * s.heads * s.seq * s.head_dim;
  auto q = random<bf16>(n, -2, 2, 1), k = random<bf16>(n, -2, 2, 2), v = random<bf16>(n, -1, 1, 3),
       dout = random<bf16>(n, -1, 1, 4);
  DeviceBuffer<bf16> o(n), dq1(n), dk1(n), dv1(n), dq2(n), dk2(n), dv2(n);
  DeviceBuffer<float> lse(n / s.head_dim);
  DeviceBuffer<unsigned char> ws(attention_backward_workspace_bytes(s));
  attention_forward(q.get(), k.get(), v.get(), o.get(), lse.get(), s, nullptr);
  attention_backward(q.get(), k.get(), v.get(), o.get(), dout.get(), lse.get(), dq1.get(),
                     dk1.get(), dv1.get(), s, ws.get(), nullptr);
  attention_backward(q.get(), k.get(), v.get(), o.get(), dout.get(), lse.get(), dq2.get(),
                     dk2.get(), dv2.get(), s, ws.get(), nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  EXPECT_TRUE(same_bits(dk1, dk2));
  EXPECT_TRUE(same_bits(dv1, dv2));
  const auto a = to_floats(dq1.download()), b = to_floats(dq2.download());
  const Comparison c =
      compare("dq run 2 vs run 1", a, std::vector<double>(b.begin(), b.end()), {1e-3, 2e-2});
  EXPECT_TRUE(c.passed) << c.summary();
}

// BHSD and BSHD hold the same numbers in different places: the results must match exactly.
TEST(KernelProperties, AttentionLayoutsAgree) {
  REQUIRE_GPU();
  if (!attention_support(DType::kBF16, 64).empty())
    GTEST_SKIP() << attention_support(DType::kBF16, 64);
  AttentionShape s;
  s.batch = 2;
  s.heads = 2;
  s.seq = 150;
  s.head_dim = 64;
  s.causal = true;
  const int64_t n = int64_t{s.batch} * s.heads * s.seq * s.head_dim;
  const auto qh = random<bf16>(n, -2, 2, 5).download(), kh = random<bf16>(n, -2, 2, 6).download(),
             vh = random<bf16>(n, -1, 1, 7).download();
  auto to_bhsd = [&](const std::vector<bf16>& x) {
    std::vector<bf16> y(x.size());
    for (int b = 0; b < s.batch; ++b)
      for (int t = 0; t < s.seq; ++t)
        for (int h = 0; h < s.heads; ++h)
          for (int d = 0; d < s.head_dim; ++d)
            y[((size_t(b) * s.heads + h) * s.seq + t) * s.head_dim + d] =
                x[((size_t(b) * s.seq + t) * s.heads + h) * s.head_dim + d];
    return y;
  };
  DeviceBuffer<bf16> q1(n), k1(n), v1(n), q2(n), k2(n), v2(n), o1(n), o2(n);
  q1.upload(qh), k1.upload(kh), v1.upload(vh);
  q2.upload(to_bhsd(qh)), k2.upload(to_bhsd(kh)), v2.upload(to_bhsd(vh));
  DeviceBuffer<float> lse1(n / s.head_dim), lse2(n / s.head_dim);
  attention_forward(q1.get(), k1.get(), v1.get(), o1.get(), lse1.get(), s, nullptr);
  s.layout = AttentionLayout::kBHSD;
  attention_forward(q2.get(), k2.get(), v2.get(), o2.get(), lse2.get(), s, nullptr);
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  const auto a = o1.download(), b = o2.download();
  const auto bt = to_bhsd(a);
  EXPECT_EQ(std::memcmp(bt.data(), b.data(), b.size() * 2), 0);
  EXPECT_TRUE(same_bits(lse1, lse2));
}

// The GPU backward from the GPU forward against a CPU forward + backward from the same inputs.
TEST(KernelProperties, AttentionEndToEndAgainstCpu) {
  REQUIRE_GPU();
  for (auto [d, causal] : {std::pair{64, true}, std::pair{128, false}}) {
    if (!attention_support(DType::kBF16, d).empty()) continue;
    AttentionShape s;
    s.batch = 1;
    s.heads = 2;
    s.seq = 193;
    s.head_dim = d;
    s.causal = causal;
    const int64_t n = int64_t{s.batch} * s.heads * s.seq * s.head_dim, rows = n / d;
    auto q = random<bf16>(n, -2, 2, 8), k = random<bf16>(n, -2, 2, 9),
         v = random<bf16>(n, -1, 1, 10), dout = random<bf16>(n, -1, 1, 11);
    DeviceBuffer<bf16> o(n), dq(n), dk(n), dv(n);
    DeviceBuffer<float> lse(rows);
    DeviceBuffer<unsigned char> ws(attention_backward_workspace_bytes(s));
    attention_forward(q.get(), k.get(), v.get(), o.get(), lse.get(), s, nullptr);
    attention_backward(q.get(), k.get(), v.get(), o.get(), dout.get(), lse.get(), dq.get(),
                       dk.get(), dv.get(), s, ws.get(), nullptr);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    const ref::AttentionDims a{s.batch, s.heads, s.seq, d, causal, s.softmax_scale(), true};
    const auto qf = to_floats(q.download()), kf = to_floats(k.download()),
               vf = to_floats(v.download()), df = to_floats(dout.download());
    std::vector<double> o_ref(n), lse_ref(rows), dq_ref(n), dk_ref(n), dv_ref(n);
    ref::attention_forward(qf, kf, vf, a, o_ref, lse_ref);
    const std::vector<float> of(o_ref.begin(), o_ref.end()), lf(lse_ref.begin(), lse_ref.end());
    ref::attention_backward(qf, kf, vf, of, df, lf, a, dq_ref, dk_ref, dv_ref);
    for (const auto& [name, got, want] : {std::tuple{"o", &o, &o_ref},
                                          {"dq", &dq, &dq_ref},
                                          {"dk", &dk, &dk_ref},
                                          {"dv", &dv, &dv_ref}}) {
      const Comparison c = compare(name, to_floats(got->download()), *want, {1e-2, 8e-2});
      EXPECT_TRUE(c.passed) << "d " << d << ": " << c.summary();
    }
  }
}

TEST(KernelProperties, UnsupportedSizesAreRefused) {
  REQUIRE_GPU();
  DeviceBuffer<bf16> x(70000), y(70000);
  DeviceBuffer<float> stats(2);
  EXPECT_THROW(layernorm_forward<bf16>(x.get(), x.get(), x.get(), y.get(), stats.get(), stats.get(),
                                       1, 65536, 1e-5f, nullptr),
               std::invalid_argument);
  AttentionShape s;
  s.head_dim = 96;
  EXPECT_THROW(attention_forward<bf16>(x.get(), x.get(), x.get(), y.get(), stats.get(), s, nullptr),
               std::invalid_argument);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // refused before any launch
}

}  // namespace
}  // namespace hetplan::kernels
