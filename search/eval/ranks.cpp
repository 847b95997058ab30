// Step 3 of a prediction: each pipeline rank's GPU, compute dtype, usable memory and layer costs.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// One node kind among a rank's devices, with the layer costs of a tensor-parallel group of it.
struct Kind {
  int64_t group = 0;  // index into the cluster's groups
  const std::vector<LayerCost>* costs = nullptr;
};

double total_s(const std::vector<LayerCost>& costs) {
  double t = 0;
  for (const auto& c : costs) t += c.total_s();
  return t;
}

// Each node kind on the rank's devices, with a tensor-parallel group of it (tp devices in a row).
std::vector<Kind> rank_kinds(const Evaluator& ev, const Strategy& s,
                             const std::vector<int64_t>& group) {
  std::vector<Kind> kinds;
  for (size_t first = 0; first < group.size(); first += static_cast<size_t>(s.tp)) {
    const int64_t kind = ev.devices()[group[first]].group;
    if (std::any_of(kinds.begin(), kinds.end(), [&](const Kind& k) { return k.group == kind; }))
      continue;
    const std::vector<int64_t> tp_devices(group.begin() + first, group.begin() + first + s.tp);
    const CommGroup tp = make_comm_group(ev.cluster(), ev.devices(), tp_devices);
    kinds.push_back({kind, &ev.layer_costs(kind, tp.nodes, s)});
  }
  return kinds;
}

// Per layer and pass, the slowest kind's time.
std::vector<LayerCost> slowest_of(const std::vector<Kind>& kinds, size_t slowest) {
  std::vector<LayerCost> mixed = *kinds[slowest].costs;
  for (const Kind& k : kinds)
    for (size_t i = 0; i < k.costs->size(); ++i) {
      LayerTimes& t = mixed[i].times;
      const LayerTimes& o = (*k.costs)[i].times;
      for (int p = 0; p < kNumPasses; ++p) {
        t.pass_s[p] = std::max(t.pass_s[p], o.pass_s[p]);
        t.tp_comm_s[p] = std::max(t.tp_comm_s[p], o.tp_comm_s[p]);
        for (int c = 0; c < kNumCommScopes; ++c)
          t.comm_s[c][p] = std::max(t.comm_s[c][p], o.comm_s[c][p]);
      }
      t.recompute_s = std::max(t.recompute_s, o.recompute_s);
    }
  return mixed;
}

// What the rank's GPUs do differently from what was asked: a dtype they lack, whole-layer timings
// that corrected the ops (one note per correction, formatted once: this runs for every candidate
// of a search).
void note_kinds(const Evaluator& ev, const std::vector<Kind>& kinds, Notes& notes) {
  const Dtype wanted = ev.model().dtype;
  for (const Kind& k : kinds) {
    const GpuSpec& g = ev.cluster().groups[k.group].node.gpu;
    const Dtype computed = ev.cost().compute_dtype(g, wanted);
    if (computed != wanted)
      notes.add(fmt::format("{} runs as {} on {}", to_string(wanted), to_string(computed), g.name));
    std::vector<const LayerCorrection*> used;
    for (const LayerCost& c : *k.costs) {
      const LayerCorrection* corr = c.times.correction;
      if (corr && std::find(used.begin(), used.end(), corr) == used.end()) used.push_back(corr);
    }
    for (const LayerCorrection* corr : used)
      notes.add(fmt::format("{} on {}: whole-layer timings ({}) correct its ops, {}",
                            describe(corr->key), g.name, corr->source, corr->model_summary()));
  }
}

Rank resolve_rank(const Evaluator& ev, const Strategy& s, int64_t d,
                  const std::vector<int64_t>& group, Notes& notes) {
  const ClusterSpec& cluster = ev.cluster();
  const std::vector<Kind> kinds = rank_kinds(ev, s, group);
  auto gpu_of = [&](const Kind& k) -> const GpuSpec& { return cluster.groups[k.group].node.gpu; };
  size_t slowest = 0, smallest = 0;
  for (size_t k = 1; k < kinds.size(); ++k) {
    if (total_s(*kinds[k].costs) > total_s(*kinds[slowest].costs)) slowest = k;
    if (usable_bytes(ev, s, gpu_of(kinds[k])) < usable_bytes(ev, s, gpu_of(kinds[smallest])))
      smallest = k;
  }
  Rank r;
  r.gpu = &gpu_of(kinds[slowest]);
  r.mem_gpu = &gpu_of(kinds[smallest]);
  r.shared_costs = kinds[slowest].costs;
  r.type = r.gpu->name;
  if (kinds.size() > 1) {
    std::set<std::string> types;
    for (const Kind& k : kinds) types.insert(gpu_of(k).name);
    r.type.clear();
    for (const auto& t : types) r.type += (r.type.empty() ? "" : "+") + t;
    r.mixed_costs = slowest_of(kinds, slowest);
    std::string names;
    for (const Kind& k : kinds) names += (names.empty() ? "" : " and ") + gpu_of(k).name;
    notes.add(
        fmt::format("pipeline rank {} runs on {}: each layer takes the slowest one's time, "
                    "memory the smallest one's",
                    d, names));
  }
  r.dtype = ev.cost().compute_dtype(*r.gpu, ev.model().dtype);
  note_kinds(ev, kinds, notes);
  r.limit_bytes = usable_bytes(ev, s, *r.mem_gpu);
  return r;
}

}  // namespace

void Notes::add(std::string text) {
  if (std::find(notes_.begin(), notes_.end(), text) == notes_.end())
    notes_.push_back(std::move(text));
}

double reserve_bytes(const Evaluator& ev, const Strategy& s, const GpuSpec& gpu) {
  const MemoryLayout& layout = ev.framework().memory;
  const double measured = ev.cost().fit(gpu).context_reserve_bytes;
  const double context = measured > 0               ? measured
                         : layout.context_bytes > 0 ? layout.context_bytes
                                                    : kDefaultReserveBytes;
  const int communicators = (s.dp > 1) + (s.tp > 1) + (s.pp > 1) + (s.cp > 1) + (s.ep > 1);
  return context + communicators * layout.communicator_bytes;
}

double usable_bytes(const Evaluator& ev, const Strategy& s, const GpuSpec& gpu) {
  return (gpu.memory_bytes - reserve_bytes(ev, s, gpu)) / (1 + ev.framework().memory.fragmentation);
}

std::vector<Rank> resolve_ranks(const Evaluator& ev, const Strategy& s, const Placement& p,
                                Notes& notes) {
  std::vector<Rank> ranks;
  ranks.reserve(p.groups.size());
  for (size_t d = 0; d < p.groups.size(); ++d)
    ranks.push_back(resolve_rank(ev, s, static_cast<int64_t>(d), p.groups[d], notes));
  return ranks;
}

}  // namespace hetplan::eval
