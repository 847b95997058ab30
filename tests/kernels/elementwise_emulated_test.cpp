// Element-wise kernels, the bandwidth probes and the random fill, run under the CPU emulator
// with the launchers' shapes against the CPU references.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/bandwidth_kernels.h"
#include "kernels/elementwise_kernels.h"
#include "kernels/reference/elementwise_reference.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::expect_close;
using testing::poisoned;

constexpr int kSms = 2;  // a small "device": grid-stride loops really loop

template <class T>
void check_gelu(int64_t n, bool misalign) {
  SCOPED_TRACE(::testing::Message() << "n " << n << (misalign ? " misaligned" : ""));
  // A misaligned view (one element in) forces the scalar path.
  std::vector<T> xs = random_vector<T>(n + 1, -4.0f, 4.0f, 21),
                 dys = random_vector<T>(n + 1, -1, 1, 22);
  std::vector<T> ys = poisoned<T>(n + 1), dxs = poisoned<T>(n + 1);
  const int o = misalign ? 1 : 0;
  emu::GlobalScope scope;
  scope.add(xs.data(), xs.size());
  scope.add(dys.data(), dys.size());
  scope.add(ys.data(), ys.size());
  scope.add(dxs.data(), dxs.size());
  const GeluArgs<T> f{xs.data() + o, nullptr, ys.data() + o, n};
  const GeluArgs<T> b{xs.data() + o, dys.data() + o, dxs.data() + o, n};
  const int vec = row_vector_width<T>(0, {f.x, f.out, b.dy, b.out});
  EXPECT_EQ(vec, misalign ? 1 : vec16<T>());
  emulate(flat_shape(n, vec, kSms), [&] {
    if (vec == 1) {
      gelu_block<T, 1, false>(f);
      gelu_block<T, 1, true>(b);
    } else {
      gelu_block<T, vec16<T>(), false>(f);
      gelu_block<T, vec16<T>(), true>(b);
    }
  });
  std::vector<double> y_ref(static_cast<size_t>(n)), dx_ref(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const double x = to_float(xs[static_cast<size_t>(i + o)]);
    y_ref[static_cast<size_t>(i)] = ref::gelu(x);
    dx_ref[static_cast<size_t>(i)] =
        to_float(dys[static_cast<size_t>(i + o)]) * ref::gelu_derivative(x);
  }
  expect_close("y", std::vector<T>(ys.begin() + o, ys.begin() + o + n), y_ref);
  expect_close("dx", std::vector<T>(dxs.begin() + o, dxs.begin() + o + n), dx_ref);
  if (o) {
    EXPECT_TRUE(std::isnan(to_float(ys[0])));  // nothing written before the view
  }
}

TEST(ElementwiseEmulated, GeluBf16Vectors) { check_gelu<bf16>(8 * 600, false); }
TEST(ElementwiseEmulated, GeluFp32VectorsWithTail) { check_gelu<float>(4 * 700 + 3, false); }
TEST(ElementwiseEmulated, GeluBf16ScalarPath) { check_gelu<bf16>(1001, true); }

template <class T>
void check_swiglu(int64_t rows, int cols) {
  SCOPED_TRACE(::testing::Message() << rows << "x" << cols);
  const auto in = random_vector<T>(rows * 2 * cols, -5.0f, 5.0f, 31);
  const auto dout = random_vector<T>(rows * cols, -1.0f, 1.0f, 32);
  auto out = poisoned<T>(rows * cols), din = poisoned<T>(rows * 2 * cols);
  emu::GlobalScope scope;
  scope.add(in.data(), in.size());
  scope.add(dout.data(), dout.size());
  scope.add(out.data(), out.size());
  scope.add(din.data(), din.size());
  const SwigluArgs<T> f{in.data(), nullptr, out.data(), rows, cols};
  const SwigluArgs<T> b{in.data(), dout.data(), din.data(), rows, cols};
  const int vec = row_vector_width<T>(cols, {in.data(), out.data(), din.data()});
  emulate(row_loop_shape(rows, cols, vec, kSms), [&] {
    if (vec == 1) {
      swiglu_block<T, 1, false>(f);
      swiglu_block<T, 1, true>(b);
    } else {
      swiglu_block<T, vec16<T>(), false>(f);
      swiglu_block<T, vec16<T>(), true>(b);
    }
  });
  std::vector<double> out_ref(out.size()), din_ref(din.size());
  ref::swiglu_forward(to_floats(in), rows, cols, out_ref);
  ref::swiglu_backward(to_floats(in), to_floats(dout), rows, cols, din_ref);
  expect_close("out", out, out_ref);
  expect_close("din", din, din_ref);
}

