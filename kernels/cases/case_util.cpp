#include "kernels/cases/case_util.h"

#include <algorithm>

namespace hetplan::kernels::cases {

DeviceBuffer<int32_t> random_int_buffer(int64_t n, int32_t lo, int32_t hi, uint64_t seed) {
  DeviceBuffer<int32_t> b(static_cast<size_t>(n));
  fill_uniform_ints(b.get(), n, lo, hi, seed, nullptr);
  return b;
}

Case new_case(std::string family, std::string pass, DType dtype, std::string note) {
  Case c;
  c.family = std::move(family);
  c.pass = std::move(pass);
  c.dtype = dtype;
  c.note = std::move(note);
  c.unsupported = [](const Shape&) { return std::string(); };
  return c;
}

void finish() {
  HETPLAN_CUDA_CHECK(cudaGetLastError());
  HETPLAN_CUDA_CHECK(cudaDeviceSynchronize());
}

std::vector<int64_t> sample_rows(int64_t rows, int64_t max_rows) {
  std::vector<int64_t> out;
  if (rows <= max_rows) {
    for (int64_t r = 0; r < rows; ++r) out.push_back(r);
    return out;
  }
  for (int64_t i = 0; i < max_rows; ++i) out.push_back(i * (rows - 1) / (max_rows - 1));
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<std::pair<int64_t, int64_t>> sample_windows(int64_t n, int64_t size, int count) {
  if (n <= size * count) return {{0, n}};
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int i = 0; i < count; ++i) {
    const int64_t begin = i * (n - size) / (count - 1);
    out.emplace_back(begin, begin + size);
  }
  return out;
}

void judge(CheckResult& r, const std::string& name, const std::vector<float>& got,
           const std::vector<double>& want, Tolerance tol) {
  r.add(compare(name, got, want, tol));
}

}  // namespace hetplan::kernels::cases
