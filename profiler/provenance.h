// The provenance block of a measured calibration file: the GPU (name, hetplan type key, SMs,
// clocks, memory, L2), the driver and libraries (CUDA runtime, cuBLAS, NCCL, CUPTI), the host,
// the UTC date, the command line, `source: measured` and the hetplan version.
#pragma once

#include <string>
#include <vector>

#include "costmodel/calibration.h"
#include "profiler/common/options.h"
#include "profiler/device.h"

namespace hetplan::profiler {

// Builds the provenance of this run on `device`. `warnings` gets lines for the user (an unknown
// GPU type, say); they also go into `notes`.
Provenance measure_provenance(const CalibrateOptions& options, const DeviceInfo& device,
                              std::vector<std::string>* warnings);
// The driver's version string through NVML ("580.159.04"), or "" when NVML is not there.
std::string nvml_driver_version();
// "2.27.3" from ncclGetVersion.
std::string nccl_version();

}  // namespace hetplan::profiler