TEST(ElementwiseEmulated, SwigluBf16ManyRowsPerBlock) { check_swiglu<bf16>(70, 48); }
TEST(ElementwiseEmulated, SwigluFp32OddCols) { check_swiglu<float>(5, 37); }
// fp32 backward, two vectors per thread and step: 300 vectors per row over 256 threads, so the
// first 44 threads take a second vector and the rest do not.
TEST(ElementwiseEmulated, SwigluFp32TwoVectorsPerStep) { check_swiglu<float>(3, 1200); }

template <class T>
void check_bias_dropout(int64_t rows, int cols, float p, bool with_bias) {
  SCOPED_TRACE(::testing::Message() << rows << "x" << cols << " p " << p);
  const auto x = random_vector<T>(rows * cols, -2.0f, 2.0f, 41);
  const auto bias = random_vector<T>(cols, -1.0f, 1.0f, 42);
  const auto res = random_vector<T>(rows * cols, -3.0f, 3.0f, 43);
  const auto dy = random_vector<T>(rows * cols, -1.0f, 1.0f, 44);
  auto y = poisoned<T>(rows * cols), dx = poisoned<T>(rows * cols);
  emu::GlobalScope scope;
  for (const auto* v : {&x, &bias, &res, &dy}) scope.add(v->data(), v->size());
  scope.add(y.data(), y.size());
  scope.add(dx.data(), dx.size());
  const uint64_t seed = 0x1234abcd5678ull, offset = 1000;
  const DropoutMask mask{seed, offset, dropout_threshold(p), p > 0 ? 1.0f / (1.0f - p) : 1.0f};
  const BiasDropoutArgs<T> f{
      x.data(), with_bias ? bias.data() : nullptr, res.data(), y.data(), rows, cols, mask};
  const DropoutBackwardArgs<T> b{dy.data(), dx.data(), rows * cols, mask};
  const int vec = row_vector_width<T>(cols, {x.data(), res.data(), y.data()});
  emulate(row_loop_shape(rows, cols, vec, kSms), [&] {
    if (vec == 1)
      bias_dropout_residual_block<T, 1>(f);
    else
      bias_dropout_residual_block<T, vec16<T>()>(f);
  });
  emulate(flat_shape(rows * cols, vec, kSms), [&] {
    if (vec == 1)
      dropout_backward_block<T, 1>(b);
    else
      dropout_backward_block<T, vec16<T>()>(b);
  });
  std::vector<double> y_ref(y.size()), dx_ref(dx.size());
  const std::vector<float> no_bias;
  ref::bias_dropout_residual_forward(to_floats(x), with_bias ? to_floats(bias) : no_bias,
                                     to_floats(res), rows, cols, p, seed, offset, y_ref);
  ref::dropout_backward(to_floats(dy), rows, cols, p, seed, offset, dx_ref);
  expect_close("y", y, y_ref);
  expect_close("dx", dx, dx_ref);
  // The mask is the same function of the element index in both passes: dx is zero exactly
  // where the forward dropped.
  int64_t dropped = 0;
  for (size_t i = 0; i < dx.size(); ++i) dropped += to_float(dx[i]) == 0.0f;
  if (p > 0) {
    EXPECT_NEAR(static_cast<double>(dropped) / static_cast<double>(dx.size()), p, 0.03);
  }
}

