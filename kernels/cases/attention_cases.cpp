// Attention cases: flash-style forward and backward, bf16 and fp16, [batch, seq, heads, dim].
#include <algorithm>
#include <cmath>

#include "kernels/attention.h"
#include "kernels/cases/case_util.h"
#include "kernels/cases/cases.h"
#include "kernels/reference/attention_reference.h"

namespace hetplan::kernels::cases {
namespace {

// Shape: batch, heads, seq, head_dim, causal (0 or 1).
AttentionShape attention_shape(const Shape& s) {
  AttentionShape a;
  a.batch = static_cast<int>(s[0]);
  a.heads = static_cast<int>(s[1]);
  a.seq = static_cast<int>(s[2]);
  a.head_dim = static_cast<int>(s[3]);
  a.causal = s[4] != 0;
  a.layout = AttentionLayout::kBSHD;
  return a;
}

template <class T>
class AttentionInstance : public Instance {
 public:
  AttentionInstance(const Shape& s, uint64_t seed, bool backward)
      : shape_(attention_shape(s)),
        backward_(backward),
        n_(int64_t{shape_.batch} * shape_.heads * shape_.seq * shape_.head_dim),
        q_(random_buffer<T>(n_, -2.0f, 2.0f, seed)),
        k_(random_buffer<T>(n_, -2.0f, 2.0f, seed + 1)),
        v_(random_buffer<T>(n_, -1.0f, 1.0f, seed + 2)),
        o_(static_cast<size_t>(n_)),
        lse_(static_cast<size_t>(n_ / shape_.head_dim)),
        dout_(backward ? random_buffer<T>(n_, -1.0f, 1.0f, seed + 3) : DeviceBuffer<T>()),
        dq_(backward ? static_cast<size_t>(n_) : 0),
        dk_(dq_.count()),
        dv_(dq_.count()),
        workspace_(backward ? attention_backward_workspace_bytes(shape_) : 0) {
    if (backward_) {
      forward(nullptr);  // o and lse as training would hand them to the backward
      finish();
    }
  }
  void run(cudaStream_t s) override {
    if (backward_)
      attention_backward(q_.get(), k_.get(), v_.get(), o_.get(), dout_.get(), lse_.get(), dq_.get(),
                         dk_.get(), dv_.get(), shape_, workspace_.get(), s);
    else
      forward(s);
  }
  CheckResult check() override {
    if (backward_) {
      dq_.fill_bytes(0xff);
      dk_.fill_bytes(0xff);
      dv_.fill_bytes(0xff);
    } else {
      o_.fill_bytes(0xff);
      lse_.fill_bytes(0xff);
    }
    run(nullptr);
    finish();
    const ref::AttentionDims dims{
        shape_.batch,  shape_.heads,           shape_.seq, shape_.head_dim,
        shape_.causal, shape_.softmax_scale(), true};
    const auto q = fetch(q_), k = fetch(k_), v = fetch(v_), o = fetch(o_), lse = fetch(lse_);
    const auto dout = backward_ ? fetch(dout_) : std::vector<float>();
    const int64_t d = shape_.head_dim;
    std::vector<float> got_a, got_b, got_c, got_lse;
    std::vector<double> want_a, want_b, want_c, want_lse;
    const auto dq = fetch(dq_), dk = fetch(dk_), dv = fetch(dv_);
    for (int64_t bh : sample_rows(int64_t{shape_.batch} * shape_.heads, 3)) {
      const int64_t b = bh / shape_.heads, h = bh % shape_.heads;
      for (int64_t i : sample_rows(shape_.seq, 24)) {
        const int64_t off = dims.row(b, h, i);
        std::vector<double> ra(static_cast<size_t>(d)), rb(static_cast<size_t>(d)),
            rc(static_cast<size_t>(d));
        if (!backward_) {
          want_lse.push_back(ref::attention_forward_row(q, k, v, dims, b, h, i, ra));
          got_lse.push_back(lse[static_cast<size_t>(dims.stat(b, h, i))]);
          got_a.insert(got_a.end(), o.begin() + off, o.begin() + off + d);
        } else {
          ref::attention_backward_dq_row(q, k, v, o, dout, lse, dims, b, h, i, ra);
          ref::attention_backward_dkdv_row(q, k, v, o, dout, lse, dims, b, h, i, rb, rc);
          got_a.insert(got_a.end(), dq.begin() + off, dq.begin() + off + d);
          got_b.insert(got_b.end(), dk.begin() + off, dk.begin() + off + d);
          got_c.insert(got_c.end(), dv.begin() + off, dv.begin() + off + d);
          want_b.insert(want_b.end(), rb.begin(), rb.end());
          want_c.insert(want_c.end(), rc.begin(), rc.end());
        }
        want_a.insert(want_a.end(), ra.begin(), ra.end());
      }
    }
    // bf16: P and dS are rounded to bf16 inside (as in FlashAttention); emulated runs measured
    // rel_l2 ~2e-3 (forward) and ~3e-3 (gradients). fp16 keeps 3 more bits.
    const Tolerance tol = std::is_same_v<T, bf16> ? Tolerance{1e-2, 8e-2} : Tolerance{2e-3, 2e-2};
    CheckResult r;
    if (!backward_) {
      judge(r, "o", got_a, want_a, tol);
      judge(r, "lse", got_lse, want_lse, {1e-5, 1e-4});
    } else {
      // dq and dk are exactly 0 for a single key (seq 1, or causal row 0 alone): judge them
      // against 1% of dv's scale there rather than relative to a zero norm.
      double dv2 = 0;
      for (double w : want_c) dv2 += w * w;
      Tolerance grad_tol = tol;
      grad_tol.floor_rms =
          1e-2 * std::sqrt(dv2 / static_cast<double>(std::max<size_t>(1, want_c.size())));
      judge(r, "dq", got_a, want_a, grad_tol);
      judge(r, "dk", got_b, want_b, grad_tol);
      judge(r, "dv", got_c, want_c, tol);
    }
    return r;
  }
  size_t device_bytes() const override {
    return total_bytes(q_, k_, v_, o_, lse_, dout_, dq_, dk_, dv_, workspace_);
  }

