// hetplan export: a strategy as Megatron-LM arguments, a DeepSpeed config or a torchtitan config.
#include <fstream>

#include <fmt/format.h>

#include "cli/command.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/export/exporters.h"
#include "report/predictions.h"

namespace hetplan::cli {
namespace {

struct ExportCliOptions {
  std::string strategy, model, format, out;
  int64_t index = 0, seq_len = 0;
  bool allow_approximate = false, split_points = false;
};

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
      ->check(CLI::NonNegativeNumber);
  app.add_option("--model", o->model, "Model preset or file (default: the one the file names)");
  app.add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)");
  app.add_option("--format", o->format, "What to write:" + formats)->required();
  app.add_option("--out", o->out, "Output file (default: stdout)");
  app.add_flag("--allow-approximate", o->allow_approximate,
               "Write the file even where the framework cannot express part of the strategy");
  app.add_flag("--torchtitan-split-points", o->split_points,
               "torchtitan: write pipeline_parallel_split_points (older torchtitan) instead of "
               "module_fqns_per_model_part");
  return [o]() {
    const ExporterSpec& exporter = find_exporter(o->format);
    const auto list = load_predicted_strategies(o->strategy);
    if (o->index >= static_cast<int64_t>(list.size()))
      throw InputError(
          o->strategy, "strategies",
          fmt::format("--index {}: the file holds {} strategies", o->index, list.size()));
    const PredictedStrategy& chosen = list[o->index];
    const std::string model_name = o->model.empty() ? chosen.model : o->model;
    if (model_name.empty())
      throw InputError(o->strategy, "", "the file does not name the model: give --model");
    const ModelSpec model = load_model(model_name, o->seq_len);
    ExportOptions options;
    options.torchtitan_split_points = o->split_points;
    const ExportResult r = exporter.run(model, chosen.strategy, options);
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
    if (o->out.empty()) {
      fmt::print("{}", r.text);
    } else {
      std::ofstream out(o->out, std::ios::binary | std::ios::trunc);
      out << r.text;
      if (!out) throw RuntimeFailure(fmt::format("cannot write {}", o->out));
    }
    return 0;
  };
}

}  // namespace hetplan::cli
