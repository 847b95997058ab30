#include <map>
#include <regex>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/input_files.h"
#include "report/import/log_text.h"
#include "report/import/profile_import.h"

namespace hetplan {
namespace {

// Helix's machine folder names and hetplan GPU presets (Helix's README: a100 is the 40 GB part).
const std::map<std::string, std::string> kHelixGpus = {
    {"a100", "a100-40gb"}, {"v100", "v100"}, {"l4", "l4"}, {"t4", "t4"}};
// Helix's model folder names and hetplan model presets.
const std::map<std::string, std::string> kHelixModels = {{"llama2_70b", "llama2-70b"},
                                                         {"llama1_30b", "llama1-30b"}};

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
      if (type.empty() && kHelixGpus.count(m[1].str())) type = kHelixGpus.at(m[1].str());
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
    if (model.empty() && kHelixModels.count(model_dir)) model = kHelixModels.at(model_dir);
    if (model.empty())
      throw InputError(origin, "",
                       fmt::format("cannot tell the model from the folder \"{}\" "
                                   "(known: llama2_70b, llama1_30b); give --model",
                                   model_dir));
    const std::string text = logs::read_text_file(src.path);
    const size_t rows_before = cal.serving_layer.size();
    std::map<int64_t, int64_t> row_of_tokens;  // tokens -> line, for rows given twice
    for (const auto& line : logs::split_lines(text)) {
      const std::string_view row = logs::trim(line.text);
      if (row.empty()) continue;
      const size_t comma = row.find(',');
      const auto tokens = comma == std::string_view::npos
                              ? std::nullopt
                              : logs::parse_integer(row.substr(0, comma));
      const auto ms = comma == std::string_view::npos ? std::nullopt
                                                      : logs::parse_number(row.substr(comma + 1));
      if (!tokens || !ms || *tokens < 0 || *ms < 0)
        logs::fail_at(origin, line.number,
                      fmt::format("expected \"tokens,milliseconds\" "
                                  "(two numbers >= 0), found \"{}\"",
                                  row));
      if (*tokens == 0) continue;  // Helix's "0,0" anchor row: no work, nothing measured
      if (*ms == 0) logs::fail_at(origin, line.number, fmt::format("{} tokens in 0 ms", *tokens));
      if (*ms / 1e3 > kMaxMeasuredSeconds)
        logs::fail_at(origin, line.number,
                      fmt::format("{} ms for {} tokens: expected at most a day", *ms, *tokens));
      // Two times for one batch would both be kept as measurements (serve refuses such a table).
      if (auto [it, fresh] = row_of_tokens.emplace(*tokens, line.number); !fresh)
        logs::fail_at(
            origin, line.number,
            fmt::format("{} tokens again (also line {}): one row per batch", *tokens, it->second));
      ServingLayerMeasurement s;
      s.model = model;
      s.phase = src.phase;
      s.tokens = *tokens;
      s.gpus = gpus;
      s.time_s = summarize({*ms / 1e3});
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
