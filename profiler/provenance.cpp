#include "profiler/provenance.h"

#include <fmt/format.h>
#include <nccl.h>

#include "costmodel/hardware.h"
#include "profiler/common/gpu_type.h"
#include "profiler/common/nvml.h"
#include "profiler/common/run_info.h"
#include "profiler/cuda_check.h"
#include "profiler/gemm/lt_gemm.h"

namespace hetplan::profiler {

std::string nvml_driver_version() { return Nvml().driver_version(); }

std::string nccl_version() {
  int v = 0;
  if (ncclGetVersion(&v) != ncclSuccess) return "";
  // NCCL >= 2.9 encodes major * 10000 + minor * 100 + patch.
  return fmt::format("{}.{}.{}", v / 10000, (v / 100) % 100, v % 100);
}

Provenance measure_provenance(const CalibrateOptions& options, const DeviceInfo& d,
                              std::vector<std::string>* warnings) {
  Provenance p = base_provenance(options, host_name());
  p.gpu_name = d.name;
  const GpuTypeKey type = gpu_type_key(d.name, d.memory_bytes);
  p.gpu_type = type.key;
  if (!type.known) {
    const std::string w = fmt::format(
        "GPU \"{}\" has no hetplan type key; using \"{}\" (add a preset in presets/gpus or map "
        "the name in profiler/common/gpu_type.cpp)",
        d.name, type.key);
    if (warnings) warnings->push_back(w);
    p.add_note(w);
  } else if (!is_gpu_preset(type.key)) {
    p.add_note(fmt::format("no preset presets/gpus/{}.yaml yet", type.key));
  }
  p.gpu_count = visible_device_count();
  p.sm_count = d.sm_count;
  p.sm_clock_mhz = d.sm_clock_mhz;
  p.memory_clock_mhz = d.memory_clock_mhz;
  p.memory_bytes = d.memory_bytes;
  p.l2_bytes = d.l2_bytes;
  const std::string nvml = nvml_driver_version();
  p.driver = nvml.empty() ? fmt::format("CUDA {}", cuda_version_text(d.driver_version))
                          : fmt::format("{} (CUDA {})", nvml, cuda_version_text(d.driver_version));
  p.cuda_runtime = cuda_version_text(d.runtime_version);
  p.cublas = LtHandle::version();
  p.nccl = nccl_version();
  p.add_note(fmt::format("device {} (PCI {}), compute capability {}.{}, memory bus {} bits",
                         d.index, d.pci_bus_id, d.cc_major, d.cc_minor, d.memory_bus_bits));
  return p;
}

}  // namespace hetplan::profiler
