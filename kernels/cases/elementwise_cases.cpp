// Element-wise cases: GeLU, SwiGLU, bias + dropout + residual, dropout backward, bias gradient
// (bf16 and fp32), and the AdamW step.
#include <cmath>

#include "kernels/cases/case_util.h"
#include "kernels/cases/cases.h"
#include "kernels/elementwise.h"
#include "kernels/norms.h"
#include "kernels/reference/elementwise_reference.h"
#include "kernels/reference/norms_reference.h"

namespace hetplan::kernels::cases {
namespace {

constexpr float kDropP = 0.1f;
constexpr uint64_t kDropSeed = 0x5eed, kDropOffset = 12345;

template <class T>
class GeluInstance : public Instance {
 public:
  GeluInstance(int64_t n, uint64_t seed, bool backward)
      : n_(n),
        backward_(backward),
        x_(random_buffer<T>(n, -5.0f, 5.0f, seed)),
        dy_(backward ? random_buffer<T>(n, -1.0f, 1.0f, seed + 1) : DeviceBuffer<T>()),
        out_(static_cast<size_t>(n)) {}
  void run(cudaStream_t s) override {
    if (backward_)
      gelu_backward(x_.get(), dy_.get(), out_.get(), n_, s);
    else
      gelu_forward(x_.get(), out_.get(), n_, s);
  }
  CheckResult check() override {
    out_.fill_bytes(0xff);
    run(nullptr);
    finish();
    std::vector<float> got;
    std::vector<double> want;
    for (auto [b, e] : sample_windows(n_)) {
      const auto x = fetch(x_, b, e - b), out = fetch(out_, b, e - b);
      const auto dy = backward_ ? fetch(dy_, b, e - b) : std::vector<float>();
      for (size_t i = 0; i < x.size(); ++i)
        want.push_back(backward_ ? dy[i] * ref::gelu_derivative(x[i]) : ref::gelu(x[i]));
      got.insert(got.end(), out.begin(), out.end());
    }
    CheckResult r;
    judge(r, backward_ ? "dx" : "y", got, want, default_tolerance(dtype_of<T>()));
    return r;
  }
  size_t device_bytes() const override { return total_bytes(x_, dy_, out_); }

 private:
  int64_t n_;
  bool backward_;
  DeviceBuffer<T> x_, dy_, out_;
};

template <class T>
class SwigluInstance : public Instance {
 public:
  SwigluInstance(const Shape& s, uint64_t seed, bool backward)
      : rows_(s[0]),
        cols_(static_cast<int>(s[1])),
        backward_(backward),
        in_(random_buffer<T>(rows_ * 2 * cols_, -5.0f, 5.0f, seed)),
        dout_(backward ? random_buffer<T>(rows_ * cols_, -1.0f, 1.0f, seed + 1)
                       : DeviceBuffer<T>()),
        out_(static_cast<size_t>(rows_ * cols_ * (backward ? 2 : 1))) {}
  void run(cudaStream_t s) override {
    if (backward_)
      swiglu_backward(in_.get(), dout_.get(), out_.get(), rows_, cols_, s);
    else
      swiglu_forward(in_.get(), out_.get(), rows_, cols_, s);
  }
  CheckResult check() override {
    out_.fill_bytes(0xff);
    run(nullptr);
    finish();
    std::vector<float> got;
    std::vector<double> want;
    const int64_t w = backward_ ? 2 * cols_ : cols_;
    for (int64_t row : sample_rows(rows_)) {
      const auto in = fetch(in_, row * 2 * cols_, 2 * cols_), out = fetch(out_, row * w, w);
      std::vector<double> ref(static_cast<size_t>(w));
      if (backward_)
        ref::swiglu_backward(in, fetch(dout_, row * cols_, cols_), 1, cols_, ref);
      else
        ref::swiglu_forward(in, 1, cols_, ref);
      got.insert(got.end(), out.begin(), out.end());
      want.insert(want.end(), ref.begin(), ref.end());
    }
    CheckResult r;
    judge(r, backward_ ? "din" : "out", got, want, default_tolerance(dtype_of<T>()));
    return r;
  }
  size_t device_bytes() const override { return total_bytes(in_, dout_, out_); }

