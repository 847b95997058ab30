// CPU references (double precision) for the row-wise kernels: softmax cross-entropy over a
// [tokens, vocab] logits matrix, the embedding gather and its scatter-add backward, and the
// rotary position embedding (LLaMA's rotate-half form, Su et al. 2021).
#pragma once

#include <cstdint>
#include <span>

namespace hetplan::kernels::ref {

// loss[t] = lse[t] - logits[t, label[t]], lse[t] = log sum_v exp(logits[t, v]); a negative label
// is ignored (loss 0, lse still computed).
void cross_entropy_forward(std::span<const float> logits, std::span<const int32_t> labels,
                           int64_t tokens, int64_t vocab, std::span<double> loss,
                           std::span<double> lse);
// dlogits[t, v] = (exp(logits[t, v] - lse[t]) - [v == label[t]]) * dloss[t]; 0 for ignored rows.
void cross_entropy_backward(std::span<const float> logits, std::span<const int32_t> labels,
                            std::span<const float> lse, std::span<const float> dloss,
                            int64_t tokens, int64_t vocab, std::span<double> dlogits);

// out[t, :] = weight[ids[t], :].
void embedding_forward(std::span<const int32_t> ids, std::span<const float> weight, int64_t tokens,
                       int64_t hidden, std::span<double> out);
// dweight[v, :] += sum of dout[t, :] over the tokens t with ids[t] == v (dweight holds the
// starting values, accumulated into).
void embedding_backward(std::span<const int32_t> ids, std::span<const float> dout, int64_t tokens,
                        int64_t hidden, std::span<double> dweight);

// Tables for positions [0, seq): cos and sin of pos * base^(-2i/head_dim), [seq, head_dim / 2].
void rotary_tables(int64_t seq, int64_t head_dim, double base, std::span<double> cos,
                   std::span<double> sin);
// y[t, h, i] = x_i cos - x_{i+d/2} sin, y[t, h, i+d/2] = x_{i+d/2} cos + x_i sin for i < d/2,
// angle of position t % seq; `sign` -1 rotates backwards (the backward pass: dx from dy).
void rotary(std::span<const float> x, std::span<const float> cos, std::span<const float> sin,
            int64_t tokens, int64_t heads, int64_t head_dim, int64_t seq, int sign,
            std::span<double> y);

}  // namespace hetplan::kernels::ref
