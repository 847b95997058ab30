#include "profiler/layer/block.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "profiler/cuda_check.h"
#include "profiler/device.h"
#include "profiler/device_fill.h"
#include "profiler/layer/arena.h"
#include "profiler/layer/block_buffers.h"

#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/norms.h"
#include "kernels/rows.h"

namespace hetplan::profiler {

BlockDims block_dims(const LayerTimingCase& c) {
  BlockDims d;
  d.batch = c.micro_batch;
  d.seq = c.seq_len;
  d.tokens = c.micro_batch * c.seq_len;
  d.hidden = c.hidden;
  d.heads = c.heads / c.tp;
  d.kv_heads = std::max<int64_t>(1, c.kv_heads / c.tp);
  d.head_dim = c.head_dim;
  d.q_dim = d.heads * d.head_dim;
  d.kv_dim = d.kv_heads * d.head_dim;
  d.qkv_out = d.q_dim + 2 * d.kv_dim;
  d.ffn = c.ffn_hidden / c.tp;
  d.gpt = c.style == "gpt";
  d.up = d.gpt ? d.ffn : 2 * d.ffn;
  d.bias = c.bias;
  d.rotary = c.rotary;
  d.causal = c.causal;
  d.dropout = static_cast<float>(c.dropout);
  return d;
}

namespace {

using namespace block_detail;  // Tensor, Set, layout
constexpr float kNormEps = 1e-5f;
constexpr float kRotaryBase = 10000.0f;

// GEMM shapes of one linear layer (see profiler/common/layer_plan.h for the transposes).
GemmShape fwd_shape(int64_t in, int64_t out, int64_t T) { return {out, T, in, 1, true, false}; }
GemmShape dgrad_shape(int64_t in, int64_t out, int64_t T) { return {in, T, out, 1, false, false}; }
GemmShape wgrad_shape(int64_t in, int64_t out, int64_t T) { return {in, out, T, 1, false, true}; }

constexpr size_t kBf16Bytes = 2;

// A strided 2-D device copy: `rows` rows of `width` bf16 elements.
void copy_columns(void* dst, int64_t dst_cols, const void* src, int64_t src_cols, int64_t width,
                  int64_t rows, cudaStream_t stream) {
  constexpr size_t e = kBf16Bytes;
  CUDA_CHECK(cudaMemcpy2DAsync(dst, dst_cols * e, src, src_cols * e, width * e,
                               static_cast<size_t>(rows), cudaMemcpyDeviceToDevice, stream));
}

// The fused QKV GEMM's [tokens, q | k | v] columns and the q, k, v tensors attention reads: the
// forward splits the GEMM's output, the backward joins the gradients for the GEMM.
enum class QkvCopy { kSplit, kJoin };
void copy_qkv(const BlockDims& d, QkvCopy direction, const Tensor& qkv, const Tensor& q,
              const Tensor& k, const Tensor& v, cudaStream_t st) {
  const std::pair<const Tensor*, int64_t> parts[] = {{&q, d.q_dim}, {&k, d.kv_dim}, {&v, d.kv_dim}};
  int64_t first_col = 0;
  for (const auto& [t, cols] : parts) {
    char* fused = static_cast<char*>(qkv.p()) + first_col * kBf16Bytes;
    if (direction == QkvCopy::kSplit)
      copy_columns(t->p(), cols, fused, d.qkv_out, cols, d.tokens, st);
    else
      copy_columns(fused, d.qkv_out, t->p(), cols, cols, d.tokens, st);
    first_col += cols;
  }
}

// Rotary embedding of q and k in place (forward), or of their gradients (backward).
void rotate_qk(const BlockDims& d, const DeviceBuffer& cos, const DeviceBuffer& sin,
               const Tensor& q, const Tensor& k, bool backward, cudaStream_t st) {
  const int hd = static_cast<int>(d.head_dim), sq = static_cast<int>(d.seq);
  for (const auto& [t, heads] : {std::pair{&q, d.heads}, std::pair{&k, d.kv_heads}}) {
    const int n = static_cast<int>(heads);
    if (backward)
      K::rotary_backward(t->b(), t->b(), cos.as<float>(), sin.as<float>(), d.tokens, n, hd, sq, st);
    else
      K::rotary_forward(t->b(), t->b(), cos.as<float>(), sin.as<float>(), d.tokens, n, hd, sq, st);
  }
}

// One of the block's two norms: LayerNorm (GPT style) or RMSNorm (LLaMA style: no bias, no mean;
// those tensors are then empty and never touched).
struct Norm {
  const Tensor &weight, &bias, &mean, &rstd, &dweight, &dbias;
};
Norm norm1(const Set& s) { return {s.g1, s.be1, s.mean1, s.rstd1, s.dg1, s.dbe1}; }
Norm norm2(const Set& s) { return {s.g2, s.be2, s.mean2, s.rstd2, s.dg2, s.dbe2}; }

// y = norm(x), keeping the statistics the backward reads.
void norm_forward(const BlockDims& d, const Norm& n, const Tensor& x, const Tensor& y,
                  cudaStream_t st) {
  const int64_t T = d.tokens;
  const int h = static_cast<int>(d.hidden);
  if (d.gpt) {
    K::layernorm_forward(x.b(), n.weight.b(), n.bias.b(), y.b(), n.mean.f(), n.rstd.f(), T, h,
                         kNormEps, st);
  } else {
    K::rmsnorm_forward(x.b(), n.weight.b(), y.b(), n.rstd.f(), T, h, kNormEps, st);
  }
}

// dx from dy through the norm (B pass).
void norm_backward_input(const BlockDims& d, const Norm& n, const Tensor& x, const Tensor& dy,
                         const Tensor& dx, cudaStream_t st) {
  const int64_t T = d.tokens;
  const int h = static_cast<int>(d.hidden);
  if (d.gpt) {
    K::layernorm_backward_input(x.b(), n.weight.b(), n.mean.f(), n.rstd.f(), dy.b(), dx.b(), T, h,
                                st);
  } else {
    K::rmsnorm_backward_input(x.b(), n.weight.b(), n.rstd.f(), dy.b(), dx.b(), T, h, st);
  }
}

// The norm's weight (and LayerNorm's bias) gradients from dy (W pass).
void norm_backward_weight(const BlockDims& d, const Norm& n, const Tensor& x, const Tensor& dy,
                          void* workspace, cudaStream_t st) {
  const int64_t T = d.tokens;
  const int h = static_cast<int>(d.hidden);
  if (d.gpt) {
    K::layernorm_backward_weight(x.b(), n.mean.f(), n.rstd.f(), dy.b(), n.dweight.f(), n.dbias.f(),
                                 T, h, workspace, st);
  } else {
    K::rmsnorm_backward_weight(x.b(), n.rstd.f(), dy.b(), n.dweight.f(), T, h, workspace, st);
  }
}

// out = branch + residual: where a residual's gradient joins its branch's (the
// bias-dropout-residual kernel without bias or dropout).
void sum_gradients(const BlockDims& d, const Tensor& branch, const Tensor& residual,
                   const Tensor& out, cudaStream_t st) {
  K::bias_dropout_residual_forward(branch.b(), static_cast<const K::bf16*>(nullptr), residual.b(),
                                   out.b(), d.tokens, static_cast<int>(d.hidden), K::Dropout{}, st);
}

}  // namespace

struct TransformerBlock::Impl {
  LayerTimingCase c;
  BlockDims d;
  cudaStream_t stream = nullptr;
  LtHandle lt;
  DeviceBuffer workspace;  // cuBLASLt's
  std::vector<std::unique_ptr<Set>> sets;
  DeviceBuffer rotary_cos, rotary_sin;
  K::AttentionShape attn;
  // The twelve GEMMs: F, B, W of the four linear layers (shared by all sets).
  std::unique_ptr<LtGemm> qkv_f, qkv_b, qkv_w, o_f, o_b, o_w, fc1_f, fc1_b, fc1_w, fc2_f, fc2_b,
      fc2_w;
  K::Dropout drop_attn, drop_mlp;

