#include "kernels/reference/attention_reference.h"

#include <cmath>
#include <limits>
#include <vector>

namespace hetplan::kernels::ref {
namespace {

double dot(const float* a, const float* b, int64_t n) {
  double s = 0;
  for (int64_t d = 0; d < n; ++d) s += double{a[d]} * b[d];
  return s;
}

// P_ij from the saved lse (0 when masked).
double prob(std::span<const float> q, std::span<const float> k, std::span<const float> lse,
            const AttentionDims& a, int64_t b, int64_t h, int64_t i, int64_t j) {
  if (a.causal && j > i) return 0.0;
  const double s = a.scale * dot(&q[a.row(b, h, i)], &k[a.row(b, h, j)], a.head_dim);
  return std::exp(s - lse[a.stat(b, h, i)]);
}

double row_delta(std::span<const float> o, std::span<const float> dout, const AttentionDims& a,
                 int64_t b, int64_t h, int64_t i) {
  return dot(&o[a.row(b, h, i)], &dout[a.row(b, h, i)], a.head_dim);
}

}  // namespace

double attention_forward_row(std::span<const float> q, std::span<const float> k,
                             std::span<const float> v, const AttentionDims& a, int64_t b, int64_t h,
                             int64_t i, std::span<double> out) {
  const int64_t last = a.causal ? i : a.seq - 1;
  std::vector<double> s(static_cast<size_t>(last + 1));
  double m = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j <= last; ++j) {
    s[static_cast<size_t>(j)] = a.scale * dot(&q[a.row(b, h, i)], &k[a.row(b, h, j)], a.head_dim);
    m = std::max(m, s[static_cast<size_t>(j)]);
  }
  double l = 0;
  for (auto& x : s) l += (x = std::exp(x - m));
  for (int64_t d = 0; d < a.head_dim; ++d) {
    double acc = 0;
    for (int64_t j = 0; j <= last; ++j) acc += s[static_cast<size_t>(j)] * v[a.row(b, h, j) + d];
    out[d] = acc / l;
  }
  return m + std::log(l);
}

void attention_forward(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                       const AttentionDims& a, std::span<double> o, std::span<double> lse) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t i = 0; i < a.seq; ++i)
        lse[a.stat(b, h, i)] =
            attention_forward_row(q, k, v, a, b, h, i, o.subspan(a.row(b, h, i), a.head_dim));
}

void attention_backward_dq_row(std::span<const float> q, std::span<const float> k,
                               std::span<const float> v, std::span<const float> o,
                               std::span<const float> dout, std::span<const float> lse,
                               const AttentionDims& a, int64_t b, int64_t h, int64_t i,
                               std::span<double> dq) {
  const double delta = row_delta(o, dout, a, b, h, i);
  for (int64_t d = 0; d < a.head_dim; ++d) dq[d] = 0;
  for (int64_t j = 0; j < a.seq; ++j) {
    const double p = prob(q, k, lse, a, b, h, i, j);
    if (p == 0.0) continue;
    const double ds = p * (dot(&dout[a.row(b, h, i)], &v[a.row(b, h, j)], a.head_dim) - delta);
    for (int64_t d = 0; d < a.head_dim; ++d) dq[d] += a.scale * ds * k[a.row(b, h, j) + d];
  }
}

void attention_backward_dkdv_row(std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v, std::span<const float> o,
                                 std::span<const float> dout, std::span<const float> lse,
                                 const AttentionDims& a, int64_t b, int64_t h, int64_t j,
                                 std::span<double> dk, std::span<double> dv) {
  for (int64_t d = 0; d < a.head_dim; ++d) dk[d] = dv[d] = 0;
  for (int64_t i = 0; i < a.seq; ++i) {
    const double p = prob(q, k, lse, a, b, h, i, j);
    if (p == 0.0) continue;
    const double delta = row_delta(o, dout, a, b, h, i);
    const double ds = p * (dot(&dout[a.row(b, h, i)], &v[a.row(b, h, j)], a.head_dim) - delta);
    for (int64_t d = 0; d < a.head_dim; ++d) {
      dk[d] += a.scale * ds * q[a.row(b, h, i) + d];
      dv[d] += p * dout[a.row(b, h, i) + d];
    }
  }
}

void attention_backward(std::span<const float> q, std::span<const float> k,
                        std::span<const float> v, std::span<const float> o,
                        std::span<const float> dout, std::span<const float> lse,
                        const AttentionDims& a, std::span<double> dq, std::span<double> dk,
                        std::span<double> dv) {
  for (int64_t b = 0; b < a.batch; ++b)
    for (int64_t h = 0; h < a.heads; ++h)
      for (int64_t r = 0; r < a.seq; ++r) {
        const int64_t off = a.row(b, h, r);
        attention_backward_dq_row(q, k, v, o, dout, lse, a, b, h, r, dq.subspan(off, a.head_dim));
        attention_backward_dkdv_row(q, k, v, o, dout, lse, a, b, h, r, dk.subspan(off, a.head_dim),
                                    dv.subspan(off, a.head_dim));
      }
}

}  // namespace hetplan::kernels::ref
