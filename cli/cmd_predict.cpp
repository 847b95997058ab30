// hetplan predict: one strategy's iteration time, throughput, MFU and memory per device.

#include <algorithm>
#include <tuple>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/cost_model.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "report/layer_ops_text.h"
#include "report/run_documents.h"
#include "report/run_text.h"
#include "search/evaluate.h"
#include "search/stage_gpu_types.h"

namespace hetplan::cli {
namespace {

struct PredictOptions {
  std::string model, cluster, strategy, json, framework;
  std::vector<std::string> calibration;
  int64_t seq_len = 0;
  bool no_default_calibration = false;
  bool layer_ops = false;
};

// Each distinct layer's ops on every GPU type the prediction's stages run on (each replica
// group's type at its own tensor width and micro-batch), in stage order: the document's
// "layer_ops".
Json layer_ops_of(const Evaluator& evaluator, const Strategy& strategy, const Prediction& p) {
  std::vector<std::tuple<std::string, int64_t, int64_t>> shown;  // type, tp, micro-batch
  Json out = Json::array();
  const auto show = [&](const std::string& type, int64_t tp, int64_t micro_batch) {
    const auto key = std::make_tuple(type, tp, micro_batch);
    if (std::find(shown.begin(), shown.end(), key) != shown.end()) return;
    shown.push_back(key);
    const ClusterSpec& cluster = evaluator.cluster();
    Strategy s = strategy;
    s.tp = tp;
    s.micro_batch = micro_batch;
    for (size_t g = 0; g < cluster.groups.size(); ++g)
      if (cluster.groups[g].node.gpu.name == type) {
        out.push_back(layer_ops_json(evaluator.model(), type, tp, micro_batch,
                                     evaluator.layer_ops(static_cast<int64_t>(g), s)));
        return;
      }
  };
  for (const StagePrediction& stage : p.stages) {
    if (stage.stage.replicas.empty()) show(stage.stage.gpu_type, strategy.tp, strategy.micro_batch);
    for (const ReplicaGroup& r : stage.stage.replicas) show(r.gpu_type, r.tp, r.micro_batch);
  }
  return out;
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
  app.add_flag(
      "--layer-ops", o->layer_ops,
      "Also print each distinct layer's ops (GEMMs, kernels, attention, collectives) with "
      "their times on each GPU type the stages use (and write them as the JSON's layer_ops)");
  return [o]() {
    std::vector<std::string> inputs = {o->strategy, o->model, o->cluster};
    inputs.insert(inputs.end(), o->calibration.begin(), o->calibration.end());
    check_outputs(inputs, {{"--json", o->json}});
    const ModelSpec model = load_model(o->model, o->seq_len);
    const ClusterSpec cluster = load_cluster(o->cluster);
    const Strategy loaded = load_strategy(o->strategy);
    const FrameworkSpec framework = load_run_framework(o->framework, loaded.framework, o->strategy);
    const Strategy strategy = with_framework_defaults(loaded, framework, &model);
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
    const RunDocumentInputs in{
        run_context("predict", profile), o->model, o->cluster, model, cluster, framework};
    Json document = prediction_document(in, strategy, p);
    if (o->layer_ops) document["layer_ops"] = layer_ops_of(evaluator, strategy, p);
    if (o->json != "-") {
      fmt::print("model {} ({:.2f}B parameters, sequence {}) on {} ({} GPUs)\n", model.name,
                 model.parameters() / 1e9, model.seq_len, cluster.name, cluster.num_gpus());
      fmt::print("{}", prediction_text(document));
      if (!strategy.stages.empty() && strategy.devices() < cluster.num_gpus())
        fmt::print("note: the strategy uses {} of the {} GPUs; {}\n", strategy.devices(),
                   cluster.num_gpus(), idle_groups_text(cluster, strategy));
      fmt::print("{}", layer_ops_text(document, strategy.has_replicas()));
    }
    if (!o->json.empty()) write_json_output(document, o->json);
    return 0;
  };
}

}  // namespace hetplan::cli
