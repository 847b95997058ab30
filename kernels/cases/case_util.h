// Helpers shared by the case files: random device buffers, partial downloads, the rows and
// windows a check looks at, and the comparison that adds to a CheckResult.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "kernels/bandwidth.h"
#include "kernels/cuda_check.h"
#include "kernels/device_buffer.h"
#include "kernels/reference/compare.h"
#include "kernels/reference/numeric.h"
#include "kernels/registry.h"

namespace hetplan::kernels::cases {

// n random values in [lo, hi) from `seed` (never zeros unless the range holds 0, which no case
// uses for an input it reads as a divisor).
template <class T>
DeviceBuffer<T> random_buffer(int64_t n, float lo, float hi, uint64_t seed) {
  DeviceBuffer<T> b(static_cast<size_t>(n));
  fill_uniform(b.get(), n, lo, hi, seed, nullptr);
  return b;
}
DeviceBuffer<int32_t> random_int_buffer(int64_t n, int32_t lo, int32_t hi, uint64_t seed);

// Elements [first, first + n) widened to fp32 (synchronous).
template <class T>
std::vector<float> fetch(const DeviceBuffer<T>& b, int64_t first, int64_t n) {
  return to_floats(b.download(static_cast<size_t>(first), static_cast<size_t>(n)));
}
template <class T>
std::vector<float> fetch(const DeviceBuffer<T>& b) {
  return fetch(b, 0, static_cast<int64_t>(b.count()));
}

// Waits for the device and throws KernelError for an asynchronous failure.
void finish();

// All rows when there are at most `max_rows`, else `max_rows` spread evenly, first and last
// included: what a check recomputes on the CPU at benchmark sizes.
std::vector<int64_t> sample_rows(int64_t rows, int64_t max_rows = 48);
// [begin, end) windows over n elements: one window of everything when n <= count * size, else
// `count` windows of `size` spread evenly, the first at 0 and the last at the end.
std::vector<std::pair<int64_t, int64_t>> sample_windows(int64_t n, int64_t size = 8192,
                                                        int count = 32);

// A case of `family` and `pass` that runs on every device; the caller adds its name, dims, shapes,
// work and make.
Case new_case(std::string family, std::string pass, DType dtype, std::string note);

// Compares and records the verdict in `r`.
void judge(CheckResult& r, const std::string& name, const std::vector<float>& got,
           const std::vector<double>& want, Tolerance tol);

// Sum of the bytes of buffers.
template <class... B>
size_t total_bytes(const B&... b) {
  return (size_t{0} + ... + b.bytes());
}

// The element sizes of the dtypes.
template <class T>
constexpr double bytes_per() {
  return static_cast<double>(sizeof(T));
}

}  // namespace hetplan::kernels::cases
