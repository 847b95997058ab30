// Row-wise kernels: softmax cross-entropy forward/backward over [tokens, vocab] logits, the
// embedding gather and its deterministic scatter-add backward, and the rotary position
// embedding. bf16 or fp32 storage, fp32 math; references in kernels/reference/rows_reference.h.
// Device code in the simt.h dialect; launchers in rows.cu.
//
// Cross-entropy reads each logit once in the forward (one pass: an online max and sum of
// exponentials per thread, merged across the block, Milakov & Gimelshein 2018) and once more
// in the backward, which writes the gradient; rows of any length (vocab 256k and beyond) and
// any alignment: a few scalar elements up to the first 16-byte boundary, then vectors.
#pragma once

#include <algorithm>
#include <cmath>

#include "kernels/launch_shape.h"
#include "kernels/simt.h"

namespace hetplan::kernels {

constexpr float kLog2e = 1.4426950408889634f;
constexpr float kLn2 = 0.6931471805599453f;

// A row of `length` elements that starts `misalign` elements past a 16-byte boundary: `head`
// scalars, then `vectors` vectors of kVec, then `tail` scalars.
struct RowSplit {
  int64_t head, vectors, tail;
};
template <int kVec>
HETPLAN_DEVICE RowSplit split_row(int64_t start_element, int64_t length) {
  if constexpr (kVec == 1) {
    return {0, length, 0};
  } else {
    const int64_t mis = start_element % kVec;
    const int64_t head = (kVec - mis) % kVec < length ? (kVec - mis) % kVec : length;
    const int64_t vectors = (length - head) / kVec;
    return {head, vectors, length - head - vectors * kVec};
  }
}

inline LaunchShape row_block_shape(int64_t rows, int64_t cols, int vec) {
  LaunchShape s;
  s.grid_x = rows;
  s.block = static_cast<int>(std::clamp<int64_t>(round_up(ceil_div(cols, vec * 4), 32), 32, 512));
  s.smem = 64 * sizeof(float);
  return s;
}

// ---- softmax cross-entropy ----
template <class T>
struct CrossEntropyArgs {
  const T* logits;        // [tokens, vocab]
  const int32_t* labels;  // [tokens]; < 0: ignored
  float* loss;            // forward: [tokens]
  float* lse;             // forward: written; backward: read
  const float* dloss;     // backward: [tokens]
  T* dlogits;             // backward: [tokens, vocab]
  int64_t tokens, vocab;
};

// Online softmax state in base 2: max m and sum s of 2^(x - m), merged exactly.
struct MaxSum {
  float m, s;
};
HETPLAN_DEVICE MaxSum merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  if (m == -INFINITY) return {m, 0.0f};
  return {m, (a.m == -INFINITY ? 0.0f : a.s * simt::exp2_fast(a.m - m)) +
                 (b.m == -INFINITY ? 0.0f : b.s * simt::exp2_fast(b.m - m))};
}
template <int N>
HETPLAN_DEVICE MaxSum absorb(MaxSum st, const float (&x)[N]) {
  float bm = x[0] * kLog2e;
  HETPLAN_UNROLL
  for (int i = 1; i < N; ++i) bm = fmaxf(bm, x[i] * kLog2e);
  const float m = fmaxf(st.m, bm);
  float s = st.m == -INFINITY ? 0.0f : st.s * simt::exp2_fast(st.m - m);
  HETPLAN_UNROLL
  for (int i = 0; i < N; ++i) s += simt::exp2_fast(x[i] * kLog2e - m);
  return {m, s};
}

