// A kernel's launch configuration, computed by plain host functions next to each kernel body so
// that the CUDA launcher and the emulator-driven CPU tests launch exactly the same shape.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <initializer_list>

namespace hetplan::kernels {

struct LaunchShape {
  int64_t grid_x = 1, grid_y = 1, grid_z = 1;
  int block = 1;    // threads, 1-D
  size_t smem = 0;  // dynamic shared memory bytes
};

#if defined(__CUDACC__)
#define HETPLAN_ANYWHERE __host__ __device__
#else
#define HETPLAN_ANYWHERE
#endif
HETPLAN_ANYWHERE constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
HETPLAN_ANYWHERE constexpr int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// Blocks for a grid-stride loop over `items` with `block` threads each: enough to fill every SM
// `waves` times over, never more than the work needs.
inline int64_t grid_stride_blocks(int64_t items, int block, int sm_count, int waves = 8) {
  return std::max<int64_t>(1, std::min<int64_t>(ceil_div(items, block), int64_t{sm_count} * waves));
}

// Elements per 16-byte vector of T.
template <class T>
constexpr int vec16() {
  return static_cast<int>(16 / sizeof(T));
}

// 16-byte vectors when every row of `cols` elements starts 16-byte aligned (cols a multiple of
// the vector and every pointer aligned), else 1: the scalar path.
template <class T>
int row_vector_width(int64_t cols, std::initializer_list<const void*> pointers) {
  if (cols % vec16<T>() != 0) return 1;
  for (const void* p : pointers)
    if (p && reinterpret_cast<uintptr_t>(p) % 16 != 0) return 1;
  return vec16<T>();
}

}  // namespace hetplan::kernels