  int rows() const { return static_cast<int>(d.tokens); }
};

std::string TransformerBlock::unsupported_reason(const LayerTimingCase& c) {
  const BlockDims d = block_dims(c);
  if (d.kv_heads != d.heads)
    return fmt::format(
        "grouped-query attention ({} KV heads for {} heads per rank) is not "
        "supported by the kernels/ attention",
        d.kv_heads, d.heads);
  const std::string why = K::attention_support(K::DType::kBF16, static_cast<int>(d.head_dim));
  if (!why.empty()) return why;
  return "";
}

int64_t TransformerBlock::set_bytes(const LayerTimingCase& c) {
  Set s;
  layout(s, block_dims(c));
  return static_cast<int64_t>(s.params.size_bytes() + s.saved.size_bytes() + s.work.size_bytes());
}

TransformerBlock::TransformerBlock(const LayerTimingCase& c, int sets, cudaStream_t stream)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.c = c;
  m.d = block_dims(c);
  m.stream = stream;
  const BlockDims& d = m.d;
  const int64_t T = d.tokens, h = d.hidden;
  m.workspace = DeviceBuffer(kGemmWorkspaceBytes, "cuBLASLt workspace");
  auto gemm = [&](const GemmShape& s, bool bias) {
    return std::make_unique<LtGemm>(m.lt.get(), Dtype::kBf16, s, nullptr, bias);
  };
  m.qkv_f = gemm(fwd_shape(h, d.qkv_out, T), d.bias);
  m.qkv_b = gemm(dgrad_shape(h, d.qkv_out, T), false);
  m.qkv_w = gemm(wgrad_shape(h, d.qkv_out, T), false);
  m.o_f = gemm(fwd_shape(d.q_dim, h, T), false);  // bias in the bias-dropout-residual kernel
  m.o_b = gemm(dgrad_shape(d.q_dim, h, T), false);
  m.o_w = gemm(wgrad_shape(d.q_dim, h, T), false);
  m.fc1_f = gemm(fwd_shape(h, d.up, T), d.bias);
  m.fc1_b = gemm(dgrad_shape(h, d.up, T), false);
  m.fc1_w = gemm(wgrad_shape(h, d.up, T), false);
  m.fc2_f = gemm(fwd_shape(d.ffn, h, T), false);
  m.fc2_b = gemm(dgrad_shape(d.ffn, h, T), false);
  m.fc2_w = gemm(wgrad_shape(d.ffn, h, T), false);

