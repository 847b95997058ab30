#include "report/run_text.h"

#include <algorithm>

#include <fmt/format.h>

#include "report/predictions.h"
#include "search/pipeline/schedule.h"

namespace hetplan {
namespace {

const char* const kOrigin = "hetplan's own document";

Strategy strategy_of(const Json& j) { return strategy_from_json(ObjectReader(j, kOrigin)); }
Prediction prediction_of(const Json& j) { return prediction_from_json(ObjectReader(j, kOrigin)); }

std::string strategy_line(const Strategy& s) {
  return fmt::format(
      "strategy ({}): dp {} tp {} pp {} micro-batch {} global batch {} schedule {}{} recompute {} "
      "zero {}{}{}\n",
      s.framework, s.dp, s.tp, s.pp, s.micro_batch, s.global_batch, s.schedule,
      s.chunks > 1 ? fmt::format(" x{}", s.chunks) : "", s.recompute_label(), s.zero,
      s.sequence_parallel ? " sequence-parallel" : "", framework_switches(s));
}

std::string stage_table(const Prediction& p) {
  std::string out =
      fmt::format("{:>5} {:>9} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10}\n", "stage",
                  "layers", "gpu", "F", "B", "W", "p2p", "dp sync", "in flight", "memory");
  for (size_t i = 0; i < p.stages.size(); ++i) {
    const auto& st = p.stages[i];
    out += fmt::format("{:>5} {:>4}-{:<4} {:>10} {:>10} {:>10} {:>10} {:>9} {:>9} {:>10} {:>10}\n",
                       i, st.stage.first_layer, st.stage.last_layer, st.stage.gpu_type,
                       format_seconds(st.forward_s), format_seconds(st.backward_input_s),
                       format_seconds(st.backward_weight_s), format_seconds(st.p2p_s),
                       format_seconds(st.dp_sync_s), st.in_flight, format_gib(st.memory.total()));
  }
  return out;
}

// Per stage and replica group (strategies with replicas): what each group runs.
std::string groups_table(const Json& predicted) {
  if (!predicted.contains("replica_groups")) return "";
  const auto seconds = [](const Json& g, const char* key) {
    return format_seconds(g[key].get<double>());
  };
  std::string out = fmt::format(
      "\n{:>5} {:>5} {:>10} {:>8} {:>3} {:>3} {:>7} {:>5} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9} "
      "{:>6} {:>6} {:>10}\n",
      "stage", "group", "gpu", "replicas", "tp", "mb", "samples", "m", "F", "B", "W", "p2p",
      "pipeline", "sync", "slices", "rounds", "memory");
  for (const Json& g : predicted["replica_groups"])
    out += fmt::format(
        "{:>5} {:>5} {:>10} {:>8} {:>3} {:>3} {:>7} {:>5} {:>10} {:>10} {:>10} {:>9} {:>10} {:>9} "
        "{:>6} {:>6} {:>10}\n",
        g["stage"].get<int64_t>(), g["group"].get<int64_t>(), g["gpu_type"].get<std::string>(),
        g["replicas"].get<int64_t>(), g["tp"].get<int64_t>(), g["micro_batch"].get<int64_t>(),
        g["samples"].get<int64_t>(), g["microbatches"].get<int64_t>(), seconds(g, "forward_s"),
        seconds(g, "backward_input_s"), seconds(g, "backward_weight_s"), seconds(g, "p2p_s"),
        seconds(g, "pipeline_s"), seconds(g, "sync_s"), g["sync_slices"].get<int64_t>(),
        g["sync_rounds"].get<int64_t>(), format_gib(g["peak_memory_bytes"].get<double>()));
  return out;
}

std::string notes_text(const Prediction& p) {
  std::string out;
  for (const auto& note : p.notes) out += fmt::format("note: {}\n", note);
  return out;
}

struct Ranked {
  Strategy strategy;
  Prediction predicted;
};

std::vector<Ranked> ranked_of(const Json& list) {
  std::vector<Ranked> out;
  for (const Json& item : list)
    out.push_back({strategy_of(item), prediction_of(item["predicted"])});
  return out;
}

// The schedule, with its chunks per device where they are not its own count ("interleaved x4").
std::string schedule_text(const Strategy& s) {
  if (s.chunks <= 1 || s.chunks == pipeline::schedule_info(s.schedule).default_chunks)
    return s.schedule;
  return fmt::format("{} x{}", s.schedule, s.chunks);
}

// Context and expert widths and the recipe show where a row has them.
bool wide_table(const std::vector<Ranked>& rows) {
  bool wide = false;
  for (const auto& r : rows)
    wide |= r.strategy.cp > 1 || r.strategy.ep > 1 || r.strategy.expert_tp() != r.strategy.tp ||
            r.strategy.precision != Precision::kBf16;
  return wide;
}

std::string ranked_table(const std::vector<Ranked>& rows) {
  const bool wide = wide_table(rows);
  // The recompute column widens for module lists ("selective(mla_up_proj,mlp)").
  size_t recompute_width = 9;
  for (const auto& r : rows)
    recompute_width = std::max(recompute_width, r.strategy.recompute_label().size());
  std::string out =
      fmt::format("{:>4} {:>4} {:>3} {:>4} {:>4} {:<9} {:<{}} {:>4} {:>3} ", "rank", "dp", "tp",
                  "pp", "mb", "schedule", "recompute", recompute_width, "zero", "sp");
  if (wide) out += fmt::format("{:>3} {:>3} {:>3} {:<13} ", "cp", "ep", "etp", "precision");
  out += fmt::format("{:>10} {:>10} {:>6} {:>9}  {}\n", "iteration", "samples/s", "MFU", "peak mem",
                     "layers per stage");
  for (size_t i = 0; i < rows.size(); ++i) {
    const Strategy& s = rows[i].strategy;
    const Prediction& p = rows[i].predicted;
    double peak = 0;
    for (double b : p.peak_memory_bytes) peak = std::max(peak, b);
    out += fmt::format("{:>4} {:>4} {:>3} {:>4} {:>4} {:<9} {:<{}} {:>4} {:>3} ", i + 1, s.dp, s.tp,
                       s.pp, s.micro_batch, schedule_text(s), s.recompute_label(), recompute_width,
                       s.zero, s.sequence_parallel ? "yes" : "no");
    if (wide)
      out += fmt::format("{:>3} {:>3} {:>3} {:<13} ", s.cp, s.ep,
                         s.ep > 1 || s.etp > 0 ? fmt::format("{}", s.expert_tp()) : "-",
                         to_string(s.precision));
    out +=
        fmt::format("{:>10} {:>10.2f} {:>5.1f}% {:>9}  {}\n", format_seconds(p.iteration_s),
                    p.samples_per_s, 100 * p.mfu, format_gib(peak), stage_layers_summary(p.stages));
  }
  return out;
}

std::string none_fits_text(const Json& doc) {
  const bool stopped = doc.contains("stats") && doc["stats"].value("time_limit_reached", false);
  // Stopped by the time limit, the candidates not costed are not known to be infeasible: say so,
  // not that memory rules them all out.
  std::string out =
      stopped
          ? fmt::format(
                "no feasible strategy found before the time limit ({}): {} of {} candidates "
                "costed, none feasible; a longer --time-limit costs the rest.\n",
                format_seconds(doc["stats"]["time_limit_s"].get<double>()),
                doc["stats"]["evaluated"].get<int64_t>(), doc["stats"]["candidates"].get<int64_t>())
          : std::string("no feasible strategy.\n");
  if (doc.contains("min_static_bytes") && !stopped)
    out += fmt::format(
        "  weights, gradients and optimizer state alone need at least {} per GPU in every "
        "candidate (spread over all {} GPUs with the best ZeRO stage); the largest GPU has {}\n",
        format_gib(doc["min_static_bytes"].get<double>()), doc["cluster_gpus"].get<int64_t>(),
        format_gib(doc["static_limit_bytes"].get<double>()));
  for (const auto& near : ranked_of(doc["closest_infeasible"])) {
    const Strategy& s = near.strategy;
    out += fmt::format("  closest: dp {} tp {} pp {} mb {} {} recompute {} zero {}: {}\n", s.dp,
                       s.tp, s.pp, s.micro_batch, s.schedule, s.recompute_label(), s.zero,
                       near.predicted.reason);
  }
  return out;
}

std::string counts_text(const Json& stats) {
  const auto by_reason = [](const Json& counts) {
    std::string out;
    for (const auto& [k, v] : counts.items()) out += fmt::format(" {} {}", k, v.get<int64_t>());
    return out.empty() ? std::string(" none") : out;
  };
  std::string out = fmt::format(
      "\n{} candidates, {} costed ({} feasible) in {} ({:.0f} candidates/s)\npruned:{}\n"
      "infeasible:{}\n",
      stats["candidates"].get<int64_t>(), stats["evaluated"].get<int64_t>(),
      stats["feasible"].get<int64_t>(), format_seconds(stats["elapsed_s"].get<double>()),
      stats["candidates_per_s"].get<double>(), by_reason(stats["pruned_by_reason"]),
      by_reason(stats["infeasible_by_reason"]));
  if (stats["time_limit_reached"].get<bool>())
    out += fmt::format(
        "time limit reached ({}): the best of the {} candidates costed in time, not necessarily "
        "the best of the space\n",
        format_seconds(stats["time_limit_s"].get<double>()), stats["evaluated"].get<int64_t>());
  return out;
}

}  // namespace

std::string format_seconds(double s) {
  if (s >= 1) return fmt::format("{:.3f} s", s);
  if (s >= 1e-3) return fmt::format("{:.2f} ms", s * 1e3);
  return fmt::format("{:.1f} us", s * 1e6);
}

std::string format_gib(double bytes) { return fmt::format("{:.1f} GiB", bytes / (1ull << 30)); }

std::string breakdown_text(const Prediction& p) {
  std::string text;
  // The parts a strategy may not have show only where they take time (the JSON has them all).
  const auto optional = [](const std::string& name) {
    return name == "host_wait" || name == "host_sync" || name == "cp_comm" || name == "ep_comm";
  };
  for (const auto& [name, sec] : p.breakdown)
    if (!optional(name) || sec > 0) text += fmt::format("  {} {}", name, format_seconds(sec));
  return text;
}

std::string prediction_text(const Json& document) {
  const Strategy s = strategy_of(document["strategy"]);
  const Prediction p = prediction_of(document["predicted"]);
  std::string out = strategy_line(s);
  if (!p.feasible) out += fmt::format("INFEASIBLE ({}): {}\n", p.reason_code(), p.reason);
  if (p.iteration_s <= 0) return out;
  out += fmt::format(
      "iteration {}  |  {:.2f} samples/s  {:.0f} tokens/s  |  MFU {:.1f}%  |  bubble {:.1f}%\n",
      format_seconds(p.iteration_s), p.samples_per_s, p.tokens_per_s, 100 * p.mfu,
      100 * p.bubble_rate);
  out += fmt::format("breakdown:{}\n\n", breakdown_text(p));
  return out + stage_table(p) + groups_table(document["predicted"]) + notes_text(p);
}

std::string search_table_text(const Json& document) {
  const std::vector<Ranked> top = ranked_of(document["strategies"]);
  if (top.empty()) return none_fits_text(document);
  const Prediction& best = top.front().predicted;
  return ranked_table(top) +
         fmt::format("\nbest: {:.0f} tokens/s; breakdown:{}\n", best.tokens_per_s,
                     breakdown_text(best)) +
         notes_text(best);
}

std::string search_counts_text(const Json& document) { return counts_text(document["stats"]); }

std::string mixed_replicas_text(const Json& document) {
  if (!document.contains("mixed_replicas") || document["mixed_replicas"].empty()) return "";
  const Json& m = document["mixed_replicas"];
  const bool even = m.value("even_shares", false);
  const std::string costed = fmt::format(
      "{} predictions in {}{}", m["evaluated"].get<int64_t>(),
      format_seconds(m["elapsed_s"].get<double>()),
      even ? "; every replica the same samples at one micro-batch, as Sailor runs them" : "");
  if (!m.contains("strategy"))
    return fmt::format("\nmixed replicas: no feasible plan with replica groups ({})\n", costed);
  const Json& predicted = m["strategy"]["predicted"];
  const double uniform_s = m["best_uniform_iteration_s"].get<double>();
  const double mixed_s = predicted["iteration_s"].get<double>();
  std::string out = fmt::format(
      "\nmixed replicas: best {} ({:.2f} samples/s, pp {}) vs best uniform {}: {:+.1f}% "
      "throughput ({})\n",
      format_seconds(mixed_s), predicted["samples_per_s"].get<double>(),
      m["strategy"]["pp"].get<int64_t>(), format_seconds(uniform_s),
      100 * m["gain_over_uniform"].get<double>(), costed);
  if (m.contains("global_batch_run"))
    out += fmt::format(
        "  it runs {} samples a step, the batch rounded down to a multiple of micro-batch x "
        "replicas as Sailor's runtime does (its throughput compared per sample)\n",
        m["global_batch_run"].get<int64_t>());
  for (const Json& g : predicted["replica_groups"])
    out += fmt::format(
        "  stage {} group {}: {} x {} at tp {}, micro-batch {}, {} samples ({} micro-batches), "
        "pipeline {}\n",
        g["stage"].get<int64_t>(), g["group"].get<int64_t>(), g["replicas"].get<int64_t>(),
        g["gpu_type"].get<std::string>(), g["tp"].get<int64_t>(), g["micro_batch"].get<int64_t>(),
        g["samples"].get<int64_t>(), g["microbatches"].get<int64_t>(),
        format_seconds(g["pipeline_s"].get<double>()));
  return out;
}

}  // namespace hetplan
