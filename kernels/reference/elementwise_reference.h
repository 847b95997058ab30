// CPU references (double precision) for the element-wise kernels: GeLU (tanh form), SwiGLU,
// bias + dropout + residual, and the AdamW step.
#pragma once

#include <cstdint>
#include <span>

namespace hetplan::kernels::ref {

// GeLU with the tanh approximation of GPT-2 / Megatron (Hendrycks & Gimpel 2016):
// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), and its derivative.
double gelu(double x);
double gelu_derivative(double x);

// SwiGLU (Shazeer 2020) on the fused [rows, 2 * cols] layout: gate a = in[:, :cols], up b =
// in[:, cols:]; out = silu(a) * b, silu(a) = a * sigmoid(a).
void swiglu_forward(std::span<const float> in, int64_t rows, int64_t cols, std::span<double> out);
// din[:, :cols] = dout * b * silu'(a), din[:, cols:] = dout * silu(a).
void swiglu_backward(std::span<const float> in, std::span<const float> dout, int64_t rows,
                     int64_t cols, std::span<double> din);

// Whether dropout keeps element `index` of stream (seed, offset) at drop probability p.
bool dropout_keeps(uint64_t seed, uint64_t offset, uint64_t index, float p);
// y = residual + dropout(x + bias): kept values scaled by 1 / (1 - p). bias may be empty.
void bias_dropout_residual_forward(std::span<const float> x, std::span<const float> bias,
                                   std::span<const float> residual, int64_t rows, int64_t cols,
                                   float p, uint64_t seed, uint64_t offset, std::span<double> y);
// dx = dy * keep / (1 - p).
void dropout_backward(std::span<const float> dy, int64_t rows, int64_t cols, float p, uint64_t seed,
                      uint64_t offset, std::span<double> dx);

// One AdamW step (Loshchilov & Hutter 2019, as torch.optim.AdamW): g = grad * grad_scale,
// m = b1 m + (1 - b1) g, v = b2 v + (1 - b2) g^2, w = w (1 - lr wd) - lr mhat / (sqrt(vhat) + eps)
// with mhat = m / (1 - b1^step), vhat = v / (1 - b2^step). Updates master, m, v in place.
struct AdamWStep {
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  int step;
};
void adamw(std::span<double> master, std::span<double> m, std::span<double> v,
           std::span<const float> grad, const AdamWStep& s);

}  // namespace hetplan::kernels::ref
