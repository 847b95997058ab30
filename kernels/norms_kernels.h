// LayerNorm and RMSNorm kernels: forward, input gradient (B pass) and weight gradients (W pass)
// over the rows of a [rows, cols] matrix; bf16 or fp32 storage, fp32 math. References:
// kernels/reference/norms_reference.h. Device code in the simt.h dialect (runs on the GPU and in
// the CPU emulator); the launchers are in norms.cu.
//
// Row kernels: one block per row, the row held in registers (a few 16-byte vectors per
// thread, all loaded before first use), so x is read once and y written once.
// Weight gradients: a deterministic two-stage column reduction: blocks of 8 warps sum 256-row
// chunks into fp32 partials, a second kernel adds the chunks in order.
#pragma once

#include <algorithm>

#include "kernels/launch_shape.h"
#include "kernels/simt.h"

namespace hetplan::kernels {

enum class NormKind { kLayerNorm, kRmsNorm };

template <class T>
struct NormForwardArgs {
  const T* x;
  const T* gamma;
  const T* beta;  // LayerNorm only
  T* y;
  float* mean;  // LayerNorm only; [rows]
  float* rstd;  // [rows]
  int64_t rows;
  int cols;
  float eps;
};

template <class T>
struct NormBackwardArgs {
  const T* x;
  const T* gamma;
  const float* mean;  // LayerNorm only
  const float* rstd;
  const T* dy;
  T* dx;
  int64_t rows;
  int cols;
};

// Vectors a thread holds: the forward keeps x (8 x 16 B), the backward x and dy (2 x 4 x 16 B,
// more would spill at 128 registers per thread).
constexpr int kNormForwardIters = 8;
constexpr int kNormBackwardIters = 4;
constexpr int kNormMaxThreads = 512;

// Whether a row of `cols` elements fits a row kernel holding `iters` vectors of width `vec`.
inline bool norm_row_fits(int64_t cols, int vec, int iters) {
  return cols >= 1 && ceil_div(cols / vec, kNormMaxThreads) <= iters;
}

// About `per_thread` vectors per thread, at least one warp, at most kNormMaxThreads.
inline LaunchShape norm_row_shape(int64_t rows, int64_t cols, int vec, int per_thread = 4) {
  LaunchShape s;
  s.grid_x = rows;
  s.block = static_cast<int>(
      std::clamp<int64_t>(round_up(ceil_div(cols / vec, per_thread), 32), 32, kNormMaxThreads));
  s.smem = 64 * sizeof(float);
  return s;
}

// The forward fills all kNormForwardIters vectors a thread holds: its registers are allocated
// for them anyway (79-88 per thread), so with half used only 2 rows of 8192 bf16 were in flight
// per SM.
inline LaunchShape norm_forward_shape(int64_t rows, int64_t cols, int vec) {
  return norm_row_shape(rows, cols, vec, kNormForwardIters);
}

template <class T, int kVec, NormKind kKind>
HETPLAN_DEVICE void norm_forward_block(const NormForwardArgs<T>& a) {
  using Raw = simt::Bits<kVec * sizeof(T)>;
  float* scratch = reinterpret_cast<float*>(simt::dynamic_smem());
  const int64_t row = simt::block_x();
  const int tid = simt::thread_x(), threads = simt::block_threads();
  const int nvec = a.cols / kVec;
  const float inv_cols = 1.0f / static_cast<float>(a.cols);
  const T* x = a.x + row * a.cols;
  T* y = a.y + row * a.cols;

  Raw raw[kNormForwardIters] = {};
  HETPLAN_UNROLL
  for (int it = 0; it < kNormForwardIters; ++it) {
    const int j = it * threads + tid;
    if (j < nvec) raw[it] = simt::load_bits<Raw::kSize>(x + j * kVec);
  }
  // One block reduction of sum(x - s) and sum((x - s)^2) with s = the row's first element:
  // var = E[(x-s)^2] - E[x-s]^2 loses only ~(mean - s)^2 / var ulps, and s is a sample of the
  // row, so |mean - s| is a few standard deviations at most. (Two reductions, sum first and then
  // squares around the mean, cost a second pair of barriers per row: layernorm_fwd_bf16 ran at
  // 68-78% of copy bandwidth on the H100 that way.)
  float shift = 0.0f;
  if constexpr (kKind == NormKind::kLayerNorm) {
    float first[1];
    simt::load<1>(x, first);
    shift = first[0];
  }
  float sum = 0.0f, sq = 0.0f;
  HETPLAN_UNROLL
  for (int it = 0; it < kNormForwardIters; ++it) {
    if (it * threads + tid >= nvec) continue;
    float v[kVec];
    simt::unpack<T, kVec>(raw[it], v);
    HETPLAN_UNROLL
    for (int e = 0; e < kVec; ++e) {
      const float d = v[e] - shift;
      sum += d;
      sq += d * d;
    }
  }
  float mean = 0.0f, var = 0.0f;
  if constexpr (kKind == NormKind::kLayerNorm) {
    simt::block_sum2(sum, sq, scratch);
    const float mean_d = sum * inv_cols;
    mean = shift + mean_d;
    var = fmaxf(sq * inv_cols - mean_d * mean_d, 0.0f);
  } else {
    var = simt::block_sum(sq, scratch) * inv_cols;
  }
  const float rstd = simt::rsqrt(var + a.eps);
  if (tid == 0) {
    if constexpr (kKind == NormKind::kLayerNorm) a.mean[row] = mean;
    a.rstd[row] = rstd;
  }
  HETPLAN_UNROLL
  for (int it = 0; it < kNormForwardIters; ++it) {
    const int j = it * threads + tid;
    if (j >= nvec) continue;
    float v[kVec], g[kVec], out[kVec];
    simt::unpack<T, kVec>(raw[it], v);
    simt::load<kVec>(a.gamma + j * kVec, g);
    if constexpr (kKind == NormKind::kLayerNorm) {
      float b[kVec];
      simt::load<kVec>(a.beta + j * kVec, b);
      HETPLAN_UNROLL
      for (int e = 0; e < kVec; ++e) out[e] = (v[e] - mean) * rstd * g[e] + b[e];
    } else {
      HETPLAN_UNROLL
      for (int e = 0; e < kVec; ++e) out[e] = v[e] * rstd * g[e];
    }
    simt::store<kVec>(y + j * kVec, out);
  }
}

template <class T, int kVec, NormKind kKind>
HETPLAN_DEVICE void norm_backward_input_block(const NormBackwardArgs<T>& a) {
  using Raw = simt::Bits<kVec * sizeof(T)>;
  float* scratch = reinterpret_cast<float*>(simt::dynamic_smem());
  const int64_t row = simt::block_x();
  const int tid = simt::thread_x(), threads = simt::block_threads();
  const int nvec = a.cols / kVec;
  const float inv_cols = 1.0f / static_cast<float>(a.cols);
  const int64_t offset = row * a.cols;

  Raw raw_x[kNormBackwardIters] = {}, raw_dy[kNormBackwardIters] = {};
  HETPLAN_UNROLL
  for (int it = 0; it < kNormBackwardIters; ++it) {
    const int j = it * threads + tid;
    if (j >= nvec) continue;
    raw_x[it] = simt::load_bits<Raw::kSize>(a.x + offset + j * kVec);
    raw_dy[it] = simt::load_bits<Raw::kSize>(a.dy + offset + j * kVec);
  }
  const float mean = kKind == NormKind::kLayerNorm ? a.mean[row] : 0.0f;
  const float rstd = a.rstd[row];
  float sum_g = 0.0f, sum_gx = 0.0f;  // sums of g = dy * gamma and of g * xhat
  HETPLAN_UNROLL
  for (int it = 0; it < kNormBackwardIters; ++it) {
    const int j = it * threads + tid;
    if (j >= nvec) continue;
    float x[kVec], dy[kVec], g[kVec];
    simt::unpack<T, kVec>(raw_x[it], x);
    simt::unpack<T, kVec>(raw_dy[it], dy);
    simt::load<kVec>(a.gamma + j * kVec, g);
    HETPLAN_UNROLL
    for (int e = 0; e < kVec; ++e) {
      const float gd = dy[e] * g[e];
      sum_g += gd;
      sum_gx += gd * (x[e] - mean) * rstd;
    }
  }
  simt::block_sum2(sum_g, sum_gx, scratch);
  const float mean_g = kKind == NormKind::kLayerNorm ? sum_g * inv_cols : 0.0f;
  const float mean_gx = sum_gx * inv_cols;
  HETPLAN_UNROLL
  for (int it = 0; it < kNormBackwardIters; ++it) {
    const int j = it * threads + tid;
    if (j >= nvec) continue;
    float x[kVec], dy[kVec], g[kVec], dx[kVec];
    simt::unpack<T, kVec>(raw_x[it], x);
    simt::unpack<T, kVec>(raw_dy[it], dy);
    simt::load<kVec>(a.gamma + j * kVec, g);
    HETPLAN_UNROLL
    for (int e = 0; e < kVec; ++e) {
      const float xhat = (x[e] - mean) * rstd;
      dx[e] = rstd * (dy[e] * g[e] - mean_g - xhat * mean_gx);
    }
    simt::store<kVec>(a.dx + offset + j * kVec, dx);
  }
}

// ---- weight gradients: column sums over rows ----

enum class ColumnKind { kLayerNorm, kRmsNorm, kSum };

template <class T>
struct ColumnArgs {
  const T* x;         // unused for kSum
  const float* mean;  // kLayerNorm only
  const float* rstd;  // unused for kSum
  const T* dy;
  float* partial_g;  // [chunks, cols]: sums of dy * xhat (of dy for kSum)
  float* partial_b;  // [chunks, cols]: sums of dy (kLayerNorm only)
  int64_t rows;
  int cols;
};

constexpr int kColumnRowsPerChunk = 256;
constexpr int kColumnWarps = 8;

inline int64_t column_chunks(int64_t rows) { return ceil_div(rows, kColumnRowsPerChunk); }

inline LaunchShape column_partials_shape(int64_t rows, int64_t cols, int vec) {
  LaunchShape s;
  s.grid_x = ceil_div(cols, 32 * vec);
  s.grid_y = column_chunks(rows);
  s.block = 32 * kColumnWarps;
  s.smem = 2 * kColumnWarps * 32 * vec * sizeof(float);
  return s;
}

// Block (bx, by): columns [bx * 32 * kVec, +32 * kVec) (a warp-wide strip, kVec per lane),
// rows of chunk by; warp w takes rows w, w + 8, ... of the chunk; the 8 warps' sums then
// meet in shared memory and are added in warp order (deterministic).
template <class T, int kVec, ColumnKind kKind>
HETPLAN_DEVICE void column_partials_block(const ColumnArgs<T>& a) {
  constexpr int kStrip = 32 * kVec;
  const int lane = simt::lane(), warp = simt::warp();
  const int64_t col = simt::block_x() * kStrip + lane * kVec;
  const int64_t chunk = simt::block_y();
  const int64_t r0 = chunk * kColumnRowsPerChunk;
  const int64_t r1 = r0 + kColumnRowsPerChunk < a.rows ? r0 + kColumnRowsPerChunk : a.rows;
  float acc_g[kVec] = {}, acc_b[kVec] = {};
  if (col < a.cols) {
    HETPLAN_UNROLL_BY(4)
    for (int64_t r = r0 + warp; r < r1; r += kColumnWarps) {
      float dy[kVec];
      simt::load<kVec>(a.dy + r * a.cols + col, dy);
      if constexpr (kKind == ColumnKind::kSum) {
        HETPLAN_UNROLL
        for (int e = 0; e < kVec; ++e) acc_g[e] += dy[e];
      } else {
        float x[kVec];
        simt::load<kVec>(a.x + r * a.cols + col, x);
        const float mean = kKind == ColumnKind::kLayerNorm ? a.mean[r] : 0.0f;
        const float rstd = a.rstd[r];
        HETPLAN_UNROLL
        for (int e = 0; e < kVec; ++e) {
          acc_g[e] += dy[e] * (x[e] - mean) * rstd;
          if constexpr (kKind == ColumnKind::kLayerNorm) acc_b[e] += dy[e];
        }
      }
    }
  }
  float* sg = reinterpret_cast<float*>(simt::dynamic_smem());
  float* sb = sg + kColumnWarps * kStrip;
  HETPLAN_UNROLL
  for (int e = 0; e < kVec; ++e) {
    sg[warp * kStrip + lane * kVec + e] = acc_g[e];
    sb[warp * kStrip + lane * kVec + e] = acc_b[e];
  }
  simt::sync_threads();
  for (int c = simt::thread_x(); c < kStrip; c += simt::block_threads()) {
    const int64_t gc = simt::block_x() * kStrip + c;
    if (gc >= a.cols) continue;
    float g = 0.0f, b = 0.0f;
    for (int w = 0; w < kColumnWarps; ++w) {
      g += sg[w * kStrip + c];
      b += sb[w * kStrip + c];
    }
    a.partial_g[chunk * a.cols + gc] = g;
    if constexpr (kKind == ColumnKind::kLayerNorm) a.partial_b[chunk * a.cols + gc] = b;
  }
}

struct ColumnFinishArgs {
  const float* partial;  // [chunks, cols]
  float* out;            // [cols]
  int64_t chunks;
  int cols;
};

inline LaunchShape column_finish_shape(int64_t cols) {
  LaunchShape s;
  s.block = 256;
  s.grid_x = ceil_div(cols, s.block);
  return s;
}

HETPLAN_DEVICE void column_finish_block(const ColumnFinishArgs& a) {
  const int64_t c = simt::block_x() * simt::block_threads() + simt::thread_x();
  if (c >= a.cols) return;
  float s = 0.0f;
  for (int64_t k = 0; k < a.chunks; ++k) s += a.partial[k * a.cols + c];
  a.out[c] = s;
}

}  // namespace hetplan::kernels
