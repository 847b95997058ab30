// The bandwidth probe: a device-to-device copy and a read-only reduction, the yardsticks the
// memory-bound kernels are measured against (bytes read + bytes written per second), plus the
// random fill used to initialise every benchmark's inputs. Device code in the simt.h dialect;
// launchers in bandwidth.cu.
//
// Both probes move 16-byte vectors in a grid-stride loop over one wave of resident blocks, four
// independent loads in flight per thread before the first use.
#pragma once

#include "kernels/launch_shape.h"
#include "kernels/philox.h"
#include "kernels/simt.h"

namespace hetplan::kernels {

constexpr int kProbeThreads = 256;
constexpr int kProbeUnroll = 4;

inline LaunchShape probe_shape(int64_t bytes, int sm_count) {
  LaunchShape s;
  s.block = kProbeThreads;
  s.grid_x = grid_stride_blocks(std::max<int64_t>(1, bytes / 16), kProbeThreads, sm_count, 8);
  s.smem = 32 * sizeof(float);
  return s;
}

struct CopyArgs {
  const unsigned char* src;  // 16-byte aligned
  unsigned char* dst;        // 16-byte aligned
  int64_t bytes;
};

HETPLAN_DEVICE void copy_block(const CopyArgs& a) {
  const int64_t n = a.bytes / 16;
  const int64_t stride = simt::grid_x() * simt::block_threads();
  int64_t v = simt::block_x() * simt::block_threads() + simt::thread_x();
  for (; v + (kProbeUnroll - 1) * stride < n; v += kProbeUnroll * stride) {
    simt::Bits<16> b[kProbeUnroll];
    HETPLAN_UNROLL
    for (int u = 0; u < kProbeUnroll; ++u)
      b[u] = simt::load_bits<16>(a.src + (v + u * stride) * 16);
    HETPLAN_UNROLL
    for (int u = 0; u < kProbeUnroll; ++u)
      simt::store_bits<16>(a.dst + (v + u * stride) * 16, b[u]);
  }
  for (; v < n; v += stride)
    simt::store_bits<16>(a.dst + v * 16, simt::load_bits<16>(a.src + v * 16));
  const int64_t t = n * 16 + simt::block_x() * simt::block_threads() + simt::thread_x();
  if (t < a.bytes) a.dst[t] = a.src[t];
}

struct ReduceArgs {
  const float* src;  // 16-byte aligned
  int64_t n;         // floats
  float* partial;    // [grid_x]: one sum per block
};

HETPLAN_DEVICE void read_reduce_block(const ReduceArgs& a) {
  const int64_t n4 = a.n / 4;
  const int64_t stride = simt::grid_x() * simt::block_threads();
  int64_t v = simt::block_x() * simt::block_threads() + simt::thread_x();
  float sum = 0.0f;
  for (; v + (kProbeUnroll - 1) * stride < n4; v += kProbeUnroll * stride) {
    float x[kProbeUnroll][4];
    HETPLAN_UNROLL
    for (int u = 0; u < kProbeUnroll; ++u) simt::load<4>(a.src + (v + u * stride) * 4, x[u]);
    HETPLAN_UNROLL
    for (int u = 0; u < kProbeUnroll; ++u) sum += (x[u][0] + x[u][1]) + (x[u][2] + x[u][3]);
  }
  for (; v < n4; v += stride) {
    float x[4];
    simt::load<4>(a.src + v * 4, x);
    sum += (x[0] + x[1]) + (x[2] + x[3]);
  }
  const int64_t t = n4 * 4 + simt::block_x() * simt::block_threads() + simt::thread_x();
  if (t < a.n) sum += a.src[t];
  sum = simt::block_sum(sum, reinterpret_cast<float*>(simt::dynamic_smem()));
  if (simt::thread_x() == 0) a.partial[simt::block_x()] = sum;
}

// ---- random fill: element i of stream `seed` is lo + (hi - lo) * U(Philox(seed, i / 4)[i % 4])
// ----
template <class T>
struct FillArgs {
  T* p;
  int64_t n;
  float lo, hi;
  uint64_t seed;
};

template <class T>
HETPLAN_DEVICE void fill_block(const FillArgs<T>& a) {
  const int64_t groups = ceil_div(a.n, 4);
  const int64_t stride = simt::grid_x() * simt::block_threads();
  for (int64_t k = simt::block_x() * simt::block_threads() + simt::thread_x(); k < groups;
       k += stride) {
    const Philox4 w = philox_group(a.seed, 0, static_cast<uint64_t>(4 * k));
    HETPLAN_UNROLL
    for (int i = 0; i < 4; ++i)
      if (4 * k + i < a.n)
        a.p[4 * k + i] = simt::from_f32<T>(a.lo + (a.hi - a.lo) * uniform01(w.v[i]));
  }
}

struct FillIntArgs {
  int32_t* p;
  int64_t n;
  int32_t lo;
  uint64_t span;  // hi - lo
  uint64_t seed;
};

HETPLAN_DEVICE void fill_int_block(const FillIntArgs& a) {
  const int64_t groups = ceil_div(a.n, 4);
  const int64_t stride = simt::grid_x() * simt::block_threads();
  for (int64_t k = simt::block_x() * simt::block_threads() + simt::thread_x(); k < groups;
       k += stride) {
    const Philox4 w = philox_group(a.seed, 0, static_cast<uint64_t>(4 * k));
    HETPLAN_UNROLL
    for (int i = 0; i < 4; ++i)
      if (4 * k + i < a.n)
        a.p[4 * k + i] =
            a.lo + static_cast<int32_t>((static_cast<uint64_t>(w.v[i]) * a.span) >> 32);
  }
}

}  // namespace hetplan::kernels
