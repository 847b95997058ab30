// Sailor's per-layer profiles (github:eth-easl/sailor, sailor/Planner/baselines/AMP/profiles/
// <model>/<GPU>/profile_<tp>.npy): AMP's known-cost layout, taken by Sailor's authors for its AMP
// baseline. examples/external/sailor/README.md gives their provenance.
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "report/import/log_text.h"
#include "report/import/npy.h"
#include "report/import/profile_import.h"

namespace hetplan {
namespace {

// A GPU folder as Sailor names it, the hetplan GPU it is and the node preset whose links its
// tensor-parallel timings crossed ("" where the repository does not say).
struct SailorGpu {
  const char* folder;
  const char* gpu_type;
  const char* node_type;
};
constexpr SailorGpu kSailorGpus[] = {
    {"V100-16", "v100", "n1-v100x4"}, {"A100-40", "a100-40gb", "a2-highgpu-4g"},
    {"A100-80", "a100-80gb", ""},     {"GH-96", "gh200-96gb", "gh200-superchip-4"},
    {"RTX-3090", "rtx-3090", ""},     {"Titan-RTX", "titan-rtx", ""},
};

// A model folder and its layer list: OPT-350M (Sailor's training_config_opt_350.json: hidden
// 1024, 16 heads, sequence 2048, vocabulary 50272, 24 layers), as its pipeline module lists it:
// the embedding, the 24 decoder layers (MLP 4096, ReLU), the output head.
struct SailorModel {
  const char* folder;
  const char* hetplan_model;
  int64_t blocks, hidden, heads, ffn_hidden, seq_len, vocab;
  const char* activation;
};
constexpr SailorModel kSailorModels[] = {
    {"OPT-350", "opt-350m", 24, 1024, 16, 4096, 2048, 50272, "relu"},
};

std::string sailor_gpu_list() {
  std::string out;
  for (const auto& g : kSailorGpus) out += fmt::format("{}{}", out.empty() ? "" : ", ", g.folder);
  return out;
}

const SailorModel& sailor_model(const std::string& name, const std::string& origin) {
  for (const auto& m : kSailorModels)
    if (name == m.folder || name == m.hetplan_model) return m;
  throw InputError(origin, "",
                   fmt::format("unknown Sailor model \"{}\": hetplan knows the layer list of "
                               "OPT-350 (hetplan's opt-350m); give --model with it, or keep "
                               "Sailor's folders (profiles/OPT-350/<GPU>/profile_<tp>.npy)",
                               name));
}

void map_entry(const SailorModel& model, LayerForwardMeasurement& m) {
  m.hidden = model.hidden;
  m.seq_len = model.seq_len;
  if (m.entry == 0) {
    m.layer = 0;
    m.kind = "embedding";
    m.vocab = model.vocab;
  } else if (m.entry <= model.blocks) {
    m.layer = m.entry;
    m.kind = "transformer";
    m.heads = model.heads;
    m.ffn_hidden = model.ffn_hidden;
    m.activation = model.activation;
  } else {
    m.layer = model.blocks + 1;
    m.kind = "lm_head";
    m.vocab = model.vocab;
  }
}

// The tensor-parallel degree of a file named profile_<tp>.npy (or --tp).
int64_t file_tp(const std::string& origin, const std::string& name,
                const ProfileImportOptions& options) {
  static const std::regex kProfileName(R"(^profile_(\d+)\.npy$)");
  std::smatch m;
  if (!std::regex_match(name, m, kProfileName))
    throw InputError(origin, "",
                     "expected a Sailor profile named profile_<tp>.npy (e.g. profile_2.npy)");
  const auto tp = logs::parse_integer(m[1].str());
  if (options.tp) return *options.tp;
  if (!tp || *tp < 1 || *tp > 1024)
    throw InputError(origin, "",
                     fmt::format("tensor-parallel degree {} in the name: expected a whole number "
                                 "1-1024 (profile_<tp>.npy)",
                                 m[1].str()));
  return *tp;
}

}  // namespace

CalibrationFile import_sailor_profiles(const std::vector<std::filesystem::path>& inputs,
                                       const ProfileImportOptions& options) {
  CalibrationFile cal;
  cal.context.source = "imported:sailor";
  const SailorGpu* gpu = nullptr;
  std::string gpu_folder;
  std::map<int64_t, std::string> seen;  // tp -> file
  for (const auto& path : npy_files(inputs)) {
    const std::string origin = path.string();
    const std::filesystem::path folder = path.parent_path();
    const std::string gpu_name = folder.filename().string();
    const SailorGpu* g = nullptr;
    for (const auto& k : kSailorGpus)
      if (gpu_name == k.folder) g = &k;
    if (!g && options.gpu_type.empty())
      throw InputError(origin, "",
                       fmt::format("the GPU folder \"{}\" is none hetplan knows of Sailor's ({}); "
                                   "give --gpu-type (Sailor's RTX-2080 does not say whether it "
                                   "is a 2080 or a 2080 Ti)",
                                   gpu_name, sailor_gpu_list()));
    if (!gpu_folder.empty() && gpu_name != gpu_folder)
      throw InputError(origin, "",
                       fmt::format("GPU folder {} differs from {}: one calibration file holds "
                                   "one GPU type; import each apart",
                                   gpu_name, gpu_folder));
    gpu = g;
    gpu_folder = gpu_name;
    const SailorModel& model = sailor_model(
        options.model.empty() ? folder.parent_path().filename().string() : options.model, origin);
    const int64_t tp = file_tp(origin, path.filename().string(), options);
    if (model.heads % tp != 0)
      throw InputError(origin, "",
                       fmt::format("tensor-parallel degree {}: expected a divisor of {}'s {} "
                                   "heads",
                                   tp, model.folder, model.heads));
    if (auto [it, fresh] = seen.emplace(tp, origin); !fresh)
      throw InputError(origin, "",
                       fmt::format("tensor-parallel degree {} again (also {}): one file per "
                                   "degree",
                                   tp, it->second));
    const NpyArray a = read_npy(path);
    const auto entries = static_cast<size_t>(model.blocks + 2);
    if (a.shape.size() != 1 || a.values.size() != entries)
      throw InputError(
          origin, "header.shape",
          fmt::format("expected a vector of {} per-layer times ({}'s embedding, {} "
                      "layers and head), found {} values in {} dimensions",
                      entries, model.folder, model.blocks, a.values.size(), a.shape.size()));
    for (size_t i = 0; i < a.values.size(); ++i) {
      LayerForwardMeasurement lf = known_cost_record(origin, i, a.values[i]);
      lf.model = model.folder;
      map_entry(model, lf);
      lf.tp = tp;
      lf.dtype = Dtype::kTf32;  // fp32 training, TF32 GEMMs where the GPU has them
      cal.layer_forward.push_back(lf);
    }
    cal.context.citations[fmt::format("{}/{}", gpu_name, path.filename().string())] =
        "Sailor (SOSP'25), github:eth-easl/sailor cf2c8e3, sailor/Planner/baselines/AMP/profiles; "
        "examples/external/sailor/README.md";
  }
  cal.context.gpu_type = !options.gpu_type.empty() ? options.gpu_type : gpu->gpu_type;
  if (gpu && options.gpu_type.empty()) cal.context.node_type = gpu->node_type;
  cal.context.gpu_count = 0;
  cal.context.notes =
      "per-layer forward seconds at micro-batch 1 of OPT-350M in fp32 (TF32 GEMMs where the GPU "
      "has them), measured by Sailor's authors with forward hooks on its DeepSpeed pipeline "
      "module; one record per entry (embedding, decoder layers, head)";
  if (cal.context.node_type.empty())
    cal.context.notes += "; the node is not known, so timings at tp > 1 are kept but not used";
  return cal;
}

}  // namespace hetplan
