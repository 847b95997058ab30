// CPU reference (double precision) for scaled dot-product attention, forward and backward, row
// by row so that GPU checks at large sizes can verify a sample of rows:
//   P = softmax(scale Q K^T + causal mask), O = P V, lse_i = log sum_j exp(scale q_i . k_j)
//   D_i = dO_i . O_i, dP = dO V^T, dS = P * (dP - D), dQ = scale dS K, dK = scale dS^T Q,
//   dV = P^T dO   (the FlashAttention-2 paper's equations; O and lse are inputs of the backward)
#pragma once

#include <cstdint>
#include <span>

namespace hetplan::kernels::ref {

struct AttentionDims {
  int64_t batch, heads, seq, head_dim;
  bool causal;
  double scale;
  bool bshd;  // [batch, seq, heads, head_dim] when true, else [batch, heads, seq, head_dim]

  // Offset of element 0 of row (b, h, s).
  int64_t row(int64_t b, int64_t h, int64_t s) const {
    return bshd ? ((b * seq + s) * heads + h) * head_dim : ((b * heads + h) * seq + s) * head_dim;
  }
  int64_t stat(int64_t b, int64_t h, int64_t s) const { return (b * heads + h) * seq + s; }
};

// One query row: out[head_dim], returns its lse.
double attention_forward_row(std::span<const float> q, std::span<const float> k,
                             std::span<const float> v, const AttentionDims& dims, int64_t b,
                             int64_t h, int64_t i, std::span<double> out);
// All rows: o laid out like q, lse [batch, heads, seq].
void attention_forward(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                       const AttentionDims& dims, std::span<double> o, std::span<double> lse);

// dQ of query row i.
void attention_backward_dq_row(std::span<const float> q, std::span<const float> k,
                               std::span<const float> v, std::span<const float> o,
                               std::span<const float> dout, std::span<const float> lse,
                               const AttentionDims& dims, int64_t b, int64_t h, int64_t i,
                               std::span<double> dq);
// dK and dV of key row j.
void attention_backward_dkdv_row(std::span<const float> q, std::span<const float> k,
                                 std::span<const float> v, std::span<const float> o,
                                 std::span<const float> dout, std::span<const float> lse,
                                 const AttentionDims& dims, int64_t b, int64_t h, int64_t j,
                                 std::span<double> dk, std::span<double> dv);
// All rows.
void attention_backward(std::span<const float> q, std::span<const float> k,
                        std::span<const float> v, std::span<const float> o,
                        std::span<const float> dout, std::span<const float> lse,
                        const AttentionDims& dims, std::span<double> dq, std::span<double> dk,
                        std::span<double> dv);

}  // namespace hetplan::kernels::ref
