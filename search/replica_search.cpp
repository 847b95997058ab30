#include "search/replica_search.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <numeric>
#include <string>

#include "search/replicas.h"

namespace hetplan {
namespace {

// Splits of a mixed plan's batch tried: by the types' own speeds, then by its pipelines' speeds.
constexpr int kSplitRefinements = 4;

// One GPU type's devices in cluster order and the GPUs of its node.
struct TypeDevices {
  std::string name;
  int64_t group = 0;  // a node group of this type (for its layer costs)
  int64_t node_gpus = 0;
  std::vector<int64_t> devices;
};

std::vector<TypeDevices> devices_by_type(const Evaluator& ev) {
  std::map<std::string, size_t> index;
  std::vector<TypeDevices> out;
  for (const Device& d : ev.devices()) {
    const NodeSpec& node = ev.cluster().groups[d.group].node;
    auto [it, fresh] = index.emplace(node.gpu.name, out.size());
    if (fresh) out.push_back({node.gpu.name, d.group, node.gpus, {}});
    out[it->second].devices.push_back(d.index);
  }
  return out;
}

// Contiguous layer ranges of `pp` stages minimising the slowest one's summed time (a small
// dynamic program over the layers).
std::vector<std::pair<int64_t, int64_t>> balanced_ranges(const std::vector<LayerCost>& costs,
                                                         int64_t pp) {
  const auto L = static_cast<int64_t>(costs.size());
  std::vector<double> prefix(L + 1, 0);
  for (int64_t i = 0; i < L; ++i) prefix[i + 1] = prefix[i] + costs[i].total_s();
  const double inf = std::numeric_limits<double>::infinity();
  // best[k][i]: the slowest stage of the first i layers in k stages; cut[k][i]: where the last
  // stage starts.
  std::vector<std::vector<double>> best(pp + 1, std::vector<double>(L + 1, inf));
  std::vector<std::vector<int64_t>> cut(pp + 1, std::vector<int64_t>(L + 1, 0));
  best[0][0] = 0;
  for (int64_t k = 1; k <= pp; ++k)
    for (int64_t i = k; i <= L; ++i)
      for (int64_t j = k - 1; j < i; ++j) {
        const double slowest = std::max(best[k - 1][j], prefix[i] - prefix[j]);
        if (slowest < best[k][i]) best[k][i] = slowest, cut[k][i] = j;
      }
  std::vector<std::pair<int64_t, int64_t>> ranges(pp);
  for (int64_t k = pp, i = L; k >= 1; --k) {
    ranges[k - 1] = {cut[k][i], i - 1};
    i = cut[k][i];
  }
  return ranges;
}

// A type's pipelines at one width and micro-batch: replicas, and its devices of each stage.
struct TypeShape {
  size_t type = 0;
  int64_t tp = 1, micro_batch = 1, replicas = 0;
  Recompute recompute = Recompute::kNone;
  double samples_per_s = 0;
};

std::vector<int64_t> stage_devices(const TypeDevices& t, const TypeShape& shape, int64_t k) {
  const int64_t n = shape.replicas * shape.tp;
  return {t.devices.begin() + k * n, t.devices.begin() + (k + 1) * n};
}

// One pipeline group of a mixed plan: per stage its GPU type, devices and tensor width (a type's
// own pipelines keep one type; a chain changes type from stage to stage, as Sailor's V100 stage 0
// feeding A100s does), with the micro-batch, replicas, recomputation and speed of the whole.
struct GroupPlan {
  std::vector<std::string> type;
  std::vector<std::vector<int64_t>> devices;
  std::vector<int64_t> tp;
  int64_t micro_batch = 1, replicas = 0;
  Recompute recompute = Recompute::kNone;
  double samples_per_s = 0;
};

GroupPlan type_group(const TypeDevices& t, const TypeShape& shape, int64_t pp) {
  GroupPlan g;
  for (int64_t k = 0; k < pp; ++k) {
    g.type.push_back(t.name);
    g.devices.push_back(stage_devices(t, shape, k));
    g.tp.push_back(shape.tp);
  }
  g.micro_batch = shape.micro_batch;
  g.replicas = shape.replicas;
  g.recompute = shape.recompute;
  g.samples_per_s = shape.samples_per_s;
  return g;
}

// The type alone as a uniform strategy at this shape, with about its share of the global batch by
// devices: its samples per second.
Strategy type_alone(const ReplicaSearchOptions& o, const TypeDevices& t, const TypeShape& shape,
                    const std::vector<std::pair<int64_t, int64_t>>& ranges, double share) {
  Strategy s = o.base;
  s.dp = shape.replicas;
  s.tp = shape.tp;
  s.pp = static_cast<int64_t>(ranges.size());
  s.micro_batch = shape.micro_batch;
  s.recompute = shape.recompute;
  const auto per_step = shape.replicas * shape.micro_batch;
  const auto m = std::max<int64_t>(
      1, static_cast<int64_t>(share * static_cast<double>(o.global_batch) / per_step));
  s.global_batch = m * per_step;
  s.stages.clear();
  for (int64_t k = 0; k < s.pp; ++k)
    s.stages.push_back({ranges[k].first, ranges[k].second, t.name, stage_devices(t, shape, k), {}});
  return s;
}

// The recomputations a shape tries: the base's, then more of it where that is what lets it fit.
std::vector<Recompute> recomputations(const ReplicaSearchOptions& o) {
  std::vector<Recompute> out = {o.base.recompute};
  for (Recompute r : {Recompute::kSelective, Recompute::kFull})
    if (r > o.base.recompute) out.push_back(r);
  return out;
}

// Each type's shapes that fit, one per tensor width and micro-batch: the fastest of its
// recomputations (the base's, then more of it where that is what lets it fit).
std::vector<std::vector<TypeShape>> fitting_shapes(
    const Evaluator& ev, const ReplicaSearchOptions& o, const std::vector<TypeDevices>& types,
    const std::vector<std::pair<int64_t, int64_t>>& ranges, int64_t& evaluated) {
  const auto pp = static_cast<int64_t>(ranges.size());
  int64_t all = 0;
  for (const auto& t : types) all += static_cast<int64_t>(t.devices.size());
  std::vector<std::vector<TypeShape>> out(types.size());
  const std::vector<Recompute> recompute = recomputations(o);
  for (size_t i = 0; i < types.size(); ++i)
    for (int64_t tp : o.tensor_widths)
      for (int64_t mb : o.micro_batches) {
        std::optional<TypeShape> best;
        for (Recompute rc : recompute) {
          TypeShape shape{i, tp, mb, static_cast<int64_t>(types[i].devices.size()) / (pp * tp), rc};
          if (tp > types[i].node_gpus || shape.replicas < 1) continue;
          const double share = static_cast<double>(types[i].devices.size()) / all;
          const Strategy s = type_alone(o, types[i], shape, ranges, share);
          if (ev.broken_rule(s)) continue;
          ++evaluated;
          const Prediction p = ev.predict(s);
          if (!p.feasible) continue;
          shape.samples_per_s = p.samples_per_s;
          if (!best || shape.samples_per_s > best->samples_per_s) best = shape;
        }
        if (best) out[i].push_back(*best);
      }
  return out;
}

// Each type's fastest shape (none when no shape of it fits).
std::vector<std::optional<TypeShape>> fastest_shapes(
    const std::vector<std::vector<TypeShape>>& fitting) {
  std::vector<std::optional<TypeShape>> out(fitting.size());
  for (size_t i = 0; i < fitting.size(); ++i)
    for (const TypeShape& shape : fitting[i])
      if (!out[i] || shape.samples_per_s > out[i]->samples_per_s) out[i] = shape;
  return out;
}

// Samples of each chosen type: in proportion to their speeds in whole micro-batches, or with
// `even` the same for every replica, in whole micro-batches. Where micro-batch x replicas does not
// divide the batch, even shares run what Sailor's runtime runs: the batch rounded down to a
// multiple of it (sailor/Controller/trace_based/trace_controller.py at cf2c8e3, Varuna's rule:
// global_batch_size // (micro_batch_size x data_parallel_size) x the same); none where not one
// micro-batch each is left.
std::vector<int64_t> type_samples(const std::vector<GroupPlan>& chosen, int64_t global_batch,
                                  bool even) {
  if (even) {
    int64_t replicas = 0;
    for (const GroupPlan& c : chosen) replicas += c.replicas;
    const int64_t mb = chosen[0].micro_batch;
    const int64_t per_replica = global_batch / (replicas * mb) * mb;
    if (per_replica == 0) return {};
    std::vector<int64_t> samples;
    for (const GroupPlan& c : chosen) samples.push_back(c.replicas * per_replica);
    return samples;
  }
  std::vector<double> speeds;
  std::vector<int64_t> granules;
  for (const GroupPlan& c : chosen) {
    speeds.push_back(c.samples_per_s);
    granules.push_back(c.micro_batch);
  }
  return split_samples(speeds, granules, global_batch);
}

// The strategy with the pipeline groups of `chosen`, the batch split by type_samples; none when
// the split leaves a replica without a micro-batch.
std::optional<Strategy> mixed_strategy(const ReplicaSearchOptions& o,
                                       const std::vector<GroupPlan>& chosen,
                                       const std::vector<std::pair<int64_t, int64_t>>& ranges) {
  const std::vector<int64_t> samples = type_samples(chosen, o.global_batch, o.even_shares);
  if (samples.empty()) return std::nullopt;
  Strategy s = o.base;
  s.pp = static_cast<int64_t>(ranges.size());
  s.global_batch = std::accumulate(samples.begin(), samples.end(), int64_t{0});
  s.dp = 0;
  for (size_t g = 0; g < chosen.size(); ++g) {
    if (samples[g] < chosen[g].replicas * chosen[g].micro_batch) return std::nullopt;
    s.dp += chosen[g].replicas;
  }
  s.tp = chosen[0].tp[0];
  s.micro_batch = chosen[0].micro_batch;
  // One recomputation for the strategy: the most any chosen group needs.
  for (const GroupPlan& c : chosen) s.recompute = keeps_less(s.recompute, c.recompute);
  s.stages.clear();
  for (int64_t k = 0; k < s.pp; ++k) {
    StageSpec st{ranges[k].first, ranges[k].second, "", {}, {}};
    for (size_t g = 0; g < chosen.size(); ++g) {
      const GroupPlan& c = chosen[g];
      st.replicas.push_back({c.type[k], c.devices[k], c.tp[k], c.micro_batch, samples[g]});
    }
    s.stages.push_back(std::move(st));
  }
  return s;
}

// One mixed plan of `chosen` costed (the split by the types' speeds alone, then again by the
// pipelines' own speeds in the mixed plan, their micro-batch counts changing their bubbles, while
// that helps; even shares do not move), the best kept in `out`.
void try_mixed(const Evaluator& ev, const ReplicaSearchOptions& o, std::vector<GroupPlan> chosen,
               const std::vector<std::pair<int64_t, int64_t>>& ranges, ReplicaSearchResult& out) {
  const int refinements = o.even_shares ? 1 : kSplitRefinements;
  for (int refine = 0; refine < refinements; ++refine) {
    const std::optional<Strategy> s = mixed_strategy(o, chosen, ranges);
    if (!s || ev.broken_rule(*s)) break;
    ++out.evaluated;
    Prediction p = ev.predict(*s);
    if (!p.feasible) break;
    ++out.feasible;
    for (size_t g = 0; g < chosen.size(); ++g)
      chosen[g].samples_per_s =
          static_cast<double>(p.groups[g].spec.samples) / p.groups[g].pipeline_s;
    // Plans may run fewer samples than asked (even shares rounded down): compared per sample.
    const bool better = !out.best || p.samples_per_s > out.best->predicted.samples_per_s;
    if (better) out.best = RankedStrategy{*s, std::move(p)};
    if (!better && refine > 0) break;
  }
}

// Every subset of two types or more of which each has a shape that fits (one type is a uniform
// plan). Proportional shares: each type at its fastest shape. Even shares: every combination of
// the types' shapes, since a type's own speed no longer sets its share (a slow type's wider
// replicas, fewer of them, each take the same samples as a fast type's).
void try_type_subsets(const Evaluator& ev, const ReplicaSearchOptions& o,
                      const std::vector<TypeDevices>& types,
                      const std::vector<std::vector<TypeShape>>& fitting,
                      const std::vector<std::pair<int64_t, int64_t>>& ranges,
                      ReplicaSearchResult& out) {
  const std::vector<std::optional<TypeShape>> fastest = fastest_shapes(fitting);
  for (uint32_t mask = 1; mask < (1u << types.size()); ++mask) {
    std::vector<size_t> members;
    for (size_t i = 0; i < types.size(); ++i)
      if ((mask >> i & 1u) && !fitting[i].empty()) members.push_back(i);
    if (members.size() < 2 || members.size() != static_cast<size_t>(__builtin_popcount(mask)))
      continue;
    const auto pp = static_cast<int64_t>(ranges.size());
    if (!o.even_shares) {
      std::vector<GroupPlan> chosen;
      for (size_t i : members) chosen.push_back(type_group(types[i], *fastest[i], pp));
      try_mixed(ev, o, std::move(chosen), ranges, out);
      continue;
    }
    std::vector<size_t> pick(members.size(), 0);  // an odometer over the members' shapes
    for (;;) {
      std::vector<GroupPlan> chosen;
      for (size_t m = 0; m < members.size(); ++m)
        chosen.push_back(type_group(types[members[m]], fitting[members[m]][pick[m]], pp));
      try_mixed(ev, o, std::move(chosen), ranges, out);
      size_t m = 0;
      while (m < members.size() && ++pick[m] == fitting[members[m]].size()) pick[m++] = 0;
      if (m == members.size()) break;
    }
  }
}

// Chains: pipelines whose first c stages run on one type and the rest on another, at a tensor
// width of each, as Sailor's plan feeds a V100 stage 0 at tp 4 into A100s at tp 1. Tried up to
// this depth (every split c of it).
constexpr int64_t kChainMaxDepth = 4;

// The chain a -> b over `pp` stages split at c (stages 0..c-1 on a at width ta, the rest on b at
// tb): as many replicas as the scarcer side holds, each stage's devices from the front of its
// type's list; none where a width leaves its node or no replica fits.
std::optional<GroupPlan> chain_group(const TypeDevices& a, const TypeDevices& b, int64_t pp,
                                     int64_t c, int64_t ta, int64_t tb) {
  if (ta > a.node_gpus || tb > b.node_gpus) return std::nullopt;
  const auto on_a = static_cast<int64_t>(a.devices.size()) / (c * ta);
  const auto on_b = static_cast<int64_t>(b.devices.size()) / ((pp - c) * tb);
  const int64_t replicas = std::min(on_a, on_b);
  if (replicas < 1) return std::nullopt;
  GroupPlan g;
  for (int64_t k = 0; k < pp; ++k) {
    const bool first = k < c;
    const TypeDevices& t = first ? a : b;
    const int64_t tp = first ? ta : tb, slot = first ? k : k - c, n = replicas * tp;
    g.type.push_back(t.name);
    g.devices.emplace_back(t.devices.begin() + slot * n, t.devices.begin() + (slot + 1) * n);
    g.tp.push_back(tp);
  }
  g.replicas = replicas;
  return g;
}

// The chain's samples per second: it alone as a strategy with replicas, with about its share of
// the global batch by devices (0 where it breaks a rule or does not fit).
double chain_speed(const Evaluator& ev, const ReplicaSearchOptions& o, const GroupPlan& g,
                   const std::vector<std::pair<int64_t, int64_t>>& ranges, double share,
                   int64_t& evaluated) {
  ReplicaSearchOptions alone = o;
  alone.even_shares = false;
  const int64_t per_step = g.replicas * g.micro_batch;
  alone.global_batch =
      std::max<int64_t>(1, static_cast<int64_t>(share * static_cast<double>(o.global_batch) /
                                                static_cast<double>(per_step))) *
      per_step;
  GroupPlan one = g;
  one.samples_per_s = 1;  // any speed: a single group takes the whole split
  const std::optional<Strategy> s = mixed_strategy(alone, {one}, ranges);
  if (!s || ev.broken_rule(*s)) return 0;
  ++evaluated;
  const Prediction p = ev.predict(*s);
  return p.feasible ? p.samples_per_s : 0;
}

// The fastest chain a -> b split at c over its widths, micro-batches and recomputations.
std::optional<GroupPlan> fastest_chain(const Evaluator& ev, const ReplicaSearchOptions& o,
                                       const TypeDevices& a, const TypeDevices& b, int64_t c,
                                       const std::vector<std::pair<int64_t, int64_t>>& ranges,
                                       double all_devices, int64_t& evaluated) {
  const auto pp = static_cast<int64_t>(ranges.size());
  std::optional<GroupPlan> best;
  for (int64_t ta : o.tensor_widths)
    for (int64_t tb : o.tensor_widths) {
      std::optional<GroupPlan> g = chain_group(a, b, pp, c, ta, tb);
      if (!g) continue;
      const double used = static_cast<double>(g->replicas * (c * ta + (pp - c) * tb));
      for (int64_t mb : o.micro_batches)
        for (Recompute rc : recomputations(o)) {
          g->micro_batch = mb;
          g->recompute = rc;
          const double speed = chain_speed(ev, o, *g, ranges, used / all_devices, evaluated);
          if (speed <= 0) continue;
          g->samples_per_s = speed;
          if (!best || speed > best->samples_per_s) best = *g;
          break;  // more recomputation is only for what does not fit
        }
    }
  return best;
}

// The fastest of a type's shapes (over all its devices, `fitting`) on the `left` devices a chain
// leaves of it: replicas and speed scaled to what fits there.
std::optional<GroupPlan> leftover_group(const TypeDevices& t, int64_t used,
                                        const std::vector<TypeShape>& fitting, int64_t pp) {
  TypeDevices left = t;
  left.devices.erase(left.devices.begin(), left.devices.begin() + used);
  std::optional<TypeShape> best;
  for (const TypeShape& shape : fitting) {
    TypeShape scaled = shape;
    scaled.replicas = static_cast<int64_t>(left.devices.size()) / (pp * shape.tp);
    if (scaled.replicas < 1) continue;
    scaled.samples_per_s *= static_cast<double>(scaled.replicas) / shape.replicas;
    if (!best || scaled.samples_per_s > best->samples_per_s) best = scaled;
  }
  if (!best) return std::nullopt;
  return type_group(left, *best, pp);
}

// Plans with one chain: for every ordered pair of types and split, the fastest chain, the
// devices it leaves of the two types as their own pipelines, and every other type whole.
void try_chains(const Evaluator& ev, const ReplicaSearchOptions& o,
                const std::vector<TypeDevices>& types,
                const std::vector<std::vector<TypeShape>>& fitting,
                const std::vector<std::pair<int64_t, int64_t>>& ranges, ReplicaSearchResult& out) {
  const auto pp = static_cast<int64_t>(ranges.size());
  if (!o.chains || pp < 2 || pp > kChainMaxDepth || types.size() < 2) return;
  double all = 0;
  for (const auto& t : types) all += static_cast<double>(t.devices.size());
  const std::vector<std::optional<TypeShape>> fastest = fastest_shapes(fitting);
  for (size_t a = 0; a < types.size(); ++a)
    for (size_t b = 0; b < types.size(); ++b) {
      if (a == b) continue;
      for (int64_t c = 1; c < pp; ++c) {
        const std::optional<GroupPlan> chain =
            fastest_chain(ev, o, types[a], types[b], c, ranges, all, out.evaluated);
        if (!chain) continue;
        std::vector<GroupPlan> groups = {*chain};
        const int64_t used_a = c * chain->replicas * chain->tp.front();
        const int64_t used_b = (pp - c) * chain->replicas * chain->tp.back();
        if (auto g = leftover_group(types[a], used_a, fitting[a], pp)) groups.push_back(*g);
        if (auto g = leftover_group(types[b], used_b, fitting[b], pp)) groups.push_back(*g);
        for (size_t i = 0; i < types.size(); ++i)
          if (i != a && i != b && fastest[i])
            groups.push_back(type_group(types[i], *fastest[i], pp));
        try_mixed(ev, o, std::move(groups), ranges, out);
      }
    }
}

}  // namespace

ReplicaSearchResult search_replicas(const Evaluator& ev, const ReplicaSearchOptions& o) {
  const auto started = std::chrono::steady_clock::now();
  ReplicaSearchResult out;
  const std::vector<TypeDevices> types = devices_by_type(ev);
  const auto layers = static_cast<int64_t>(ev.model().layers.size());
  // Layer ranges balanced on the type with the most devices at tp 1 and micro-batch 1.
  size_t widest = 0;
  for (size_t i = 1; i < types.size(); ++i)
    if (types[i].devices.size() > types[widest].devices.size()) widest = i;
  Strategy probe = o.base;
  probe.global_batch = o.global_batch;
  probe.micro_batch = 1;
  probe.tp = 1;
  probe.dp = o.global_batch;
  const std::vector<LayerCost>& costs = ev.layer_costs(types[widest].group, 1, probe);
  for (int64_t pp : o.pipeline_depths) {
    if (pp > layers) continue;
    const auto ranges = balanced_ranges(costs, pp);
    if (!o.even_shares) {
      const auto fitting = fitting_shapes(ev, o, types, ranges, out.evaluated);
      try_type_subsets(ev, o, types, fitting, ranges, out);
      try_chains(ev, o, types, fitting, ranges, out);
      continue;
    }
    // Even shares: one micro-batch for every type.
    for (int64_t mb : o.micro_batches) {
      ReplicaSearchOptions one = o;
      one.micro_batches = {mb};
      const auto fitting = fitting_shapes(ev, one, types, ranges, out.evaluated);
      try_type_subsets(ev, one, types, fitting, ranges, out);
      try_chains(ev, one, types, fitting, ranges, out);
    }
  }
  out.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  return out;
}

Strategy replica_base(const Strategy& best) {
  Strategy s = best;
  if (s.chunks_per_device() != 1) s.schedule = "1f1b", s.chunks = 1;
  s.zero = 0;
  s.cp = 1;
  s.ep = 1;
  s.etp = 0;
  s.sequence_parallel = false;
  s.tp_comm_overlap = false;
  return s;
}

Json mixed_replicas_json(const Evaluator& ev, int64_t global_batch, const SearchResult& r,
                         bool even_shares) {
  Json out = Json::object();
  if (r.top.empty()) return out;
  ReplicaSearchOptions ro;
  ro.global_batch = global_batch;
  ro.base = replica_base(r.top.front().strategy);
  ro.even_shares = even_shares;
  const ReplicaSearchResult m = search_replicas(ev, ro);
  const double uniform_s = r.top.front().predicted.iteration_s;
  const double uniform_samples_per_s = r.top.front().predicted.samples_per_s;
  out["evaluated"] = m.evaluated;
  out["feasible"] = m.feasible;
  out["elapsed_s"] = m.elapsed_s;
  out["best_uniform_iteration_s"] = uniform_s;
  out["even_shares"] = even_shares;
  if (m.best) {
    Json strategy = to_json(m.best->strategy);
    strategy["predicted"] = to_json(m.best->predicted);
    out["strategy"] = strategy;
    // Per sample: an even-share plan may run its batch rounded down (type_samples).
    out["gain_over_uniform"] = m.best->predicted.samples_per_s / uniform_samples_per_s - 1;
    if (m.best->strategy.global_batch != global_batch)
      out["global_batch_run"] = m.best->strategy.global_batch;
  }
  return out;
}

}  // namespace hetplan