  m.attn = attention_shape(d);
  m.drop_attn = K::Dropout{d.dropout, 1234, 0};
  m.drop_mlp = K::Dropout{d.dropout, 1234, static_cast<uint64_t>((T * h + 3) / 4)};

  if (d.rotary) {
    const size_t n = static_cast<size_t>(d.seq * d.head_dim / 2) * sizeof(float);
    m.rotary_cos = DeviceBuffer(n, "rotary cos");
    m.rotary_sin = DeviceBuffer(n, "rotary sin");
    K::rotary_tables(m.rotary_cos.as<float>(), m.rotary_sin.as<float>(), static_cast<int>(d.seq),
                     static_cast<int>(d.head_dim), kRotaryBase, stream);
  }
  uint64_t seed = 100;
  for (int i = 0; i < sets; ++i) {
    auto s = std::make_unique<Set>();
    layout(*s, d);
    s->params.allocate(fmt::format("layer weights (set {})", i));
    s->saved_memgetinfo = s->saved.allocate(fmt::format("saved activations (set {})", i));
    s->work.allocate(fmt::format("layer temporaries and gradients (set {})", i));
    // Random weights at the usual 1/sqrt(fan-in) scale, inputs and incoming gradients random.
    auto fill = [&](const Tensor& t, float scale) {
      if (t.arena != nullptr && t.count > 0)
        fill_uniform(t.p(), t.count, t.dtype, seed++, scale, stream);
    };
    fill(s->wqkv, 1.0f / std::sqrt(float(h)));
    fill(s->wo, 1.0f / std::sqrt(float(d.q_dim)));
    fill(s->w1, 1.0f / std::sqrt(float(h)));
    fill(s->w2, 1.0f / std::sqrt(float(d.ffn)));
    fill(s->g1, 1.0f);
    fill(s->g2, 1.0f);
    fill(s->be1, 0.1f);
    fill(s->be2, 0.1f);
    fill(s->bqkv, 0.1f);
    fill(s->bo, 0.1f);
    fill(s->b1, 0.1f);
    fill(s->b2, 0.1f);
    fill(s->x, 1.0f);
    fill(s->dout, 0.01f);
    m.sets.push_back(std::move(s));
  }
  CUDA_CHECK(cudaStreamSynchronize(stream));
}

