// The CPU references' backward passes against finite differences of their forward passes:
// for a scalar loss L = sum(w * y) with fixed random weights w, dL/dx from the analytical
// backward (fed dy = w) must match (L(x + h e_i) - L(x - h e_i)) / 2h for every input i.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <vector>

#include "kernels/reference/elementwise_reference.h"
#include "kernels/reference/norms_reference.h"
#include "kernels/reference/random.h"
#include "kernels/reference/rows_reference.h"

namespace hetplan::kernels::ref {
namespace {

using Vec = std::vector<float>;

// Central differences in double around x (perturbing the float inputs by h).
std::vector<double> numerical_gradient(Vec x, const std::function<double(const Vec&)>& loss,
                                       float h = 1e-2f) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const float keep = x[i];
    x[i] = keep + h;
    const double up = loss(x);
    x[i] = keep - h;
    const double down = loss(x);
    x[i] = keep;
    g[i] = (up - down) / (2.0 * static_cast<double>(h));
  }
  return g;
}

void expect_gradients_near(const std::vector<double>& analytic, const std::vector<double>& numeric,
                           double tol) {
  ASSERT_EQ(analytic.size(), numeric.size());
  for (size_t i = 0; i < analytic.size(); ++i)
    EXPECT_NEAR(analytic[i], numeric[i], tol * (1.0 + std::fabs(numeric[i]))) << "at " << i;
}

double dot(const std::vector<double>& a, const Vec& w) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * w[i];
  return s;
}

const int64_t kRows = 3, kCols = 7;

TEST(ReferenceGradients, LayerNorm) {
  const Vec x = random_vector<float>(kRows * kCols, -2, 2, 1),
            gamma = random_vector<float>(kCols, 0.5f, 1.5f, 2),
            beta = random_vector<float>(kCols, -1, 1, 3),
            w = random_vector<float>(kRows * kCols, -1, 1, 4);
  std::vector<double> y(x.size()), mean(kRows), rstd(kRows);
  auto loss_x = [&](const Vec& xv) {
    layernorm_forward(xv, gamma, beta, kRows, kCols, 1e-5f, y, mean, rstd);
    return dot(y, w);
  };
  auto loss_gamma = [&](const Vec& gv) {
    layernorm_forward(x, gv, beta, kRows, kCols, 1e-5f, y, mean, rstd);
    return dot(y, w);
  };
  auto loss_beta = [&](const Vec& bv) {
    layernorm_forward(x, gamma, bv, kRows, kCols, 1e-5f, y, mean, rstd);
    return dot(y, w);
  };
  layernorm_forward(x, gamma, beta, kRows, kCols, 1e-5f, y, mean, rstd);
  const Vec meanf(mean.begin(), mean.end()), rstdf(rstd.begin(), rstd.end());
  std::vector<double> dx(x.size()), dgamma(kCols), dbeta(kCols);
  layernorm_backward_input(x, gamma, meanf, rstdf, w, kRows, kCols, dx);
  layernorm_backward_weight(x, meanf, rstdf, w, kRows, kCols, dgamma, dbeta);
  expect_gradients_near(dx, numerical_gradient(x, loss_x, 1e-3f), 2e-3);
  expect_gradients_near(dgamma, numerical_gradient(gamma, loss_gamma, 1e-3f), 2e-3);
  expect_gradients_near(dbeta, numerical_gradient(beta, loss_beta, 1e-3f), 2e-3);
}

TEST(ReferenceGradients, RmsNorm) {
  const Vec x = random_vector<float>(kRows * kCols, -2, 2, 5),
            gamma = random_vector<float>(kCols, 0.5f, 1.5f, 6),
            w = random_vector<float>(kRows * kCols, -1, 1, 7);
  std::vector<double> y(x.size()), rstd(kRows);
  auto loss_x = [&](const Vec& xv) {
    rmsnorm_forward(xv, gamma, kRows, kCols, 1e-5f, y, rstd);
    return dot(y, w);
  };
  auto loss_gamma = [&](const Vec& gv) {
    rmsnorm_forward(x, gv, kRows, kCols, 1e-5f, y, rstd);
    return dot(y, w);
  };
  rmsnorm_forward(x, gamma, kRows, kCols, 1e-5f, y, rstd);
  const Vec rstdf(rstd.begin(), rstd.end());
  std::vector<double> dx(x.size()), dgamma(kCols);
  rmsnorm_backward_input(x, gamma, rstdf, w, kRows, kCols, dx);
  rmsnorm_backward_weight(x, rstdf, w, kRows, kCols, dgamma);
  expect_gradients_near(dx, numerical_gradient(x, loss_x, 1e-3f), 2e-3);
  expect_gradients_near(dgamma, numerical_gradient(gamma, loss_gamma, 1e-3f), 2e-3);
}

TEST(ReferenceGradients, GeluMatchesPublishedValuesAndItsDerivative) {
  // gelu_tanh(1) = 0.5 (1 + tanh(0.79788456 * 1.044715)) = 0.8411920 (PyTorch's
  // gelu(approximate='tanh') gives 0.8411920 for 1.0).
  EXPECT_NEAR(gelu(1.0), 0.8411920, 1e-6);
  EXPECT_NEAR(gelu(-3.0), -0.0036373, 1e-6);
  for (double x : {-4.0, -1.3, -0.2, 0.0, 0.7, 2.5}) {
    const double h = 1e-5;
    EXPECT_NEAR(gelu_derivative(x), (gelu(x + h) - gelu(x - h)) / (2 * h), 1e-8) << x;
  }
}