TEST(ElementwiseEmulated, BiasDropoutResidualBf16) {
  check_bias_dropout<bf16>(40, 128, 0.1f, true);
}
TEST(ElementwiseEmulated, BiasDropoutResidualFp32NoBiasNoDropout) {
  check_bias_dropout<float>(9, 36, 0.0f, false);
}
TEST(ElementwiseEmulated, BiasDropoutResidualBf16OddCols) {
  check_bias_dropout<bf16>(13, 45, 0.3f, true);
}

void check_adamw(int64_t n) {
  SCOPED_TRACE(n);
  auto master = random_vector<float>(n, -1.0f, 1.0f, 51);
  auto m = random_vector<float>(n, -0.01f, 0.01f, 52);
  auto v = random_vector<float>(n, 1e-6f, 1e-4f, 53);
  const auto grad = random_vector<float>(n, -0.05f, 0.05f, 54);
  auto param = poisoned<bf16>(n);
  std::vector<double> w_ref(master.begin(), master.end()), m_ref(m.begin(), m.end()),
      v_ref(v.begin(), v.end());
  emu::GlobalScope scope;
  scope.add(master.data(), master.size());
  scope.add(m.data(), m.size());
  scope.add(v.data(), v.size());
  scope.add(grad.data(), grad.size());
  scope.add(param.data(), param.size());
  const ref::AdamWStep s{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 7};
  const AdamWArgs a{master.data(),
                    param.data(),
                    grad.data(),
                    m.data(),
                    v.data(),
                    n,
                    s.lr,
                    s.beta1,
                    s.beta2,
                    s.eps,
                    s.weight_decay,
                    s.grad_scale,
                    static_cast<float>(1 / (1 - std::pow(0.9, 7))),
                    static_cast<float>(1 / (1 - std::pow(0.95, 7)))};
  emulate(flat_shape(n, 4, kSms), [&] { adamw_block<4>(a); });
  ref::adamw(w_ref, m_ref, v_ref, grad, s);
  expect_close("master", master, w_ref, {1e-6, 1e-5});
  expect_close("m", m, m_ref, {1e-6, 1e-5});
  expect_close("v", v, v_ref, {1e-6, 1e-5});
  expect_close("param", param, w_ref);
}

TEST(ElementwiseEmulated, AdamW) { check_adamw(4 * 999 + 2); }

TEST(BandwidthEmulated, CopyAndReduce) {
  const int64_t n = 4 * 2300 + 3;  // floats: vectors, the unrolled loop's remainder and a tail
  const auto src = random_vector<float>(n, 0.5f, 1.5f, 61);
  auto dst = poisoned<float>(n);
  std::vector<float> partial(kSms * 8, NAN);
  emu::GlobalScope scope;
  scope.add(src.data(), src.size());
  scope.add(dst.data(), dst.size());
  const LaunchShape s = probe_shape(n * 4, kSms);
  emulate(s, [&] {
    copy_block({reinterpret_cast<const unsigned char*>(src.data()),
                reinterpret_cast<unsigned char*>(dst.data()), n * 4});
  });
  EXPECT_EQ(dst, src);
  emulate(s, [&] { read_reduce_block({src.data(), n, partial.data()}); });
  double sum = 0, want = 0;
  for (int64_t b = 0; b < s.grid_x; ++b) sum += partial[static_cast<size_t>(b)];
  for (float x : src) want += x;
  EXPECT_NEAR(sum, want, want * 1e-5);
}

TEST(BandwidthEmulated, FillMatchesHostRandom) {
  const int64_t n = 1001;
  auto dev = poisoned<bf16>(n);
  std::vector<int32_t> ints(n, -1);
  emulate({2, 1, 1, 64, 0}, [&] {
    fill_block<bf16>({dev.data(), n, -3.0f, 3.0f, 77});
    fill_int_block({ints.data(), n, 10, 90, 78});
  });
  const auto host = random_vector<bf16>(n, -3.0f, 3.0f, 77);
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(dev[static_cast<size_t>(i)].bits, host[static_cast<size_t>(i)].bits) << i;
  EXPECT_EQ(ints, random_ints(n, 10, 100, 78));
}

}  // namespace
}  // namespace hetplan::kernels
