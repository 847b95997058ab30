// Sailor's per-layer profiles (github:eth-easl/sailor, sailor/Planner/baselines/AMP/profiles/
// <model>/<GPU>/profile_<tp>.npy): AMP's known-cost layout, taken by Sailor's authors for its AMP
// baseline. examples/external/sailor/README.md gives their provenance.
#include <algorithm>
#include <map>
#include <regex>
#include <string>
#include <tuple>
#include <vector>

#include <fmt/format.h>

#include "costmodel/document.h"
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
    // GPT-Neo 2.7B as Sailor's training config and Metis profiles count it
    // (examples/models/gpt-neo-2.7b-sailor.yaml; its AMP-format profiles are not published).
    {"GPT-Neo-2.7", "gpt-neo-2.7b-sailor", 32, 2560, 32, 10240, 2048, 50304, "gelu"},
};

std::string sailor_gpu_list() {
  std::string out;
  for (const auto& g : kSailorGpus) out += fmt::format("{}{}", out.empty() ? "" : ", ", g.folder);
  return out;
}

// The GPU a folder name is (nullptr where --gpu-type names it instead).
const SailorGpu* sailor_gpu(const std::string& origin, const std::string& folder,
                            const ProfileImportOptions& options) {
  for (const auto& k : kSailorGpus)
    if (folder == k.folder) return &k;
  if (!options.gpu_type.empty()) return nullptr;
  throw InputError(origin, "",
                   fmt::format("the GPU folder \"{}\" is none hetplan knows of Sailor's ({}); give "
                               "--gpu-type (Sailor's RTX-2080 does not say whether it is a 2080 "
                               "or a 2080 Ti)",
                               folder, sailor_gpu_list()));
}

