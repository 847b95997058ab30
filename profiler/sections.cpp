#include "profiler/section.h"

namespace hetplan::profiler {

std::vector<std::unique_ptr<Section>> make_sections(const CalibrateOptions& o) {
  const std::vector<std::string> models =
      o.layer_models.empty() && o.all_sections() ? default_layer_models() : o.layer_models;
  std::vector<std::unique_ptr<Section>> out;
  if (o.run_gemm()) out.push_back(make_gemm_grid_section());
  if (!models.empty()) out.push_back(make_layer_gemm_section(models));
  if (o.run_kernels()) out.push_back(make_kernels_section());
  if (!models.empty()) out.push_back(make_layer_timing_section(models));
  if (o.run_collectives()) out.push_back(make_collectives_section());
  return out;
}

}  // namespace hetplan::profiler
