// The one symbol of libhetplan_gpu.so (see profiler/common/gpu_module.h): hands the command line
// the entry points of the CUDA half.
#include <string>

#include "profiler/common/gpu_module.h"

extern "C" __attribute__((visibility("default"))) int hetplan_gpu_module(
    int abi, const char* signature, hetplan::profiler::GpuModule* out) {
  using namespace hetplan::profiler;
  if (abi != kGpuModuleAbi || signature == nullptr || gpu_module_signature() != signature)
    return kGpuModuleAbi;
  out->run_calibration = &run_calibration;
  out->run_collective_calibration = &run_collective_calibration;
  return 0;
}