const SailorModel& sailor_model(const std::string& name, const std::string& origin) {
  for (const auto& m : kSailorModels)
    if (name == m.folder || name == m.hetplan_model) return m;
  throw InputError(origin, "",
                   fmt::format("unknown Sailor model \"{}\": hetplan knows the layer lists of "
                               "OPT-350 (hetplan's opt-350m) and GPT-Neo-2.7 "
                               "(gpt-neo-2.7b-sailor); give --model with one, or keep Sailor's "
                               "folders (profiles/<model>/<GPU>/...)",
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

// The micro-batch and tensor-parallel degree a file's name gives (--tp overrides the degree):
// profile_<tp>.npy (forward times at micro-batch 1) or mbs<M>_tmp<T>.json (Metis-format fwd+bwd).
struct FileShape {
  bool forward_backward = false;
  int64_t micro_batch = 1, tp = 1;
};
FileShape file_shape(const std::string& origin, const std::string& name,
                     const ProfileImportOptions& options) {
  static const std::regex kProfileName(R"(^profile_(\d+)\.npy$)");
  static const std::regex kMetisName(R"(^mbs(\d+)_tmp(\d+)\.json$)");
  std::smatch m;
  FileShape f;
  std::string tp_text;
  if (std::regex_match(name, m, kProfileName)) {
    tp_text = m[1].str();
  } else if (std::regex_match(name, m, kMetisName)) {
    f.forward_backward = true;
    const auto mb = logs::parse_integer(m[1].str());
    if (!mb || *mb < 1 || *mb > 65536)
      throw InputError(origin, "",
                       fmt::format("micro-batch {} in the name: expected a whole number 1-65536 "
                                   "(mbs<M>_tmp<T>.json)",
                                   m[1].str()));
    f.micro_batch = *mb;
    tp_text = m[2].str();
  } else {
    throw InputError(origin, "",
                     "expected a Sailor profile named profile_<tp>.npy (e.g. profile_2.npy) or "
                     "mbs<M>_tmp<T>.json (e.g. mbs4_tmp2.json)");
  }
  const auto tp = logs::parse_integer(tp_text);
  if (options.tp) {
    f.tp = *options.tp;
  } else if (!tp || *tp < 1 || *tp > 1024) {
    throw InputError(origin, "",
                     fmt::format("tensor-parallel degree {} in the name: expected a whole number "
                                 "1-1024",
                                 tp_text));
  } else {
    f.tp = *tp;
  }
  return f;
}

// The per-layer seconds of one file: the AMP-format forward vector or the Metis file's
// execution_time.layer_compute_total_ms (milliseconds, forward and backward), `entries` long.
std::vector<double> layer_seconds(const std::filesystem::path& path, const FileShape& shape,
                                  const SailorModel& model, size_t entries) {
  const std::string origin = path.string();
  const std::string what =
      fmt::format("{}'s embedding, {} layers and head", model.folder, model.blocks);
  if (!shape.forward_backward) {
    const NpyArray a = read_npy(path);
    if (a.shape.size() != 1 || a.values.size() != entries)
      throw InputError(origin, "header.shape",
                       fmt::format("expected a vector of {} per-layer times ({}), found {} values "
                                   "in {} dimensions",
                                   entries, what, a.values.size(), a.shape.size()));
    return a.values;
  }
  const Document doc = load_document(path);
  ObjectReader r(doc);
  ObjectReader times = r.object("execution_time");
  std::vector<double> ms = times.numbers("layer_compute_total_ms");
  if (ms.size() != entries)
    times.fail("layer_compute_total_ms",
               fmt::format("expected {} per-layer times ({}), found {}", entries, what, ms.size()));
  for (double& v : ms) v /= 1e3;
  return ms;
}

}  // namespace

CalibrationFile import_sailor_profiles(const std::vector<std::filesystem::path>& inputs,
                                       const ProfileImportOptions& options) {
  CalibrationFile cal;
  cal.context.source = "imported:sailor";
  const SailorGpu* gpu = nullptr;
  std::string gpu_folder;
  // (model, fwd+bwd, micro-batch, tp) -> file: two files of one shape would sum their times.
  std::map<std::tuple<std::string, bool, int64_t, int64_t>, std::string> seen;
  bool forward_only = false, forward_backward = false;
  for (const auto& path : files_in(inputs, {".npy", ".json"}, "Sailor profile (.npy or .json)")) {
    const std::string origin = path.string();
    const std::filesystem::path folder = path.parent_path();
    const std::string gpu_name = folder.filename().string();
    const SailorGpu* g = sailor_gpu(origin, gpu_name, options);
    if (!gpu_folder.empty() && gpu_name != gpu_folder)
      throw InputError(origin, "",
                       fmt::format("GPU folder {} differs from {}: one calibration file holds "
                                   "one GPU type; import each apart",
                                   gpu_name, gpu_folder));
    gpu = g;
    gpu_folder = gpu_name;
    const SailorModel& model = sailor_model(
        options.model.empty() ? folder.parent_path().filename().string() : options.model, origin);
    const FileShape shape = file_shape(origin, path.filename().string(), options);
    if (model.heads % shape.tp != 0)
      throw InputError(origin, "",
                       fmt::format("tensor-parallel degree {}: expected a divisor of {}'s {} "
                                   "heads",
                                   shape.tp, model.folder, model.heads));
    if (auto [it, fresh] =
            seen.emplace(std::make_tuple(std::string(model.folder), shape.forward_backward,
                                         shape.micro_batch, shape.tp),
                         origin);
        !fresh)
      throw InputError(origin, "",
                       fmt::format("micro-batch {} at tensor-parallel degree {} again (also {}): "
                                   "one file per shape",
                                   shape.micro_batch, shape.tp, it->second));
    const auto entries = static_cast<size_t>(model.blocks + 2);
    const std::vector<double> seconds = layer_seconds(path, shape, model, entries);
    for (size_t i = 0; i < seconds.size(); ++i) {
      LayerForwardMeasurement lf = known_cost_record(origin, i, seconds[i]);
      lf.model = model.folder;
      map_entry(model, lf);
      lf.micro_batch = shape.micro_batch;
      lf.tp = shape.tp;
      lf.forward_backward = shape.forward_backward;
      // Its layers ran Megatron-DeepSpeed's kernels in fp32 (Sailor's fork; the hook profiler's
      // HF OPT module likewise runs its fp32 scores through kernels of their own).
      lf.framework = "deepspeed";
      lf.dtype = Dtype::kTf32;  // fp32 training, TF32 GEMMs where the GPU has them
      cal.layer_forward.push_back(lf);
    }
    (shape.forward_backward ? forward_backward : forward_only) = true;
    cal.context
        .citations[fmt::format("{}/{}/{}", model.folder, gpu_name, path.filename().string())] =
        fmt::format(
            "Sailor (SOSP'25), github:eth-easl/sailor cf2c8e3, "
            "sailor/Planner/baselines/{}/profiles; examples/external/sailor/README.md",
            shape.forward_backward ? "Metis" : "AMP");
  }
  cal.context.gpu_type = !options.gpu_type.empty() ? options.gpu_type : gpu->gpu_type;
  if (gpu && options.gpu_type.empty()) cal.context.node_type = gpu->node_type;
  cal.context.gpu_count = 0;
  cal.context.notes = fmt::format(
      "per-layer seconds in fp32 (TF32 GEMMs where the GPU has them) measured by Sailor's "
      "authors, one record per entry (embedding, decoder layers, head): {}{}{}",
      forward_only ? "forward times at micro-batch 1 (AMP-format: forward hooks on its DeepSpeed "
                     "pipeline module)"
                   : "",
      forward_only && forward_backward ? "; " : "",
      forward_backward ? "forward and backward together per micro-batch (Metis-format, "
                         "\"forward_backward\": true)"
                       : "");
  if (cal.context.node_type.empty())
    cal.context.notes += "; the node is not known, so timings at tp > 1 are kept but not used";
  return cal;
}

}  // namespace hetplan
