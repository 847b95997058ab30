#include "report/import/importers.h"

#include <algorithm>

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
       },
       "--model --cluster --gpu-type --warmup --memory"},
      {"deepspeed", "DeepSpeed training logs -> measurements",
       [](const ImportRequest& r) {
         return ImportResult{import_deepspeed_logs(r.inputs, r.log), std::nullopt};
       },
       "--model --cluster --gpu-type --warmup --memory --tp --pp --recompute"},
      {"amp", "AMP known-cost arrays (<model>_<machine>_<tp>.npy) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_amp_known_cost(r.inputs, r.profile)};
       },
       "--model --gpu-type --tp"},
      {"sailor",
       "Sailor's per-layer profiles (profiles/<model>/<GPU>/profile_<tp>.npy) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_sailor_profiles(r.inputs, r.profile)};
       },
       "--model --gpu-type --tp"},
      {"helix", "Helix serving profiles ({prompt,decode}_bs2time.csv) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_helix_profiles(r.inputs, r.profile)};
       },
       "--model --gpu-type"},
      {"kernel-bench", "kernels/bench JSON (hetplan_kernel_bench --json) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_kernel_bench(r.inputs, r.profile)};
       },
       "--gpu-type"},
      {"torch-sdpa", "PyTorch SDPA timings (scripts/bench_attention_torch.py) -> calibration",
       [](const ImportRequest& r) {
         return ImportResult{std::nullopt, import_torch_sdpa(r.inputs, r.profile)};
       },
       "--gpu-type"},
  };
  return kImporters;
}

bool ImporterSpec::takes(std::string_view option) const {
  for (size_t at = 0; at < options.size();) {
    const size_t end = std::min(options.find(' ', at), options.size());
    if (options.substr(at, end - at) == option) return true;
    at = end + 1;
  }
  return false;
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
