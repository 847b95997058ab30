// LayerNorm and RMSNorm cases: forward, input gradient, weight gradients; bf16 and fp32.
#include <cmath>

#include "kernels/cases/case_util.h"
#include "kernels/cases/cases.h"
#include "kernels/norms.h"
#include "kernels/reference/norms_reference.h"

namespace hetplan::kernels::cases {
namespace {

enum class Pass { kForward, kBackwardInput, kBackwardWeight };
constexpr float kEps = 1e-5f;

template <class T>
class NormInstance : public Instance {
 public:
  NormInstance(const Shape& s, uint64_t seed, bool layernorm, Pass pass)
      : rows_(s[0]),
        cols_(static_cast<int>(s[1])),
        ln_(layernorm),
        pass_(pass),
        x_(random_buffer<T>(rows_ * cols_, -2.0f, 2.5f, seed)),
        gamma_(random_buffer<T>(cols_, 0.5f, 1.5f, seed + 1)),
        beta_(random_buffer<T>(cols_, -0.5f, 0.5f, seed + 2)),
        dy_(pass == Pass::kForward ? 0 : static_cast<size_t>(rows_ * cols_)),
        out_(pass == Pass::kBackwardWeight ? 0 : static_cast<size_t>(rows_ * cols_)),
        mean_(static_cast<size_t>(rows_)),
        rstd_(static_cast<size_t>(rows_)),
        dgamma_(pass == Pass::kBackwardWeight ? static_cast<size_t>(cols_) : 0),
        dbeta_(pass == Pass::kBackwardWeight ? static_cast<size_t>(cols_) : 0),
        workspace_(pass == Pass::kBackwardWeight ? norm_weight_workspace_bytes(rows_, cols_) : 0) {
    if (pass_ != Pass::kForward) {
      fill_uniform(dy_.get(), rows_ * cols_, -1.0f, 1.0f, seed + 3, nullptr);
      // The statistics the backward consumes come from the forward, as in training.
      DeviceBuffer<T> y(static_cast<size_t>(rows_ * cols_));
      forward(y.get(), nullptr);
      finish();
    }
  }

  void run(cudaStream_t s) override {
    switch (pass_) {
      case Pass::kForward:
        forward(out_.get(), s);
        break;
      case Pass::kBackwardInput:
        if (ln_)
          layernorm_backward_input(x_.get(), gamma_.get(), mean_.get(), rstd_.get(), dy_.get(),
                                   out_.get(), rows_, cols_, s);
        else
          rmsnorm_backward_input(x_.get(), gamma_.get(), rstd_.get(), dy_.get(), out_.get(), rows_,
                                 cols_, s);
        break;
      case Pass::kBackwardWeight:
        if (ln_)
          layernorm_backward_weight(x_.get(), mean_.get(), rstd_.get(), dy_.get(), dgamma_.get(),
                                    dbeta_.get(), rows_, cols_, workspace_.get(), s);
        else
          rmsnorm_backward_weight(x_.get(), rstd_.get(), dy_.get(), dgamma_.get(), rows_, cols_,
                                  workspace_.get(), s);
        break;
    }
  }

  CheckResult check() override {
    out_.fill_bytes(0xff);
    dgamma_.fill_bytes(0xff);
    dbeta_.fill_bytes(0xff);
    if (pass_ == Pass::kForward) {
      mean_.fill_bytes(0xff);
      rstd_.fill_bytes(0xff);
    }
    run(nullptr);
    finish();
    CheckResult r;
    const auto gamma = fetch(gamma_), beta = fetch(beta_);
    if (pass_ == Pass::kBackwardWeight) {
      check_weights(r);
      return r;
    }
    std::vector<float> got, got_mean, got_rstd;
    std::vector<double> want, want_mean, want_rstd;
    for (int64_t row : sample_rows(rows_)) {
      const auto x = fetch(x_, row * cols_, cols_), out = fetch(out_, row * cols_, cols_);
      const auto mean = fetch(mean_, row, 1), rstd = fetch(rstd_, row, 1);
      std::vector<double> ref(static_cast<size_t>(cols_)), m(1), s(1);
      if (pass_ == Pass::kForward) {
        if (ln_)
          ref::layernorm_forward(x, gamma, beta, 1, cols_, kEps, ref, m, s);
        else
          ref::rmsnorm_forward(x, gamma, 1, cols_, kEps, ref, s);
        got_rstd.push_back(rstd[0]);
        want_rstd.push_back(s[0]);
        if (ln_) {
          got_mean.push_back(mean[0]);
          want_mean.push_back(m[0]);
        }
      } else {
        const auto dy = fetch(dy_, row * cols_, cols_);
        if (ln_)
          ref::layernorm_backward_input(x, gamma, mean, rstd, dy, 1, cols_, ref);
        else
          ref::rmsnorm_backward_input(x, gamma, rstd, dy, 1, cols_, ref);
      }
      got.insert(got.end(), out.begin(), out.end());
      want.insert(want.end(), ref.begin(), ref.end());
    }
    judge(r, pass_ == Pass::kForward ? "y" : "dx", got, want, default_tolerance(dtype_of<T>()));
    if (pass_ == Pass::kForward) {
      judge(r, "rstd", got_rstd, want_rstd, {1e-5, 1e-4});
      if (ln_) judge(r, "mean", got_mean, want_mean, {1e-5, 1e-4});
    }
    return r;
  }

