// The SM clocks a GPU type's calibration saw, by class of measurement: GEMMs of each dtype, each
// kernel family's pass, each layer style's pass. `hetplan fit` prints them beside the fits, so that
// a class timed under a power limit (a layer whose GEMMs hold the board at its cap) and one timed
// at the top boost clock (a kernel alone) are told apart before their times are compared.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "costmodel/calibration.h"

namespace hetplan {

struct ClockClass {
  std::string what;          // "gemm bf16", "kernel attention forward", "layer llama B"
  int64_t measurements = 0;  // with a clock record
  // Over the measurements' median clocks: their median, 10th and 90th percentiles.
  double sm_mhz_median = 0, sm_mhz_p10 = 0, sm_mhz_p90 = 0;
  double sm_mhz_min = 0;      // the lowest reading of any of them
  int64_t power_thermal = 0;  // measurements with a power or thermal reason in some reading
  int64_t abnormal = 0;       // of them, with one of kClockReasonsAbnormal (heat, power brake)
  uint64_t reasons = 0;       // every reason seen
  std::optional<double> power_w_median;  // over the measurements that read it
};

// The classes of every measurement in `files` that has `method.clocks`, in a fixed order (GEMMs,
// kernels, layers; names sorted within each). A kernel timed again right after GEMMs (SDPA's
// `method.after_gemm.clocks`) is also in its class "... after GEMMs". Throws InputError naming the
// file and the key path for a malformed clock record.
std::vector<ClockClass> clock_classes(const std::vector<const CalibrationFile*>& files);

Json to_json(const ClockClass& c);

}  // namespace hetplan