 private:
  int64_t rows_;
  int cols_;
  bool backward_;
  DeviceBuffer<T> in_, dout_, out_;
};

// kForward: y = residual + dropout(x + bias); kBackward: dx = dropout'(dy);
// kBias: dbias = column sums of dx.
enum class DropPass { kForward, kBackward, kBias };

template <class T>
class DropoutInstance : public Instance {
 public:
  DropoutInstance(const Shape& s, uint64_t seed, DropPass pass)
      : rows_(s[0]),
        cols_(static_cast<int>(s[1])),
        pass_(pass),
        x_(random_buffer<T>(rows_ * cols_, -2.0f, 2.0f, seed)),
        bias_(random_buffer<T>(cols_, -1.0f, 1.0f, seed + 1)),
        residual_(pass == DropPass::kForward
                      ? random_buffer<T>(rows_ * cols_, -3.0f, 3.0f, seed + 2)
                      : DeviceBuffer<T>()),
        out_(pass == DropPass::kBias ? 0 : static_cast<size_t>(rows_ * cols_)),
        dbias_(pass == DropPass::kBias ? static_cast<size_t>(cols_) : 0),
        workspace_(pass == DropPass::kBias ? norm_weight_workspace_bytes(rows_, cols_) : 0) {}
  void run(cudaStream_t s) override {
    const Dropout d{kDropP, kDropSeed, kDropOffset};
    switch (pass_) {
      case DropPass::kForward:
        bias_dropout_residual_forward(x_.get(), bias_.get(), residual_.get(), out_.get(), rows_,
                                      cols_, d, s);
        break;
      case DropPass::kBackward:
        dropout_backward(x_.get(), out_.get(), rows_ * cols_, d, s);
        break;
      case DropPass::kBias:
        column_sum(x_.get(), dbias_.get(), rows_, cols_, workspace_.get(), s);
        break;
    }
  }
  CheckResult check() override {
    out_.fill_bytes(0xff);
    dbias_.fill_bytes(0xff);
    run(nullptr);
    finish();
    CheckResult r;
    if (pass_ == DropPass::kBias) {
      const auto x = fetch(x_);
      std::vector<double> want(static_cast<size_t>(cols_));
      ref::column_sum(x, rows_, cols_, want);
      judge(r, "dbias", fetch(dbias_), want, {1e-5, 1e-4});
      return r;
    }
    std::vector<float> got;
    std::vector<double> want;
    const auto bias = fetch(bias_);
    for (int64_t row : sample_rows(rows_)) {
      const auto x = fetch(x_, row * cols_, cols_), out = fetch(out_, row * cols_, cols_);
      for (int c = 0; c < cols_; ++c) {
        const uint64_t i = static_cast<uint64_t>(row * cols_ + c);
        const double scale =
            ref::dropout_keeps(kDropSeed, kDropOffset, i, kDropP) ? 1.0 / (1.0 - kDropP) : 0.0;
        want.push_back(pass_ == DropPass::kBackward
                           ? x[static_cast<size_t>(c)] * scale
                           : (double{x[static_cast<size_t>(c)]} + bias[static_cast<size_t>(c)]) *
                                 scale);
      }
      if (pass_ == DropPass::kForward) {
        const auto res = fetch(residual_, row * cols_, cols_);
        for (int c = 0; c < cols_; ++c)
          want[want.size() - static_cast<size_t>(cols_) + static_cast<size_t>(c)] +=
              res[static_cast<size_t>(c)];
      }
      got.insert(got.end(), out.begin(), out.end());
    }
    judge(r, pass_ == DropPass::kForward ? "y" : "dx", got, want, default_tolerance(dtype_of<T>()));
    return r;
  }
  size_t device_bytes() const override {
    return total_bytes(x_, bias_, residual_, out_, dbias_, workspace_);
  }

 private:
  int64_t rows_;
  int cols_;
  DropPass pass_;
  DeviceBuffer<T> x_, bias_, residual_, out_;
  DeviceBuffer<float> dbias_;
  DeviceBuffer<unsigned char> workspace_;
};

class AdamWInstance : public Instance {
 public:
  AdamWInstance(int64_t n, uint64_t seed)
      : n_(n),
        seed_(seed),
        master_(static_cast<size_t>(n)),
        m_(static_cast<size_t>(n)),
        v_(static_cast<size_t>(n)),
        grad_(random_buffer<float>(n, -0.05f, 0.05f, seed + 3)),
        param_(static_cast<size_t>(n)) {
    reset();
  }
  void run(cudaStream_t s) override {
    adamw_step(master_.get(), param_.get(), grad_.get(), m_.get(), v_.get(), n_, config_, s);
  }
  CheckResult check() override {
    reset();
    param_.fill_bytes(0xff);
    finish();
    std::vector<std::vector<float>> w0, m0, v0, g;
    const auto windows = sample_windows(n_);
    for (auto [b, e] : windows) {
      w0.push_back(fetch(master_, b, e - b));
      m0.push_back(fetch(m_, b, e - b));
      v0.push_back(fetch(v_, b, e - b));
      g.push_back(fetch(grad_, b, e - b));
    }
    run(nullptr);
    finish();
    std::vector<float> got_w, got_p;
    std::vector<double> want_w;
    const ref::AdamWStep step{config_.lr,           config_.beta1,      config_.beta2, config_.eps,
                              config_.weight_decay, config_.grad_scale, config_.step};
    for (size_t k = 0; k < windows.size(); ++k) {
      const auto [b, e] = windows[k];
      std::vector<double> w(w0[k].begin(), w0[k].end()), m(m0[k].begin(), m0[k].end()),
          v(v0[k].begin(), v0[k].end());
      ref::adamw(w, m, v, g[k], step);
      want_w.insert(want_w.end(), w.begin(), w.end());
      const auto gw = fetch(master_, b, e - b), gp = fetch(param_, b, e - b);
      got_w.insert(got_w.end(), gw.begin(), gw.end());
      got_p.insert(got_p.end(), gp.begin(), gp.end());
    }
    CheckResult r;
    judge(r, "master", got_w, want_w, {1e-6, 1e-5});
    judge(r, "param", got_p, want_w, default_tolerance(DType::kBF16));
    reset();
    return r;
  }
  size_t device_bytes() const override { return total_bytes(master_, m_, v_, grad_, param_); }

