// hetplan serve: places a model's layers on a heterogeneous serving cluster by max flow (Helix's
// model), next to baselines, and simulates a request trace on the result.
#include <cctype>
#include <chrono>
#include <ctime>
#include <filesystem>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/validators.h"
#include "costmodel/errors.h"
#include "costmodel/model.h"
#include "costmodel/utc_time.h"
#include "costmodel/version.h"
#include "serve/cost_layer_time.h"
#include "serve/helix_capacity.h"
#include "serve/helix_import.h"
#include "serve/helix_profiles.h"
#include "serve/helix_solution.h"
#include "serve/planner.h"
#include "serve/serve_output.h"
#include "serve/topology.h"
#include "serve/training_cluster.h"

namespace hetplan::cli {
namespace {

namespace fs = std::filesystem;
using namespace hetplan::serve;

struct ServeCliOptions {
  std::string model, cluster, profiles, machine_profiles, placement, json, write_sol;
  std::string capacity_model = capacity_model_name(CapacityParams{}.model);
  std::vector<std::string> calibration;
  bool no_default_calibration = false;
  double time_limit_s = 60;
  int threads = 1;
  uint64_t seed = 1;
  int64_t evaluations = 100000;
  int64_t requests = 1000;
  double rate = 0;
  double prompt_tokens = 750, output_tokens = 240;
  double kv_reserve = CapacityParams{}.kv_reserve_fraction;  // one default: serve/capacity.h
  bool exact_boundaries = false, partial_inference = false;
  bool no_milp = false, no_simulation = false, quiet = false;
  bool optimistic_batching = false;
  std::string trace_lengths, trace_arrivals;
  double trace_duration_s = 1800;
};

ServeCluster load_cluster_for_serving(const ServeCliOptions& o) {
  if (!o.machine_profiles.empty()) {
    if (fs::path(o.cluster).extension() != ".ini")
      throw InputError(o.cluster, "",
                       "--machine-profiles applies only to Helix cluster topologies "
                       "(cluster*.ini, pruned_cluster.ini); a hetplan serving cluster file gives "
                       "VRAM and NICs in its machine_types, a training cluster its node types");
    return {read_helix_cluster(o.cluster, o.machine_profiles), std::nullopt};
  }
  return load_serve_cluster(o.cluster);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

// A training cluster's machine types are its node kinds ("p4d.24xlarge"), which Helix's profile
// folders ("a100", "t4x2") do not name: every missing one is said at once, before any is read.
void check_profiles_cover(const std::string& profiles, const ClusterSpec& training) {
  std::set<std::string> folders;
  std::string found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(profiles, ec))
    if (entry.is_directory()) folders.insert(entry.path().filename().string());
  for (const auto& f : folders) found += (found.empty() ? "" : ", ") + f;
  std::string missing;
  for (const auto& g : training.groups) {
    bool has = false;
    for (const auto& f : folders) has = has || lower(f) == lower(g.node.name);
    if (!has) missing += (missing.empty() ? "" : ", ") + g.node.name + "/";
  }
  if (missing.empty()) return;
  throw InputError(
      profiles, "",
      fmt::format("no per-layer profiles for the machine types of cluster {}: a training "
                  "cluster's machine types are its node types; expected the folders {} with "
                  "prompt_bs2time.csv and decode_bs2time.csv (found: {}), or no --profiles to "
                  "derive the times from the cost model",
                  training.name, missing, found.empty() ? "none" : found));
}

// Helix's profile folders name their model; another model's per-layer times would silently give
// the wrong capacities. Models are compared by shape, so a model file of the same model passes.
void check_profiles_model(const std::string& profiles, const std::string& model_arg,
                          const ServingModel& model) {
  const std::string named = helix_profile_model(profiles);
  if (named.empty()) return;
  const ModelSpec spec = load_model(named);
  const ServingModel theirs = serving_model_from(spec, spec.dtype);
  if (theirs.num_layers == model.num_layers &&
      theirs.layer_weight_bytes == model.layer_weight_bytes &&
      theirs.activation_bytes_per_token == model.activation_bytes_per_token &&
      theirs.kv_bytes_per_token_layer == model.kv_bytes_per_token_layer)
    return;
  throw InputError(
      profiles, "",
      fmt::format("the folder holds Helix's per-layer times of {} ({} layers of {:.2f} GB), but "
                  "--model {} has {} layers of {:.2f} GB: expected the profiles of the model "
                  "served (Helix's are profiles/llama2_70b and profiles/llama1_30b)",
                  named, theirs.num_layers, theirs.layer_weight_bytes / 1e9, model_arg,
                  model.num_layers, model.layer_weight_bytes / 1e9));
}

// Requests must fit the model's context (a longer prompt only extended the profile's table and
// raised the capacity).
void check_request_lengths(const ServeCliOptions& o, const ModelSpec& spec) {
  const double tokens = o.prompt_tokens + o.output_tokens;
  if (spec.seq_len > 0 && !(tokens <= static_cast<double>(spec.seq_len)))
    throw InputError(fmt::format(
        "--prompt-tokens {:g} + --output-tokens {:g} = {:g} tokens: expected at most {}'s context "
        "of {} tokens",
        o.prompt_tokens, o.output_tokens, tokens, spec.name, spec.seq_len));
}

// Prompts longer than a profile measured are extrapolated, which is said.
void note_extrapolated_prompts(const ServeCliOptions& o, const ServingProblem& problem) {
  if (o.quiet) return;
  std::set<std::string> said;
  for (size_t i = 0; i < problem.times.size(); ++i) {
    const auto& times = *problem.times[i];
    if (o.prompt_tokens <= times.max_measured_prompt_tokens() ||
        !said.insert(times.origin()).second)
      continue;
    fmt::print(stderr,
               "note: --prompt-tokens {:g} is beyond the longest prompt measured in {} ({:g} "
               "tokens): its time is extrapolated along the last two points\n",
               o.prompt_tokens, times.origin(), times.max_measured_prompt_tokens());
  }
}

// --json is checked as every command checks its outputs, before a search of minutes: its folder
// exists and is writable, and it is none of the inputs (QA: --json CLUSTER.ini replaced the
// cluster file with the result).
void check_json_output(const ServeCliOptions& o) {
  std::vector<std::string> inputs = {o.model, o.cluster, o.profiles, o.machine_profiles,
                                     o.placement};
  // A Helix topology without --machine-profiles reads the one found near it: an input too.
  if (o.machine_profiles.empty() && fs::path(o.cluster).extension() == ".ini") {
    try {
      inputs.push_back(find_machine_profiles(o.cluster).string());
    } catch (const InputError&) {
      // None (a simulator_cluster.ini needs none): reading the cluster says so where it must.
    }
  }
  inputs.insert(inputs.end(), o.calibration.begin(), o.calibration.end());
  std::erase(inputs, std::string());
  check_outputs(inputs, {{"--json", o.json}, {"--write-sol", o.write_sol}});
}

// The capacity model's parameters; Helix's model takes its tables from the profile folder
// (helix_capacity.yaml), and without them hetplan's memory model (said on stderr).
CapacityParams capacity_params(const ServeCliOptions& o) {
  CapacityParams params;
  params.kv_reserve_fraction = o.kv_reserve;
  params.model = o.capacity_model == "helix" ? CapacityModel::kHelix : CapacityModel::kHetplan;
  if (params.model != CapacityModel::kHelix) return params;
  const fs::path tables =
      o.profiles.empty() ? fs::path() : fs::path(o.profiles) / kHelixCapacityFile;
  if (!tables.empty() && fs::exists(tables)) {
    auto read = std::make_shared<HelixCapacityTables>(read_helix_capacity_tables(tables));
    const std::string named = helix_profile_model(o.profiles);
    if (!named.empty() && read->model != named)
      throw InputError(tables.string(), "model",
                       fmt::format("expected {} (the model of the profile folder), found {}", named,
                                   read->model));
    params.helix_tables = std::move(read);
  } else if (!o.quiet) {
    fmt::print(stderr,
               "note: --capacity-model helix without Helix's tables ({}{}): its layer limits and "
               "KV cache come from hetplan's memory model\n",
               o.profiles.empty() ? "no --profiles folder" : "none in ",
               o.profiles.empty() ? "" : tables.string());
  }
  return params;
}

std::optional<SimulationResult> simulate(const ServingProblem& problem, const EvaluatedPlacement& e,
                                         const SimulationConfig& config) {
  if (!(e.flow.max_flow_tokens_per_s > 0) || !e.valid()) return std::nullopt;
  return simulate_serving(problem, e.placement, routing_from_flow(problem, e.flow), config);
}

}  // namespace

CommandRunner declare_serve(CLI::App& app) {
  auto o = std::make_shared<ServeCliOptions>();
  app.add_option("--model", o->model, "Model preset, model file or Hugging Face config.json")
      ->required();
  app.add_option("--cluster", o->cluster,
                 "Cluster preset, NODE:COUNT,..., training or serving cluster file (YAML/JSON), "
                 "or a Helix INI file (cluster*.ini, pruned_cluster.ini, simulator_cluster.ini)")
      ->required();
  app.add_option("--profiles", o->profiles,
                 "Per-layer times: <dir>/<machine type>/{prompt,decode}_bs2time.csv (Helix)");
  app.add_option("--calibration", o->calibration,
                 "Without --profiles: calibration files, profiles or directories for the cost "
                 "model that derives per-layer times (the shipped calibration_data/ is loaded "
                 "first)");
  app.add_flag("--no-default-calibration", o->no_default_calibration,
               "Do not load the shipped calibration_data/");
  app.add_option("--machine-profiles", o->machine_profiles,
                 "Helix machine_profiles.ini for a cluster topology (default: found near it)");
  app.add_option("--placement", o->placement,
                 "Evaluate this placement (hetplan placement JSON or Helix *_sol.ini) instead of "
                 "searching");
  app.add_option("--json", o->json, "Write the result as JSON to FILE ('-' for stdout)");
  app.add_option("--write-sol", o->write_sol,
                 "Also write the chosen placement as a Helix *_sol.ini to FILE (Helix's tools "
                 "read it)");
  app.add_option("--capacity-model", o->capacity_model,
                 "How a machine's tokens/s follow from the layers it holds: helix (Helix's "
                 "model, from its measured tables; the default) or hetplan")
      ->check(CLI::IsMember({"hetplan", "helix"}));
  app.add_option("--time-limit", o->time_limit_s, "Search time limit in seconds (default 60)")
      ->check(kPositive);
  app.add_option("--threads", o->threads, "Threads for the search (default 1)")
      ->check(kThreadCount);
  app.add_option("--seed", o->seed, "Seed of the search, baselines and trace (default 1)")
      ->check(kNonNegative);
  app.add_option("--evaluations", o->evaluations,
                 "Max-flow evaluations per local search (default 100000)")
      ->check(kPositive);
  app.add_option("--requests", o->requests, "Requests in the simulated trace (default 1000)")
      ->check(kNonNegative);
  app.add_option("--rate", o->rate,
                 "Arrival rate of the trace, requests/s (default: half the max flow)")
      ->check(kPositive);
  app.add_option("--prompt-tokens", o->prompt_tokens, "Mean prompt length (default 750)")
      ->check(kPositive);
  app.add_option("--output-tokens", o->output_tokens, "Mean output length (default 240)")
      ->check(kPositive);
  app.add_option("--kv-reserve", o->kv_reserve,
                 fmt::format("Share of VRAM weights must leave free for KV cache (default {})",
                             CapacityParams{}.kv_reserve_fraction))
      ->check(CLI::Range(0.0, 0.95));
  auto* exact = app.add_flag("--exact-boundaries", o->exact_boundaries,
                             "Requests go from machine i to j only when j starts where i ends "
                             "(no partial inference; the default with --capacity-model helix, as "
                             "Helix's runs)");
  app.add_flag("--partial-inference", o->partial_inference,
               "Machine i may feed j when j's range holds the layer after i's (Helix's partial "
               "inference; the default with --capacity-model hetplan)")
      ->excludes(exact);
  app.add_flag("--no-milp", o->no_milp, "Skip the CBC MILP");
  app.add_flag("--no-simulation", o->no_simulation, "Skip the request-trace simulation");
  app.add_flag("--optimistic-batching", o->optimistic_batching,
               "Simulate decode batches up to the profile's largest batch (default: the capacity "
               "model's batch, so that the simulation cannot beat the max flow)");
  app.add_option("--trace-lengths", o->trace_lengths,
                 "Simulate Helix's trace generator: (prompt,output) pairs to draw lengths from "
                 "(CSV; examples/external/helix/traces/azure_conv_lengths.csv); needs "
                 "--trace-arrivals");
  app.add_option("--trace-arrivals", o->trace_arrivals,
                 "Requests per 3-s interval to draw arrivals from, rescaled to --rate (one per "
                 "line; examples/external/helix/traces/azure_conv_arrivals.csv)");
  app.add_option("--trace-duration", o->trace_duration_s,
                 "Seconds of Helix's trace, measured as Helix does (default 1800)")
      ->check(kPositive);
  app.add_flag("--quiet", o->quiet, "No progress on stderr");
  return [o]() {
    check_json_output(*o);
    if (o->trace_lengths.empty() != o->trace_arrivals.empty())
      throw InputError(
          fmt::format("{} without {}: Helix's trace generator needs both the lengths "
                      "and the arrival series",
                      o->trace_lengths.empty() ? "--trace-arrivals" : "--trace-lengths",
                      o->trace_lengths.empty() ? "--trace-lengths" : "--trace-arrivals"));
    const ModelSpec spec = load_model(o->model);
    check_request_lengths(*o, spec);
    ServingModel model = serving_model_from(spec, spec.dtype);
    ServeCluster loaded = load_cluster_for_serving(*o);
    ServingCluster& cluster = loaded.serving;
    const ClusterSpec training = loaded.training.value_or(ClusterSpec{});
    // Per-layer times: Helix's measured tables, or hetplan's cost model at serving shapes.
    std::unique_ptr<LayerTimeSource> times;
    if (!o->profiles.empty()) {
      check_profiles_model(o->profiles, o->model, model);
      times = std::make_unique<ProfileDirectory>(o->profiles);
      if (loaded.training) check_profiles_cover(o->profiles, training);
    } else {
      // As predict and search: the shipped calibration, the cluster file's, then --calibration.
      std::map<std::string, NodeSpec> nodes;
      for (const auto& g : training.groups) nodes[g.node.name] = g.node;
      // A decode step attends on average to the prompt and half the output.
      times = std::make_unique<CostModelLayerTimes>(
          spec, cli::load_run_profile(o->calibration, training, o->no_default_calibration),
          o->prompt_tokens, o->prompt_tokens + o->output_tokens / 2, std::move(nodes));
    }
    ServingWorkload workload{o->prompt_tokens, o->output_tokens};
    const CapacityParams params = capacity_params(*o);
    ServingProblem problem =
        make_problem(std::move(cluster), std::move(model), *times, workload, params);
    // Helix's runs allow no partial inference: a placement searched without it scores the same
    // with it, one searched with it may not (docs/serving.md).
    problem.partial_inference =
        o->partial_inference ||
        (!o->exact_boundaries && problem.params.model == CapacityModel::kHetplan);
    note_extrapolated_prompts(*o, problem);

    ServeReport report;
    report.problem = &problem;
    report.context = {{"hetplan_version", version()},
                      {"command", own_command_line()},
                      {"date", utc_now_iso8601()},
                      {"model", o->model},
                      {"cluster", o->cluster},
                      {"profiles", o->profiles.empty() ? Json("cost model") : Json(o->profiles)},
                      {"placement", o->placement.empty() ? Json(nullptr) : Json(o->placement)},
                      {"capacity_model", o->capacity_model},
                      {"seed", o->seed},
                      {"threads", o->threads},
                      {"time_limit_s", o->time_limit_s}};
    if (!o->placement.empty()) {
      report.chosen.evaluated =
          evaluate_placement(problem, fs::path(o->placement).stem().string(),
                             load_placement(o->placement, problem.cluster, problem.num_layers()));
    } else {
      // A cluster that cannot serve the model at all is inconsistent input, not a result of 0.
      if (const std::string why = why_nothing_serves(problem); !why.empty())
        throw InputError(o->cluster, "",
                         fmt::format("cannot serve {}: {}", problem.model.name, why));
      PlannerOptions po;
      po.time_limit_s = o->time_limit_s;
      po.threads = o->threads;
      po.seed = o->seed;
      po.local_search_evaluations = o->evaluations;
      po.use_milp = !o->no_milp;
      if (!o->quiet)
        po.progress = [](const std::string& line) { fmt::print(stderr, "serve: {}\n", line); };
      report.plan = plan_serving(problem, po);
      report.chosen.evaluated = report.plan->best;
    }
    for (auto& b : evaluate_baselines(problem, o->seed)) report.baselines.push_back({b, {}});
    if (!o->write_sol.empty())
      write_helix_solution(o->write_sol, report.chosen.evaluated.placement, problem.cluster);

    if (!o->no_simulation && report.chosen.evaluated.flow.max_flow_tokens_per_s > 0) {
      SimulationConfig sc;
      sc.requests = o->requests;
      sc.mean_prompt_tokens = o->prompt_tokens;
      sc.mean_output_tokens = o->output_tokens;
      sc.seed = o->seed;
      sc.max_request_tokens = spec.seq_len;
      sc.model_batch_limit = !o->optimistic_batching;
      std::optional<MeasuredTrace> measured;
      if (!o->trace_lengths.empty())
        measured = read_measured_trace(o->trace_lengths, o->trace_arrivals);
      const double request_tokens =
          measured ? measured->mean_request_tokens() : o->prompt_tokens + o->output_tokens;
      sc.rate_requests_per_s =
          o->rate > 0 ? o->rate
                      : 0.5 * report.chosen.evaluated.flow.max_flow_tokens_per_s / request_tokens;
      if (measured) {
        sc.trace = helix_trace(*measured, sc.rate_requests_per_s, o->trace_duration_s, o->seed);
        sc.window_s = o->trace_duration_s;
        sc.requests = static_cast<int64_t>(sc.trace.size());
      }
      report.simulation_config = sc;
      if (!o->quiet)
        fmt::print(stderr, "serve: simulating {} requests at {:.3f} requests/s\n", sc.requests,
                   sc.rate_requests_per_s);
      report.chosen.simulation = simulate(problem, report.chosen.evaluated, sc);
      for (auto& b : report.baselines) b.simulation = simulate(problem, b.evaluated, sc);
    }

    if (o->json != "-") fmt::print("{}", serve_summary(report));
    if (!o->json.empty()) write_json_output(serve_json(report), o->json);
    return 0;
  };
}

}  // namespace hetplan::cli
