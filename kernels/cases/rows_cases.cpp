// Row-wise cases: embedding gather and scatter-add, rotary embedding, softmax cross-entropy.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "kernels/cases/case_util.h"
#include "kernels/cases/cases.h"
#include "kernels/reference/rows_reference.h"
#include "kernels/rows.h"

namespace hetplan::kernels::cases {
namespace {

// Shape: tokens, vocab, hidden.
template <class T>
class EmbeddingInstance : public Instance {
 public:
  EmbeddingInstance(const Shape& s, uint64_t seed, bool backward)
      : tokens_(s[0]),
        vocab_(s[1]),
        hidden_(static_cast<int>(s[2])),
        backward_(backward),
        seed_(seed),
        ids_(random_int_buffer(tokens_, 0, static_cast<int32_t>(vocab_), seed)),
        weight_(backward ? DeviceBuffer<T>()
                         : random_buffer<T>(vocab_ * hidden_, -1.0f, 1.0f, seed + 1)),
        out_(static_cast<size_t>(tokens_ * hidden_)),
        dweight_(backward ? static_cast<size_t>(vocab_ * hidden_) : 0),
        workspace_(backward ? embedding_backward_workspace_bytes(tokens_, vocab_) : 0) {
    if (backward_) {
      fill_uniform(out_.get(), tokens_ * hidden_, -1.0f, 1.0f, seed + 2, nullptr);  // dout
      reset();
    }
  }
  void run(cudaStream_t s) override {
    if (backward_)
      embedding_backward(ids_.get(), out_.get(), dweight_.get(), tokens_, vocab_, hidden_,
                         workspace_.get(), workspace_.bytes(), s);
    else
      embedding_forward(ids_.get(), weight_.get(), out_.get(), tokens_, hidden_, s);
  }
  CheckResult check() override {
    CheckResult r;
    const auto ids = ids_.download();
    if (!backward_) {
      out_.fill_bytes(0xff);
      run(nullptr);
      finish();
      std::vector<float> got;
      std::vector<double> want;
      for (int64_t t : sample_rows(tokens_)) {
        const auto w = fetch(weight_, int64_t{ids[static_cast<size_t>(t)]} * hidden_, hidden_);
        const auto o = fetch(out_, t * hidden_, hidden_);
        want.insert(want.end(), w.begin(), w.end());
        got.insert(got.end(), o.begin(), o.end());
      }
      judge(r, "out", got, want, {0, 0});  // a copy
      return r;
    }
    // Rows of dweight hit by sampled tokens, and a few rows no token may hit: all must equal
    // their starting value plus the sum of their tokens' dout rows.
    reset();
    std::vector<int64_t> rows;
    for (int64_t t : sample_rows(tokens_, 32)) rows.push_back(ids[static_cast<size_t>(t)]);
    for (int64_t v : sample_rows(vocab_, 8)) rows.push_back(v);
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    std::map<int64_t, std::vector<double>> want_rows;
    for (int64_t v : rows) {
      const auto start = fetch(dweight_, v * hidden_, hidden_);
      want_rows[v] = std::vector<double>(start.begin(), start.end());
    }
    run(nullptr);
    finish();
    const auto dout = fetch(out_);
    for (int64_t t = 0; t < tokens_; ++t) {
      auto it = want_rows.find(ids[static_cast<size_t>(t)]);
      if (it == want_rows.end()) continue;
      for (int c = 0; c < hidden_; ++c)
        it->second[static_cast<size_t>(c)] += dout[static_cast<size_t>(t * hidden_ + c)];
    }
    std::vector<float> got;
    std::vector<double> want;
    for (const auto& [v, w] : want_rows) {
      const auto g = fetch(dweight_, v * hidden_, hidden_);
      got.insert(got.end(), g.begin(), g.end());
      want.insert(want.end(), w.begin(), w.end());
    }
    judge(r, "dweight", got, want, {1e-6, 1e-5});
    // Deterministic: a second run from the same start gives the same bits (checked rows).
    std::vector<float> first;
    for (const auto& [v, w] : want_rows) {
      const auto g =
          dweight_.download(static_cast<size_t>(v * hidden_), static_cast<size_t>(hidden_));
      first.insert(first.end(), g.begin(), g.end());
    }
    reset();
    run(nullptr);
    finish();
    std::vector<float> second;
    for (const auto& [v, w] : want_rows) {
      const auto g =
          dweight_.download(static_cast<size_t>(v * hidden_), static_cast<size_t>(hidden_));
      second.insert(second.end(), g.begin(), g.end());
    }
    if (std::memcmp(first.data(), second.data(), first.size() * sizeof(float)) != 0)
      r.fail("dweight: two runs from the same start differ in their bits");
    reset();
    return r;
  }
  size_t device_bytes() const override {
    return total_bytes(ids_, weight_, out_, dweight_, workspace_);
  }