TEST(ReferenceGradients, Swiglu) {
  const Vec in = random_vector<float>(kRows * 2 * kCols, -3, 3, 8),
            w = random_vector<float>(kRows * kCols, -1, 1, 9);
  std::vector<double> out(kRows * kCols), din(in.size());
  swiglu_backward(in, w, kRows, kCols, din);
  expect_gradients_near(din,
                        numerical_gradient(
                            in,
                            [&](const Vec& v) {
                              swiglu_forward(v, kRows, kCols, out);
                              return dot(out, w);
                            },
                            1e-3f),
                        2e-3);
}

TEST(ReferenceGradients, DropoutIsLinearWithItsOwnTranspose) {
  // y = dropout(x) is diagonal: <dropout(x), w> == <x, dropout_backward(w)>.
  const Vec x = random_vector<float>(kRows * kCols, -1, 1, 10),
            w = random_vector<float>(kRows * kCols, -1, 1, 11);
  const Vec zeros(x.size(), 0.0f), no_bias;
  std::vector<double> y(x.size()), dx(x.size());
  bias_dropout_residual_forward(x, no_bias, zeros, kRows, kCols, 0.4f, 99, 3, y);
  dropout_backward(w, kRows, kCols, 0.4f, 99, 3, dx);
  EXPECT_NEAR(dot(y, w), dot(dx, x), 1e-9);
  int dropped = 0;
  for (double v : dx) dropped += v == 0.0;
  EXPECT_GT(dropped, 0);
}

TEST(ReferenceGradients, CrossEntropy) {
  const int64_t vocab = 11;
  const Vec logits = random_vector<float>(kRows * vocab, -3, 3, 12);
  const std::vector<int32_t> labels = {4, -100, 10};
  const Vec dloss = {0.7f, 1.0f, 1.3f};
  std::vector<double> loss(kRows), lse(kRows), dlogits(logits.size());
  cross_entropy_forward(logits, labels, kRows, vocab, loss, lse);
  const Vec lsef(lse.begin(), lse.end());
  cross_entropy_backward(logits, labels, lsef, dloss, kRows, vocab, dlogits);
  expect_gradients_near(dlogits,
                        numerical_gradient(
                            logits,
                            [&](const Vec& v) {
                              cross_entropy_forward(v, labels, kRows, vocab, loss, lse);
                              return dot(loss, dloss);
                            },
                            1e-3f),
                        1e-4);
  // A uniform row's loss is log(vocab).
  const Vec flat(vocab, 0.25f);
  std::vector<double> l1(1), s1(1);
  cross_entropy_forward(flat, std::vector<int32_t>{3}, 1, vocab, l1, s1);
  EXPECT_NEAR(l1[0], std::log(11.0), 1e-12);
}

TEST(ReferenceGradients, EmbeddingBackwardIsTheGathersTranspose) {
  const int64_t vocab = 5, hidden = 3, tokens = 8;
  const std::vector<int32_t> ids = {0, 3, 3, 1, 0, 4, 3, 2};
  const Vec weight = random_vector<float>(vocab * hidden, -1, 1, 13),
            w = random_vector<float>(tokens * hidden, -1, 1, 14);
  std::vector<double> out(tokens * hidden), dweight(vocab * hidden, 0.0);
  embedding_forward(ids, weight, tokens, hidden, out);
  embedding_backward(ids, w, tokens, hidden, dweight);
  EXPECT_NEAR(dot(out, w), dot(dweight, weight), 1e-9);
  // Row 3 collects tokens 1, 2 and 6.
  EXPECT_NEAR(dweight[3 * hidden], double{w[1 * hidden]} + w[2 * hidden] + w[6 * hidden], 1e-12);
}

TEST(ReferenceGradients, RotaryBackwardIsTheInverseRotation) {
  const int64_t seq = 4, heads = 2, d = 8, tokens = 8;
  std::vector<double> cd(seq * d / 2), sd(cd.size());
  rotary_tables(seq, d, 10000.0, cd, sd);
  // Position 1, pair 0: angle 1 radian; pair 1: 1e4^(-1/4) = 0.1 radian.
  EXPECT_NEAR(cd[4], std::cos(1.0), 1e-15);
  EXPECT_NEAR(sd[5], std::sin(0.1), 1e-15);
  const Vec c(cd.begin(), cd.end()), s(sd.begin(), sd.end());
  const Vec x = random_vector<float>(tokens * heads * d, -1, 1, 15),
            w = random_vector<float>(x.size(), -1, 1, 16);
  std::vector<double> y(x.size()), dx(x.size());
  rotary(x, c, s, tokens, heads, d, seq, 1, y);
  rotary(w, c, s, tokens, heads, d, seq, -1, dx);
  EXPECT_NEAR(dot(y, w), dot(dx, x), 1e-9);  // a rotation's transpose is its inverse
}

}  // namespace
}  // namespace hetplan::kernels::ref