  size_t device_bytes() const override {
    return total_bytes(x_, gamma_, beta_, dy_, out_, mean_, rstd_, dgamma_, dbeta_, workspace_);
  }

 private:
  void forward(T* y, cudaStream_t s) {
    if (ln_)
      layernorm_forward(x_.get(), gamma_.get(), beta_.get(), y, mean_.get(), rstd_.get(), rows_,
                        cols_, kEps, s);
    else
      rmsnorm_forward(x_.get(), gamma_.get(), y, rstd_.get(), rows_, cols_, kEps, s);
  }

  // Every row enters each column sum, so the check takes all rows and a sample of columns.
  void check_weights(CheckResult& r) {
    const auto x = fetch(x_), dy = fetch(dy_), mean = fetch(mean_), rstd = fetch(rstd_);
    const auto dgamma = fetch(dgamma_), dbeta = fetch(dbeta_);
    std::vector<float> got_g, got_b;
    std::vector<double> want_g, want_b;
    for (int64_t c : sample_rows(cols_, 256)) {
      double g = 0, b = 0;
      for (int64_t row = 0; row < rows_; ++row) {
        const double d = dy[static_cast<size_t>(row * cols_ + c)];
        const double xv = x[static_cast<size_t>(row * cols_ + c)];
        g += d * (xv - (ln_ ? mean[static_cast<size_t>(row)] : 0.0)) *
             rstd[static_cast<size_t>(row)];
        b += d;
      }
      got_g.push_back(dgamma[static_cast<size_t>(c)]);
      want_g.push_back(g);
      if (ln_) {
        got_b.push_back(dbeta[static_cast<size_t>(c)]);
        want_b.push_back(b);
      }
    }
    // fp32 sums of up to 1e4 products in a different order: ~1e-6 relative.
    judge(r, "dgamma", got_g, want_g, {1e-5, 1e-4});
    if (ln_) judge(r, "dbeta", got_b, want_b, {1e-5, 1e-4});
  }

  int64_t rows_;
  int cols_;
  bool ln_;
  Pass pass_;
  DeviceBuffer<T> x_, gamma_, beta_, dy_, out_;
  DeviceBuffer<float> mean_, rstd_, dgamma_, dbeta_;
  DeviceBuffer<unsigned char> workspace_;
};

template <class T>
Case norm_case(bool layernorm, Pass pass) {
  static const char* kPassNames[] = {"fwd", "bwd_input", "bwd_weight"};
  static const char* kPasses[] = {"forward", "backward_input", "backward_weight"};
  Case c =
      new_case(layernorm ? "layernorm" : "rmsnorm", kPasses[static_cast<int>(pass)], dtype_of<T>(),
               "over the last dimension of [rows, cols]; statistics fp32; weight gradients fp32");
  c.name = c.family + "_" + kPassNames[static_cast<int>(pass)] + "_" +
           std::string(dtype_name(dtype_of<T>()));
  c.dims = {"rows", "cols"};
  c.test_shapes = {{3, 520}, {2, 77}, {300, 1024}, {7, 8192}};
  c.bench_shapes = {{16384, 4096}, {16384, 8192}};
  c.work = [layernorm, pass](const Shape& s) {
    const double n = static_cast<double>(s[0]) * s[1], rows = s[0], cols = s[1];
    const double t = bytes_per<T>(), stats = (layernorm ? 2 : 1) * 4.0 * rows;
    const double params = (layernorm ? 2 : 1) * t * cols;
    switch (pass) {
      case Pass::kForward:
        return Work{2 * t * n + params + stats, 0};
      case Pass::kBackwardInput:
        return Work{3 * t * n + t * cols + stats, 0};
      case Pass::kBackwardWeight:
        break;
    }
    return Work{2 * t * n + stats + (layernorm ? 2 : 1) * 4.0 * cols, 0};
  };
  c.make = [layernorm, pass](const Shape& s, uint64_t seed) {
    return std::make_unique<NormInstance<T>>(s, seed, layernorm, pass);
  };
  return c;
}

}  // namespace

void add_norm_cases(std::vector<Case>& out) {
  for (bool layernorm : {true, false})
    for (Pass pass : {Pass::kForward, Pass::kBackwardInput, Pass::kBackwardWeight}) {
      out.push_back(norm_case<bf16>(layernorm, pass));
      out.push_back(norm_case<float>(layernorm, pass));
    }
}

}  // namespace hetplan::kernels::cases