template <class T, int kVec>
HETPLAN_DEVICE void cross_entropy_forward_block(const CrossEntropyArgs<T>& a) {
  const int64_t t = simt::block_x();
  const int tid = simt::thread_x(), threads = simt::block_threads();
  const T* row = a.logits + t * a.vocab;
  const RowSplit sp = split_row<kVec>(t * a.vocab, a.vocab);
  MaxSum st{-INFINITY, 0.0f};
  if (tid < sp.head) {
    const float x[1] = {simt::to_f32(row[tid])};
    st = absorb(st, x);
  }
  const T* vrow = row + sp.head;
  int64_t j = tid;
  for (; j + threads < sp.vectors; j += 2 * threads) {  // two loads in flight
    float x0[kVec], x1[kVec];
    simt::load<kVec>(vrow + j * kVec, x0);
    simt::load<kVec>(vrow + (j + threads) * kVec, x1);
    st = absorb(absorb(st, x0), x1);
  }
  if (j < sp.vectors) {
    float x0[kVec];
    simt::load<kVec>(vrow + j * kVec, x0);
    st = absorb(st, x0);
  }
  if (tid < sp.tail) {
    const float x[1] = {simt::to_f32(vrow[sp.vectors * kVec + tid])};
    st = absorb(st, x);
  }
  // Merge over the warp, then over the warps.
  for (int mask = 16; mask > 0; mask >>= 1)
    st = merge(st, MaxSum{simt::shfl_xor(st.m, mask), simt::shfl_xor(st.s, mask)});
  float* scratch = reinterpret_cast<float*>(simt::dynamic_smem());
  const int warps = (threads + 31) / 32;
  if (simt::lane() == 0) {
    scratch[simt::warp()] = st.m;
    scratch[32 + simt::warp()] = st.s;
  }
  simt::sync_threads();
  if (tid == 0) {
    MaxSum all{-INFINITY, 0.0f};
    for (int w = 0; w < warps; ++w) all = merge(all, MaxSum{scratch[w], scratch[32 + w]});
    const float lse = (all.m + log2f(all.s)) * kLn2;
    a.lse[t] = lse;
    const int32_t label = a.labels[t];
    a.loss[t] = label < 0 ? 0.0f : lse - simt::to_f32(row[label]);
  }
}

template <class T, int N>
HETPLAN_DEVICE void ce_grad(const T* x_at, T* g_at, int64_t v, int32_t label, float lse,
                            float scale) {
  float x[N], g[N];
  simt::load<N>(x_at, x);
  HETPLAN_UNROLL
  for (int i = 0; i < N; ++i)
    g[i] = (simt::exp2_fast((x[i] - lse) * kLog2e) - (v + i == label ? 1.0f : 0.0f)) * scale;
  simt::store<N>(g_at, g);
}

template <class T, int kVec>
HETPLAN_DEVICE void cross_entropy_backward_block(const CrossEntropyArgs<T>& a) {
  const int64_t t = simt::block_x();
  const int tid = simt::thread_x(), threads = simt::block_threads();
  const T* row = a.logits + t * a.vocab;
  T* grow = a.dlogits + t * a.vocab;
  const RowSplit sp = split_row<kVec>(t * a.vocab, a.vocab);
  const int32_t label = a.labels[t];
  const float lse = a.lse[t];
  const float scale = label < 0 ? 0.0f : a.dloss[t];  // ignored rows get zeros
  if (tid < sp.head) ce_grad<T, 1>(row + tid, grow + tid, tid, label, lse, scale);
  const int64_t v0 = sp.head;
  for (int64_t j = tid; j < sp.vectors; j += threads)
    ce_grad<T, kVec>(row + v0 + j * kVec, grow + v0 + j * kVec, v0 + j * kVec, label, lse, scale);
  const int64_t tail0 = v0 + sp.vectors * kVec;
  if (tid < sp.tail)
    ce_grad<T, 1>(row + tail0 + tid, grow + tail0 + tid, tail0 + tid, label, lse, scale);
}

// ---- embedding ----
template <class T>
struct EmbeddingArgs {
  const int32_t* ids;  // [tokens], in [0, vocab)
  const T* weight;     // [vocab, hidden]
  T* out;              // [tokens, hidden]
  int64_t tokens;
  int hidden;
};

template <class T, int kVec>
HETPLAN_DEVICE void embedding_forward_block(const EmbeddingArgs<T>& a) {
  const int nvec = a.hidden / kVec;
  for (int64_t t = simt::block_x(); t < a.tokens; t += simt::grid_x()) {
    const T* src = a.weight + static_cast<int64_t>(a.ids[t]) * a.hidden;
    T* dst = a.out + t * a.hidden;
    for (int j = simt::thread_x(); j < nvec; j += simt::block_threads())
      simt::store_bits<kVec * sizeof(T)>(dst + j * kVec,
                                         simt::load_bits<kVec * sizeof(T)>(src + j * kVec));
  }
}

// Backward, second step: the (id, token) pairs sorted by id (stable, so tokens ascend within an
// id). Block (i, y) adds the dout rows of the run of equal ids starting at sorted position i, in
// token order, to dweight's row: columns [y * threads * kVec, +threads * kVec). Blocks not at
// the start of a run exit. No atomics: each dweight row has one writer, the sum order is fixed.
template <class T>
struct EmbeddingBackwardArgs {
  const int32_t* sorted_ids;     // [tokens]
  const int32_t* sorted_tokens;  // [tokens]
  const T* dout;                 // [tokens, hidden]
  float* dweight;                // [vocab, hidden], accumulated into
  int64_t tokens;
  int hidden;
};

