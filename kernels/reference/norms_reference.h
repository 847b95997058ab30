// CPU references (double precision) for LayerNorm and RMSNorm over the last dimension of a
// [rows, cols] matrix, forward and backward, as in Ba et al. 2016 (LayerNorm, biased variance)
// and Zhang & Sennrich 2019 (RMSNorm). The backward is split as the pipeline schedules split it:
// the input gradient (B pass) and the weight gradients (W pass).
#pragma once

#include <cstdint>
#include <span>

namespace hetplan::kernels::ref {

// y = (x - mean) * rstd * gamma + beta, rstd = 1 / sqrt(var + eps); mean and rstd per row.
void layernorm_forward(std::span<const float> x, std::span<const float> gamma,
                       std::span<const float> beta, int64_t rows, int64_t cols, float eps,
                       std::span<double> y, std::span<double> mean, std::span<double> rstd);
// dx = rstd * (g - mean(g) - xhat * mean(g * xhat)), g = dy * gamma, xhat = (x - mean) * rstd.
void layernorm_backward_input(std::span<const float> x, std::span<const float> gamma,
                              std::span<const float> mean, std::span<const float> rstd,
                              std::span<const float> dy, int64_t rows, int64_t cols,
                              std::span<double> dx);
// dgamma = sum over rows of dy * xhat, dbeta = sum over rows of dy.
void layernorm_backward_weight(std::span<const float> x, std::span<const float> mean,
                               std::span<const float> rstd, std::span<const float> dy, int64_t rows,
                               int64_t cols, std::span<double> dgamma, std::span<double> dbeta);

// y = x * rstd * gamma, rstd = 1 / sqrt(mean(x^2) + eps).
void rmsnorm_forward(std::span<const float> x, std::span<const float> gamma, int64_t rows,
                     int64_t cols, float eps, std::span<double> y, std::span<double> rstd);
// dx = rstd * (g - xhat * mean(g * xhat)), g = dy * gamma, xhat = x * rstd.
void rmsnorm_backward_input(std::span<const float> x, std::span<const float> gamma,
                            std::span<const float> rstd, std::span<const float> dy, int64_t rows,
                            int64_t cols, std::span<double> dx);
// dgamma = sum over rows of dy * xhat.
void rmsnorm_backward_weight(std::span<const float> x, std::span<const float> rstd,
                             std::span<const float> dy, int64_t rows, int64_t cols,
                             std::span<double> dgamma);

// dbias = sum over rows of dy (the bias gradient of any [rows, cols] output).
void column_sum(std::span<const float> dy, int64_t rows, int64_t cols, std::span<double> out);

}  // namespace hetplan::kernels::ref
