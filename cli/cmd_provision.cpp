// hetplan provision: which GPUs to rent for a training job (hardware and strategy searched
// together).
#include <algorithm>
#include <chrono>
#include <cmath>

#include <fmt/format.h>

#include "cli/command.h"
#include "cli/common.h"
#include "cli/lora_options.h"
#include "cli/progress_line.h"
#include "cli/validators.h"
#include "costmodel/model.h"
#include "report/run_documents.h"
#include "search/provision.h"

namespace hetplan::cli {

CommandRunner declare_provision(CLI::App& app) {
  struct Options {
    std::string model, json, framework, network, spread = "one-zone";
    std::vector<std::string> nodes, calibration;
    int64_t global_batch = 0, seq_len = 0, max_nodes = 16, max_types = 2, top = 15;
    double budget = 0, time_limit_s = 0;
    int threads = 1;
    bool no_default_calibration = false, quiet = false;
    LoraCliOptions lora;
  };
  auto o = std::make_shared<Options>();
  app.add_option("--model", o->model, "Model preset, model file or Hugging Face config.json")
      ->required();
  app.add_option("--nodes", o->nodes,
                 "Node types to choose from (comma separated presets or node files)")
      ->required()
      ->delimiter(',');
  app.add_option("--global-batch", o->global_batch, "Samples per iteration")
      ->required()
      ->check(kPositive);
  app.add_option("--seq-len", o->seq_len, "Sequence length (default: the model's)")
      ->check(kPositive);
  app.add_option("--max-nodes", o->max_nodes, "Largest count per node type (tried: 1, 2, 4, ...)")
      ->check(kPositive);
  app.add_option("--max-types", o->max_types, "At most this many node types in one mix")
      ->check(kPositive);
  app.add_option("--budget", o->budget, "Largest price per hour in dollars (0: none)")
      ->check(kNonNegative);
  app.add_option("--network", o->network,
                 "Zone and region links with their price per GB (a network preset: aws, gcp; or "
                 "a file)");
  app.add_option("--spread", o->spread,
                 "Where each mix's node types run: one-zone (default), zones (each type in a "
                 "zone of its own, one region) or regions (each in a region of its own)")
      ->check(CLI::IsMember({"one-zone", "zones", "regions"}));
  app.add_option("--top", o->top, "Rows to print")->check(kPositive);
  app.add_option("--threads", o->threads, "Worker threads for each search")->check(kThreadCount);
  app.add_option("--calibration", o->calibration, "Calibration files, profiles or directories");
  app.add_flag("--no-default-calibration", o->no_default_calibration,
               "Do not load the shipped calibration_data/");
  app.add_option("--json", o->json, "Write every mix as JSON to FILE ('-' for stdout)");
  app.add_option("--framework", o->framework, kFrameworkHelp);
  app.add_option("--time-limit", o->time_limit_s,
                 "Seconds for all the mixes (default: none); then the best of those searched")
      ->check(kNonNegative);
  add_lora_options(app, o->lora);
  app.add_flag("--quiet", o->quiet, "No progress on stderr (shown only on a terminal)");
  return [o]() {
    std::vector<std::string> inputs = {o->model};
    inputs.insert(inputs.end(), o->calibration.begin(), o->calibration.end());
    check_outputs(inputs, {{"--json", o->json}});
    const ModelSpec model = load_model(o->model, o->seq_len);
    ProvisionOptions po;
    po.node_types = o->nodes;
    po.max_nodes_per_type = o->max_nodes;
    po.max_types = o->max_types;
    po.max_price_per_hour = o->budget;
    po.spread = o->spread == "zones"     ? Spread::kZones
                : o->spread == "regions" ? Spread::kRegions
                                         : Spread::kOneZone;
    if (!o->network.empty()) po.network = load_network(o->network);
    po.search.global_batch = o->global_batch;
    po.search.threads = o->threads;
    po.search.lora = lora_of(o->lora);
    po.framework = load_run_framework(o->framework);
    po.time_limit_s = o->time_limit_s;
    ProgressLine progress(!o->quiet);
    const auto started = std::chrono::steady_clock::now();
    if (progress.active())
      po.progress = [&](size_t done, size_t total) {
        const double spent_s =
            std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
        progress.update(static_cast<int64_t>(done), static_cast<int64_t>(total),
                        "node mixes searched",
                        o->time_limit_s > 0 ? std::max(0.0, o->time_limit_s - spent_s) : -1);
      };
    ClusterSpec none;
    const Profile profile = load_run_profile(o->calibration, none, o->no_default_calibration);
    const ProvisionResult r = provision(model, profile, po);
    progress.finish();
    // With --json - stdout holds the JSON alone (docs/cli.md); the table goes to stderr.
    FILE* table = o->json == "-" ? stderr : stdout;
    fmt::print(table, "{} (global batch {}): {} node mixes in {}\n", model.name, o->global_batch,
               r.mixes_tried, format_seconds(r.elapsed_s));
    fmt::print(table, "{:<40} {:>6} {:>9} {:>12} {:>10} {:>10} {:>7}  {}\n", "nodes", "GPUs",
               "$/hour", "tokens/s", "$/M tok", "xfer $/M", "pareto", "best strategy");
    int64_t shown = 0;
    for (const auto& m : r.mixes) {
      if (!m.feasible || shown++ >= o->top) continue;
      const Strategy& s = m.best.strategy;
      fmt::print(table,
                 "{:<40} {:>6} {:>9.2f} {:>12.0f} {:>10.3f} {:>10.4f} {:>7}  dp {} tp {} pp {} mb "
                 "{} {} {}\n",
                 m.cluster.name, m.cluster.num_gpus(), m.total_dollars_per_hour(), m.tokens_per_s,
                 m.dollars_per_million_tokens, m.transfer_dollars_per_million_tokens,
                 m.pareto ? "yes" : "", s.dp, s.tp, s.pp, s.micro_batch, s.schedule,
                 s.recompute_label());
    }
    const auto infeasible = std::count_if(r.mixes.begin(), r.mixes.end(),
                                          [](const ProvisionedMix& m) { return !m.feasible; });
    if (infeasible)
      fmt::print(table, "{} mixes could not train the model (nothing fits)\n", infeasible);
    if (r.over_budget)
      fmt::print(table,
                 "{} mixes cost more than the ${:.2f}/hour budget (the cheapest of them, {}, "
                 "costs ${:.2f}/hour)\n",
                 r.over_budget, o->budget, r.cheapest_over, r.cheapest_over_price);
    if (r.time_limit_reached)
      fmt::print(table,
                 "time limit reached ({}): the best of what was searched in time ({}), not "
                 "necessarily the best of all\n",
                 format_seconds(o->time_limit_s),
                 r.mixes_not_searched > 0
                     ? fmt::format("{} mixes not searched", r.mixes_not_searched)
                     : std::string("the last mix searched in part"));
    if (!o->json.empty()) {
      Json out;
      out["format"] = "hetplan-provision";
      out["schema_version"] = 1;
      out["context"] = run_context("provision", profile);
      out["model"] = model.name;
      out["global_batch"] = o->global_batch;
      out["framework"] = po.framework.name;
      out["network"] = po.network ? Json(po.network->name) : Json(nullptr);
      out["spread"] = o->spread;
      Json list = Json::array();
      for (const auto& m : r.mixes) {
        Json j = {{"nodes", m.cluster.name},
                  {"gpus", m.cluster.num_gpus()},
                  {"price_per_hour", m.price_per_hour},
                  {"feasible", m.feasible},
                  {"pareto", m.pareto}};
        if (m.feasible) {
          j["tokens_per_s"] = m.tokens_per_s;
          j["dollars_per_million_tokens"] = m.dollars_per_million_tokens;
          j["total_dollars_per_hour"] = m.total_dollars_per_hour();
          j["transfer"] = {{"bytes_between_zones", m.transfer.bytes_between_zones},
                           {"bytes_between_regions", m.transfer.bytes_between_regions},
                           {"gradient_bytes", std::llround(m.transfer.gradient_bytes)},
                           {"pipeline_bytes", std::llround(m.transfer.pipeline_bytes)},
                           {"dollars_per_step", m.transfer.dollars},
                           {"dollars_per_hour", m.transfer_dollars_per_hour},
                           {"dollars_per_million_tokens", m.transfer_dollars_per_million_tokens}};
          Json s = to_json(m.best.strategy);
          s["predicted"] = to_json(m.best.predicted);
          j["strategy"] = s;
        }
        list.push_back(j);
      }
      out["mixes"] = list;
      out["mixes_tried"] = r.mixes_tried;
      out["elapsed_s"] = r.elapsed_s;
      out["stats"] = {{"mixes_tried", r.mixes_tried},
                      {"mixes_not_searched", r.mixes_not_searched},
                      {"elapsed_s", r.elapsed_s},
                      {"time_limit_s", o->time_limit_s},
                      {"time_limit_reached", r.time_limit_reached}};
      write_json_output(out, o->json);
    }
    return 0;
  };
}

}  // namespace hetplan::cli
