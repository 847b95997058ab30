// Element-wise kernels: GeLU (tanh form) and SwiGLU forward/backward, bias + dropout +
// residual forward and the dropout backward, the fused AdamW step. bf16 or fp32 storage, fp32
// math; references in kernels/reference/elementwise_reference.h. Device code in the simt.h
// dialect; launchers in elementwise.cu.
//
// Each element is read once and written once with 16-byte vectors (a scalar path serves sizes
// or pointers that do not allow them). Flat kernels run a grid-stride loop over vectors with one
// wave of resident blocks; kernels that need the column (bias, SwiGLU's halves) loop over rows
// per block and over the row's vectors per thread, so no index division is needed.
// Dropout draws its mask from Philox(seed, offset + element / 4): reproducible, never stored.
#pragma once

#include <algorithm>

#include "kernels/launch_shape.h"
#include "kernels/philox.h"
#include "kernels/simt.h"

namespace hetplan::kernels {

constexpr int kFlatThreads = 256;

// One wave of resident 256-thread blocks (8 per SM), fewer when the work is smaller.
inline LaunchShape flat_shape(int64_t n, int vec, int sm_count) {
  LaunchShape s;
  s.block = kFlatThreads;
  s.grid_x = grid_stride_blocks(std::max<int64_t>(1, n / vec), kFlatThreads, sm_count, 8);
  return s;
}

// Rows spread over blocks, a row's vectors over a block's threads.
inline int row_loop_block(int64_t cols, int vec) {
  return static_cast<int>(std::clamp<int64_t>(round_up(ceil_div(cols, vec), 32), 32, 256));
}

// One wave of resident blocks: `blocks_per_sm` as the occupancy calculator says for the kernel
// (0: as many as 2048 threads allow). A grid larger than what is resident runs a second, partial
// wave of these long-lived blocks, which left swiglu_bwd_fp32 (40 registers: 6 of 8 blocks
// resident) at 78% of copy bandwidth on the H100.
inline LaunchShape row_loop_shape(int64_t rows, int64_t cols, int vec, int sm_count,
                                  int blocks_per_sm = 0) {
  LaunchShape s;
  s.block = row_loop_block(cols, vec);
  const int per_sm = blocks_per_sm > 0 ? blocks_per_sm : 2048 / s.block;
  s.grid_x = std::max<int64_t>(1, std::min<int64_t>(rows, int64_t{sm_count} * per_sm));
  return s;
}

// Calls f(e, kN) for the elements [e, e + kN) this thread owns: vectors of kVec from the
// grid-stride loop, then the n % kVec leftover elements, one per thread of the first few.
template <int kVec, class F>
HETPLAN_DEVICE void for_each_flat(int64_t n, F&& f) {
  const int64_t nvec = n / kVec;
  const int64_t stride = simt::grid_x() * simt::block_threads();
  const int64_t first = simt::block_x() * simt::block_threads() + simt::thread_x();
  for (int64_t v = first; v < nvec; v += stride) f.template items<kVec>(v * kVec);
  if constexpr (kVec > 1) {
    if (nvec * kVec + first < n) f.template items<1>(nvec * kVec + first);
  }
}

// ---- math ----
HETPLAN_DEVICE float tanh_fast(float u) {
  u = fminf(fmaxf(u, -15.0f), 15.0f);  // tanh(15) rounds to 1 in fp32; keeps exp finite
  return 1.0f - simt::div_fast(2.0f, 1.0f + simt::exp_fast(2.0f * u));
}
HETPLAN_DEVICE float sigmoid_fast(float a) {
  return simt::div_fast(1.0f, 1.0f + simt::exp_fast(-fmaxf(a, -80.0f)));
}
constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCubic = 0.044715f;

// ---- GeLU ----
template <class T>
struct GeluArgs {
  const T* x;
  const T* dy;  // backward only
  T* out;       // y (forward) or dx (backward)
  int64_t n;
};

template <class T, bool kBackward>
struct GeluOp {
  const GeluArgs<T>& a;
  template <int N>
  HETPLAN_DEVICE void items(int64_t e) const {
    float x[N], out[N];
    simt::load<N>(a.x + e, x);
    if constexpr (kBackward) {
      float dy[N];
      simt::load<N>(a.dy + e, dy);
      HETPLAN_UNROLL
      for (int i = 0; i < N; ++i) {
        const float t = tanh_fast(kSqrt2OverPi * (x[i] + kGeluCubic * x[i] * x[i] * x[i]));
        const float du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCubic * x[i] * x[i]);
        out[i] = dy[i] * (0.5f * (1.0f + t) + 0.5f * x[i] * (1.0f - t * t) * du);
      }
    } else {
      HETPLAN_UNROLL
      for (int i = 0; i < N; ++i)
        out[i] = 0.5f * x[i] *
                 (1.0f + tanh_fast(kSqrt2OverPi * (x[i] + kGeluCubic * x[i] * x[i] * x[i])));
    }
    simt::store<N>(a.out + e, out);
  }
};