TransformerBlock::~TransformerBlock() = default;

int TransformerBlock::sets() const { return static_cast<int>(impl_->sets.size()); }

void TransformerBlock::forward(int set) {
  Impl& m = *impl_;
  Set& s = *m.sets[static_cast<size_t>(set)];
  const BlockDims& d = m.d;
  const cudaStream_t st = m.stream;
  const int64_t T = d.tokens;
  const int h = static_cast<int>(d.hidden);
  void* ws = m.workspace.get();
  // Attention half.
  norm_forward(d, norm1(s), s.x, s.y1, st);
  m.qkv_f->run(s.wqkv.p(), s.y1.p(), s.qkv.p(), ws, st, d.bias ? s.bqkv.p() : nullptr);
  copy_qkv(d, QkvCopy::kSplit, s.qkv, s.q, s.k, s.v, st);
  if (d.rotary) rotate_qk(d, m.rotary_cos, m.rotary_sin, s.q, s.k, /*backward=*/false, st);
  K::attention_forward(s.q.b(), s.k.b(), s.v.b(), s.o.b(), s.lse.f(), m.attn, st);
  m.o_f->run(s.wo.p(), s.o.p(), s.proj.p(), ws, st);
  K::bias_dropout_residual_forward(s.proj.b(), d.bias ? s.bo.b() : nullptr, s.x.b(), s.x2.b(), T, h,
                                   m.drop_attn, st);
  // MLP half.
  norm_forward(d, norm2(s), s.x2, s.y2, st);
  m.fc1_f->run(s.w1.p(), s.y2.p(), s.u.p(), ws, st, d.bias ? s.b1.p() : nullptr);
  if (d.gpt) {
    K::gelu_forward(s.u.b(), s.a.b(), T * d.ffn, st);
  } else {
    K::swiglu_forward(s.u.b(), s.a.b(), T, static_cast<int>(d.ffn), st);
  }
  m.fc2_f->run(s.w2.p(), s.a.p(), s.z.p(), ws, st);
  K::bias_dropout_residual_forward(s.z.b(), d.bias ? s.b2.b() : nullptr, s.x2.b(), s.out.b(), T, h,
                                   m.drop_mlp, st);
}

void TransformerBlock::backward_input(int set) {
  Impl& m = *impl_;
  Set& s = *m.sets[static_cast<size_t>(set)];
  const BlockDims& d = m.d;
  const cudaStream_t st = m.stream;
  const int64_t T = d.tokens;
  const int h = static_cast<int>(d.hidden);
  void* ws = m.workspace.get();
  // MLP half: out = x2 + dropout(z + b2).
  const Tensor& dz = d.dropout > 0 ? s.dz : s.dout;
  if (d.dropout > 0) K::dropout_backward(s.dout.b(), s.dz.b(), T * h, m.drop_mlp, st);
  m.fc2_b->run(s.w2.p(), dz.p(), s.da.p(), ws, st);
  if (d.gpt) {
    K::gelu_backward(s.u.b(), s.da.b(), s.du.b(), T * d.ffn, st);
  } else {
    K::swiglu_backward(s.u.b(), s.da.b(), s.du.b(), T, static_cast<int>(d.ffn), st);
  }
  m.fc1_b->run(s.w1.p(), s.du.p(), s.dy2.p(), ws, st);
  norm_backward_input(d, norm2(s), s.x2, s.dy2, s.dx2a, st);
  // The residual's gradient joins the norm's: dx2 = dout + dx2_norm.
  sum_gradients(d, s.dx2a, s.dout, s.dx2, st);
  // Attention half: x2 = x + dropout(proj + bo).
  const Tensor& dproj = d.dropout > 0 ? s.dproj : s.dx2;
  if (d.dropout > 0) K::dropout_backward(s.dx2.b(), s.dproj.b(), T * h, m.drop_attn, st);
  m.o_b->run(s.wo.p(), dproj.p(), s.d_o.p(), ws, st);
  K::attention_backward(s.q.b(), s.k.b(), s.v.b(), s.o.b(), s.d_o.b(), s.lse.f(), s.dq.b(),
                        s.dk.b(), s.dv.b(), m.attn, s.attn_ws.p(), st);
  if (d.rotary) rotate_qk(d, m.rotary_cos, m.rotary_sin, s.dq, s.dk, /*backward=*/true, st);
  copy_qkv(d, QkvCopy::kJoin, s.dqkv, s.dq, s.dk, s.dv, st);
  m.qkv_b->run(s.wqkv.p(), s.dqkv.p(), s.dy1.p(), ws, st);
  norm_backward_input(d, norm1(s), s.x, s.dy1, s.dx1, st);
  sum_gradients(d, s.dx1, s.dx2, s.dx, st);
}

