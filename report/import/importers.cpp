#include "report/import/importers.h"

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "report/import/deepspeed_log.h"
#include "report/import/megatron_log.h"

namespace hetplan {

const std::vector<ImporterSpec>& importers() {
  static const std::vector<ImporterSpec> kImporters = {
      {"megatron", "Megatron-LM training logs -> measurements",
       [](const ImportRequest& r) {
         return ImportResult{import_megatron_logs(r.inputs, r.log), std::nullopt};
       }},
      {"deepspeed", "DeepSpeed training logs -> measurements",
       [](const ImportRequest& r) {
         return ImportResult{import_deepspeed_logs(r.inputs, r.log), std::nullopt};
       }},
      {"amp", "AMP known-cost arrays (<model>_<machine>_<tp>.npy) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_amp_known_cost(r.inputs, r.profile)};
       }},
      {"helix", "Helix serving profiles ({prompt,decode}_bs2time.csv) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_helix_profiles(r.inputs, r.profile)};
       }},
      {"kernel-bench", "kernels/bench JSON (hetplan_kernel_bench --json) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_kernel_bench(r.inputs, r.profile)};
       }},
      {"torch-sdpa", "PyTorch SDPA timings (scripts/bench_attention_torch.py) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_torch_sdpa(r.inputs, r.profile)};
       }},
  };
  return kImporters;
}

const ImporterSpec& find_importer(std::string_view format) {
  std::string names;
  for (const auto& spec : importers()) {
    if (spec.format == format) return spec;
    names += (names.empty() ? "" : ", ") + std::string(spec.format);
  }
  throw InputError(fmt::format("--format: unknown format \"{}\" (expected {})", format, names));
}

}  // namespace hetplan
