#include "report/predictions.h"

#include <algorithm>
#include <filesystem>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "costmodel/hardware.h"
#include "costmodel/model.h"

namespace hetplan {
namespace {

MemoryBreakdown memory_from_json(ObjectReader r) {
  MemoryBreakdown m;
  m.weights = r.number_or("weights_bytes", 0);
  m.gradients = r.number_or("gradients_bytes", 0);
  m.optimizer = r.number_or("optimizer_bytes", 0);
  m.activations = r.number_or("activations_bytes", 0);
  m.transient = r.number_or("transient_bytes", 0);
  m.reserve = r.number_or("reserve_bytes", 0);
  m.fragmentation = r.number_or("fragmentation_bytes", 0);
  return m;
}

StagePrediction stage_from_json(ObjectReader r) {
  StagePrediction s;
  if (r.has("layers")) {
    const auto layers = r.integers("layers");
    if (layers.size() != 2) r.fail("layers", "expected [first, last]");
    s.stage.first_layer = layers[0];
    s.stage.last_layer = layers[1];
  }
  s.stage.gpu_type = r.string_or("gpu_type", "");
  if (r.has("devices")) s.stage.devices = r.integers("devices");
  s.forward_s = r.number_or("forward_s", 0);
  s.backward_input_s = r.number_or("backward_input_s", 0);
  s.backward_weight_s = r.number_or("backward_weight_s", 0);
  s.tp_comm_s = r.number_or("tp_comm_s", 0);
  s.recompute_s = r.number_or("recompute_s", 0);
  s.p2p_s = r.number_or("p2p_s", 0);
  s.dp_sync_s = r.number_or("dp_sync_s", 0);
  s.optimizer_s = r.number_or("optimizer_s", 0);
  s.in_flight = r.integer_or("in_flight_microbatches", 0);
  if (auto m = r.optional_object("memory")) s.memory = memory_from_json(*m);
  return s;
}

PredictedStrategy read_one(ObjectReader strategy, std::optional<ObjectReader> predicted,
                           const std::string& model, const std::string& cluster,
                           const std::string& origin) {
  PredictedStrategy p;
  p.model = model;
  p.cluster = cluster;
  p.origin = origin;
  p.strategy = strategy_from_json(strategy);
  if (predicted) p.predicted = prediction_from_json(*predicted);
  // The prediction knows the partition and placement the strategy may have left open: its stages
  // are the virtual stages (pp x chunks, model order).
  Strategy& s = p.strategy;
  // A strategy with replica groups places every group itself (its stages name no devices).
  if (p.predicted && !s.has_replicas() &&
      static_cast<int64_t>(p.predicted->stages.size()) == s.pp * s.chunks) {
    const auto& predicted_stages = p.predicted->stages;
    const bool open = s.stages.empty() || s.stages.front().first_layer < 0;
    if (open && predicted_stages.front().stage.first_layer >= 0) {
      s.stages.clear();
      for (const auto& st : predicted_stages) s.stages.push_back(st.stage);
    } else if (s.stages.size() == predicted_stages.size()) {
      for (size_t i = 0; i < s.stages.size(); ++i) {
        if (s.stages[i].devices.empty()) s.stages[i].devices = predicted_stages[i].stage.devices;
        if (s.stages[i].gpu_type.empty()) s.stages[i].gpu_type = predicted_stages[i].stage.gpu_type;
      }
    }
    // The strategy's own devices were checked as it was read; these are the prediction's.
    size_t stage = 0;
    if (std::string problem = stage_devices_problem(s, stage); !problem.empty())
      throw InputError(origin, fmt::format("predicted.stages[{}].devices", stage), problem);
  }
  return p;
}

}  // namespace

Prediction prediction_from_json(ObjectReader r) {
  Prediction p;
  p.feasible = r.boolean("feasible");
  p.reason = r.string_or("reason", "");
  p.kind = infeasible_kind(r.string_or("reason_code", ""), p.rule);
  p.iteration_s = r.number_or("iteration_s", 0);
  p.samples_per_s = r.number_or("samples_per_s", 0);
  p.tokens_per_s = r.number_or("tokens_per_s", 0);
  p.mfu = r.number_or("mfu", 0);
  if (r.has("peak_memory_bytes")) p.peak_memory_bytes = r.numbers("peak_memory_bytes");
  if (auto b = r.optional_object("breakdown")) {
    for (const auto& key : b->keys()) p.breakdown.emplace_back(key, b->number(key));
    // In the evaluator's order; a part it does not know (a newer version's) after them.
    const auto rank = [](const std::string& name) {
      const auto* it = std::find(kBreakdownParts.begin(), kBreakdownParts.end(), name);
      return it - kBreakdownParts.begin();
    };
    std::stable_sort(p.breakdown.begin(), p.breakdown.end(),
                     [&](const auto& x, const auto& y) { return rank(x.first) < rank(y.first); });
  }
  p.bubble_rate = r.number_or("bubble_rate", 0);
  p.kernels_per_iteration = r.number_or("kernels_per_iteration", 0);
  p.host_s = r.number_or("host_s", 0);
  for (auto& st : r.objects_or_empty("stages")) p.stages.push_back(stage_from_json(st));
  if (r.has("notes")) p.notes = r.strings("notes");
  return p;
}

std::vector<PredictedStrategy> load_predicted_strategies(const std::string& path) {
  const Document doc = load_document(path);
  ObjectReader r(doc);
  const std::string model = r.string_or("model", "");
  const std::string cluster = r.string_or("cluster", "");
  std::string model_source, cluster_source;
  int64_t seq_len = 0;
  if (auto context = r.optional_object("context")) {
    model_source = context->string_or("model_source", "");
    cluster_source = context->string_or("cluster_source", "");
    seq_len = context->integer_or("seq_len", 0);
  }
  std::vector<PredictedStrategy> out;
  if (r.has("strategies")) {
    auto list = r.objects("strategies");
    for (size_t i = 0; i < list.size(); ++i) {
      auto predicted = list[i].optional_object("predicted");
      out.push_back(
          read_one(list[i], predicted, model, cluster, fmt::format("{}: strategies[{}]", path, i)));
    }
  } else if (r.has("strategy")) {
    out.push_back(
        read_one(r.object("strategy"), r.optional_object("predicted"), model, cluster, path));
  } else {
    out.push_back(read_one(r, std::nullopt, model, cluster, path));
  }
  for (auto& p : out) {
    p.model_source = model_source;
    p.cluster_source = cluster_source;
    p.seq_len = seq_len;
  }
  return out;
}

void add_input_sources(Json& context, const std::string& model_arg, const std::string& cluster_arg,
                       int64_t seq_len) {
  // Presets are found by name; a file is recorded by its absolute path.
  const auto file = [](const std::string& arg, bool preset) {
    std::error_code ec;
    if (preset || !std::filesystem::is_regular_file(arg, ec)) return std::string();
    return std::filesystem::absolute(arg, ec).lexically_normal().string();
  };
  bool model_preset = false, cluster_preset = false;
  for (const auto& info : model_presets()) model_preset |= info.name == model_arg;
  for (const auto& info : hardware_presets())
    cluster_preset |= info.kind == "cluster" && info.name == cluster_arg;
  if (auto path = file(model_arg, model_preset); !path.empty()) context["model_source"] = path;
  if (auto path = file(cluster_arg, cluster_preset); !path.empty())
    context["cluster_source"] = path;
  context["seq_len"] = seq_len;
}

}  // namespace hetplan
