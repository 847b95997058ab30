#include "profiler/layer/block_buffers.h"

#include "kernels/norms.h"

namespace hetplan::profiler::block_detail {
namespace {

Tensor add(DeviceArena& arena, const std::string& name, int64_t count, Dtype dtype) {
  Tensor t{&arena, 0, count, dtype, name};
  t.offset = arena.reserve(t.bytes());
  return t;
}

// A parameter's gradient: as many values, named "d" and the parameter's name.
Tensor gradient(DeviceArena& arena, const Tensor& param, Dtype dtype) {
  return add(arena, "d" + param.name, param.count, dtype);
}

}  // namespace

K::AttentionShape attention_shape(const BlockDims& d) {
  K::AttentionShape a;
  a.batch = static_cast<int>(d.batch);
  a.heads = static_cast<int>(d.heads);
  a.seq = static_cast<int>(d.seq);
  a.head_dim = static_cast<int>(d.head_dim);
  a.causal = d.causal;
  a.layout = K::AttentionLayout::kBSHD;
  return a;
}

void layout(Set& s, const BlockDims& d) {
  const int64_t T = d.tokens, h = d.hidden;
  const Dtype bf = Dtype::kBf16, f32 = Dtype::kFp32;
  s.wqkv = add(s.params, "wqkv", d.qkv_out * h, bf);
  s.wo = add(s.params, "wo", h * d.q_dim, bf);
  s.w1 = add(s.params, "w1", d.up * h, bf);
  s.w2 = add(s.params, "w2", h * d.ffn, bf);
  s.g1 = add(s.params, "norm1_weight", h, bf);
  s.g2 = add(s.params, "norm2_weight", h, bf);
  if (d.gpt) {
    s.be1 = add(s.params, "norm1_bias", h, bf);
    s.be2 = add(s.params, "norm2_bias", h, bf);
  }
  if (d.bias) {
    s.bqkv = add(s.params, "bqkv", d.qkv_out, bf);
    s.bo = add(s.params, "bo", h, bf);
    s.b1 = add(s.params, "b1", d.up, bf);
    s.b2 = add(s.params, "b2", h, bf);
  }
  // Saved: exactly what the backward reads (dropout masks are recomputed from Philox).
  s.x = add(s.saved, "x", T * h, bf);
  if (d.gpt) s.mean1 = add(s.saved, "norm1_mean", T, f32);
  s.rstd1 = add(s.saved, "norm1_rstd", T, f32);
  s.y1 = add(s.saved, "qkv_input", T * h, bf);
  s.q = add(s.saved, "q", T * d.q_dim, bf);
  s.k = add(s.saved, "k", T * d.kv_dim, bf);
  s.v = add(s.saved, "v", T * d.kv_dim, bf);
  s.o = add(s.saved, "attention_out", T * d.q_dim, bf);
  s.lse = add(s.saved, "lse", d.batch * d.heads * d.seq, f32);
  s.x2 = add(s.saved, "x2", T * h, bf);
  if (d.gpt) s.mean2 = add(s.saved, "norm2_mean", T, f32);
  s.rstd2 = add(s.saved, "norm2_rstd", T, f32);
  s.y2 = add(s.saved, "fc1_input", T * h, bf);
  s.u = add(s.saved, "activation_input", T * d.up, bf);
  s.a = add(s.saved, "fc2_input", T * d.ffn, bf);

  s.qkv = add(s.work, "qkv", T * d.qkv_out, bf);
  s.proj = add(s.work, "attn_proj", T * h, bf);
  s.z = add(s.work, "fc2_out", T * h, bf);
  s.out = add(s.work, "out", T * h, bf);
  s.dout = add(s.work, "dout", T * h, bf);
  if (d.dropout > 0) s.dz = add(s.work, "dz", T * h, bf);
  s.da = add(s.work, "da", T * d.ffn, bf);
  s.du = add(s.work, "du", T * d.up, bf);
  s.dy2 = add(s.work, "dy2", T * h, bf);
  s.dx2a = add(s.work, "dx2_norm", T * h, bf);
  s.dx2 = add(s.work, "dx2", T * h, bf);
  if (d.dropout > 0) s.dproj = add(s.work, "dproj", T * h, bf);
  s.d_o = add(s.work, "d_attention_out", T * d.q_dim, bf);
  s.dq = add(s.work, "dq", T * d.q_dim, bf);
  s.dk = add(s.work, "dk", T * d.kv_dim, bf);
  s.dv = add(s.work, "dv", T * d.kv_dim, bf);
  s.dqkv = add(s.work, "dqkv", T * d.qkv_out, bf);
  s.dy1 = add(s.work, "dy1", T * h, bf);
  s.dx1 = add(s.work, "dx_norm", T * h, bf);
  s.dx = add(s.work, "dx", T * h, bf);
  s.dwqkv = gradient(s.work, s.wqkv, bf);
  s.dwo = gradient(s.work, s.wo, bf);
  s.dw1 = gradient(s.work, s.w1, bf);
  s.dw2 = gradient(s.work, s.w2, bf);
  s.dg1 = gradient(s.work, s.g1, f32);
  s.dg2 = gradient(s.work, s.g2, f32);
  if (d.gpt) {
    s.dbe1 = gradient(s.work, s.be1, f32);
    s.dbe2 = gradient(s.work, s.be2, f32);
  }
  if (d.bias) {
    s.dbqkv = gradient(s.work, s.bqkv, f32);
    s.dbo = gradient(s.work, s.bo, f32);
    s.db1 = gradient(s.work, s.b1, f32);
    s.db2 = gradient(s.work, s.b2, f32);
  }
  const int64_t ws_cols = std::max(d.up, d.qkv_out);
  s.norm_ws =
      add(s.work, "norm_workspace",
          static_cast<int64_t>(K::norm_weight_workspace_bytes(T, static_cast<int>(ws_cols))),
          Dtype::kFp8);  // bytes
  s.attn_ws = add(s.work, "attention_workspace",
                  static_cast<int64_t>(K::attention_backward_workspace_bytes(attention_shape(d))),
                  Dtype::kFp8);

  s.f_outputs = {&s.y1, &s.q, &s.k, &s.v, &s.o, &s.lse, &s.x2, &s.y2, &s.u, &s.a, &s.out};
  s.b_outputs = {&s.da, &s.du, &s.dy2, &s.dx2, &s.d_o, &s.dq, &s.dk, &s.dv, &s.dqkv, &s.dy1, &s.dx};
  s.w_outputs = {&s.dwqkv, &s.dwo, &s.dw1, &s.dw2, &s.dg1, &s.dg2};
  if (d.gpt) {
    s.f_outputs.insert(s.f_outputs.end(), {&s.mean1, &s.rstd1, &s.mean2, &s.rstd2});
    s.w_outputs.insert(s.w_outputs.end(), {&s.dbe1, &s.dbe2});
  } else {
    s.f_outputs.insert(s.f_outputs.end(), {&s.rstd1, &s.rstd2});
  }
  if (d.bias) s.w_outputs.insert(s.w_outputs.end(), {&s.dbqkv, &s.dbo, &s.db1, &s.db2});
}

}  // namespace hetplan::profiler::block_detail
