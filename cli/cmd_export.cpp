// hetplan export: a strategy as Megatron-LM arguments, a DeepSpeed config or a torchtitan config.
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/atomic_file.h"
#include "costmodel/calibration.h"
#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/model.h"
#include "report/export/exporters.h"
#include "report/predictions.h"
#include "search/rules.h"

namespace hetplan::cli {
namespace {

struct ExportCliOptions {
  std::string strategy, model, format, out, framework;
  int64_t index = 0, seq_len = 0;
  bool allow_approximate = false, split_points = false, torchtitan_toml = false;
};

// A model or cluster file the predictions file recorded (context "model_source" or
// "cluster_source"): the path as written when it exists, else, for a relative path, relative to
// the predictions file, else the file of that name next to the predictions file (a folder moved
// as a whole). "" when none exists.
std::string find_source(const std::string& recorded, const std::string& predictions_path) {
  namespace fs = std::filesystem;
  if (recorded.empty()) return "";
  std::error_code ec;
  const fs::path path(recorded), beside = fs::path(predictions_path).parent_path();
  const std::vector<fs::path> tries = {path.is_relative() ? beside / path : path, path,
                                       beside / path.filename()};
  for (const auto& p : tries)
    if (fs::is_regular_file(p, ec)) return p.string();
  return "";
}

bool is_model_preset(const std::string& name) {
  for (const auto& info : model_presets())
    if (info.name == name) return true;
  return false;
}

// The model the strategy was planned for: --model, the file the predictions file recorded, or the
// preset it names.
ModelSpec export_model(const ExportCliOptions& o, const PredictedStrategy& chosen) {
  const int64_t seq_len = o.seq_len > 0 ? o.seq_len : chosen.seq_len;
  if (!o.model.empty()) return load_model(o.model, seq_len);
  if (const auto file = find_source(chosen.model_source, o.strategy); !file.empty())
    return load_model(file, seq_len);
  if (chosen.model.empty())
    throw InputError(o.strategy, "", "the file does not name the model: give --model");
  if (!is_model_preset(chosen.model))
    throw InputError(
        o.strategy, "model",
        chosen.model_source.empty()
            ? fmt::format("model \"{}\" is not a preset and the file does not say which model "
                          "file it was read from: give --model with that file",
                          chosen.model)
            : fmt::format("model \"{}\" was read from {}, which no longer exists (nor next to "
                          "this file): give --model with the model file",
                          chosen.model, chosen.model_source));
  return load_model(chosen.model, seq_len);
}

// The cluster the plan was made for, to name each device's node in the placement; nullopt when
// the file does not name one or it cannot be read (the placement then names devices only).
std::optional<ClusterSpec> export_cluster(const ExportCliOptions& o,
                                          const PredictedStrategy& chosen) {
  std::string spec = find_source(chosen.cluster_source, o.strategy);
  if (spec.empty()) spec = chosen.cluster;
  if (spec.empty() || chosen.strategy.stages.empty()) return std::nullopt;
  try {
    return load_cluster(spec);
  } catch (const InputError& e) {
    fmt::print(stderr, "note: cluster {} not read ({}); the placement names hetplan devices only\n",
               spec, e.what());
    return std::nullopt;
  }
}

std::string formats_list() {
  std::string names;
  for (const auto& spec : exporters())
    names += (names.empty() ? "" : ", ") + std::string(spec.format);
  return names;
}

}  // namespace

CommandRunner declare_export(CLI::App& app) {
  auto o = std::make_shared<ExportCliOptions>();
  std::string formats;
  for (const auto& spec : exporters())
    formats += fmt::format("\n  {}: {}", spec.format, spec.writes);
  app.add_option("--strategy", o->strategy,
                 "Strategy file, or predict/search --json output (its partition is exported)")
      ->required();
  app.add_option("--index", o->index, "Which strategy of a search --json output (0 = best)")
      ->check(kNonNegative);
  app.add_option("--model", o->model, "Model preset or file (default: the one the file names)");
  app.add_option(
         "--seq-len", o->seq_len,
         "Sequence length (default: the one the prediction was made with, else the model's)")
      ->check(kPositive);
  app.add_option("--format", o->format,
                 "What to write (default: the export of the strategy's framework):" + formats);
  app.add_option("--framework", o->framework,
                 "Framework the strategy was planned for (default: the one the file names, else "
                 "megatron-core); its export is the default --format");
  app.add_option("--out", o->out, "Output file (default: stdout)");
  app.add_flag("--allow-approximate", o->allow_approximate,
               "Write the file even where the framework cannot express part of the strategy");
  app.add_flag("--torchtitan-toml", o->torchtitan_toml,
               "torchtitan: write the TOML job config of releases before the February 2026 "
               "configuration refactor (current torchtitan reads a Python Trainer.Config)");
  app.add_flag("--torchtitan-split-points", o->split_points,
               "torchtitan: write pipeline_parallel_split_points (TOML releases before "
               "module_fqns_per_model_part) instead of module_fqns_per_model_part; implies "
               "--torchtitan-toml");
  return [o]() {
    check_outputs({o->strategy, o->model}, {{"--out", o->out}});
    auto list = load_predicted_strategies(o->strategy);
    if (o->index >= static_cast<int64_t>(list.size()))
      throw InputError(o->strategy, "strategies",
                       fmt::format("--index {}: the file holds {} {}", o->index, list.size(),
                                   list.size() == 1 ? "strategy" : "strategies"));
    PredictedStrategy& chosen = list[o->index];
    // The strategy as its framework runs it (switches it leaves out are the framework's), and
    // that framework's export unless --format names another.
    const bool named = !o->framework.empty() || !chosen.strategy.framework.empty();
    const FrameworkSpec framework =
        load_run_framework(o->framework, chosen.strategy.framework, o->strategy);
    if (o->format.empty() && framework.export_format.empty())
      throw InputError("--format", "",
                       fmt::format("a format to write: framework {} has no export of its own "
                                   "(one of {})",
                                   framework.name, formats_list()));
    const ExporterSpec& exporter =
        find_exporter(o->format.empty() ? framework.export_format : o->format);
    for (const auto& [flag, given] : {std::pair{"--torchtitan-split-points", o->split_points},
                                      std::pair{"--torchtitan-toml", o->torchtitan_toml}})
      if (given && exporter.format != "torchtitan")
        throw InputError(fmt::format("{}: a torchtitan option; --format {} does not read it", flag,
                                     exporter.format));
    if (named && framework.export_format != exporter.format)
      fmt::print(stderr,
                 "note: planned for {}, written for {}: what {} runs differently is listed "
                 "as approximations\n",
                 framework.name, exporter.format, exporter.format);
    if (chosen.strategy.has_replicas() && !exporter.replica_groups)
      throw InputError(chosen.origin, "stages",
                       fmt::format("{} cannot run this strategy: its stages hold replica groups "
                                   "of different GPU types, tensor widths or micro-batches, and "
                                   "Megatron-LM, DeepSpeed and torchtitan run one tp and one "
                                   "micro-batch for every data-parallel replica (Sailor's own "
                                   "training framework, github.com/eth-easl/sailor, a "
                                   "Megatron-DeepSpeed fork, runs a tp per replica: --format "
                                   "sailor; docs/exports.md, \"Replica groups\")",
                                   exporter.format));
    const ModelSpec model = export_model(*o, chosen);
    // The framework's defaults for what the strategy leaves out, as far as the model's dtype
    // allows (a fp32 model's attention is unfused).
    chosen.strategy = with_framework_defaults(chosen.strategy, framework, &model);
    const std::optional<ClusterSpec> cluster = export_cluster(*o, chosen);
    ExportOptions options;
    options.torchtitan_split_points = o->split_points;
    // A release that reads TOML gets TOML unless another format is asked for.
    options.torchtitan_toml = o->torchtitan_toml || (o->format.empty() && framework.export_toml);
    options.cluster = cluster ? &*cluster : nullptr;
    // A framework whose loss is a kernel of its own (ops.cross_entropy) runs the fused loss.
    options.fused_cross_entropy = framework.recipe("cross_entropy", HostMode::kEager) != nullptr;
    // The stages' layer ranges are checked against the model as they are exported: name the file.
    const ExportResult r = naming_input(
        chosen.origin, "stages", [&] { return exporter.run(model, chosen.strategy, options); });
    if (!r.unsupported.empty() && !o->allow_approximate) {
      std::string list_text;
      for (const auto& u : r.unsupported) list_text += "\n  - " + u;
      throw InputError(chosen.origin, "",
                       fmt::format("{} cannot express this strategy:{}\n(--allow-approximate "
                                   "writes the rest, listing these in the file)",
                                   exporter.format, list_text));
    }
    for (const auto& note : r.approximations) fmt::print(stderr, "note: {}\n", note);
    for (const auto& no : r.unsupported) fmt::print(stderr, "NOT EXPRESSED: {}\n", no);
    for (const auto& line : r.placement) fmt::print(stderr, "placement: {}\n", line);
    for (const auto& line : r.instructions) fmt::print(stderr, "to run it: {}\n", line);
    if (o->out.empty()) {
      fmt::print("{}", r.text);
    } else {
      write_text_atomically(r.text, o->out);
    }
    return 0;
  };
}

}  // namespace hetplan::cli
