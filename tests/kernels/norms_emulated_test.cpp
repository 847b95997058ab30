// The norm kernels' device code, run under the CPU emulator with the launchers' shapes, against
// the CPU references: both code paths (16-byte vectors and scalar), odd sizes, several warps.
#include <gtest/gtest.h>

#include "kernels/norms_kernels.h"
#include "kernels/reference/norms_reference.h"
#include "tests/kernels/emulated.h"

namespace hetplan::kernels {
namespace {

using testing::emulate;
using testing::expect_close;
using testing::poisoned;

template <class T>
struct NormCase {
  int64_t rows;
  int cols;
  std::vector<T> x, gamma, beta, dy;
  NormCase(int64_t r, int c) : rows(r), cols(c) {
    x = random_vector<T>(r * c, -2.0f, 2.5f, 11);
    gamma = random_vector<T>(c, 0.5f, 1.5f, 12);
    beta = random_vector<T>(c, -0.5f, 0.5f, 13);
    dy = random_vector<T>(r * c, -1.0f, 1.0f, 14);
  }
};

template <class T, NormKind kKind>
void check_forward_and_backward(int64_t rows, int cols) {
  SCOPED_TRACE(::testing::Message() << "rows " << rows << " cols " << cols);
  NormCase<T> c(rows, cols);
  constexpr bool ln = kKind == NormKind::kLayerNorm;
  std::vector<T> y = poisoned<T>(rows * cols), dx = poisoned<T>(rows * cols);
  std::vector<float> mean(static_cast<size_t>(rows), NAN), rstd(static_cast<size_t>(rows), NAN);
  emu::GlobalScope scope;
  scope.add(c.x.data(), c.x.size());
  scope.add(c.gamma.data(), c.gamma.size());
  scope.add(c.beta.data(), c.beta.size());
  scope.add(c.dy.data(), c.dy.size());
  scope.add(y.data(), y.size());
  scope.add(dx.data(), dx.size());

  NormForwardArgs<T> f{c.x.data(),
                       c.gamma.data(),
                       ln ? c.beta.data() : nullptr,
                       y.data(),
                       ln ? mean.data() : nullptr,
                       rstd.data(),
                       rows,
                       cols,
                       1e-5f};
  const int vec = row_vector_width<T>(cols, {c.x.data(), c.gamma.data(), y.data()});
  ASSERT_TRUE(norm_row_fits(cols, vec, kNormForwardIters));
  emulate(norm_forward_shape(rows, cols, vec), [&] {
    if (vec == 1)
      norm_forward_block<T, 1, kKind>(f);
    else
      norm_forward_block<T, vec16<T>(), kKind>(f);
  });

  const auto xf = to_floats(c.x), gf = to_floats(c.gamma), bf = to_floats(c.beta),
             dyf = to_floats(c.dy);
  std::vector<double> y_ref(static_cast<size_t>(rows * cols)), mean_ref(static_cast<size_t>(rows)),
      rstd_ref(static_cast<size_t>(rows));
  if (ln)
    ref::layernorm_forward(xf, gf, bf, rows, cols, 1e-5f, y_ref, mean_ref, rstd_ref);
  else
    ref::rmsnorm_forward(xf, gf, rows, cols, 1e-5f, y_ref, rstd_ref);
  expect_close("y", y, y_ref);
  expect_close("rstd", rstd, rstd_ref);
  if (ln) expect_close("mean", mean, mean_ref, {1e-5, 1e-4});

  // Backward from the kernel's own statistics, as in training.
  NormBackwardArgs<T> b{c.x.data(),
                        c.gamma.data(),
                        ln ? mean.data() : nullptr,
                        rstd.data(),
                        c.dy.data(),
                        dx.data(),
                        rows,
                        cols};
  emulate(norm_row_shape(rows, cols, vec), [&] {
    if (vec == 1)
      norm_backward_input_block<T, 1, kKind>(b);
    else
      norm_backward_input_block<T, vec16<T>(), kKind>(b);
  });
  std::vector<double> dx_ref(static_cast<size_t>(rows * cols));
  if (ln)
    ref::layernorm_backward_input(xf, gf, mean, rstd, dyf, rows, cols, dx_ref);
  else
    ref::rmsnorm_backward_input(xf, gf, rstd, dyf, rows, cols, dx_ref);
  expect_close("dx", dx, dx_ref);

  // Weight gradients: partials, then the ordered finish.
  const int64_t chunks = column_chunks(rows);
  std::vector<float> partial(static_cast<size_t>(2 * chunks * cols), NAN);
  std::vector<float> dgamma(static_cast<size_t>(cols), NAN), dbeta(static_cast<size_t>(cols), NAN);
  scope.add(partial.data(), partial.size());
  constexpr ColumnKind kColumn = ln ? ColumnKind::kLayerNorm : ColumnKind::kRmsNorm;
  ColumnArgs<T> w{c.x.data(),     ln ? mean.data() : nullptr,     rstd.data(), c.dy.data(),
                  partial.data(), partial.data() + chunks * cols, rows,        cols};
  emulate(column_partials_shape(rows, cols, vec), [&] {
    if (vec == 1)
      column_partials_block<T, 1, kColumn>(w);
    else
      column_partials_block<T, vec16<T>(), kColumn>(w);
  });
  const LaunchShape fs = column_finish_shape(cols);
  emulate(fs, [&] { column_finish_block({partial.data(), dgamma.data(), chunks, cols}); });
  if (ln)
    emulate(fs, [&] {
      column_finish_block({partial.data() + chunks * cols, dbeta.data(), chunks, cols});
    });
  std::vector<double> dgamma_ref(static_cast<size_t>(cols)), dbeta_ref(static_cast<size_t>(cols));
  if (ln)
    ref::layernorm_backward_weight(xf, mean, rstd, dyf, rows, cols, dgamma_ref, dbeta_ref);
  else
    ref::rmsnorm_backward_weight(xf, rstd, dyf, rows, cols, dgamma_ref);
  expect_close("dgamma", dgamma, dgamma_ref, {1e-5, 1e-4});
  if (ln) expect_close("dbeta", dbeta, dbeta_ref, {1e-5, 1e-4});
}

TEST(NormsEmulated, LayerNormBf16VectorPath) {
  check_forward_and_backward<bf16, NormKind::kLayerNorm>(3, 520);
}
TEST(NormsEmulated, LayerNormBf16ScalarPathOddCols) {
  check_forward_and_backward<bf16, NormKind::kLayerNorm>(2, 77);
}
TEST(NormsEmulated, LayerNormFp32SeveralWarpsAndChunks) {
  check_forward_and_backward<float, NormKind::kLayerNorm>(300, 1028);
}
TEST(NormsEmulated, RmsNormBf16VectorPath) {
  check_forward_and_backward<bf16, NormKind::kRmsNorm>(5, 264);
}
TEST(NormsEmulated, RmsNormFp32ScalarPath) {
  check_forward_and_backward<float, NormKind::kRmsNorm>(4, 33);
}

}  // namespace
}  // namespace hetplan::kernels
