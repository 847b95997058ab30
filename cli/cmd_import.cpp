// hetplan import: training logs into measurements files, other tools' profiles into calibration
// files (source imported:<tool>).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/errors.h"
#include "costmodel/input_files.h"
#include "report/import/importers.h"
#include "report/run_documents.h"

namespace hetplan::cli {
namespace {

struct ImportCliOptions {
  std::string format, out, model, cluster, gpu_type, memory = "allocated", recompute;
  std::vector<std::string> inputs;
  int64_t warmup = 2, tp = 0, pp = 0;
};

std::string command_line(const ImportCliOptions& o) {
  std::string cmd = fmt::format("hetplan import --format {}", o.format);
  for (const auto& in : o.inputs) cmd += " " + in;
  return cmd + " --out " + o.out;
}

}  // namespace

CommandRunner declare_import(CLI::App& app) {
  auto o = std::make_shared<ImportCliOptions>();
  std::string formats;
  for (const auto& spec : importers())
    formats += fmt::format("\n  {}: {}", spec.format, spec.reads);
  app.add_option("--format", o->format, "What the inputs are:" + formats)->required();
  app.add_option("inputs", o->inputs, "Log files, .npy files, CSV files or folders")->required();
  app.add_option("--out", o->out, "Output file (measurements or calibration JSON)")->required();
  app.add_option("--model", o->model,
                 "Model the run trained (checked against a Megatron-LM log's shape; required for "
                 "DeepSpeed); AMP and Helix: override the model read from the names");
  app.add_option("--cluster", o->cluster, "Cluster the run used (recorded as is)");
  app.add_option("--gpu-type", o->gpu_type,
                 "GPU type (recorded; overrides the names for AMP and "
                 "Helix)");
  app.add_option("--warmup", o->warmup, "Logged iterations to drop at the start (default 2)")
      ->check(kNonNegative);
  app.add_option("--memory", o->memory, "Peak memory to record: allocated (default) or reserved")
      ->check(CLI::IsMember({"allocated", "reserved"}));
  app.add_option("--tp", o->tp,
                 "Tensor-parallel width where the log does not say (DeepSpeed); "
                 "AMP: override the file names' degree")
      ->check(kPositive);
  app.add_option("--pp", o->pp, "Pipeline stages where the log does not say (DeepSpeed)")
      ->check(kPositive);
  app.add_option("--recompute", o->recompute,
                 "Activation recomputation where the log does not say (DeepSpeed)")
      ->check(CLI::IsMember({"none", "selective", "full"}));
  return [o, &app]() {
    const ImporterSpec& importer = find_importer(o->format);
    for (const char* option : {"--model", "--cluster", "--gpu-type", "--warmup", "--memory", "--tp",
                               "--pp", "--recompute"})
      if (app.count(option) > 0 && !importer.takes(option))
        throw InputError(fmt::format("{}: --format {} does not read it (it reads {})", option,
                                     importer.format, importer.options));
    check_outputs(o->inputs, {{"--out", o->out}});
    ImportRequest r;
    for (const auto& in : o->inputs) r.inputs.emplace_back(in);
    require_distinct_inputs(r.inputs);
    r.log.model = o->model;
    r.log.cluster = o->cluster;
    r.log.gpu_type = o->gpu_type;
    r.log.warmup_iterations = o->warmup;
    r.log.memory_kind = o->memory;
    if (o->tp > 0) r.log.tp = r.profile.tp = o->tp;
    if (o->pp > 0) r.log.pp = o->pp;
    if (!o->recompute.empty()) r.log.recompute = o->recompute;
    r.profile.gpu_type = o->gpu_type;
    r.profile.model = o->model;
    ImportResult result = importer.run(r);
    const Json context = run_context("import", Profile{});
    if (result.measurements) {
      MeasurementsFile& f = *result.measurements;
      f.context.date = context["date"];
      f.context.hetplan_version = context["hetplan_version"];
      f.context.command = command_line(*o);
      save_measurements(f, o->out);
      int64_t oom = 0;
      for (const auto& m : f.measurements) oom += m.oom ? 1 : 0;
      fmt::print("{}: {} measurements ({} out of memory) from {} files\n", o->out,
                 f.measurements.size(), oom, o->inputs.size());
      for (const auto& m : f.measurements)
        if (!m.assumed.empty())
          fmt::print(stderr, "warning: {}: not in the log, recorded with defaults: {}\n", m.origin,
                     fmt::join(m.assumed, ", "));
    } else {
      CalibrationFile& f = *result.calibration;
      f.context.hetplan_version = context["hetplan_version"];
      if (f.context.date.empty()) {
        f.context.date = context["date"];
        f.context.command = command_line(*o);
      } else {
        // Our own measurement (kernel bench): its date and command stay; the import is a note.
        f.context.add_note(fmt::format("converted by `{}` on {}", command_line(*o),
                                       context["date"].get<std::string>()));
      }
      save_calibration(f, o->out);
      std::string counts;
      auto count = [&](size_t n, const char* what) {
        if (n) counts += fmt::format("{}{} {}", counts.empty() ? "" : ", ", n, what);
      };
      count(f.layer_forward.size(), "layer_forward");
      count(f.serving_layer.size(), "serving_layer");
      count(f.kernels.size(), "kernel");
      fmt::print("{}: {} records for {} ({})\n", o->out, counts, f.context.gpu_type,
                 f.context.source);
    }
    return 0;
  };
}

}  // namespace hetplan::cli