 private:
  void reset() {
    fill_uniform(master_.get(), n_, -1.0f, 1.0f, seed_, nullptr);
    fill_uniform(m_.get(), n_, -0.01f, 0.01f, seed_ + 1, nullptr);
    fill_uniform(v_.get(), n_, 1e-6f, 1e-4f, seed_ + 2, nullptr);
  }
  int64_t n_;
  uint64_t seed_;
  AdamWConfig config_{1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 0.5f, 10};
  DeviceBuffer<float> master_, m_, v_, grad_;
  DeviceBuffer<bf16> param_;
};

template <class T>
void add_typed(std::vector<Case>& out) {
  const std::string dt(dtype_name(dtype_of<T>()));
  const double t = bytes_per<T>();
  for (bool backward : {false, true}) {
    Case c =
        new_case("gelu", backward ? "backward" : "forward", dtype_of<T>(), "tanh approximation");
    c.name = std::string(backward ? "gelu_bwd_" : "gelu_fwd_") + dt;
    c.dims = {"elements"};
    c.test_shapes = {{1000003}, {4096}, {17}};
    c.bench_shapes = {{int64_t{1} << 25}, {int64_t{1} << 28}};
    c.work = [t, backward](const Shape& s) { return Work{(backward ? 3 : 2) * t * s[0], 0}; };
    c.make = [backward](const Shape& s, uint64_t seed) {
      return std::make_unique<GeluInstance<T>>(s[0], seed, backward);
    };
    out.push_back(c);
  }
  for (bool backward : {false, true}) {
    Case c = new_case("swiglu", backward ? "backward" : "forward", dtype_of<T>(),
                      "input [rows, 2 cols] = (gate, up); out [rows, cols]");
    c.name = std::string(backward ? "swiglu_bwd_" : "swiglu_fwd_") + dt;
    c.dims = {"rows", "cols"};
    c.test_shapes = {{70, 48}, {5, 37}, {33, 2752}};
    c.bench_shapes = {{16384, 4096}, {8192, 14336}};
    c.work = [t, backward](const Shape& s) {
      const double n = static_cast<double>(s[0]) * s[1];
      return Work{(backward ? 5 : 3) * t * n, 0};
    };
    c.make = [backward](const Shape& s, uint64_t seed) {
      return std::make_unique<SwigluInstance<T>>(s, seed, backward);
    };
    out.push_back(c);
  }
  const char* names[] = {"bias_dropout_residual_fwd_", "dropout_bwd_", "bias_grad_"};
  const char* passes[] = {"forward", "backward_input", "backward_weight"};
  const char* notes[] = {"y = residual + dropout(x + bias), p = 0.1, Philox mask recomputed",
                         "dx = dy * mask / (1 - p), p = 0.1", "dbias = column sums (fp32)"};
  for (DropPass pass : {DropPass::kForward, DropPass::kBackward, DropPass::kBias}) {
    const int k = static_cast<int>(pass);
    Case c = new_case(k == 2 ? "bias_grad" : "bias_dropout_residual", passes[k], dtype_of<T>(),
                      notes[k]);
    c.name = names[k] + dt;
    c.dims = {"rows", "cols"};
    c.test_shapes = {{40, 128}, {13, 45}, {300, 1024}};
    c.bench_shapes = {{16384, 4096}, {16384, 8192}};
    c.work = [t, pass](const Shape& s) {
      const double n = static_cast<double>(s[0]) * s[1];
      if (pass == DropPass::kForward)
        return Work{3 * t * n + t * s[1], 0};  // x, residual in; y out
      if (pass == DropPass::kBackward) return Work{2 * t * n, 0};
      return Work{t * n + 4.0 * s[1], 0};
    };
    c.make = [pass](const Shape& s, uint64_t seed) {
      return std::make_unique<DropoutInstance<T>>(s, seed, pass);
    };
    out.push_back(c);
  }
}

}  // namespace

void add_elementwise_cases(std::vector<Case>& out) {
  add_typed<bf16>(out);
  add_typed<float>(out);
}

void add_optimizer_cases(std::vector<Case>& out) {
  Case c = new_case("adamw", "optimizer", DType::kF32,
                    "fp32 master weights, moments and gradients; bf16 parameters written");
  c.name = "adamw_step";
  c.dims = {"params"};
  c.test_shapes = {{4 * 999 + 2}, {1000000}};
  c.bench_shapes = {{int64_t{1} << 24}, {int64_t{1} << 27}};
  // Reads master, m, v, grad (16 B), writes master, m, v (12 B) and the bf16 parameter (2 B).
  c.work = [](const Shape& s) { return Work{30.0 * s[0], 0}; };
  c.make = [](const Shape& s, uint64_t seed) {
    return std::make_unique<AdamWInstance>(s[0], seed);
  };
  out.push_back(c);
}

}  // namespace hetplan::kernels::cases
