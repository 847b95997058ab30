#include "costmodel/clocks.h"

#include <charconv>

#include <fmt/format.h>

#include "costmodel/stats.h"

namespace hetplan {
namespace {

struct NamedReason {
  uint64_t bit;
  const char* name;
};
constexpr NamedReason kReasons[] = {{kClockReasonGpuIdle, "gpu_idle"},
                                    {kClockReasonApplicationsClocks, "applications_clocks"},
                                    {kClockReasonSwPowerCap, "sw_power_cap"},
                                    {kClockReasonHwSlowdown, "hw_slowdown"},
                                    {kClockReasonSyncBoost, "sync_boost"},
                                    {kClockReasonSwThermal, "sw_thermal"},
                                    {kClockReasonHwThermal, "hw_thermal"},
                                    {kClockReasonHwPowerBrake, "hw_power_brake"},
                                    {kClockReasonDisplayClocks, "display_clocks"}};

}  // namespace

std::vector<std::string> clock_reason_names(uint64_t reasons) {
  std::vector<std::string> out;
  for (int b = 0; b < 64; ++b) {
    const uint64_t bit = uint64_t{1} << b;
    if (!(reasons & bit)) continue;
    std::string name = fmt::format("{:#x}", bit);
    for (const auto& r : kReasons)
      if (r.bit == bit) name = r.name;
    out.push_back(std::move(name));
  }
  return out;
}

std::optional<uint64_t> clock_reason_bit(std::string_view name) {
  for (const auto& r : kReasons)
    if (name == r.name) return r.bit;
  if (name.size() > 2 && name.substr(0, 2) == "0x") {
    uint64_t v = 0;
    const char* end = name.data() + name.size();
    const auto [p, ec] = std::from_chars(name.data() + 2, end, v, 16);
    if (ec == std::errc() && p == end && v != 0) return v;
  }
  return std::nullopt;
}

ClockSummary summarize_clocks(const std::vector<ClockSample>& samples) {
  ClockSummary s;
  if (samples.empty()) return s;
  std::vector<double> mhz, power, read;
  for (const ClockSample& c : samples) {
    mhz.push_back(c.sm_mhz);
    if (c.power_w) power.push_back(*c.power_w);
    read.push_back(c.read_s);
    s.reasons |= c.reasons;
    s.power_thermal_samples += (c.reasons & kClockReasonsPowerThermal) != 0;
  }
  const Distribution m = summarize(std::move(mhz));
  s.samples = m.count;
  s.sm_mhz_median = m.median;
  s.sm_mhz_min = m.min;
  s.sm_mhz_max = m.max;
  if (!power.empty()) s.power_w_median = summarize(std::move(power)).median;
  s.read_s_median = summarize(std::move(read)).median;
  return s;
}

Json to_json(const ClockSummary& s) {
  Json j{{"samples", s.samples},
         {"sm_mhz_median", s.sm_mhz_median},
         {"sm_mhz_min", s.sm_mhz_min},
         {"sm_mhz_max", s.sm_mhz_max},
         {"reasons", clock_reason_names(s.reasons)},
         {"power_thermal_samples", s.power_thermal_samples},
         {"read_us_median", s.read_s_median * 1e6}};
  if (s.power_w_median) j["power_w_median"] = *s.power_w_median;
  return j;
}

ClockSummary clock_summary_from_json(ObjectReader r) {
  ClockSummary s;
  s.samples = r.positive_integer("samples");
  s.sm_mhz_median = r.positive("sm_mhz_median");
  s.sm_mhz_min = r.positive_or("sm_mhz_min", s.sm_mhz_median);
  s.sm_mhz_max = r.positive_or("sm_mhz_max", s.sm_mhz_median);
  if (s.sm_mhz_min > s.sm_mhz_median || s.sm_mhz_median > s.sm_mhz_max)
    r.fail("sm_mhz_median", "expected sm_mhz_min <= sm_mhz_median <= sm_mhz_max");
  s.power_w_median = r.optional_number("power_w_median");
  if (s.power_w_median && !(*s.power_w_median >= 0))
    r.fail("power_w_median", fmt::format("expected watts >= 0, found {}", *s.power_w_median));
  for (const std::string& name : r.strings("reasons")) {
    const std::optional<uint64_t> bit = clock_reason_bit(name);
    if (!bit)
      r.fail("reasons", fmt::format("expected NVML clocks-event reason names (sw_power_cap, "
                                    "hw_thermal, ...) or hex bits, found \"{}\"",
                                    name));
    s.reasons |= *bit;
  }
  s.power_thermal_samples = r.integer_or("power_thermal_samples", 0);
  if (s.power_thermal_samples < 0 || s.power_thermal_samples > s.samples)
    r.fail("power_thermal_samples",
           fmt::format("expected 0 to samples ({}), found {}", s.samples, s.power_thermal_samples));
  s.read_s_median = r.non_negative_or("read_us_median", 0) * 1e-6;
  r.finish();
  return s;
}

}  // namespace hetplan
