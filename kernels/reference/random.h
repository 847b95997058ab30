// Reproducible random inputs: element i of (seed) is a function of (seed, i) through Philox, the
// same mapping the device fill kernels (kernels/fill.h) use, so CPU tests and GPU checks can
// draw the very same inputs. Never zeros: tests must not pass on unwritten outputs.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/philox.h"
#include "kernels/reference/numeric.h"

namespace hetplan::kernels {

// Uniform in [lo, hi) for element `i`.
inline float random_uniform(uint64_t seed, uint64_t i, float lo, float hi) {
  return lo + (hi - lo) * uniform01(philox_group(seed, 0, i).v[i % 4]);
}

// n values uniform in [lo, hi), rounded to T.
template <class T>
std::vector<T> random_vector(int64_t n, float lo, float hi, uint64_t seed) {
  std::vector<T> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] =
        from_float<T>(random_uniform(seed, static_cast<uint64_t>(i), lo, hi));
  return v;
}

// n integers uniform in [lo, hi).
inline std::vector<int32_t> random_ints(int64_t n, int32_t lo, int32_t hi, uint64_t seed) {
  std::vector<int32_t> v(static_cast<size_t>(n));
  const uint64_t span = static_cast<uint64_t>(static_cast<int64_t>(hi) - lo);
  for (int64_t i = 0; i < n; ++i) {
    const uint32_t w = philox_group(seed, 0, static_cast<uint64_t>(i)).v[i % 4];
    v[static_cast<size_t>(i)] = lo + static_cast<int32_t>((uint64_t{w} * span) >> 32);
  }
  return v;
}

}  // namespace hetplan::kernels
