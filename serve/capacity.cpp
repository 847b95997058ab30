#include "serve/capacity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::serve {

double kv_tokens_per_layer(const Machine& machine, const ServingModel& model,
                           const CapacityParams& params, int k) {
  const double kv_bytes =
      std::max(0.0, params.usable_fraction * machine.vram_bytes - k * model.layer_weight_bytes);
  return kv_bytes / (k * model.kv_bytes_per_token_layer);
}

MachineCapacity machine_capacity(const Machine& machine, const ServingModel& model,
                                 const LayerTimeModel& times, const ServingWorkload& workload,
                                 const CapacityParams& params) {
  MachineCapacity cap;
  const double weight_budget = (1.0 - params.kv_reserve_fraction) * machine.vram_bytes;
  cap.max_layers = std::min(model.num_layers,
                            static_cast<int>(std::floor(weight_budget / model.layer_weight_bytes)));
  // Whatever the reserve, some KV cache must be left within the usable share of VRAM.
  const double usable = params.usable_fraction * machine.vram_bytes;
  cap.max_layers =
      std::min(cap.max_layers, static_cast<int>(std::ceil(usable / model.layer_weight_bytes)) - 1);
  cap.max_layers = std::max(cap.max_layers, 0);
  cap.weight_max_layers = cap.max_layers;
  cap.tokens_per_s.assign(cap.max_layers + 1, 0.0);
  cap.decode_batch.assign(cap.max_layers + 1, 0.0);
  cap.kv_tokens_per_layer.assign(cap.max_layers + 1, 0.0);

  const double prompt = workload.avg_prompt_tokens;
  const double output = workload.avg_output_tokens;
  const double prompt_s = times.prompt_s(prompt);
  for (int k = 1; k <= cap.weight_max_layers; ++k) {
    const double kv_tokens = kv_tokens_per_layer(machine, model, params, k);
    cap.kv_tokens_per_layer[k] = kv_tokens;
    // A machine whose KV cache cannot hold one average request on each of its layers serves
    // nothing with that many layers (or more: the cache only shrinks as k grows).
    if (kv_tokens < prompt + output) {
      cap.max_layers = std::min(cap.max_layers, k - 1);
      continue;
    }
    // Requests resident on the machine at the scheduler's high-water mark; a decode step serves
    // the share of them that is at this machine, k of the model's L layers (Helix's workload
    // ratio with equal per-layer times along the path).
    const double resident = params.kv_high_water * kv_tokens / (prompt + output);
    const double batch = std::clamp(resident * k / model.num_layers, 1.0, times.max_decode_batch());
    // An average request costs its prompt pass plus `output` decode steps, each step shared by
    // `batch` requests, on each of the k layers.
    const double request_s = k * (prompt_s + output * times.decode_s(batch) / batch);
    cap.decode_batch[k] = batch;
    cap.tokens_per_s[k] = (prompt + output) / request_s;
  }
  return cap;
}

const char* capacity_model_name(CapacityModel model) {
  return model == CapacityModel::kHelix ? "helix" : "hetplan";
}

ServingProblem make_problem(ServingCluster cluster, ServingModel model,
                            const LayerTimeSource& times, ServingWorkload workload,
                            CapacityParams params) {
  ServingProblem p;
  p.cluster = std::move(cluster);
  p.model = std::move(model);
  p.workload = workload;
  p.params = params;
  for (const auto& m : p.cluster.machines()) {
    p.times.push_back(times.for_machine_type(m.machine_type));
    p.capacity.push_back(machine_capacity(m, p.model, *p.times.back(), workload, params));
  }
  if (params.model == CapacityModel::kHelix)
    p.capacity = helix_capacities(p.cluster, p.model, p.times, workload, params, p.capacity,
                                  params.helix_tables.get());
  return p;
}

std::vector<std::string> placement_errors(const ServingProblem& problem,
                                          const Placement& placement) {
  std::vector<std::string> errors;
  if (static_cast<int>(placement.ranges.size()) != problem.machines()) {
    errors.push_back(fmt::format("the placement has {} machines, the cluster {}",
                                 placement.ranges.size(), problem.machines()));
    return errors;
  }
  const int L = problem.num_layers();
  std::vector<bool> held(L, false);
  for (int i = 0; i < problem.machines(); ++i) {
    const LayerRange& r = placement.ranges[i];
    const Machine& m = problem.cluster.machines()[i];
    const MachineCapacity& cap = problem.capacity[i];
    if (r.empty()) continue;
    if (r.count < 0 || r.start < 0 || r.end() > L) {
      errors.push_back(fmt::format("{}: layers {}..{} are outside the model's 0..{}", m.name,
                                   r.start, r.end() - 1, L - 1));
      continue;
    }
    for (int l = r.start; l < r.end(); ++l) held[l] = true;
    const bool helix_table = problem.params.model == CapacityModel::kHelix &&
                             problem.params.helix_tables &&
                             problem.params.helix_tables->find(m.machine_type);
    if (r.count > cap.weight_max_layers && helix_table) {
      errors.push_back(fmt::format("{}: {} layers; Helix's tables let a {} hold at most {}", m.name,
                                   r.count, m.machine_type, cap.weight_max_layers));
    } else if (r.count > cap.weight_max_layers) {
      errors.push_back(fmt::format(
          "{}: {} layers need {:.2f} GB of weights; {} ({:.1f} GB of VRAM) may hold {} "
          "({:.0f}% of VRAM stays free for KV cache and workspace)",
          m.name, r.count, r.count * problem.model.layer_weight_bytes / 1e9, m.machine_type,
          m.vram_bytes / 1e9, cap.weight_max_layers, 100 * problem.params.kv_reserve_fraction));
    } else if (r.count > cap.max_layers) {
      errors.push_back(fmt::format(
          "{}: with {} layers the KV cache holds {:.0f} tokens per layer, less than one request "
          "of {:g} + {:g} tokens; {} ({:.1f} GB of VRAM) may hold {} layers",
          m.name, r.count, cap.kv_tokens_per_layer[r.count], problem.workload.avg_prompt_tokens,
          problem.workload.avg_output_tokens, m.machine_type, m.vram_bytes / 1e9, cap.max_layers));
    }
  }
  for (int l = 0; l < L; ++l) {
    if (held[l]) continue;
    int last = l;
    while (last + 1 < L && !held[last + 1]) ++last;
    errors.push_back(l == last ? fmt::format("layer {} is held by no machine", l)
                               : fmt::format("layers {}..{} are held by no machine", l, last));
    l = last;
  }
  return errors;
}

double flow_upper_bound(const ServingProblem& problem) {
  int layers = 0;
  for (const auto& cap : problem.capacity) layers += cap.max_layers;
  if (layers < problem.num_layers()) return 0;  // the machines cannot hold the model
  double total = 0;
  for (const auto& cap : problem.capacity) {
    double best = 0;
    for (int k = 1; k <= cap.max_layers; ++k) best = std::max(best, k * cap.tokens_per_s[k]);
    total += best;
  }
  return total / problem.num_layers();
}

}  // namespace hetplan::serve
