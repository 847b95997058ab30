// Step 2 of a prediction: the devices of every pipeline rank and, when the strategy gives them, the
// layer range of every virtual stage.
#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "costmodel/errors.h"
#include "search/eval/steps.h"

namespace hetplan::eval {
namespace {

// Device groups: given per pipeline rank, or per virtual stage (then the same for the chunks of
// one rank), dp x cp x tp each, no device in two: what the strategy alone says is checked as a
// strategy file is read, and again here for strategies built in code. Ranks the strategy leaves
// open take free devices of their wanted GPU type in cluster order. Returns the problem when the
// cluster lacks them.
std::string device_groups(const Evaluator& ev, const Strategy& s, bool checked,
                          std::vector<std::vector<int64_t>>& groups) {
  const int64_t P = s.pp, per_stage = s.rank_devices();
  const auto& devices = ev.devices();
  const ClusterSpec& cluster = ev.cluster();
  groups.assign(P, {});
  size_t stage = 0;
  if (!checked)
    if (std::string problem = stage_devices_problem(s, stage); !problem.empty())
      throw InputError(fmt::format("stage {}: {}", stage, problem));
  std::vector<std::string> want_type(P);
  for (size_t i = 0; i < s.stages.size(); ++i) {
    const int64_t d = s.rank_of_stage(i);
    const StageSpec& st = s.stages[i];
    if (!st.gpu_type.empty()) want_type[d] = st.gpu_type;
    if (!st.devices.empty()) groups[d] = st.devices;
  }
  if (s.stages.empty())
    for (int64_t d = 0; d < P; ++d)
      for (int64_t i = 0; i < per_stage; ++i) groups[d].push_back(d * per_stage + i);
  // Ranks left open take free devices (the used ones are gathered only when some rank is open).
  std::set<int64_t> used;
  if (std::any_of(groups.begin(), groups.end(), [](const auto& g) { return g.empty(); }))
    for (const auto& g : groups) used.insert(g.begin(), g.end());
  for (int64_t d = 0; d < P; ++d) {
    auto& g = groups[d];
    if (!g.empty()) continue;
    for (const Device& dev : devices) {
      if (static_cast<int64_t>(g.size()) == per_stage) break;
      const auto& type = cluster.groups[dev.group].node.gpu.name;
      if (!used.count(dev.index) && (want_type[d].empty() || type == want_type[d])) {
        g.push_back(dev.index);
        used.insert(dev.index);
      }
    }
    if (static_cast<int64_t>(g.size()) != per_stage)
      return fmt::format("pipeline rank {} needs {} free {}GPUs, the cluster has fewer", d,
                         per_stage, want_type[d].empty() ? "" : want_type[d] + " ");
  }
  // Every group now holds dp x cp x tp devices and none is in two: what is left to check needs the
  // cluster. A rank may span GPU types (data-parallel replicas on different GPUs): its gpu_type
  // names them all, joined by "+" in name order.
  for (int64_t d = 0; d < P; ++d) {
    std::vector<int64_t> kinds;  // node groups of the rank's devices (few)
    for (int64_t dev : groups[d]) {
      if (dev < 0 || dev >= static_cast<int64_t>(devices.size()))
        throw InputError(
            fmt::format("pipeline rank {} uses device {}; the cluster has {} devices "
                        "(0-{})",
                        d, dev, devices.size(), devices.size() - 1));
      if (std::find(kinds.begin(), kinds.end(), devices[dev].group) == kinds.end())
        kinds.push_back(devices[dev].group);
    }
    std::set<std::string> types;
    for (int64_t k : kinds) types.insert(cluster.groups[k].node.gpu.name);
    std::string joined;
    for (const auto& t : types) joined += (joined.empty() ? "" : "+") + t;
    if (!want_type[d].empty() && want_type[d] != joined)
      throw InputError(fmt::format("pipeline rank {} says gpu_type {} but its devices are {}", d,
                                   want_type[d], joined));
  }
  return "";
}

}  // namespace

std::vector<LayerRange> given_ranges(const Strategy& s, int64_t layers) {
  const auto has_layers = [](const StageSpec& st) { return st.first_layer >= 0; };
  if (!std::any_of(s.stages.begin(), s.stages.end(), has_layers)) return {};
  if (!std::all_of(s.stages.begin(), s.stages.end(), has_layers))
    throw InputError("give layers for every stage or for none (then the partition chooses them)");
  const int64_t S = s.pp * s.chunks_per_device();
  if (s.stages.size() != static_cast<size_t>(S))
    throw InputError(
        fmt::format("layer ranges need one stage per virtual stage: {} x {} chunks "
                    "= {}, found {}",
                    s.pp, s.chunks_per_device(), S, s.stages.size()));
  std::vector<LayerRange> ranges;
  int64_t next = 0;
  for (size_t st = 0; st < s.stages.size(); ++st) {
    if (s.stages[st].first_layer != next)
      throw InputError(
          fmt::format("stage {} starts at layer {}; expected {} (stages must hold "
                      "contiguous layers in order)",
                      st, s.stages[st].first_layer, next));
    ranges.emplace_back(s.stages[st].first_layer, s.stages[st].last_layer);
    next = s.stages[st].last_layer + 1;
  }
  if (next != layers)
    throw InputError(
        fmt::format("the stages end at layer {}; the model has layers 0-{}", next - 1, layers - 1));
  return ranges;
}

Placement place(const Evaluator& ev, const Strategy& s, bool checked, std::string& problem) {
  const int64_t P = s.pp, v = s.chunks_per_device(), S = P * v;
  const size_t given = s.stages.size();
  if (given != 0 && given != static_cast<size_t>(P) && given != static_cast<size_t>(S))
    throw InputError(fmt::format("expected {} stages (one per pipeline rank){}, found {}", P,
                                 v > 1 ? fmt::format(" or {} (one per virtual stage)", S) : "",
                                 given));
  Placement p;
  problem = device_groups(ev, s, checked, p.groups);
  if (!problem.empty()) return p;
  p.ranges = given_ranges(s, static_cast<int64_t>(ev.model().layers.size()));
  for (int64_t j = 0; j < S; ++j) p.rank_of_stage.push_back(s.rank_of_virtual_stage(j));
  return p;
}

}  // namespace hetplan::eval
