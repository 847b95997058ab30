#include "search/serve/capacity.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "costmodel/errors.h"

namespace hetplan::serve {

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
  cap.tokens_per_s.assign(cap.max_layers + 1, 0.0);
  cap.decode_batch.assign(cap.max_layers + 1, 0.0);
  cap.kv_tokens_per_layer.assign(cap.max_layers + 1, 0.0);

  const double prompt = workload.avg_prompt_tokens;
  const double output = workload.avg_output_tokens;
  const double prompt_s = times.prompt_s(prompt);
  for (int k = 1; k <= cap.max_layers; ++k) {
    // KV cache left after the weights, in tokens per held layer.
    const double kv_bytes =
        std::max(0.0, params.usable_fraction * machine.vram_bytes - k * model.layer_weight_bytes);
    const double kv_tokens = kv_bytes / (k * model.kv_bytes_per_token_layer);
    // Requests resident on the machine at the scheduler's high-water mark; a decode step serves
    // the share of them that is at this machine, k of the model's L layers (Helix's workload
    // ratio with equal per-layer times along the path).
    const double resident = params.kv_high_water * kv_tokens / (prompt + output);
    const double batch = std::clamp(resident * k / model.num_layers, 1.0, times.max_decode_batch());
    // An average request costs its prompt pass plus `output` decode steps, each step shared by
    // `batch` requests, on each of the k layers.
    const double request_s = k * (prompt_s + output * times.decode_s(batch) / batch);
    cap.kv_tokens_per_layer[k] = kv_tokens;
    cap.decode_batch[k] = batch;
    cap.tokens_per_s[k] = (prompt + output) / request_s;
  }
  return cap;
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
  for (int i = 0; i < problem.machines(); ++i) {
    const LayerRange& r = placement.ranges[i];
    const Machine& m = problem.cluster.machines()[i];
    if (r.empty()) continue;
    if (r.count < 0 || r.start < 0 || r.end() > problem.num_layers())
      errors.push_back(fmt::format("{}: layers {}..{} are outside the model's 0..{}", m.name,
                                   r.start, r.end() - 1, problem.num_layers() - 1));
    else if (r.count > problem.capacity[i].max_layers)
      errors.push_back(fmt::format(
          "{}: {} layers need {:.2f} GB of weights; a {} with {:.1f} GB of VRAM may hold {} "
          "({:.0f}% of VRAM stays free for KV cache and workspace)",
          m.name, r.count, r.count * problem.model.layer_weight_bytes / 1e9, m.machine_type,
          m.vram_bytes / 1e9, problem.capacity[i].max_layers,
          100 * problem.params.kv_reserve_fraction));
  }
  return errors;
}

double flow_upper_bound(const ServingProblem& problem) {
  double total = 0;
  for (const auto& cap : problem.capacity) {
    double best = 0;
    for (int k = 1; k <= cap.max_layers; ++k) best = std::max(best, k * cap.tokens_per_s[k]);
    total += best;
  }
  return total / problem.num_layers();
}

}  // namespace hetplan::serve