void TransformerBlock::backward_weight(int set) {
  Impl& m = *impl_;
  Set& s = *m.sets[static_cast<size_t>(set)];
  const BlockDims& d = m.d;
  const cudaStream_t st = m.stream;
  const int64_t T = d.tokens;
  const int h = static_cast<int>(d.hidden);
  void* ws = m.workspace.get();
  void* nws = s.norm_ws.p();
  const Tensor& dz = d.dropout > 0 ? s.dz : s.dout;
  const Tensor& dproj = d.dropout > 0 ? s.dproj : s.dx2;
  m.fc2_w->run(s.a.p(), dz.p(), s.dw2.p(), ws, st);
  m.fc1_w->run(s.y2.p(), s.du.p(), s.dw1.p(), ws, st);
  m.o_w->run(s.o.p(), dproj.p(), s.dwo.p(), ws, st);
  m.qkv_w->run(s.y1.p(), s.dqkv.p(), s.dwqkv.p(), ws, st);
  if (d.bias) {
    K::column_sum(dz.b(), s.db2.f(), T, h, nws, st);
    K::column_sum(s.du.b(), s.db1.f(), T, static_cast<int>(d.up), nws, st);
    K::column_sum(dproj.b(), s.dbo.f(), T, h, nws, st);
    K::column_sum(s.dqkv.b(), s.dbqkv.f(), T, static_cast<int>(d.qkv_out), nws, st);
  }
  norm_backward_weight(d, norm2(s), s.x2, s.dy2, nws, st);
  norm_backward_weight(d, norm1(s), s.x, s.dy1, nws, st);
}

void TransformerBlock::poison(int set) {
  Set& s = *impl_->sets[static_cast<size_t>(set)];
  for (auto* list : {&s.f_outputs, &s.b_outputs, &s.w_outputs})
    for (const Tensor* t : *list)
      CUDA_CHECK(cudaMemsetAsync(t->p(), 0xFF, t->bytes(), impl_->stream));
}

std::vector<CheckedTensor> TransformerBlock::outputs(int set) const {
  const Set& s = *impl_->sets[static_cast<size_t>(set)];
  std::vector<CheckedTensor> out;
  for (const auto* list : {&s.f_outputs, &s.b_outputs, &s.w_outputs})
    for (const Tensor* t : *list) out.push_back({t->name, t->p(), t->count, t->dtype});
  return out;
}

int64_t TransformerBlock::saved_bytes() const { return impl_->sets[0]->saved.requested_bytes(); }

int64_t TransformerBlock::saved_memgetinfo_bytes() const {
  return impl_->sets[0]->saved_memgetinfo;
}

int64_t TransformerBlock::b_to_w_bytes() const {
  const Set& s = *impl_->sets[0];
  const BlockDims& d = impl_->d;
  int64_t bytes =
      static_cast<int64_t>(s.du.bytes() + s.dy2.bytes() + s.dqkv.bytes() + s.dy1.bytes());
  bytes += static_cast<int64_t>(d.dropout > 0 ? s.dz.bytes() + s.dproj.bytes() : s.dx2.bytes());
  return bytes;
}

}  // namespace hetplan::profiler
