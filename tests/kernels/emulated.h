// Helpers for CPU tests that run kernel code under the SIMT emulator and compare it with the
// CPU reference.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/emulator/simt_emulator.h"
#include "kernels/launch_shape.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/numeric.h"
#include "kernels/reference/random.h"

namespace hetplan::kernels::testing {

// Launches `body` (the kernel's per-thread code) with the launcher's shape. A nonzero `seed`
// runs warps alone between barriers in shuffled order; `eager` lands cp.async data at issue.
inline void emulate(const LaunchShape& s, const std::function<void()>& body, uint64_t seed = 0,
                    bool eager = false) {
  emu::LaunchOptions o;
  o.schedule_seed = seed;
  o.eager_async_copies = eager;
  emu::launch({static_cast<unsigned>(s.grid_x), static_cast<unsigned>(s.grid_y),
               static_cast<unsigned>(s.grid_z)},
              {static_cast<unsigned>(s.block), 1, 1}, s.smem, body, o);
}

// Runs `body` as one block of `threads` threads with `smem` bytes and returns the error the
// emulator throws ("" if none).
inline std::string run_block(int threads, size_t smem, const std::function<void()>& body,
                             uint64_t seed = 0) {
  LaunchShape one;
  one.block = threads;
  one.smem = smem;
  try {
    emulate(one, body, seed);
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

#define EXPECT_ERROR_HAS(error, text)              \
  EXPECT_NE((error).find(text), std::string::npos) \
      << "error: " << ((error).empty() ? "(none)" : (error))

// An output buffer filled with NaN, as GPU checks poison theirs.
template <class T>
std::vector<T> poisoned(int64_t n) {
  return std::vector<T>(static_cast<size_t>(n),
                        from_float<T>(std::numeric_limits<float>::quiet_NaN()));
}

template <class T>
std::vector<float> widen(const std::vector<T>& v) {
  return to_floats(v);
}

// Expects `got` to match `want` within the default tolerance of T (or `tol`).
template <class T>
void expect_close(const char* name, const std::vector<T>& got, const std::vector<double>& want,
                  Tolerance tol) {
  const std::vector<float> g = to_floats(got);
  const Comparison c = compare(name, g, want, tol);
  EXPECT_TRUE(c.passed) << c.summary();
}
template <class T>
void expect_close(const char* name, const std::vector<T>& got, const std::vector<double>& want) {
  expect_close(name, got, want, default_tolerance(dtype_of<T>()));
}

}  // namespace hetplan::kernels::testing
