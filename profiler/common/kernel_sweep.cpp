#include "profiler/common/kernel_sweep.h"

#include <algorithm>

namespace hetplan::profiler {
namespace {

struct Scaling {
  const char* dim;
  int64_t divisor;
  int64_t floor;
};

// In priority order; floors keep the smallest shapes meaningful (a few rows, 4 KiB, 128 tokens).
constexpr Scaling kScalings[] = {{"rows", 4, 1},      {"tokens", 4, 1},   {"elements", 4, 1024},
                                 {"params", 4, 1024}, {"bytes", 4, 4096}, {"seq", 2, 128},
                                 {"batch", 4, 1}};

const Scaling* scaling_for(const std::vector<std::string>& dims, int* index) {
  for (const auto& s : kScalings) {
    const auto it = std::find(dims.begin(), dims.end(), s.dim);
    if (it != dims.end()) {
      *index = static_cast<int>(it - dims.begin());
      return &s;
    }
  }
  *index = -1;
  return nullptr;
}

}  // namespace

int size_dimension(const std::vector<std::string>& dims) {
  int index = -1;
  scaling_for(dims, &index);
  return index;
}

std::vector<KernelShape> kernel_sweep_shapes(const std::vector<std::string>& dims,
                                             const std::vector<KernelShape>& bench, bool quick) {
  std::vector<KernelShape> out;
  auto add = [&](const KernelShape& s) {
    if (std::find(out.begin(), out.end(), s) == out.end()) out.push_back(s);
  };
  int index = -1;
  const Scaling* scaling = scaling_for(dims, &index);
  const size_t shapes = quick ? std::min<size_t>(1, bench.size()) : bench.size();
  for (size_t b = 0; b < shapes; ++b) {
    add(bench[b]);
    if (scaling == nullptr || b > 0) continue;  // smaller copies of the first shape only
    const int steps = quick ? 1 : 4;
    // Quick: one step of divisor^3 (1/64, or 1/8 for seq); full: steps of the divisor.
    const int64_t step =
        quick ? scaling->divisor * scaling->divisor * scaling->divisor : scaling->divisor;
    KernelShape s = bench[b];
    for (int k = 0; k < steps; ++k) {
      const int64_t next = s[static_cast<size_t>(index)] / step;
      if (next < scaling->floor) break;
      s[static_cast<size_t>(index)] = next;
      add(s);
    }
  }
  return out;
}

std::string kernel_shape_text(const std::vector<std::string>& dims, const KernelShape& shape) {
  std::string out;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ',';
    if (i < dims.size()) {
      out += dims[i];
    } else {
      out += 'd';
      out += std::to_string(i);
    }
    out += '=';
    out += std::to_string(shape[i]);
  }
  return out;
}

}  // namespace hetplan::profiler
