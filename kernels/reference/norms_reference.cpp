#include "kernels/reference/norms_reference.h"

#include <cmath>

namespace hetplan::kernels::ref {

void layernorm_forward(std::span<const float> x, std::span<const float> gamma,
                       std::span<const float> beta, int64_t rows, int64_t cols, float eps,
                       std::span<double> y, std::span<double> mean, std::span<double> rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double m = 0;
    for (int64_t c = 0; c < cols; ++c) m += xr[c];
    m /= static_cast<double>(cols);
    double var = 0;
    for (int64_t c = 0; c < cols; ++c) var += (xr[c] - m) * (xr[c] - m);
    var /= static_cast<double>(cols);
    const double s = 1.0 / std::sqrt(var + eps);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = (xr[c] - m) * s * gamma[c] + beta[c];
    mean[r] = m;
    rstd[r] = s;
  }
}

void layernorm_backward_input(std::span<const float> x, std::span<const float> gamma,
                              std::span<const float> mean, std::span<const float> rstd,
                              std::span<const float> dy, int64_t rows, int64_t cols,
                              std::span<double> dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    double sum_g = 0, sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c) {
      const double g = double{dy[o + c]} * gamma[c];
      const double xhat = (x[o + c] - double{mean[r]}) * rstd[r];
      sum_g += g;
      sum_gx += g * xhat;
    }
    const double mg = sum_g / static_cast<double>(cols), mgx = sum_gx / static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double g = double{dy[o + c]} * gamma[c];
      const double xhat = (x[o + c] - double{mean[r]}) * rstd[r];
      dx[o + c] = rstd[r] * (g - mg - xhat * mgx);
    }
  }
}

void layernorm_backward_weight(std::span<const float> x, std::span<const float> mean,
                               std::span<const float> rstd, std::span<const float> dy, int64_t rows,
                               int64_t cols, std::span<double> dgamma, std::span<double> dbeta) {
  for (int64_t c = 0; c < cols; ++c) dgamma[c] = dbeta[c] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double xhat = (x[r * cols + c] - double{mean[r]}) * rstd[r];
      dgamma[c] += dy[r * cols + c] * xhat;
      dbeta[c] += dy[r * cols + c];
    }
}

void rmsnorm_forward(std::span<const float> x, std::span<const float> gamma, int64_t rows,
                     int64_t cols, float eps, std::span<double> y, std::span<double> rstd) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* xr = x.data() + r * cols;
    double ms = 0;
    for (int64_t c = 0; c < cols; ++c) ms += double{xr[c]} * xr[c];
    ms /= static_cast<double>(cols);
    const double s = 1.0 / std::sqrt(ms + eps);
    for (int64_t c = 0; c < cols; ++c) y[r * cols + c] = xr[c] * s * gamma[c];
    rstd[r] = s;
  }
}

void rmsnorm_backward_input(std::span<const float> x, std::span<const float> gamma,
                            std::span<const float> rstd, std::span<const float> dy, int64_t rows,
                            int64_t cols, std::span<double> dx) {
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t o = r * cols;
    double sum_gx = 0;
    for (int64_t c = 0; c < cols; ++c)
      sum_gx += double{dy[o + c]} * gamma[c] * (double{x[o + c]} * rstd[r]);
    const double mgx = sum_gx / static_cast<double>(cols);
    for (int64_t c = 0; c < cols; ++c) {
      const double g = double{dy[o + c]} * gamma[c];
      dx[o + c] = rstd[r] * (g - double{x[o + c]} * rstd[r] * mgx);
    }
  }
}

void rmsnorm_backward_weight(std::span<const float> x, std::span<const float> rstd,
                             std::span<const float> dy, int64_t rows, int64_t cols,
                             std::span<double> dgamma) {
  for (int64_t c = 0; c < cols; ++c) dgamma[c] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      dgamma[c] += double{dy[r * cols + c]} * x[r * cols + c] * rstd[r];
}

void column_sum(std::span<const float> dy, int64_t rows, int64_t cols, std::span<double> out) {
  for (int64_t c = 0; c < cols; ++c) out[c] = 0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c] += dy[r * cols + c];
}

}  // namespace hetplan::kernels::ref
