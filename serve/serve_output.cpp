#include "serve/serve_output.h"

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "costmodel/whole_number.h"

namespace hetplan::serve {
namespace {

std::string endpoint_name(const ServingProblem& problem, int endpoint) {
  if (endpoint == kSource) return "source";
  if (endpoint == kSink) return "sink";
  return problem.cluster.machines()[endpoint].name;
}

Json latency_json(const LatencyStats& s) {
  return {{"mean", s.mean_s}, {"p50", s.p50_s}, {"p95", s.p95_s}};
}

// Output tokens among all tokens of the workload (prompt + output).
double decode_share(const ServingProblem& problem) {
  const auto& w = problem.workload;
  return w.avg_output_tokens / (w.avg_prompt_tokens + w.avg_output_tokens);
}

// "upper bound X tokens/s (which bound; the others)": the tightest valid bound first.
std::string bounds_summary(const PlanResult& plan) {
  const TightestBound best = plan.tightest_bound();
  std::vector<std::string> others;
  if (best.kind != "helix")
    others.push_back(fmt::format("Helix's bound {:.1f}", plan.helix_bound_tokens_per_s));
  if (best.kind != "milp_lp" && plan.milp_upper_bound_tokens_per_s)
    others.push_back(fmt::format("MILP LP bound {:.1f}", *plan.milp_upper_bound_tokens_per_s));
  if (best.kind != "link_lp" && plan.link_upper_bound_tokens_per_s)
    others.push_back(fmt::format("link-aware LP {:.1f}", *plan.link_upper_bound_tokens_per_s));
  const char* name = best.kind == "link_lp"   ? "link-aware LP"
                     : best.kind == "milp_lp" ? "MILP LP bound, ignores links"
                                              : "Helix's bound, ignores links";
  return fmt::format("upper bound {:.1f} tokens/s ({}{}{})", best.tokens_per_s, name,
                     others.empty() ? "" : "; ", fmt::join(others, ", "));
}

}  // namespace

Json placement_json(const ServingProblem& problem, const EvaluatedPlacement& e) {
  Json out = Json::array();
  for (int i = 0; i < problem.machines(); ++i) {
    const Machine& m = problem.cluster.machines()[i];
    const LayerRange& r = e.placement.ranges[i];
    Json entry = {{"machine", m.name}, {"machine_type", m.machine_type}};
    if (r.empty()) {
      entry["layers"] = nullptr;
    } else {
      entry["layers"] = {r.start, r.end() - 1};
      entry["layer_count"] = r.count;
      entry["capacity_tokens_per_s"] = e.flow.machine_capacity[i];
      entry["flow_tokens_per_s"] = e.flow.machine_flow[i];
    }
    out.push_back(entry);
  }
  return out;
}

Json routing_json(const ServingProblem& problem, const RoutingTable& routing) {
  Json out = Json::array();
  for (size_t slot = 0; slot < routing.out.size(); ++slot) {
    const int from = slot + 1 == routing.out.size() ? kSource : static_cast<int>(slot);
    for (const RouteChoice& c : routing.out[slot])
      out.push_back({{"from", endpoint_name(problem, from)},
                     {"to", endpoint_name(problem, c.to)},
                     {"flow_tokens_per_s", c.flow_tokens_per_s},
                     {"share", c.share},
                     {"weight", c.weight}});
  }
  return out;
}

Json simulation_json(const SimulationConfig& config, const SimulationResult& s) {
  Json out = {
      {"requests", s.requests},
      {"completed", s.completed},
      {"rejected", s.rejected},
      {"rate_requests_per_s", config.rate_requests_per_s},
      {"mean_prompt_tokens", config.mean_prompt_tokens},
      {"mean_output_tokens", config.mean_output_tokens},
      {"seed", config.seed},
      {"decode_batch_limit", config.model_batch_limit ? "capacity model" : "profile maximum"},
      {"duration_s", s.duration_s},
      {"throughput_tokens_per_s", s.throughput_tokens_per_s},
      {"decode_throughput_tokens_per_s", s.decode_throughput_tokens_per_s},
      {"prompt_latency_s", latency_json(s.prompt_latency)},
      {"decode_latency_s_per_token", latency_json(s.decode_latency)},
      {"admission_wait_s", latency_json(s.admission_wait)},
      {"batches", s.batches},
      {"trace", config.trace.empty() ? "poisson, uniform lengths" : "helix"}};
  if (s.window_s > 0) {
    out["window_s"] = s.window_s;
    out["window_decode_throughput_tokens_per_s"] = s.window_decode_throughput_tokens_per_s;
    out["window_prompt_latency_s"] = latency_json(s.window_prompt_latency);
  }
  return out;
}

Json serve_json(const ServeReport& report) {
  const ServingProblem& problem = *report.problem;
  const EvaluatedPlacement& chosen = report.chosen.evaluated;
  Json out;
  out["format"] = "hetplan-serve";
  out["schema_version"] = 1;
  out["schema"] = "hetplan.serve/1";  // the key before format and schema_version (kept for readers)
  out["context"] = report.context;
  out["model"] = {
      {"name", problem.model.name},
      {"layers", problem.model.num_layers},
      {"layer_weight_bytes", whole_number_json(problem.model.layer_weight_bytes)},
      {"kv_bytes_per_token_layer", whole_number_json(problem.model.kv_bytes_per_token_layer)},
      {"activation_bytes_per_token", whole_number_json(problem.model.activation_bytes_per_token)}};
  out["workload"] = {{"avg_prompt_tokens", problem.workload.avg_prompt_tokens},
                     {"avg_output_tokens", problem.workload.avg_output_tokens}};
  out["capacity_model"] = {{"name", capacity_model_name(problem.params.model)},
                           {"kv_high_water", problem.params.kv_high_water},
                           {"usable_fraction", problem.params.usable_fraction},
                           {"kv_reserve_fraction", problem.params.kv_reserve_fraction},
                           {"partial_inference", problem.partial_inference}};
  out["source"] = chosen.name;
  out["valid"] = chosen.valid();
  out["errors"] = chosen.errors;
  out["no_flow_reason"] =
      chosen.no_flow_reason.empty() ? Json(nullptr) : Json(chosen.no_flow_reason);
  out["max_flow_tokens_per_s"] = chosen.flow.max_flow_tokens_per_s;
  out["max_flow_decode_tokens_per_s"] = chosen.flow.max_flow_tokens_per_s * decode_share(problem);
  out["placement"] = placement_json(problem, chosen);
  out["routing"] = routing_json(problem, routing_from_flow(problem, chosen.flow));
  out["simulation"] = report.chosen.simulation
                          ? simulation_json(report.simulation_config, *report.chosen.simulation)
                          : Json(nullptr);
  Json baselines = Json::array();
  for (const ServeEntry& b : report.baselines) {
    Json entry = {
        {"name", b.evaluated.name},
        {"valid", b.evaluated.valid()},
        {"errors", b.evaluated.errors},
        {"no_flow_reason",
         b.evaluated.no_flow_reason.empty() ? Json(nullptr) : Json(b.evaluated.no_flow_reason)},
        {"max_flow_tokens_per_s", b.evaluated.flow.max_flow_tokens_per_s},
        {"used_machines", b.evaluated.placement.used_machines()},
        {"placement", placement_json(problem, b.evaluated)}};
    entry["simulation"] =
        b.simulation ? simulation_json(report.simulation_config, *b.simulation) : Json(nullptr);
    baselines.push_back(entry);
  }
  out["baselines"] = baselines;
  if (report.plan) {
    const PlanResult& plan = *report.plan;
    Json phases = Json::array();
    for (const SearchPhase& p : plan.phases)
      phases.push_back({{"name", p.name},
                        {"max_flow_tokens_per_s", p.max_flow_tokens_per_s},
                        {"elapsed_s", p.elapsed_s},
                        {"evaluations", p.evaluations}});
    const TightestBound bound = plan.tightest_bound();
    auto optional_json = [](const std::optional<double>& v) {
      return v ? Json(*v) : Json(nullptr);
    };
    Json search = {
        {"method", plan.method},
        {"elapsed_s", plan.elapsed_s},
        {"phases", phases},
        {"upper_bound_tokens_per_s", bound.tokens_per_s},
        {"upper_bound_kind", bound.kind},
        {"helix_bound_tokens_per_s", plan.helix_bound_tokens_per_s},
        {"milp_lp_bound_tokens_per_s", optional_json(plan.milp_upper_bound_tokens_per_s)},
        {"link_lp_bound_tokens_per_s", optional_json(plan.link_upper_bound_tokens_per_s)},
        {"link_lp_bound_elapsed_s", plan.link_bound_elapsed_s}};
    if (plan.milp.columns > 0)
      search["milp"] = {{"solved", plan.milp.solved},
                        {"optimal", plan.milp.optimal},
                        {"objective_tokens_per_s", plan.milp.objective_tokens_per_s},
                        {"lp_bound_tokens_per_s", plan.milp.lp_bound_tokens_per_s},
                        {"best_bound_tokens_per_s", plan.milp.best_bound_tokens_per_s},
                        {"nodes", plan.milp.nodes},
                        {"elapsed_s", plan.milp.elapsed_s},
                        {"columns", plan.milp.columns},
                        {"integer_columns", plan.milp.integer_columns},
                        {"rows", plan.milp.rows}};
    out["search"] = search;
  }
  return out;
}

std::string serve_summary(const ServeReport& report) {
  const ServingProblem& problem = *report.problem;
  const EvaluatedPlacement& chosen = report.chosen.evaluated;
  std::string s;
  s += fmt::format("Serving {} ({} layers) on {} ({} machine{})\n", problem.model.name,
                   problem.num_layers(), problem.cluster.origin(), problem.machines(),
                   problem.machines() == 1 ? "" : "s");
  s += fmt::format("{}: max flow {:.1f} tokens/s (prompt + output; {:.1f} output tokens/s)\n",
                   chosen.name, chosen.flow.max_flow_tokens_per_s,
                   chosen.flow.max_flow_tokens_per_s * decode_share(problem));
  for (const auto& e : chosen.errors) s += "  invalid: " + e + "\n";
  if (!chosen.no_flow_reason.empty()) s += "  no flow: " + chosen.no_flow_reason + "\n";
  if (report.plan) {
    const PlanResult& plan = *report.plan;
    s += fmt::format("search: best by {} in {:.1f} s; {}\n",
                     plan.method.empty() ? "none" : plan.method, plan.elapsed_s,
                     bounds_summary(plan));
  }
  // Columns as wide as the longest machine name and machine type (a training cluster's node
  // types, such as g4dn.12xlarge, are longer than Helix's).
  size_t name_w = std::string_view("machine").size(), type_w = std::string_view("type").size();
  for (const Machine& m : problem.cluster.machines()) {
    name_w = std::max(name_w, m.name.size());
    type_w = std::max(type_w, m.machine_type.size());
  }
  s += fmt::format("\n{:<{}} {:<{}} {:>9} {:>9} {:>9}  (tokens/s)\n", "machine", name_w, "type",
                   type_w, "layers", "capacity", "flow");
  for (int i = 0; i < problem.machines(); ++i) {
    const LayerRange& r = chosen.placement.ranges[i];
    const Machine& m = problem.cluster.machines()[i];
    if (r.empty()) {
      s += fmt::format("{:<{}} {:<{}} {:>9}\n", m.name, name_w, m.machine_type, type_w, "-");
      continue;
    }
    s += fmt::format("{:<{}} {:<{}} {:>9} {:>9.1f} {:>9.1f}\n", m.name, name_w, m.machine_type,
                     type_w, fmt::format("{}-{}", r.start, r.end() - 1),
                     chosen.flow.machine_capacity[i], chosen.flow.machine_flow[i]);
  }
  auto sim_cells = [](const std::optional<SimulationResult>& sim) {
    if (!sim) return std::string("          -         -         -");
    return fmt::format("{:>11.1f} {:>9.2f} {:>9.3f}", sim->decode_throughput_tokens_per_s,
                       sim->prompt_latency.mean_s, sim->decode_latency.mean_s);
  };
  // The name column is as wide as the longest name (a placement file's name may be long).
  size_t width = 14;
  width = std::max(width, chosen.name.size());
  for (const ServeEntry& b : report.baselines) width = std::max(width, b.evaluated.name.size());
  s += fmt::format("\n{:<{}} max flow  machines  sim output/s  prompt s  s/token\n", "placement",
                   width + 2);
  s += fmt::format("{:<{}} {:>9.1f} {:>9} {}{}\n", chosen.name, width,
                   chosen.flow.max_flow_tokens_per_s, chosen.placement.used_machines(),
                   sim_cells(report.chosen.simulation), chosen.valid() ? "" : "  (invalid)");
  for (const ServeEntry& b : report.baselines)
    s += fmt::format("{:<{}} {:>9.1f} {:>9} {}{}\n", b.evaluated.name, width,
                     b.evaluated.flow.max_flow_tokens_per_s, b.evaluated.placement.used_machines(),
                     sim_cells(b.simulation), b.evaluated.valid() ? "" : "  (invalid)");
  return s;
}

}  // namespace hetplan::serve