 private:
  void forward(cudaStream_t s) {
    attention_forward(q_.get(), k_.get(), v_.get(), o_.get(), lse_.get(), shape_, s);
  }
  AttentionShape shape_;
  bool backward_;
  int64_t n_;
  DeviceBuffer<T> q_, k_, v_, o_;
  DeviceBuffer<float> lse_;
  DeviceBuffer<T> dout_, dq_, dk_, dv_;
  DeviceBuffer<unsigned char> workspace_;
};

template <class T>
Case attention_case(bool backward) {
  Case c;
  c.family = "attention";
  c.pass = backward ? "backward" : "forward";
  c.dtype = dtype_of<T>();
  c.bound = Bound::kCompute;
  c.name = std::string(backward ? "attention_bwd_" : "attention_fwd_") +
           std::string(dtype_name(c.dtype));
  c.note = backward ? "FlashAttention-2 backward: D = rowsum(dO O), recompute P per tile, dQ by "
                      "fp32 atomics, then dQ conversion; mma.sync (64 x 64 tiles), or on "
                      "compute capability 9.0 the experimental wgmma kernels where built"
                    : "flash forward, online softmax, writes O and lse; mma.sync (64 x 64 tiles), "
                      "or on compute capability 9.0 the experimental wgmma kernels where built";
  c.dims = {"batch", "heads", "seq", "head_dim", "causal"};
  c.test_shapes = {{1, 2, 100, 64, 1}, {2, 1, 130, 64, 0},  {1, 1, 128, 128, 1},
                   {1, 2, 37, 128, 0}, {2, 3, 257, 128, 1}, {1, 1, 1, 64, 1}};
  if (std::is_same_v<T, bf16>)
    c.bench_shapes = {{4, 16, 4096, 128, 1},
                      {8, 16, 2048, 128, 1},
                      {8, 32, 1024, 128, 1},
                      {4, 32, 4096, 64, 1},
                      {4, 16, 4096, 128, 0}};
  else
    c.bench_shapes = {{4, 16, 4096, 128, 1}};
  c.work = [backward](const Shape& s) {
    const AttentionShape a = attention_shape(s);
    const double n = static_cast<double>(a.batch) * a.heads * a.seq * a.head_dim;
    const double rows = static_cast<double>(a.batch) * a.heads * a.seq;
    if (!backward) return Work{4 * n * sizeof(T) + 4 * rows, attention_forward_flops(a)};
    return Work{8 * n * sizeof(T) + 4 * rows, attention_backward_flops(a)};
  };
  c.make = [backward](const Shape& s, uint64_t seed) {
    return std::make_unique<AttentionInstance<T>>(s, seed, backward);
  };
  c.unsupported = [](const Shape& s) {
    return attention_support(dtype_of<T>(), static_cast<int>(s[3]));
  };
  return c;
}

}  // namespace

void add_attention_cases(std::vector<Case>& out) {
  out.push_back(attention_case<bf16>(false));
  out.push_back(attention_case<bf16>(true));
  out.push_back(attention_case<fp16>(false));
  out.push_back(attention_case<fp16>(true));
}

}  // namespace hetplan::kernels::cases