template <class T, int kVec, bool kBackward>
HETPLAN_DEVICE void gelu_block(const GeluArgs<T>& a) {
  for_each_flat<kVec>(a.n, GeluOp<T, kBackward>{a});
}

// ---- SwiGLU on the fused [rows, 2 * cols] layout: gate = first half, up = second half ----
template <class T>
struct SwigluArgs {
  const T* in;    // [rows, 2 cols]
  const T* dout;  // [rows, cols], backward only
  T* out;         // forward: [rows, cols]; backward: din [rows, 2 cols]
  int64_t rows;
  int cols;
};

// The backward of one vector: dgate and dup from gate, up and dout.
template <int kVec>
HETPLAN_DEVICE void swiglu_grad(const float (&g)[kVec], const float (&u)[kVec],
                                const float (&d)[kVec], float (&dg)[kVec], float (&du)[kVec]) {
  HETPLAN_UNROLL
  for (int i = 0; i < kVec; ++i) {
    const float s = sigmoid_fast(g[i]);
    dg[i] = d[i] * u[i] * s * (1.0f + g[i] * (1.0f - s));
    du[i] = d[i] * g[i] * s;
  }
}

// fp32 backward: two vectors per thread and step, their six loads issued before any use. With one
// (three 16-byte loads in flight per thread, 6 blocks of 256 threads resident) it reached 77% of
// copy bandwidth on the H100 where the bf16 one, with the same bytes per load, reached 90%.
template <class T, int kVec, bool kBackward>
inline constexpr int kSwigluVectorsPerStep = kBackward && sizeof(T) == 4 && kVec > 1 ? 2 : 1;

template <class T, int kVec, bool kBackward>
HETPLAN_DEVICE void swiglu_block(const SwigluArgs<T>& a) {
  const int nvec = a.cols / kVec;
  constexpr int kSteps = kSwigluVectorsPerStep<T, kVec, kBackward>;
  for (int64_t r = simt::block_x(); r < a.rows; r += simt::grid_x()) {
    const T* gate = a.in + r * 2 * a.cols;
    if constexpr (kSteps == 2) {
      const int threads = simt::block_threads();
      for (int j = simt::thread_x(); j < nvec; j += 2 * threads) {
        const int c0 = j * kVec, c1 = (j + threads) * kVec;
        const bool second = j + threads < nvec;
        float g0[kVec], u0[kVec], d0[kVec], g1[kVec], u1[kVec], d1[kVec];
        simt::load<kVec>(gate + c0, g0);
        simt::load<kVec>(gate + a.cols + c0, u0);
        simt::load<kVec>(a.dout + r * a.cols + c0, d0);
        if (second) {
          simt::load<kVec>(gate + c1, g1);
          simt::load<kVec>(gate + a.cols + c1, u1);
          simt::load<kVec>(a.dout + r * a.cols + c1, d1);
        }
        float dg[kVec], du[kVec];
        swiglu_grad<kVec>(g0, u0, d0, dg, du);
        simt::store<kVec>(a.out + r * 2 * a.cols + c0, dg);
        simt::store<kVec>(a.out + r * 2 * a.cols + a.cols + c0, du);
        if (second) {
          swiglu_grad<kVec>(g1, u1, d1, dg, du);
          simt::store<kVec>(a.out + r * 2 * a.cols + c1, dg);
          simt::store<kVec>(a.out + r * 2 * a.cols + a.cols + c1, du);
        }
      }
    } else {
      for (int j = simt::thread_x(); j < nvec; j += simt::block_threads()) {
        const int c = j * kVec;
        float g[kVec], u[kVec];
        simt::load<kVec>(gate + c, g);
        simt::load<kVec>(gate + a.cols + c, u);
        if constexpr (kBackward) {
          float d[kVec], dg[kVec], du[kVec];
          simt::load<kVec>(a.dout + r * a.cols + c, d);
          swiglu_grad<kVec>(g, u, d, dg, du);
          simt::store<kVec>(a.out + r * 2 * a.cols + c, dg);
          simt::store<kVec>(a.out + r * 2 * a.cols + a.cols + c, du);
        } else {
          float y[kVec];
          HETPLAN_UNROLL
          for (int i = 0; i < kVec; ++i) y[i] = g[i] * sigmoid_fast(g[i]) * u[i];
          simt::store<kVec>(a.out + r * a.cols + c, y);
        }
      }
    }
  }
}

// ---- dropout ----
struct DropoutMask {
  uint64_t seed, offset;
  uint32_t threshold;  // keep when the element's word >= threshold; 0 keeps all
  float scale;         // 1 / (1 - p)
};