 private:
  void reset() { fill_uniform(dweight_.get(), vocab_ * hidden_, -0.1f, 0.1f, seed_ + 3, nullptr); }
  int64_t tokens_, vocab_;
  int hidden_;
  bool backward_;
  uint64_t seed_;
  DeviceBuffer<int32_t> ids_;
  DeviceBuffer<T> weight_, out_;  // out_ is dout in the backward
  DeviceBuffer<float> dweight_;
  DeviceBuffer<unsigned char> workspace_;
};

// Shape: batch, seq, heads, head_dim. One tensor rotated (the q or k of a layer).
template <class T>
class RotaryInstance : public Instance {
 public:
  RotaryInstance(const Shape& s, uint64_t seed, bool backward)
      : seq_(static_cast<int>(s[1])),
        heads_(static_cast<int>(s[2])),
        d_(static_cast<int>(s[3])),
        tokens_(s[0] * s[1]),
        backward_(backward),
        x_(random_buffer<T>(tokens_ * heads_ * d_, -2.0f, 2.0f, seed)),
        y_(x_.count()),
        cos_(static_cast<size_t>(seq_ * d_ / 2)),
        sin_(cos_.count()) {
    rotary_tables(cos_.get(), sin_.get(), seq_, d_, 10000.0f, nullptr);
    finish();
  }
  void run(cudaStream_t s) override {
    if (backward_)
      rotary_backward(x_.get(), y_.get(), cos_.get(), sin_.get(), tokens_, heads_, d_, seq_, s);
    else
      rotary_forward(x_.get(), y_.get(), cos_.get(), sin_.get(), tokens_, heads_, d_, seq_, s);
  }
  CheckResult check() override {
    y_.fill_bytes(0xff);
    run(nullptr);
    finish();
    CheckResult r;
    // The device tables against cos/sin in double.
    std::vector<double> c_ref(cos_.count()), s_ref(sin_.count());
    ref::rotary_tables(seq_, d_, 10000.0, c_ref, s_ref);
    const auto cosv = fetch(cos_), sinv = fetch(sin_);
    judge(r, "cos", cosv, c_ref, {1e-6, 1e-5});
    judge(r, "sin", sinv, s_ref, {1e-6, 1e-5});
    std::vector<float> got;
    std::vector<double> want;
    const int64_t row = int64_t{heads_} * d_;
    for (int64_t t : sample_rows(tokens_)) {
      const auto x = fetch(x_, t * row, row), y = fetch(y_, t * row, row);
      std::vector<double> ref(static_cast<size_t>(row));
      // Token t alone: a one-token slice with its own position t % seq.
      const int64_t p = t % seq_;
      const std::vector<float> c1(cosv.begin() + p * d_ / 2, cosv.begin() + (p + 1) * d_ / 2),
          s1(sinv.begin() + p * d_ / 2, sinv.begin() + (p + 1) * d_ / 2);
      ref::rotary(x, c1, s1, 1, heads_, d_, 1, backward_ ? -1 : 1, ref);
      got.insert(got.end(), y.begin(), y.end());
      want.insert(want.end(), ref.begin(), ref.end());
    }
    judge(r, backward_ ? "dx" : "y", got, want, default_tolerance(dtype_of<T>()));
    return r;
  }
  size_t device_bytes() const override { return total_bytes(x_, y_, cos_, sin_); }

