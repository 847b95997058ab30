#include "costmodel/clock_classes.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "costmodel/clocks.h"
#include "costmodel/stats.h"

namespace hetplan {
namespace {

struct Accumulator {
  std::vector<double> medians, power;
  double min = 0;
  int64_t power_thermal = 0, abnormal = 0;
  uint64_t reasons = 0;

  void add(const ClockSummary& s) {
    min = medians.empty() ? s.sm_mhz_min : std::min(min, s.sm_mhz_min);
    medians.push_back(s.sm_mhz_median);
    if (s.power_w_median) power.push_back(*s.power_w_median);
    power_thermal += s.power_thermal_samples > 0;
    abnormal += (s.reasons & kClockReasonsAbnormal) != 0;
    reasons |= s.reasons;
  }
};

// Classes in print order: GEMMs (0), kernels (1), layers (2), by name within each.
using ClassKey = std::pair<int, std::string>;

class Collector {
 public:
  // `method` is a measurement's method object; `path` its key path in the file, for errors.
  void add(int group, std::string what, const Json& method, const char* sub,
           const std::string& origin, const std::string& path) {
    const Json* m = &method;
    std::string where = path + ".method";
    if (sub != nullptr) {
      if (!method.is_object() || !method.contains(sub)) return;
      m = &method[sub];
      where += std::string(".") + sub;
    }
    if (!m->is_object() || !m->contains("clocks")) return;
    const ClockSummary s =
        clock_summary_from_json(ObjectReader((*m)["clocks"], origin, where + ".clocks"));
    classes_[{group, std::move(what)}].add(s);
  }

  std::vector<ClockClass> result() const {
    std::vector<ClockClass> out;
    for (const auto& [key, a] : classes_) {
      ClockClass c;
      c.what = key.second;
      const Distribution medians = summarize(a.medians);
      c.measurements = medians.count;
      c.sm_mhz_median = medians.median;
      c.sm_mhz_p10 = medians.p10;
      c.sm_mhz_p90 = medians.p90;
      c.sm_mhz_min = a.min;
      c.power_thermal = a.power_thermal;
      c.abnormal = a.abnormal;
      c.reasons = a.reasons;
      if (!a.power.empty()) c.power_w_median = summarize(a.power).median;
      out.push_back(std::move(c));
    }
    return out;
  }

 private:
  std::map<ClassKey, Accumulator> classes_;
};

std::string kernel_class(const KernelMeasurement& k) {
  const bool named = k.params.is_object() && k.params.contains("family") &&
                     k.params["family"].is_string() && k.params.contains("pass") &&
                     k.params["pass"].is_string();
  if (!named) return "kernel " + k.kernel;
  return fmt::format("kernel {} {}", k.params["family"].get<std::string>(),
                     k.params["pass"].get<std::string>());
}

}  // namespace

std::vector<ClockClass> clock_classes(const std::vector<const CalibrationFile*>& files) {
  Collector c;
  for (const CalibrationFile* f : files) {
    for (size_t i = 0; i < f->gemm.size(); ++i)
      c.add(0, fmt::format("gemm {}", to_string(f->gemm[i].dtype)), f->gemm[i].method, nullptr,
            f->origin, fmt::format("gemm[{}]", i));
    for (size_t i = 0; i < f->kernels.size(); ++i) {
      const std::string what = kernel_class(f->kernels[i]), path = fmt::format("kernels[{}]", i);
      c.add(1, what, f->kernels[i].method, nullptr, f->origin, path);
      // Timed again right after GEMMs (SDPA's --between-gemm-ms): the in-layer context.
      c.add(1, what + " after GEMMs", f->kernels[i].method, "after_gemm", f->origin, path);
    }
    for (size_t i = 0; i < f->layers.size(); ++i) {
      const LayerMeasurement& l = f->layers[i];
      const std::string path = fmt::format("layers[{}]", i);
      c.add(2, fmt::format("layer {} F", l.style), l.method, "forward", f->origin, path);
      c.add(2, fmt::format("layer {} B", l.style), l.method, "backward_input", f->origin, path);
      c.add(2, fmt::format("layer {} W", l.style), l.method, "backward_weight", f->origin, path);
    }
  }
  return c.result();
}

Json to_json(const ClockClass& c) {
  Json j{{"what", c.what},
         {"measurements", c.measurements},
         {"sm_mhz_median", c.sm_mhz_median},
         {"sm_mhz_p10", c.sm_mhz_p10},
         {"sm_mhz_p90", c.sm_mhz_p90},
         {"sm_mhz_min", c.sm_mhz_min},
         {"power_thermal_measurements", c.power_thermal},
         {"abnormal_measurements", c.abnormal},
         {"reasons", clock_reason_names(c.reasons)}};
  if (c.power_w_median) j["power_w_median"] = *c.power_w_median;
  return j;
}

}  // namespace hetplan
