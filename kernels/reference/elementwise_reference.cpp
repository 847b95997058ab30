#include "kernels/reference/elementwise_reference.h"

#include <cmath>

#include "kernels/philox.h"

namespace hetplan::kernels::ref {
namespace {
constexpr double kSqrt2OverPi = 0.7978845608028654;
constexpr double kGeluCubic = 0.044715;
double sigmoid(double a) { return 1.0 / (1.0 + std::exp(-a)); }
}  // namespace

double gelu(double x) {
  return 0.5 * x * (1.0 + std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x)));
}

double gelu_derivative(double x) {
  const double t = std::tanh(kSqrt2OverPi * (x + kGeluCubic * x * x * x));
  return 0.5 * (1.0 + t) +
         0.5 * x * (1.0 - t * t) * kSqrt2OverPi * (1.0 + 3.0 * kGeluCubic * x * x);
}

void swiglu_forward(std::span<const float> in, int64_t rows, int64_t cols, std::span<double> out) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double a = in[r * 2 * cols + c], b = in[r * 2 * cols + cols + c];
      out[r * cols + c] = a * sigmoid(a) * b;
    }
}

void swiglu_backward(std::span<const float> in, std::span<const float> dout, int64_t rows,
                     int64_t cols, std::span<double> din) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const double a = in[r * 2 * cols + c], b = in[r * 2 * cols + cols + c];
      const double s = sigmoid(a), d = dout[r * cols + c];
      din[r * 2 * cols + c] = d * b * s * (1.0 + a * (1.0 - s));
      din[r * 2 * cols + cols + c] = d * a * s;
    }
}

bool dropout_keeps(uint64_t seed, uint64_t offset, uint64_t index, float p) {
  return philox_group(seed, offset, index).v[index % 4] >= dropout_threshold(p);
}

void bias_dropout_residual_forward(std::span<const float> x, std::span<const float> bias,
                                   std::span<const float> residual, int64_t rows, int64_t cols,
                                   float p, uint64_t seed, uint64_t offset, std::span<double> y) {
  const double scale = p > 0 ? 1.0 / (1.0 - p) : 1.0;
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      const int64_t i = r * cols + c;
      const double v = double{x[i]} + (bias.empty() ? 0.0 : bias[c]);
      const bool keep = dropout_keeps(seed, offset, static_cast<uint64_t>(i), p);
      y[i] = residual[i] + (keep ? v * scale : 0.0);
    }
}

void dropout_backward(std::span<const float> dy, int64_t rows, int64_t cols, float p, uint64_t seed,
                      uint64_t offset, std::span<double> dx) {
  const double scale = p > 0 ? 1.0 / (1.0 - p) : 1.0;
  for (int64_t i = 0; i < rows * cols; ++i)
    dx[i] = dropout_keeps(seed, offset, static_cast<uint64_t>(i), p) ? dy[i] * scale : 0.0;
}

void adamw(std::span<double> master, std::span<double> m, std::span<double> v,
           std::span<const float> grad, const AdamWStep& s) {
  const double c1 = 1.0 - std::pow(double{s.beta1}, s.step);
  const double c2 = 1.0 - std::pow(double{s.beta2}, s.step);
  for (size_t i = 0; i < master.size(); ++i) {
    const double g = double{grad[i]} * s.grad_scale;
    m[i] = s.beta1 * m[i] + (1.0 - s.beta1) * g;
    v[i] = s.beta2 * v[i] + (1.0 - s.beta2) * g * g;
    const double mhat = m[i] / c1, vhat = v[i] / c2;
    master[i] =
        master[i] * (1.0 - double{s.lr} * s.weight_decay) - s.lr * mhat / (std::sqrt(vhat) + s.eps);
  }
}

}  // namespace hetplan::kernels::ref
