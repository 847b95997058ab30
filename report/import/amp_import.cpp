#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "report/import/log_text.h"
#include "report/import/npy.h"
#include "report/import/profile_import.h"

namespace hetplan {
namespace {

// An AMP machine name and the hetplan GPU and node presets it stands for (AMP's README).
struct AmpMachine {
  const char* name;
  const char* gpu_type;
  const char* node_type;
};
constexpr AmpMachine kMachines[] = {{"G4", "t4", "g4dn.12xlarge"}, {"P3", "v100", "p3.8xlarge"}};

// gpt2 in AMP (src/known_cost, as DeepSpeed's PipelineModule lists it): embedding, a no-op,
// 24 transformer layers, two no-ops, the output embedding, a no-op. Hidden 1024, 16 heads,
// sequence 1024, vocabulary 52256: GPT-2 medium's shape (hetplan's gpt2-medium).
constexpr int64_t kGpt2Entries = 30, kGpt2Blocks = 24, kGpt2Heads = 16;

// The layer lists hetplan knows of AMP's models (src/known_cost): their length, and the hetplan
// models a layer list maps onto (only gpt2's does; others' records keep layer -1).
struct AmpModel {
  const char* name;
  size_t entries;
  std::vector<std::string> maps_onto;  // hetplan models --model may name for it
};
const AmpModel kModels[] = {{"gpt2", kGpt2Entries, {"gpt2-medium", "amp-gpt2"}},
                            {"transgan", 56, {}}};

std::string known_models() {
  std::string out;
  for (const auto& m : kModels) {
    out += fmt::format("{}{} ({} entries", out.empty() ? "" : ", ", m.name, m.entries);
    for (size_t i = 0; i < m.maps_onto.size(); ++i)
      out += fmt::format("{}{}", i == 0 ? ", also named " : " or ", m.maps_onto[i]);
    out += ")";
  }
  return out;
}

// The AMP model --model (else the file name) names: AMP's own name, or a hetplan model its layer
// list maps onto.
const AmpModel& amp_model(const std::string& name, const std::string& origin, bool from_option) {
  for (const auto& m : kModels) {
    if (name == m.name) return m;
    for (const auto& h : m.maps_onto)
      if (name == h) return m;
  }
  throw InputError(
      from_option ? "--model" : origin, "",
      fmt::format("unknown AMP model \"{}\": hetplan knows the layer lists of {}; {}", name,
                  known_models(),
                  from_option ? "--model names the AMP model whose layer list the files hold"
                              : "give --model with the AMP model whose layer list the file holds"));
}

void map_gpt2_entry(LayerForwardMeasurement& m) {
  m.hidden = 1024;
  m.seq_len = 1024;
  if (m.entry <= 1) {
    m.layer = 0;
    m.kind = "embedding";
    m.vocab = 52256;
  } else if (m.entry < 2 + kGpt2Blocks) {
    m.layer = m.entry - 1;
    m.kind = "transformer";
    m.heads = kGpt2Heads;
  } else {
    m.layer = kGpt2Blocks + 1;
    m.kind = "lm_head";
    m.vocab = 52256;
  }
}

}  // namespace

LayerForwardMeasurement known_cost_record(const std::string& origin, size_t entry, double seconds) {
  if (!(seconds > 0 && seconds <= kMaxMeasuredSeconds))
    throw InputError(
        origin, fmt::format("[{}]", entry),
        fmt::format("expected a forward time > 0 s, at most a day, found {}", seconds));
  LayerForwardMeasurement lf;
  lf.entry = static_cast<int64_t>(entry);
  lf.micro_batch = 1;
  lf.forward_s = summarize({seconds});
  return lf;
}

CalibrationFile import_amp_known_cost(const std::vector<std::filesystem::path>& inputs,
                                      const ProfileImportOptions& options) {
  static const std::regex kName(R"(^(.+)_([A-Za-z0-9]+)_(\d+)\.npy$)");
  CalibrationFile cal;
  cal.context.source = "imported:amp";
  const AmpMachine* machine = nullptr;
  std::string notes, aliases;
  std::map<std::pair<std::string, int64_t>, std::string> seen;  // (model, tp) -> file
  // A folder stands for its .npy files (AMP's src/known_cost), in name order.
  const std::vector<std::filesystem::path> arrays = npy_files(inputs);
  for (const auto& path : arrays) {
    const std::string name = path.filename().string();
    const std::string origin = path.string();
    std::smatch m;
    if (!std::regex_match(name, m, kName))
      throw InputError(origin, "",
                       "expected an AMP known-cost file named "
                       "<model>_<machine>_<tp>.npy (e.g. gpt2_P3_2.npy)");
    const bool from_option = !options.model.empty();
    const AmpModel& model =
        amp_model(from_option ? options.model : m[1].str(), origin, from_option);
    if (from_option && options.model != model.name && aliases.empty())
      aliases += fmt::format("--model {} read as AMP's {} (its layer list maps onto {}); ",
                             options.model, model.name, options.model);
    const AmpMachine* mach = nullptr;
    for (const auto& k : kMachines)
      if (m[2].str() == k.name) mach = &k;
    if (!mach && options.gpu_type.empty())
      throw InputError(origin, "",
                       fmt::format("unknown AMP machine \"{}\" (known: G4, P3); give "
                                   "--gpu-type",
                                   m[2].str()));
    if (machine && mach != machine)
      throw InputError(origin, "",
                       fmt::format("machine {} differs from {}: one calibration file "
                                   "holds one GPU type; import each apart",
                                   m[2].str(), machine->name));
    machine = mach;
    // gpt2_G4_0.npy divided by a degree of 0 (SIGFPE); 20 digits overflowed std::stoll.
    const auto named_tp = logs::parse_integer(m[3].str());
    if (!options.tp && (!named_tp || *named_tp < 1))
      throw InputError(origin, "",
                       fmt::format("tensor-parallel degree {} in the name: expected a whole "
                                   "number >= 1 (<model>_<machine>_<tp>.npy)",
                                   m[3].str()));
    const int64_t tp = options.tp ? *options.tp : *named_tp;
    if (model.name == std::string("gpt2") && (kGpt2Heads % tp != 0 || (mach && tp > 4)))
      throw InputError(origin, "",
                       fmt::format("tensor-parallel degree {} (AMP measured 1, 2 and 4): expected "
                                   "a divisor of gpt2's {} heads{}",
                                   tp, kGpt2Heads, mach ? " within the machine's 4 GPUs" : ""));
    // Two files of one model and degree would give every layer two forward times, summed.
    if (auto [it, fresh] = seen.emplace(std::make_pair(std::string(model.name), tp), origin);
        !fresh)
      throw InputError(origin, "",
                       fmt::format("{} at tensor-parallel degree {} again (also {}{}): one file "
                                   "per model and degree",
                                   model.name, tp, it->second,
                                   options.tp ? "; --tp gives every file the same degree" : ""));
    const NpyArray a = read_npy(path);
    if (a.shape.size() != 1)
      throw InputError(origin, "header.shape",
                       fmt::format("expected a vector of per-layer times, "
                                   "found {} dimensions",
                                   a.shape.size()));
    if (a.values.size() != model.entries)
      throw InputError(origin, "header.shape",
                       fmt::format("expected {} entries (AMP's {} layer list), found {}",
                                   model.entries, model.name, a.values.size()));
    const bool gpt2 = model.name == std::string("gpt2");
    if (!gpt2)
      notes += fmt::format(
          "{}: {} entries kept unmapped (hetplan knows the layer list of AMP's "
          "gpt2 only); ",
          name, a.values.size());
    for (size_t i = 0; i < a.values.size(); ++i) {
      LayerForwardMeasurement lf = known_cost_record(origin, i, a.values[i]);
      lf.model = model.name;
      lf.kind = "other";
      if (gpt2) map_gpt2_entry(lf);
      lf.tp = tp;
      lf.dtype = Dtype::kFp16;
      cal.layer_forward.push_back(lf);
    }
    cal.context.citations[name] =
        "AMP (Li et al., NeurIPS 2022), src/known_cost; examples/external/amp/README.md";
  }
  cal.context.gpu_type = !options.gpu_type.empty() ? options.gpu_type
                         : machine                 ? machine->gpu_type
                                                   : "";
  if (machine) cal.context.node_type = machine->node_type;
  cal.context.gpu_count = machine ? 4 : 0;
  cal.context.notes =
      "per-layer forward seconds at micro-batch 1, fp16, measured by AMP's authors inside "
      "DeepSpeed on Megatron-LM v1.1.5; one record per entry of AMP's layer list, `layer` is the "
      "hetplan layer it belongs to (no-op entries belong to their neighbours); " +
      aliases + notes;
  if (cal.context.notes.size() > 2 &&
      cal.context.notes.substr(cal.context.notes.size() - 2) == "; ")
    cal.context.notes.resize(cal.context.notes.size() - 2);
  return cal;
}

}  // namespace hetplan
