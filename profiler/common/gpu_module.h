// hetplan's CUDA half (profiler/ and kernels/, with cuBLAS(Lt), CUPTI and NCCL) is a module,
// libhetplan_gpu.so, that only the commands measuring a GPU load. The libraries' start-up alone
// (cuBLASLt's initialisers) costs about 65 ms and 200 MB per process, which every `hetplan
// search`, `predict` or `simulate` would otherwise pay without touching a GPU.
#pragma once

#include "profiler/calibrate.h"
#include "profiler/collectives/calibrate_collectives.h"

#include <string>

namespace hetplan::profiler {

// What the module hands to the command line. Both structs are built by the same compiler from the
// same headers; kGpuModuleAbi and the version string guard against a stale module.
struct GpuModule {
  CalibrationOutcome (*run_calibration)(const CalibrateOptions& options) = nullptr;
  CollectiveRunSummary (*run_collective_calibration)(
      const CollectiveOptions& options, CalibrationFile& out, Journal* main_journal,
      const CollectiveProgressFn& progress) = nullptr;
};

inline constexpr int kGpuModuleAbi = 1;
// The module's one exported symbol: fills `out` and returns 0, or returns the module's ABI number
// when `abi` or `signature` differ from its own.
inline constexpr const char* kGpuModuleSymbol = "hetplan_gpu_module";
using GpuModuleEntry = int (*)(int abi, const char* signature, GpuModule* out);

// hetplan's version and the sizes of the structures that cross the boundary, as each side was
// compiled: a module from another build (or other headers) fails to load instead of misreading.
std::string gpu_module_signature();

// Loads the module once per process and returns its entry points. Looks at $HETPLAN_GPU_MODULE,
// then beside the running executable, then in ../lib/hetplan (installed) and ../lib from it. Throws
// RuntimeFailure saying why when this hetplan was built without CUDA or the module cannot be loaded
// (missing, CUDA libraries absent, another build's module).
const GpuModule& gpu_module();

}  // namespace hetplan::profiler
