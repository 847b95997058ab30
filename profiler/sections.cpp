#include "profiler/section.h"

#include "costmodel/errors.h"

namespace hetplan::profiler {

std::vector<std::unique_ptr<Section>> make_sections(const CalibrateOptions& o, bool multi_process) {
  std::vector<std::unique_ptr<Section>> out;
  if (multi_process) {
    // One GPU's GEMMs, kernels and layers are calibrated by a single process per GPU type; the
    // processes of a launch meet for the collectives only.
    if (o.gemm || o.kernels || !o.layer_models.empty())
      throw InputError(
          "--gemm, --kernels and --layers run in a single process (one per GPU "
          "type); under mpirun or srun only --collectives runs");
    out.push_back(make_collectives_section());
    return out;
  }
  const std::vector<std::string> models =
      o.layer_models.empty() && o.all_sections() ? default_layer_models() : o.layer_models;
  if (o.run_gemm()) out.push_back(make_gemm_grid_section());
  if (!models.empty()) out.push_back(make_layer_gemm_section(models));
  if (o.run_kernels()) out.push_back(make_kernels_section());
  if (!models.empty()) out.push_back(make_layer_timing_section(models));
  if (o.run_collectives()) out.push_back(make_collectives_section());
  return out;
}

}  // namespace hetplan::profiler