 private:
  int seq_, heads_, d_;
  int64_t tokens_;
  bool backward_;
  DeviceBuffer<T> x_, y_;
  DeviceBuffer<float> cos_, sin_;
};

// Shape: tokens, vocab.
template <class T>
class CrossEntropyInstance : public Instance {
 public:
  CrossEntropyInstance(const Shape& s, uint64_t seed, bool backward)
      : tokens_(s[0]),
        vocab_(s[1]),
        backward_(backward),
        logits_(random_buffer<T>(tokens_ * vocab_, -8.0f, 8.0f, seed)),
        labels_(random_int_buffer(tokens_, 0, static_cast<int32_t>(vocab_), seed + 1)),
        loss_(static_cast<size_t>(tokens_)),
        lse_(static_cast<size_t>(tokens_)),
        dloss_(random_buffer<float>(tokens_, 0.5f, 1.5f, seed + 2)),
        dlogits_(backward ? static_cast<size_t>(tokens_ * vocab_) : 0) {
    // Some tokens are ignored (label -100), as padding is in training.
    std::vector<int32_t> labels = labels_.download();
    for (size_t t = 3; t < labels.size(); t += 97) labels[t] = -100;
    labels_.upload(labels);
    if (backward_) {
      cross_entropy_forward(logits_.get(), labels_.get(), loss_.get(), lse_.get(), tokens_, vocab_,
                            nullptr);
      finish();
    }
  }
  void run(cudaStream_t s) override {
    if (backward_)
      cross_entropy_backward(logits_.get(), labels_.get(), lse_.get(), dloss_.get(), dlogits_.get(),
                             tokens_, vocab_, s);
    else
      cross_entropy_forward(logits_.get(), labels_.get(), loss_.get(), lse_.get(), tokens_, vocab_,
                            s);
  }
  CheckResult check() override {
    dlogits_.fill_bytes(0xff);
    if (!backward_) {
      loss_.fill_bytes(0xff);
      lse_.fill_bytes(0xff);
    }
    run(nullptr);
    finish();
    const auto labels = labels_.download();
    const auto lse = fetch(lse_), loss = fetch(loss_), dloss = fetch(dloss_);
    std::vector<float> got, got_loss, got_lse;
    std::vector<double> want, want_loss, want_lse;
    for (int64_t t : sample_rows(tokens_)) {
      const auto logits = fetch(logits_, t * vocab_, vocab_);
      const std::vector<int32_t> label = {labels[static_cast<size_t>(t)]};
      if (backward_) {
        std::vector<double> ref(static_cast<size_t>(vocab_));
        ref::cross_entropy_backward(logits, label, std::vector<float>{lse[static_cast<size_t>(t)]},
                                    std::vector<float>{dloss[static_cast<size_t>(t)]}, 1, vocab_,
                                    ref);
        const auto g = fetch(dlogits_, t * vocab_, vocab_);
        got.insert(got.end(), g.begin(), g.end());
        want.insert(want.end(), ref.begin(), ref.end());
      } else {
        std::vector<double> l(1), s(1);
        ref::cross_entropy_forward(logits, label, 1, vocab_, l, s);
        got_loss.push_back(loss[static_cast<size_t>(t)]);
        want_loss.push_back(l[0]);
        got_lse.push_back(lse[static_cast<size_t>(t)]);
        want_lse.push_back(s[0]);
      }
    }
    CheckResult r;
    if (backward_) {
      judge(r, "dlogits", got, want, default_tolerance(dtype_of<T>()));
    } else {
      judge(r, "lse", got_lse, want_lse, {1e-6, 1e-5});
      judge(r, "loss", got_loss, want_loss, {1e-5, 1e-4});
    }
    return r;
  }
  size_t device_bytes() const override {
    return total_bytes(logits_, labels_, loss_, lse_, dloss_, dlogits_);
  }

