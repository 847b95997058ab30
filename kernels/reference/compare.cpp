#include "kernels/reference/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace hetplan::kernels {

Tolerance default_tolerance(DType t) {
  switch (t) {
    case DType::kF32:
      return {1e-5, 1e-4};
    case DType::kF16:
      return {2e-3, 2e-2};
    case DType::kBF16:
      break;
  }
  return {1e-2, 6e-2};
}

std::string Comparison::summary() const {
  char buf[512];
  if (nonfinite > 0) {
    std::snprintf(buf, sizeof buf,
                  "%s: FAILED, %lld of %lld values are NaN/Inf (first at %lld): unwritten or "
                  "overflowed",
                  name.c_str(), static_cast<long long>(nonfinite), static_cast<long long>(count),
                  static_cast<long long>(first_nonfinite));
    return buf;
  }
  std::snprintf(buf, sizeof buf,
                "%s: %s, rel_l2 %.3g (bound %.3g), elementwise %.3g (bound %.3g) at %lld: got "
                "%.6g want %.6g, %lld values",
                name.c_str(), passed ? "ok" : "FAILED", rel_l2, tolerance.rel_l2, elementwise,
                tolerance.elementwise, static_cast<long long>(worst_index), worst_got, worst_want,
                static_cast<long long>(count));
  return buf;
}

Comparison compare(std::string name, std::span<const float> got, std::span<const double> want,
                   Tolerance tol) {
  Comparison c;
  c.name = std::move(name);
  c.tolerance = tol;
  c.count = static_cast<int64_t>(got.size());
  if (got.size() != want.size()) {
    c.passed = false;
    c.nonfinite = c.count;  // reported as a failure; sizes never differ in working code
    return c;
  }
  double diff2 = 0, ref2 = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(want[i])) continue;
    ref2 += want[i] * want[i];
  }
  const double rms = got.empty() ? 0 : std::sqrt(ref2 / static_cast<double>(got.size()));
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (!std::isfinite(w)) {
      if (std::isfinite(g) || std::isnan(g) != std::isnan(w) || (std::isinf(w) && g != w)) {
        ++c.nonfinite;
        if (c.first_nonfinite < 0) c.first_nonfinite = static_cast<int64_t>(i);
      }
      continue;
    }
    if (!std::isfinite(g)) {
      ++c.nonfinite;
      if (c.first_nonfinite < 0) c.first_nonfinite = static_cast<int64_t>(i);
      continue;
    }
    const double d = g - w;
    diff2 += d * d;
    const double scale = std::fabs(w) + rms;
    const double e = scale > 0 ? std::fabs(d) / scale : (d == 0 ? 0 : INFINITY);
    if (e > c.elementwise || c.worst_index < 0) {
      c.elementwise = std::max(c.elementwise, e);
      c.worst_index = static_cast<int64_t>(i);
      c.worst_got = g;
      c.worst_want = w;
    }
  }
  c.rel_l2 = ref2 > 0 ? std::sqrt(diff2 / ref2) : (diff2 > 0 ? INFINITY : 0);
  c.passed = c.nonfinite == 0 && c.rel_l2 <= tol.rel_l2 && c.elementwise <= tol.elementwise;
  return c;
}

void CheckResult::add(const Comparison& c) {
  passed = passed && c.passed;
  worst_rel_l2 = std::max(worst_rel_l2, c.rel_l2);
  if (!detail.empty()) detail += "\n";
  detail += c.summary();
}

void CheckResult::fail(const std::string& why) {
  passed = false;
  if (!detail.empty()) detail += "\n";
  detail += why;
}

}  // namespace hetplan::kernels
