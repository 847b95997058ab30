#include <regex>

#include <fmt/format.h>

#include "costmodel/errors.h"
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
constexpr int64_t kGpt2Entries = 30, kGpt2Blocks = 24;

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
    m.heads = 16;
  } else {
    m.layer = kGpt2Blocks + 1;
    m.kind = "lm_head";
    m.vocab = 52256;
  }
}

}  // namespace

CalibrationFile import_amp_known_cost(const std::vector<std::filesystem::path>& files,
                                      const ProfileImportOptions& options) {
  static const std::regex kName(R"(^(.+)_([A-Za-z0-9]+)_(\d+)\.npy$)");
  CalibrationFile cal;
  cal.context.source = "imported:amp";
  const AmpMachine* machine = nullptr;
  std::string notes;
  for (const auto& path : files) {
    const std::string name = path.filename().string();
    const std::string origin = path.string();
    std::smatch m;
    if (!std::regex_match(name, m, kName))
      throw InputError(origin, "",
                       "expected an AMP known-cost file named "
                       "<model>_<machine>_<tp>.npy (e.g. gpt2_P3_2.npy)");
    const std::string model = options.model.empty() ? m[1].str() : options.model;
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
    const int64_t tp = options.tp.value_or(std::stoll(m[3].str()));
    const NpyArray a = read_npy(path);
    if (a.shape.size() != 1)
      throw InputError(origin, "header.shape",
                       fmt::format("expected a vector of per-layer times, "
                                   "found {} dimensions",
                                   a.shape.size()));
    const bool gpt2 = model == "gpt2" && a.values.size() == kGpt2Entries;
    if (!gpt2)
      notes += fmt::format(
          "{}: {} entries kept unmapped (hetplan knows the layer list of AMP's "
          "gpt2 only); ",
          name, a.values.size());
    for (size_t i = 0; i < a.values.size(); ++i) {
      if (!(a.values[i] > 0))
        throw InputError(origin, fmt::format("[{}]", i),
                         fmt::format("expected a forward time > 0, found {}", a.values[i]));
      LayerForwardMeasurement lf;
      lf.model = model;
      lf.entry = static_cast<int64_t>(i);
      lf.kind = "other";
      if (gpt2) map_gpt2_entry(lf);
      lf.micro_batch = 1;
      lf.tp = tp;
      lf.dtype = Dtype::kFp16;
      lf.forward_s = summarize({a.values[i]});
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
      notes;
  if (cal.context.notes.size() > 2 &&
      cal.context.notes.substr(cal.context.notes.size() - 2) == "; ")
    cal.context.notes.resize(cal.context.notes.size() - 2);
  return cal;
}

}  // namespace hetplan
