// hetplan predict: one strategy's iteration time, throughput, MFU and memory per device.
#include <map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/run_documents.h"
#include "search/evaluate.h"
#include "search/stage_gpu_types.h"

namespace hetplan::cli {
namespace {

struct PredictOptions {
  std::string model, cluster, strategy, json, framework;
  std::vector<std::string> calibration;
  int64_t seq_len = 0;
  bool no_default_calibration = false;
};

void print_prediction(const Strategy& s, const Prediction& p) {
  fmt::print(
      "strategy ({}): dp {} tp {} pp {} micro-batch {} global batch {} schedule {}{} recompute {} "
      "zero {}{}{}\n",
      s.framework, s.dp, s.tp, s.pp, s.micro_batch, s.global_batch, s.schedule,
      s.chunks > 1 ? fmt::format(" x{}", s.chunks) : "", s.recompute_label(), s.zero,
      s.sequence_parallel ? " sequence-parallel" : "", framework_switches(s));
  if (!p.feasible) fmt::print("INFEASIBLE ({}): {}\n", p.reason_code(), p.reason);
  if (p.iteration_s <= 0) return;
  fmt::print(
      "iteration {}  |  {:.2f} samples/s  {:.0f} tokens/s  |  MFU {:.1f}%  |  bubble "
      "{:.1f}%\n",
      format_seconds(p.iteration_s), p.samples_per_s, p.tokens_per_s, 100 * p.mfu,
      100 * p.bubble_rate);
  fmt::print("breakdown:{}", breakdown_text(p));
  fmt::print("\n\n{:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10}\n", "stage",
             "layers", "gpu", "F", "B", "W", "p2p", "dp sync", "in flight", "memory");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    fmt::print("{:>5} {:>4}-{:<4} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10}\n", i,
               st.stage.first_layer, st.stage.last_layer, st.stage.gpu_type,
               format_seconds(st.forward_s), format_seconds(st.backward_input_s),
               format_seconds(st.backward_weight_s), format_seconds(st.p2p_s),
               format_seconds(st.dp_sync_s), st.in_flight, format_gib(st.memory.total()));
  }
  for (const auto& note : p.notes) fmt::print("note: {}\n", note);
}

}  // namespace

CommandRunner declare_predict(CLI::App& app) {
  auto o = std::make_shared<PredictOptions>();
  app.add_option("--model", o->model, "Model preset, model file or Hugging Face config.json")
      ->required();
  app.add_option("--cluster", o->cluster, "Cluster preset, cluster file, or NODE:COUNT,...")
      ->required();
  app.add_option("--strategy", o->strategy, "Strategy file (JSON or YAML)")->required();
  app.add_option(
      "--framework", o->framework,
      std::string(kFrameworkHelp) + "; default: the strategy file's, else megatron-core");
  app.add_option("--calibration", o->calibration,
                 "Calibration files, profiles or directories (repeatable)");
  app.add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)")
      ->check(kPositive);
  app.add_flag("--no-default-calibration", o->no_default_calibration,
               "Do not load the shipped calibration_data/");
  app.add_option("--json", o->json, "Write the prediction as JSON to FILE ('-' for stdout)");
  return [o]() {
    std::vector<std::string> inputs = {o->strategy, o->model, o->cluster};
    inputs.insert(inputs.end(), o->calibration.begin(), o->calibration.end());
    check_outputs(inputs, {{"--json", o->json}});
    const ModelSpec model = load_model(o->model, o->seq_len);
    const ClusterSpec cluster = load_cluster(o->cluster);
    const Strategy loaded = load_strategy(o->strategy);
    const FrameworkSpec framework = load_run_framework(o->framework, loaded.framework);
    const Strategy strategy = with_framework_defaults(loaded, framework);
    const Profile profile = load_run_profile(o->calibration, cluster, o->no_default_calibration);
    const CostModel cost(profile, cluster);
    const Evaluator evaluator(model, cluster, cost, framework);
    // A strategy that contradicts the model, cluster or framework is bad input here (the search
    // merely skips such candidates); one that does not fit in memory is a prediction: infeasible.
    if (const auto broken = evaluator.broken_rule(strategy))
      throw InputError(o->strategy, broken->key, broken->reason);
    if (const auto wrong = stage_gpu_type_problem(strategy, cluster))
      throw InputError(o->strategy, wrong->key, wrong->reason);
    // The stages' devices and layers are checked as the strategy is placed: name the file.
    const Prediction p =
        naming_input(o->strategy, "stages", [&] { return evaluator.predict(strategy); });
    if (o->json != "-") {
      fmt::print("model {} ({:.2f}B parameters, sequence {}) on {} ({} GPUs)\n", model.name,
                 model.parameters() / 1e9, model.seq_len, cluster.name, cluster.num_gpus());
      print_prediction(strategy, p);
      if (!strategy.stages.empty() && strategy.devices() < cluster.num_gpus())
        fmt::print("note: the strategy uses {} of the {} GPUs; {}\n", strategy.devices(),
                   cluster.num_gpus(), idle_groups_text(cluster, strategy));
    }
    if (!o->json.empty()) {
      const RunDocumentInputs in{
          run_context("predict", profile), o->model, o->cluster, model, cluster, framework};
      write_json_output(prediction_document(in, strategy, p), o->json);
    }
    return 0;
  };
}

}  // namespace hetplan::cli
