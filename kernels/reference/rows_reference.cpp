#include "kernels/reference/rows_reference.h"

#include <cmath>
#include <limits>

namespace hetplan::kernels::ref {

void cross_entropy_forward(std::span<const float> logits, std::span<const int32_t> labels,
                           int64_t tokens, int64_t vocab, std::span<double> loss,
                           std::span<double> lse) {
  for (int64_t t = 0; t < tokens; ++t) {
    const float* row = logits.data() + t * vocab;
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t v = 0; v < vocab; ++v) m = std::max(m, double{row[v]});
    double s = 0;
    for (int64_t v = 0; v < vocab; ++v) s += std::exp(row[v] - m);
    lse[t] = m + std::log(s);
    loss[t] = labels[t] < 0 ? 0.0 : lse[t] - row[labels[t]];
  }
}

void cross_entropy_backward(std::span<const float> logits, std::span<const int32_t> labels,
                            std::span<const float> lse, std::span<const float> dloss,
                            int64_t tokens, int64_t vocab, std::span<double> dlogits) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t v = 0; v < vocab; ++v) {
      const int64_t i = t * vocab + v;
      dlogits[i] = labels[t] < 0
                       ? 0.0
                       : (std::exp(double{logits[i]} - lse[t]) - (v == labels[t])) * dloss[t];
    }
}

void embedding_forward(std::span<const int32_t> ids, std::span<const float> weight, int64_t tokens,
                       int64_t hidden, std::span<double> out) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < hidden; ++c) out[t * hidden + c] = weight[ids[t] * hidden + c];
}

void embedding_backward(std::span<const int32_t> ids, std::span<const float> dout, int64_t tokens,
                        int64_t hidden, std::span<double> dweight) {
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t c = 0; c < hidden; ++c) dweight[ids[t] * hidden + c] += dout[t * hidden + c];
}

void rotary_tables(int64_t seq, int64_t head_dim, double base, std::span<double> cos,
                   std::span<double> sin) {
  const int64_t half = head_dim / 2;
  for (int64_t p = 0; p < seq; ++p)
    for (int64_t i = 0; i < half; ++i) {
      const double angle =
          static_cast<double>(p) *
          std::pow(base, -2.0 * static_cast<double>(i) / static_cast<double>(head_dim));
      cos[p * half + i] = std::cos(angle);
      sin[p * half + i] = std::sin(angle);
    }
}

void rotary(std::span<const float> x, std::span<const float> cos, std::span<const float> sin,
            int64_t tokens, int64_t heads, int64_t head_dim, int64_t seq, int sign,
            std::span<double> y) {
  const int64_t half = head_dim / 2;
  for (int64_t t = 0; t < tokens; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t o = (t * heads + h) * head_dim, p = t % seq;
      for (int64_t i = 0; i < half; ++i) {
        const double c = cos[p * half + i], s = sign * double{sin[p * half + i]};
        const double a = x[o + i], b = x[o + half + i];
        y[o + i] = a * c - b * s;
        y[o + half + i] = b * c + a * s;
      }
    }
}

}  // namespace hetplan::kernels::ref
