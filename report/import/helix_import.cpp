#include <map>
#include <regex>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"
#include "report/import/log_text.h"
#include "report/import/profile_import.h"
#include "serve/helix_profiles.h"

namespace hetplan {
namespace {

struct CsvSource {
  std::filesystem::path path;
  std::string phase;  // prompt or decode
};

std::vector<CsvSource> csv_files(const std::filesystem::path& input) {
  std::vector<CsvSource> out;
  auto phase_of = [](const std::string& name) -> std::string {
    if (name == "prompt_bs2time.csv") return "prompt";
    if (name == "decode_bs2time.csv") return "decode";
    return "";
  };
  if (std::filesystem::is_directory(input)) {
    for (const char* name : {"prompt_bs2time.csv", "decode_bs2time.csv"})
      if (std::filesystem::exists(input / name)) out.push_back({input / name, phase_of(name)});
    if (out.empty())
      throw InputError(input.string(), "", "no prompt_bs2time.csv or decode_bs2time.csv here");
    return out;
  }
  const std::string phase = phase_of(input.filename().string());
  if (phase.empty())
    throw InputError(input.string(), "",
                     "expected prompt_bs2time.csv, decode_bs2time.csv or a "
                     "folder holding them");
  out.push_back({input, phase});
  return out;
}

}  // namespace

CalibrationFile import_helix_profiles(const std::vector<std::filesystem::path>& inputs,
                                      const ProfileImportOptions& options) {
  static const std::regex kMachine(R"(^([a-z0-9]+?)(?:x(\d+))?$)");
  CalibrationFile cal;
  cal.context.source = "imported:helix";
  std::string gpu_type;
  std::vector<CsvSource> sources;
  std::vector<std::filesystem::path> paths;
  for (const auto& input : inputs)
    for (auto& src : csv_files(input)) {
      paths.push_back(src.path);
      sources.push_back(std::move(src));
    }
  require_distinct_inputs(paths);  // a folder and a file in it, say
  for (const auto& src : sources) {
    const std::string origin = src.path.string();
    const std::filesystem::path machine_dir = src.path.parent_path();
    const std::string machine = machine_dir.filename().string();
    const std::string model_dir = machine_dir.parent_path().filename().string();
    std::smatch m;
    std::string type = options.gpu_type;
    int64_t gpus = 1;
    if (std::regex_match(machine, m, kMachine)) {
      if (const auto preset = serve::helix_gpu_preset(m[1].str()); type.empty() && preset)
        type = *preset;
      if (m[2].matched) {
        const auto n = logs::parse_integer(m[2].str());
        if (!n || *n < 1 || *n > kMaxGpusPerNode)
          throw InputError(origin, "",
                           fmt::format("folder \"{}\": expected 1 to {} GPUs after x", machine,
                                       kMaxGpusPerNode));
        gpus = *n;
      }
    }
    if (type.empty())
      throw InputError(origin, "",
                       fmt::format("cannot tell the GPU type from the folder \"{}\" "
                                   "(known: a100, v100, l4, t4, with xN for N "
                                   "GPUs); give --gpu-type",
                                   machine));
    if (!gpu_type.empty() && type != gpu_type)
      throw InputError(origin, "",
                       fmt::format("GPU type {} differs from {}: one calibration "
                                   "file holds one GPU type; import each apart",
                                   type, gpu_type));
    gpu_type = type;
    std::string model = options.model;
    if (model.empty()) model = serve::helix_profile_model(machine_dir.parent_path());
    if (model.empty())
      throw InputError(origin, "",
                       fmt::format("cannot tell the model from the folder \"{}\" "
                                   "(known: {}); give --model",
                                   model_dir, serve::helix_profile_model_folders()));
    const size_t rows_before = cal.serving_layer.size();
    // The table as `serve --profiles` reads it (serve/helix_profiles.h).
    for (const serve::Bs2TimeRow& row : serve::read_bs2time_csv(src.path)) {
      if (row.batch == 0) continue;  // Helix's "0,0" anchor row: no work, nothing measured
      ServingLayerMeasurement s;
      s.model = model;
      s.phase = src.phase;
      s.tokens = row.batch;
      s.gpus = gpus;
      s.time_s = summarize({row.ms / 1e3});
      cal.serving_layer.push_back(s);
    }
    if (cal.serving_layer.size() == rows_before)
      throw InputError(origin, "",
                       "no measured row (\"tokens,milliseconds\" with tokens > 0): the table is "
                       "empty or holds only Helix's \"0,0\" anchor");
    cal.context
        .citations[fmt::format("{}/{}/{}", model_dir, machine, src.path.filename().string())] =
        "Helix (Mei et al., ASPLOS 2025) artifact, Apache-2.0; examples/external/helix/README.md";
  }
  cal.context.gpu_type = gpu_type;
  cal.context.notes =
      "one transformer layer served by vLLM, measured by Helix's authors: time for a batch of "
      "`tokens` tokens (prompt) or sequences (decode) on one machine of `gpus` GPUs; Helix's "
      "\"0,0\" rows are dropped";
  return cal;
}

}  // namespace hetplan