inline LaunchShape embedding_backward_shape(int64_t tokens, int hidden, int vec) {
  LaunchShape s;
  s.block = static_cast<int>(std::clamp<int64_t>(round_up(ceil_div(hidden, vec), 32), 32, 256));
  s.grid_x = tokens;
  s.grid_y = ceil_div(hidden, int64_t{s.block} * vec);
  return s;
}

template <class T, int kVec>
HETPLAN_DEVICE void embedding_backward_block(const EmbeddingBackwardArgs<T>& a) {
  const int64_t i = simt::block_x();
  const int32_t id = a.sorted_ids[i];
  if (i > 0 && a.sorted_ids[i - 1] == id) return;  // not the start of a run
  const int64_t c = (simt::block_y() * simt::block_threads() + simt::thread_x()) * kVec;
  if (c >= a.hidden) return;
  float acc[kVec] = {};
  for (int64_t j = i; j < a.tokens && a.sorted_ids[j] == id; ++j) {
    float d[kVec];
    simt::load<kVec>(a.dout + static_cast<int64_t>(a.sorted_tokens[j]) * a.hidden + c, d);
    HETPLAN_UNROLL
    for (int e = 0; e < kVec; ++e) acc[e] += d[e];
  }
  float* w = a.dweight + static_cast<int64_t>(id) * a.hidden + c;
  if constexpr (kVec == 1) {
    w[0] += acc[0];
  } else {
    HETPLAN_UNROLL
    for (int q = 0; q < kVec; q += 4) {
      float cur[4];
      simt::load<4>(w + q, cur);
      HETPLAN_UNROLL
      for (int e = 0; e < 4; ++e) cur[e] += acc[q + e];
      simt::store<4>(w + q, cur);
    }
  }
}

// ---- rotary position embedding (rotate-half), in place allowed ----
template <class T>
struct RotaryArgs {
  const T* x;        // [tokens, heads, head_dim], tokens x_token_stride elements apart
  T* y;              // [tokens, heads, head_dim], contiguous; may equal x when x is
  const float* cos;  // [seq, head_dim / 2]
  const float* sin;  // [seq, head_dim / 2]
  int64_t tokens;
  int heads, head_dim, seq;
  float sign;                  // +1 forward, -1 backward (rotation by the opposite angle)
  int64_t x_token_stride = 0;  // 0: heads * head_dim (contiguous); more: Q or K inside QKV
};

// Item k of a (token, head) row: pairs [k * kVec, +kVec) of its first half with the same pairs
// of its second half.
template <class T, int kVec>
HETPLAN_DEVICE void rotary_block(const RotaryArgs<T>& a) {
  const int half = a.head_dim / 2;
  const int per_row = half / kVec;
  const int64_t items = a.tokens * a.heads * per_row;
  const int64_t stride = simt::grid_x() * simt::block_threads();
  for (int64_t it = simt::block_x() * simt::block_threads() + simt::thread_x(); it < items;
       it += stride) {
    const int64_t row = it / per_row;  // (token, head)
    const int i = static_cast<int>(it - row * per_row) * kVec;
    const int64_t token = row / a.heads;
    const int64_t pos = token % a.seq;
    const T* x = a.x_token_stride == 0
                     ? a.x + row * a.head_dim
                     : a.x + token * a.x_token_stride + (row - token * a.heads) * a.head_dim;
    float lo[kVec], hi[kVec], c[kVec], s[kVec], out_lo[kVec], out_hi[kVec];
    simt::load<kVec>(x + i, lo);
    simt::load<kVec>(x + half + i, hi);
    if constexpr (kVec == 1) {
      c[0] = a.cos[pos * half + i];
      s[0] = a.sin[pos * half + i];
    } else {
      HETPLAN_UNROLL
      for (int q = 0; q < kVec; q += 4) {
        float c4[4], s4[4];
        simt::load<4>(a.cos + pos * half + i + q, c4);
        simt::load<4>(a.sin + pos * half + i + q, s4);
        HETPLAN_UNROLL
        for (int e = 0; e < 4; ++e) {
          c[q + e] = c4[e];
          s[q + e] = s4[e];
        }
      }
    }
    HETPLAN_UNROLL
    for (int e = 0; e < kVec; ++e) {
      const float sn = a.sign * s[e];
      out_lo[e] = lo[e] * c[e] - hi[e] * sn;
      out_hi[e] = hi[e] * c[e] + lo[e] * sn;
    }
    simt::store<kVec>(a.y + row * a.head_dim + i, out_lo);
    simt::store<kVec>(a.y + row * a.head_dim + half + i, out_hi);
  }
}

}  // namespace hetplan::kernels
