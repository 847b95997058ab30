// The GPU's clock while measured work ran: the SM clock, the board's power draw and the reasons
// the driver gave for holding the clock below its maximum (NVML's clocks-event reasons). The
// profiler reads them during every timed region (profiler/common/clock_monitor.h) and keeps a
// summary in the measurement's `method.clocks`; `hetplan fit` summarises them per class of
// measurement. A kernel timed alone at the top boost clock and the same kernel inside a layer whose
// GEMMs hold the board at its power limit differ for a reason no shape model shows: these records
// say which clock each timing saw.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/document.h"

namespace hetplan {

// NVML's clocks-event reason bits (nvml.h `nvmlClocksEventReason*`, NVML API reference,
// "NvmlClocksEventReasons"; the same values as the older `nvmlClocksThrottleReason*`).
inline constexpr uint64_t kClockReasonGpuIdle = 0x1;
inline constexpr uint64_t kClockReasonApplicationsClocks = 0x2;
inline constexpr uint64_t kClockReasonSwPowerCap = 0x4;
inline constexpr uint64_t kClockReasonHwSlowdown = 0x8;
inline constexpr uint64_t kClockReasonSyncBoost = 0x10;
inline constexpr uint64_t kClockReasonSwThermal = 0x20;
inline constexpr uint64_t kClockReasonHwThermal = 0x40;
inline constexpr uint64_t kClockReasonHwPowerBrake = 0x80;
inline constexpr uint64_t kClockReasonDisplayClocks = 0x100;
// The reasons that hold the clock down for power or heat: a timing taken under one of them is
// slower than the same work at the GPU's boost clock for a reason outside the work.
inline constexpr uint64_t kClockReasonsPowerThermal =
    kClockReasonSwPowerCap | kClockReasonHwSlowdown | kClockReasonSwThermal |
    kClockReasonHwThermal | kClockReasonHwPowerBrake;

// The reasons that mean something is wrong with the board (heat, an external power brake),
// unlike the power cap a loaded GPU normally runs at. Not hw_slowdown: NVML's reference says it
// "may be also reported during PState or clock change".
inline constexpr uint64_t kClockReasonsAbnormal =
    kClockReasonSwThermal | kClockReasonHwThermal | kClockReasonHwPowerBrake;

// "sw_power_cap", "hw_thermal", ... in bit order; a bit without a name as "0x200".
std::vector<std::string> clock_reason_names(uint64_t reasons);
// The inverse; std::nullopt for a name that is neither known nor "0x" and hex digits.
std::optional<uint64_t> clock_reason_bit(std::string_view name);

// One reading.
struct ClockSample {
  double sm_mhz = 0;
  std::optional<double> power_w;  // absent where the board does not report it
  uint64_t reasons = 0;
  double read_s = 0;  // what the reading cost the host
};

// The readings taken during one timed region.
struct ClockSummary {
  int64_t samples = 0;
  double sm_mhz_median = 0, sm_mhz_min = 0, sm_mhz_max = 0;
  std::optional<double> power_w_median;
  uint64_t reasons = 0;               // every reason seen in any reading
  int64_t power_thermal_samples = 0;  // readings with a power or thermal reason
  double read_s_median = 0;

  bool empty() const { return samples == 0; }
};

ClockSummary summarize_clocks(const std::vector<ClockSample>& samples);

// {"samples", "sm_mhz_median", "sm_mhz_min", "sm_mhz_max", "power_w_median" (where read),
//  "reasons": [names], "power_thermal_samples", "read_us_median"}.
Json to_json(const ClockSummary& s);
// Throws InputError naming the key for a malformed record.
ClockSummary clock_summary_from_json(ObjectReader r);

}  // namespace hetplan