 private:
  int64_t tokens_, vocab_;
  bool backward_;
  DeviceBuffer<T> logits_;
  DeviceBuffer<int32_t> labels_;
  DeviceBuffer<float> loss_, lse_, dloss_;
  DeviceBuffer<T> dlogits_;
};

template <class T>
void add_embedding(std::vector<Case>& out) {
  const std::string dt(dtype_name(dtype_of<T>()));
  const double t = bytes_per<T>();
  for (bool backward : {false, true}) {
    Case c =
        new_case("embedding", backward ? "backward_weight" : "forward", dtype_of<T>(),
                 backward ? "dweight (fp32) += dout rows by token id; deterministic (CUB radix "
                            "sort of ids, then per-id sums in token order)"
                          : "gather of weight rows by token id");
    c.name = std::string(backward ? "embedding_bwd_" : "embedding_fwd_") + dt;
    c.dims = {"tokens", "vocab", "hidden"};
    c.test_shapes = {{50, 7, 64}, {20, 30, 37}, {6, 4, 2064}, {4096, 50304, 256}};
    c.bench_shapes = {{16384, 50304, 4096}, {16384, 128256, 4096}};
    c.work = [t, backward](const Shape& s) {
      const double rows = static_cast<double>(s[0]) * s[2];
      if (!backward) return Work{2 * t * rows + 4.0 * s[0], 0};
      // dout read once, each touched dweight row read and written once (at most one per token).
      const double touched = std::min<double>(s[0], s[1]) * s[2];
      return Work{t * rows + 8.0 * touched + 4.0 * s[0], 0};
    };
    c.make = [backward](const Shape& s, uint64_t seed) {
      return std::make_unique<EmbeddingInstance<T>>(s, seed, backward);
    };
    out.push_back(c);
  }
}

template <class T>
void add_rotary(std::vector<Case>& out) {
  const std::string dt(dtype_name(dtype_of<T>()));
  const double t = bytes_per<T>();
  for (bool backward : {false, true}) {
    Case c = new_case(
        "rotary", backward ? "backward" : "forward", dtype_of<T>(),
        "rotate-half (LLaMA) on one [batch * seq, heads, head_dim] tensor; fp32 cos/sin tables");
    c.name = std::string(backward ? "rotary_bwd_" : "rotary_fwd_") + dt;
    c.dims = {"batch", "seq", "heads", "head_dim"};
    c.test_shapes = {{2, 5, 3, 64}, {1, 6, 2, 128}, {3, 7, 2, 10}};
    c.bench_shapes = {{8, 2048, 32, 128}, {4, 4096, 32, 128}};
    c.work = [t](const Shape& s) {
      return Work{2 * t * static_cast<double>(s[0]) * s[1] * s[2] * s[3] + 4.0 * s[1] * s[3], 0};
    };
    c.make = [backward](const Shape& s, uint64_t seed) {
      return std::make_unique<RotaryInstance<T>>(s, seed, backward);
    };
    out.push_back(c);
  }
}

template <class T>
void add_cross_entropy(std::vector<Case>& out) {
  const std::string dt(dtype_name(dtype_of<T>()));
  const double t = bytes_per<T>();
  for (bool backward : {false, true}) {
    Case c = new_case("cross_entropy", backward ? "backward" : "forward", dtype_of<T>(),
                      backward ? "dlogits = (softmax - onehot) * dloss, from the saved lse"
                               : "one pass: online max and sum of exp per row; loss and lse fp32");
    c.name = std::string(backward ? "cross_entropy_bwd_" : "cross_entropy_fwd_") + dt;
    c.dims = {"tokens", "vocab"};
    c.test_shapes = {{9, 1003}, {4, 2048}, {3, 5}, {2, 256000}};
    c.bench_shapes = {{8192, 50304}, {4096, 128256}, {2048, 256000}};
    c.work = [t, backward](const Shape& s) {
      const double n = static_cast<double>(s[0]) * s[1];
      return Work{(backward ? 2 : 1) * t * n + 12.0 * s[0], 0};
    };
    c.make = [backward](const Shape& s, uint64_t seed) {
      return std::make_unique<CrossEntropyInstance<T>>(s, seed, backward);
    };
    out.push_back(c);
  }
}

}  // namespace

void add_embedding_cases(std::vector<Case>& out) {
  add_embedding<bf16>(out);
  add_embedding<float>(out);
}
void add_rotary_cases(std::vector<Case>& out) {
  add_rotary<bf16>(out);
  add_rotary<float>(out);
}
void add_cross_entropy_cases(std::vector<Case>& out) {
  add_cross_entropy<bf16>(out);
  add_cross_entropy<float>(out);
}

}  // namespace hetplan::kernels::cases
