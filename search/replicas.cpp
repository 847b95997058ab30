#include "search/replicas.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include <fmt/format.h>

#include "search/pipeline/schedule.h"

namespace hetplan {

int64_t ReplicaGroup::microbatches() const {
  const int64_t n = replicas();
  if (n <= 0 || micro_batch <= 0 || samples % micro_batch != 0 || samples / micro_batch < n)
    return 0;
  return (samples / micro_batch + n - 1) / n;  // the busiest replica's
}

namespace {

ReplicaProblem replica_problem_at(int64_t stage, int64_t group, std::string key,
                                  std::string reason) {
  return {std::move(reason), std::move(key), stage, group};
}

// A stage's own keys next to its replicas, and each group's shape.
std::optional<ReplicaProblem> replica_stage_problem(const StageSpec& st, int64_t k,
                                                    int64_t global_batch) {
  if (st.replicas.empty())
    return replica_problem_at(k, -1, "replicas", "every stage lists replicas when one does");
  if (!st.devices.empty() || !st.gpu_type.empty())
    return replica_problem_at(
        k, -1, "devices",
        "a stage with replicas lists its GPU type and devices per group, not for the stage");
  if (st.first_layer < 0)
    return replica_problem_at(k, -1, "layers",
                              "a stage with replicas gives its layers ([first, last])");
  int64_t samples = 0;
  for (size_t g = 0; g < st.replicas.size(); ++g) {
    const ReplicaGroup& r = st.replicas[g];
    const auto gi = static_cast<int64_t>(g);
    const auto n = static_cast<int64_t>(r.devices.size());
    if (n == 0 || n % r.tp != 0)
      return replica_problem_at(
          k, gi, "devices",
          fmt::format("expected replicas x tp devices (a multiple of tp {}), found {}", r.tp, n));
    if (r.microbatches() == 0)
      return replica_problem_at(
          k, gi, "samples",
          fmt::format("expected whole micro-batches of {}, at least one per replica ({} "
                      "replicas), found {} samples",
                      r.micro_batch, r.replicas(), r.samples));
    samples += r.samples;
  }
  if (samples != global_batch)
    return replica_problem_at(
        k, -1, "replicas",
        fmt::format("the groups' samples add up to {}, expected global_batch {}", samples,
                    global_batch));
  return std::nullopt;
}

// Group g of every stage is pipeline g: the same count of groups, and per group the same samples,
// micro-batch and replicas as in stage 0.
std::optional<ReplicaProblem> replica_pipeline_problem(const Strategy& s) {
  const auto& first = s.stages.front().replicas;
  for (size_t k = 1; k < s.stages.size(); ++k) {
    const auto ki = static_cast<int64_t>(k);
    const auto& groups = s.stages[k].replicas;
    if (groups.size() != first.size())
      return replica_problem_at(
          ki, -1, "replicas",
          fmt::format("expected {} groups, as stage 0 (group g of every stage forms "
                      "pipeline g), found {}",
                      first.size(), groups.size()));
    for (size_t g = 0; g < groups.size(); ++g) {
      const ReplicaGroup &a = first[g], &b = groups[g];
      const auto gi = static_cast<int64_t>(g);
      const auto differs = [&](const char* key, int64_t want, int64_t found) {
        return replica_problem_at(
            ki, gi, key,
            fmt::format("expected {} {}, as group {} of stage 0 (the same pipeline), "
                        "found {}",
                        want, key, g, found));
      };
      if (b.samples != a.samples) return differs("samples", a.samples, b.samples);
      if (b.micro_batch != a.micro_batch)
        return differs("micro_batch", a.micro_batch, b.micro_batch);
      if (b.replicas() != a.replicas())
        return replica_problem_at(
            ki, gi, "devices",
            fmt::format("expected {} replicas (devices / tp), as group {} of stage 0 (the "
                        "same pipeline), found {}",
                        a.replicas(), g, b.replicas()));
    }
  }
  return std::nullopt;
}

// The strategy's own dp, tp and micro_batch: the replicas per stage and the first group's.
std::optional<ReplicaProblem> replica_top_level_problem(const Strategy& s) {
  int64_t replicas = 0;
  for (const ReplicaGroup& r : s.stages.front().replicas) replicas += r.replicas();
  if (s.dp != replicas)
    return replica_problem_at(
        -1, -1, "dp",
        fmt::format("with replicas, dp is the replicas of a stage: expected {}, found {}", replicas,
                    s.dp));
  const ReplicaGroup& first = s.stages.front().replicas.front();
  if (s.tp != first.tp)
    return replica_problem_at(
        -1, -1, "tp",
        fmt::format("with replicas, tp is stage 0 group 0's: expected {}, found {}", first.tp,
                    s.tp));
  if (s.micro_batch != first.micro_batch)
    return replica_problem_at(
        -1, -1, "micro_batch",
        fmt::format("with replicas, micro_batch is stage 0 group 0's: expected {}, found {}",
                    first.micro_batch, s.micro_batch));
  return std::nullopt;
}

std::optional<ReplicaProblem> replica_repeated_device(const Strategy& s) {
  std::map<int64_t, std::pair<size_t, size_t>> where;  // device: stage, group
  for (size_t k = 0; k < s.stages.size(); ++k)
    for (size_t g = 0; g < s.stages[k].replicas.size(); ++g)
      for (int64_t d : s.stages[k].replicas[g].devices) {
        const auto [it, fresh] = where.emplace(d, std::make_pair(k, g));
        if (!fresh)
          return replica_problem_at(
              static_cast<int64_t>(k), static_cast<int64_t>(g), "devices",
              fmt::format("device {} is listed twice (also in stage {} group {})", d,
                          it->second.first, it->second.second));
      }
  return std::nullopt;
}

}  // namespace

std::optional<ReplicaProblem> replicas_problem(const Strategy& s) {
  if (!s.has_replicas()) return std::nullopt;
  if (static_cast<int64_t>(s.stages.size()) != s.pp)
    return replica_problem_at(
        -1, -1, "stages",
        fmt::format("with replicas, expected one stage per pipeline rank: pp = {}, found {}", s.pp,
                    s.stages.size()));
  for (size_t k = 0; k < s.stages.size(); ++k)
    if (auto p = replica_stage_problem(s.stages[k], static_cast<int64_t>(k), s.global_batch))
      return p;
  if (auto p = replica_pipeline_problem(s)) return p;
  if (auto p = replica_top_level_problem(s)) return p;
  return replica_repeated_device(s);
}

std::string replicas_limit(const Strategy& s) {
  const auto no = [](const char* what) {
    return fmt::format("replica groups run {} in this version (docs/formats.md, \"replicas\")",
                       what);
  };
  if (s.cp != 1) return no("without context parallelism (cp 1)");
  if (s.ep != 1) return no("without expert parallelism (ep 1)");
  if (s.zero != 0) return no("with plain data parallelism (zero 0)");
  if (s.chunks_per_device() != 1)
    return no("one-chunk schedules (gpipe, 1f1b, zb-h1, zb-h2), not virtual stages");
  if (s.sequence_parallel) return no("without sequence parallelism");
  return "";
}

size_t replica_pipelines(const Strategy& s) {
  return s.has_replicas() ? s.stages.front().replicas.size() : 0;
}

Strategy group_strategy(const Strategy& s, size_t k, size_t g) {
  const ReplicaGroup& r = s.stages[k].replicas[g];
  Strategy v = s;
  v.tp = r.tp;
  v.micro_batch = r.micro_batch;
  v.dp = r.replicas();
  // The busiest replica's micro-batches on every replica (the group's time; Strategy's batch
  // rule then holds).
  v.global_batch = r.microbatches() * r.replicas() * r.micro_batch;
  for (StageSpec& st : v.stages) {
    st.replicas.clear();
    st.devices.clear();
    st.gpu_type.clear();
  }
  return v;
}

std::vector<int64_t> split_samples(const std::vector<double>& samples_per_s,
                                   const std::vector<int64_t>& granule, int64_t total) {
  const size_t n = samples_per_s.size();
  const double speed = std::accumulate(samples_per_s.begin(), samples_per_s.end(), 0.0);
  std::vector<int64_t> share(n, 0);
  int64_t left = total;
  // Whole granules below each group's proportional share (at least one), then one granule at a
  // time to the group that would finish it soonest.
  for (size_t g = 0; g < n; ++g) {
    const double ideal = static_cast<double>(total) * samples_per_s[g] / speed;
    share[g] = granule[g] * std::max<int64_t>(1, static_cast<int64_t>(ideal / granule[g]));
    left -= share[g];
  }
  if (left < 0) return {};
  while (left > 0) {
    size_t best = n;
    double best_s = 0;
    for (size_t g = 0; g < n; ++g) {
      if (granule[g] > left) continue;
      const double finish_s = static_cast<double>(share[g] + granule[g]) / samples_per_s[g];
      if (best == n || finish_s < best_s) best = g, best_s = finish_s;
    }
    if (best == n) return {};
    share[best] += granule[best];
    left -= granule[best];
  }
  return share;
}

}  // namespace hetplan