// keep[i] for elements e .. e + N - 1 (e a multiple of 4 when N >= 4).
template <int N>
HETPLAN_DEVICE void dropout_keep(const DropoutMask& m, int64_t e, bool (&keep)[N]) {
  if (m.threshold == 0) {
    HETPLAN_UNROLL
    for (int i = 0; i < N; ++i) keep[i] = true;
    return;
  }
  if constexpr (N == 1) {
    keep[0] = philox_group(m.seed, m.offset, static_cast<uint64_t>(e)).v[e % 4] >= m.threshold;
  } else {
    static_assert(N % 4 == 0);
    HETPLAN_UNROLL
    for (int q = 0; q < N / 4; ++q) {
      const Philox4 w = philox_group(m.seed, m.offset, static_cast<uint64_t>(e + 4 * q));
      HETPLAN_UNROLL
      for (int i = 0; i < 4; ++i) keep[4 * q + i] = w.v[i] >= m.threshold;
    }
  }
}

template <class T>
struct BiasDropoutArgs {
  const T* x;
  const T* bias;  // [cols], may be null
  const T* residual;
  T* y;
  int64_t rows;
  int cols;
  DropoutMask mask;
};

// y = residual + dropout(x + bias)
template <class T, int kVec>
HETPLAN_DEVICE void bias_dropout_residual_block(const BiasDropoutArgs<T>& a) {
  const int nvec = a.cols / kVec;
  for (int64_t r = simt::block_x(); r < a.rows; r += simt::grid_x()) {
    for (int j = simt::thread_x(); j < nvec; j += simt::block_threads()) {
      const int c = j * kVec;
      const int64_t e = r * a.cols + c;
      float x[kVec], res[kVec], b[kVec] = {}, y[kVec];
      bool keep[kVec];
      simt::load<kVec>(a.x + e, x);
      simt::load<kVec>(a.residual + e, res);
      if (a.bias) simt::load<kVec>(a.bias + c, b);
      dropout_keep<kVec>(a.mask, e, keep);
      HETPLAN_UNROLL
      for (int i = 0; i < kVec; ++i)
        y[i] = res[i] + (keep[i] ? (x[i] + b[i]) * a.mask.scale : 0.0f);
      simt::store<kVec>(a.y + e, y);
    }
  }
}

template <class T>
struct DropoutBackwardArgs {
  const T* dy;
  T* dx;
  int64_t n;
  DropoutMask mask;
};

template <class T>
struct DropoutBackwardOp {
  const DropoutBackwardArgs<T>& a;
  template <int N>
  HETPLAN_DEVICE void items(int64_t e) const {
    float dy[N], dx[N];
    bool keep[N];
    simt::load<N>(a.dy + e, dy);
    dropout_keep<N>(a.mask, e, keep);
    HETPLAN_UNROLL
    for (int i = 0; i < N; ++i) dx[i] = keep[i] ? dy[i] * a.mask.scale : 0.0f;
    simt::store<N>(a.dx + e, dx);
  }
};

template <class T, int kVec>
HETPLAN_DEVICE void dropout_backward_block(const DropoutBackwardArgs<T>& a) {
  for_each_flat<kVec>(a.n, DropoutBackwardOp<T>{a});
}

// ---- AdamW on flat buffers: fp32 master weights, moments and gradients; bf16 parameters ----
struct AdamWArgs {
  float* master;
  bf16* param;
  const float* grad;
  float* m;
  float* v;
  int64_t n;
  float lr, beta1, beta2, eps, weight_decay, grad_scale;
  float inv_bias1, inv_bias2;  // 1 / (1 - beta^step)
};

struct AdamWOp {
  const AdamWArgs& a;
  template <int N>
  HETPLAN_DEVICE void items(int64_t e) const {
    float w[N], g[N], m[N], v[N];
    simt::load<N>(a.master + e, w);
    simt::load<N>(a.grad + e, g);
    simt::load<N>(a.m + e, m);
    simt::load<N>(a.v + e, v);
    HETPLAN_UNROLL
    for (int i = 0; i < N; ++i) {
      const float gi = g[i] * a.grad_scale;
      m[i] = a.beta1 * m[i] + (1.0f - a.beta1) * gi;
      v[i] = a.beta2 * v[i] + (1.0f - a.beta2) * gi * gi;
      const float denom = sqrtf(v[i] * a.inv_bias2) + a.eps;
      w[i] = w[i] * (1.0f - a.lr * a.weight_decay) - a.lr * (m[i] * a.inv_bias1) / denom;
    }
    simt::store<N>(a.master + e, w);
    simt::store<N>(a.m + e, m);
    simt::store<N>(a.v + e, v);
    simt::store<N>(a.param + e, w);
  }
};

template <int kVec>
HETPLAN_DEVICE void adamw_block(const AdamWArgs& a) {
  for_each_flat<kVec>(a.n, AdamWOp{a});
}

}  // namespace hetplan::kernels
